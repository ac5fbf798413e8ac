"""An independent implementation of cosign's key-based signature layout, for host/tests/oci.rs.

Written from cosign's specification, not from skillhost's code: Python's `cryptography` for
ECDSA P-256 and the standard library's HTTP client for the OCI distribution API (a plain-HTTP
registry on loopback, no credentials).

    cosign.py sign REGISTRY REPOSITORY DIGEST KEY_OUT PUB_OUT
        makes a P-256 key (KEY_OUT: SEC1 PEM, PUB_OUT: SPKI PEM) and writes the signature
        artifact `sha256-<hex>.sig` with one simplesigning layer signing DIGEST.
    cosign.py verify REGISTRY REPOSITORY DIGEST PUB
        exits 0 when a layer of `sha256-<hex>.sig` verifies with PUB and names DIGEST.
    cosign.py encrypted-key KEY_OUT PUB_OUT PASSWORD
        writes a P-256 key as `cosign generate-key-pair` does (KEY_OUT: the PKCS#8 DER key
        sealed with NaCl secretbox under scrypt(PASSWORD), PEM `ENCRYPTED SIGSTORE PRIVATE
        KEY`; PUB_OUT: SPKI PEM). Needs PyNaCl.
    cosign.py keyless DIR REGISTRY REPOSITORY DIGEST IDENTITY ISSUER [forged-log]
        a throwaway Sigstore: DIR holds its keys (made on first use: a Fulcio CA, a CT log, a
        Rekor log) and DIR/trusted_root.json (Sigstore's TrustedRoot naming the three). Issues
        a Fulcio-style certificate to IDENTITY (an email, or a URI) vouched for by ISSUER, with
        its SCT embedded; signs DIGEST's simplesigning payload with it; logs the signature as a
        hashedrekord entry with a signed entry timestamp; appends the layer in cosign's keyless
        layout (the certificate and the Rekor bundle as annotations). Modes: `forged-log`, the
        entry timestamp signed by a key the trust root does not hold (under the log's id);
        `bundle`, cosign 3's layout instead: a Sigstore bundle v0.3 (a DSSE in-toto statement
        of predicate https://sigstore.dev/cosign/sign/v1, the entry with an RFC 6962 inclusion
        proof and a signed checkpoint) in a manifest referring to DIGEST, listed in the
        referrers tag `sha256-<hex>`; `bundle-bad-proof`, that with a proof hash altered.
    cosign.py bundle-key REGISTRY REPOSITORY DIGEST KEY_OUT PUB_OUT
        cosign 3's `sign --key`: makes a P-256 key and a bundle referring to DIGEST whose DSSE
        statement it signed (no transparency log).
"""

import base64
import hashlib
import json
import sys
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
SIMPLESIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE = "dev.cosignproject.cosign/signature"


def request(method, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    with urllib.request.urlopen(req) as response:
        return dict(response.headers), response.read()


def push_blob(base, repository, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    headers, _ = request("POST", f"{base}/v2/{repository}/blobs/uploads/")
    location = headers["Location"]
    if location.startswith("/"):
        location = base + location
    separator = "&" if "?" in location else "?"
    request("PUT", f"{location}{separator}digest={digest}", data, {"Content-Type": "application/octet-stream"})
    return {"digest": digest, "size": len(data)}


def signature_tag(digest):
    return "sha256-" + digest.split(":", 1)[1] + ".sig"


def new_key(key_out, pub_out, private_format):
    """A P-256 key written to KEY_OUT (PEM, `private_format`) and PUB_OUT (SPKI PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    with open(key_out, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption()))
    with open(pub_out, "wb") as f:
        f.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo))
    return key


def sign(registry, repository, digest, key_out, pub_out):
    key = new_key(key_out, pub_out, serialization.PrivateFormat.TraditionalOpenSSL)
    payload = simplesigning(registry, repository, digest)
    signature = b64(key.sign(payload, ec.ECDSA(hashes.SHA256())))
    append_layer(registry, repository, digest, payload, {SIGNATURE: signature})
    return 0


def verify(registry, repository, digest, pub):
    with open(pub, "rb") as f:
        key = serialization.load_pem_public_key(f.read())
    base = f"http://{registry}"
    _, body = request("GET", f"{base}/v2/{repository}/manifests/{signature_tag(digest)}",
                      headers={"Accept": OCI_MANIFEST})
    for layer in json.loads(body)["layers"]:
        if layer["mediaType"] != SIMPLESIGNING or SIGNATURE not in layer.get("annotations", {}):
            continue
        _, payload = request("GET", f"{base}/v2/{repository}/blobs/{layer['digest']}")
        if "sha256:" + hashlib.sha256(payload).hexdigest() != layer["digest"]:
            continue
        try:
            key.verify(base64.b64decode(layer["annotations"][SIGNATURE]), payload, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            continue
        if json.loads(payload)["critical"]["image"]["docker-manifest-digest"] == digest:
            print("verified")
            return 0
    print("no layer verifies")
    return 1


def encrypted_key(key_out, pub_out, password):
    import hashlib
    import os

    import nacl.secret

    key = ec.generate_private_key(ec.SECP256R1())
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    salt, nonce = os.urandom(32), os.urandom(24)
    secret = hashlib.scrypt(password.encode(), salt=salt, n=32768, r=8, p=1, maxmem=64 << 20, dklen=32)
    sealed = nacl.secret.SecretBox(secret).encrypt(der, nonce).ciphertext
    b64 = lambda data: base64.b64encode(data).decode()
    envelope = {
        "kdf": {"name": "scrypt", "params": {"N": 32768, "r": 8, "p": 1}, "salt": b64(salt)},
        "cipher": {"name": "nacl/secretbox", "nonce": b64(nonce)},
        "ciphertext": b64(sealed),
    }
    body = base64.encodebytes(json.dumps(envelope).encode()).decode()
    with open(key_out, "w") as f:
        f.write(f"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n{body}-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    with open(pub_out, "wb") as f:
        f.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo))
    return 0


def keyless(directory, registry, repository, digest, identity, issuer, mode=""):
    import datetime
    import os
    import struct
    import time

    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    os.makedirs(directory, exist_ok=True)

    def stored_key(name):
        path = os.path.join(directory, name + ".pem")
        if not os.path.exists(path):
            with open(path, "wb") as f:
                f.write(ec.generate_private_key(ec.SECP256R1()).private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        with open(path, "rb") as f:
            return serialization.load_pem_private_key(f.read(), None)

    def spki(key):
        return key.public_key().public_bytes(serialization.Encoding.DER,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)

    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    ca_key, ct_key, rekor_key = stored_key("fulcio"), stored_key("ctlog"), stored_key("rekor")
    ca_path = os.path.join(directory, "fulcio.crt")
    if not os.path.exists(ca_path):
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "throwaway"),
                          x509.NameAttribute(NameOID.COMMON_NAME, "throwaway fulcio")])
        ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(ca_key.public_key())
              .serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(days=1))
              .not_valid_after(now + datetime.timedelta(days=3650))
              .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
              .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                           key_encipherment=False, data_encipherment=False, key_agreement=False,
                                           key_cert_sign=True, crl_sign=True, encipher_only=False,
                                           decipher_only=False), critical=True)
              .sign(ca_key, hashes.SHA256()))
        with open(ca_path, "wb") as f:
            f.write(ca.public_bytes(serialization.Encoding.DER))
    with open(ca_path, "rb") as f:
        ca = x509.load_der_x509_certificate(f.read())
    log_id = lambda key: hashlib.sha256(spki(key)).digest()
    log = lambda key, url: {
        "baseUrl": url, "hashAlgorithm": "SHA2_256",
        "publicKey": {"rawBytes": b64(spki(key)), "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                      "validFor": {"start": "2020-01-01T00:00:00Z"}},
        "logId": {"keyId": b64(log_id(key))},
    }
    root = {
        "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
        "tlogs": [log(rekor_key, "https://rekor.throwaway.test")],
        "certificateAuthorities": [{
            "subject": {"organization": "throwaway", "commonName": "throwaway fulcio"},
            "uri": "https://fulcio.throwaway.test",
            "certChain": {"certificates": [{"rawBytes": b64(ca.public_bytes(serialization.Encoding.DER))}]},
            "validFor": {"start": "2020-01-01T00:00:00Z"},
        }],
        "ctlogs": [log(ct_key, "https://ctfe.throwaway.test")],
        "timestampAuthorities": [],
    }
    with open(os.path.join(directory, "trusted_root.json"), "w") as f:
        json.dump(root, f, indent=1)

    # The certificate, as Fulcio issues it: ten minutes, no subject, the identity as a SAN, the
    # issuer in Sigstore's extension, and the CT log's SCT over the precertificate.
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    # "moved-time" modes: a certificate that expired two hours ago, and a log entry whose
    # integratedTime claims it was logged while the certificate was valid.
    moved = mode in ("moved-time", "bundle-moved-time")
    shift = datetime.timedelta(hours=2) if moved else datetime.timedelta(0)
    san = x509.UniformResourceIdentifier(identity) if "://" in identity else x509.RFC822Name(identity)
    issuer_oid = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
    issuer_v2_oid = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
    utf8 = issuer.encode()
    builder = (x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(ca.subject)
               .public_key(leaf_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=1) - shift)
               .not_valid_after(now + datetime.timedelta(minutes=10) - shift)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False, key_agreement=False,
                                            key_cert_sign=False, crl_sign=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
               .add_extension(x509.SubjectAlternativeName([san]), critical=True)
               .add_extension(x509.UnrecognizedExtension(issuer_oid, utf8), critical=False)
               .add_extension(x509.UnrecognizedExtension(issuer_v2_oid, bytes([0x0C, len(utf8)]) + utf8),
                              critical=False))
    precert = builder.sign(ca_key, hashes.SHA256())
    timestamp = int(time.time() * 1000)
    issuer_key_hash = hashlib.sha256(spki(ca_key)).digest()
    tbs = precert.tbs_certificate_bytes
    signed = (struct.pack(">BBQH", 0, 0, timestamp, 1) + issuer_key_hash + len(tbs).to_bytes(3, "big") + tbs
              + struct.pack(">H", 0))
    sct_signature = ct_key.sign(signed, ec.ECDSA(hashes.SHA256()))
    sct = (bytes([0]) + log_id(ct_key) + struct.pack(">QH", timestamp, 0) + bytes([4, 3])
           + struct.pack(">H", len(sct_signature)) + sct_signature)
    sct_list = struct.pack(">H", len(sct) + 2) + struct.pack(">H", len(sct)) + sct
    octets = bytes([0x04]) + (bytes([len(sct_list)]) if len(sct_list) < 128 else bytes([0x81, len(sct_list)])) + sct_list
    sct_oid = x509.ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
    certificate = builder.add_extension(x509.UnrecognizedExtension(sct_oid, octets), critical=False).sign(
        ca_key, hashes.SHA256())
    certificate_pem = certificate.public_bytes(serialization.Encoding.PEM)
    # "bare-key" modes: the leaf's bare public key where the certificate goes.
    bare_key = mode in ("bare-key", "bundle-bare-key")
    if bare_key:
        certificate_pem = leaf_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                             serialization.PublicFormat.SubjectPublicKeyInfo)

    log_key = ec.generate_private_key(ec.SECP256R1()) if mode == "forged-log" else rekor_key
    if mode.startswith("bundle"):
        statement, envelope, signature = dsse(leaf_key, registry, repository, digest)
        envelope_json = json.dumps(envelope, separators=(",", ":")).encode()
        body = canonical({
            "apiVersion": "0.0.1", "kind": "dsse",
            "spec": {
                "envelopeHash": {"algorithm": "sha256", "value": hashlib.sha256(envelope_json).hexdigest()},
                "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(statement).hexdigest()},
                "signatures": [{"signature": b64(signature), "verifier": b64(certificate_pem)}],
            },
        })
        entry, entry_timestamp = logged(body, log_key, log_id(rekor_key).hex())
        proof = inclusion_proof(body, entry["logIndex"], rekor_key, spki(rekor_key), mode == "bundle-bad-proof")
        der = spki(leaf_key) if bare_key else certificate.public_bytes(serialization.Encoding.DER)
        tlog_entry = {
            "logIndex": str(entry["logIndex"]), "logId": {"keyId": b64(log_id(rekor_key))},
            "kindVersion": {"kind": "dsse", "version": "0.0.1"},
            "integratedTime": str(entry["integratedTime"]),
            "inclusionPromise": {"signedEntryTimestamp": b64(entry_timestamp)},
            "inclusionProof": proof,
            "canonicalizedBody": b64(body),
        }
        if moved:
            # An inclusion proof alone (a real one) signs no time: the claimed one is moved.
            del tlog_entry["inclusionPromise"]
            tlog_entry["integratedTime"] = str(entry["integratedTime"] - 7200)
        bundle = {
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {"certificate": {"rawBytes": b64(der)}, "tlogEntries": [tlog_entry]},
            "dsseEnvelope": envelope,
        }
        push_referrer(registry, repository, digest, json.dumps(bundle).encode())
        return 0
    # "bad-payload": signed and logged, but not a simplesigning payload.
    payload = b"{not json" if mode == "bad-payload" else simplesigning(registry, repository, digest)
    signature = leaf_key.sign(payload, ec.ECDSA(hashes.SHA256()))
    # "log-other-*": a genuine log entry, of another artifact digest, signature or key.
    logged_hash = hashlib.sha256(payload + (b" " if mode == "log-other-digest" else b"")).hexdigest()
    logged_signature = leaf_key.sign(b"another", ec.ECDSA(hashes.SHA256())) if mode == "log-other-signature" \
        else signature
    logged_key = ca.public_bytes(serialization.Encoding.PEM) if mode == "log-other-key" else certificate_pem
    body = canonical({
        "apiVersion": "0.0.1", "kind": "hashedrekord",
        "spec": {
            "data": {"hash": {"algorithm": "sha256", "value": logged_hash}},
            "signature": {"content": b64(logged_signature), "publicKey": {"content": b64(logged_key)}},
        },
    })
    entry, entry_timestamp = logged(body, log_key, log_id(rekor_key).hex())
    if moved:
        # The entry's signed timestamp is over the real time; the claimed one is moved.
        entry = dict(entry, integratedTime=entry["integratedTime"] - 7200)
    rekor_bundle = {"SignedEntryTimestamp": b64(entry_timestamp), "Payload": entry}
    append_layer(registry, repository, digest, payload, {
        SIGNATURE: b64(signature),
        "dev.sigstore.cosign/certificate": certificate_pem.decode(),
        "dev.sigstore.cosign/chain": ca.public_bytes(serialization.Encoding.PEM).decode(),
        "dev.sigstore.cosign/bundle": json.dumps(rekor_bundle),
    })
    return 0


def b64(data):
    return base64.b64encode(data).decode()


def canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def simplesigning(registry, repository, digest):
    return json.dumps({
        "critical": {
            "identity": {"docker-reference": f"{registry}/{repository}"},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": None,
    }).encode()


def logged(body, log_key, log_id_hex):
    """A Rekor entry of `body` and its signed entry timestamp (by `log_key`)."""
    import os
    import time

    entry = {"body": b64(body), "integratedTime": int(time.time()), "logID": log_id_hex,
             "logIndex": int.from_bytes(os.urandom(2), "big") % 7}
    return entry, log_key.sign(canonical(entry), ec.ECDSA(hashes.SHA256()))


def inclusion_proof(body, index, log_key, log_spki, tampered):
    """RFC 6962: `body` as leaf `index` of a tree of random leaves, its audit path, and a
    checkpoint (a signed note) naming the root."""
    import os

    size = index + 1 + int.from_bytes(os.urandom(1), "big") % 5
    leaves = [os.urandom(40) for _ in range(size)]
    leaves[index] = body
    leaf = lambda data: hashlib.sha256(b"\x00" + data).digest()
    node = lambda left, right: hashlib.sha256(b"\x01" + left + right).digest()

    def split(n):
        k = 1
        while k * 2 < n:
            k *= 2
        return k

    def root(items):
        if len(items) == 1:
            return leaf(items[0])
        k = split(len(items))
        return node(root(items[:k]), root(items[k:]))

    def path(m, items):
        if len(items) == 1:
            return []
        k = split(len(items))
        if m < k:
            return path(m, items[:k]) + [root(items[k:])]
        return path(m - k, items[k:]) + [root(items[:k])]

    audit, tree_root = path(index, leaves), root(leaves)
    if tampered and audit:
        audit[0] = bytes([audit[0][0] ^ 1]) + audit[0][1:]
    elif tampered:
        tree_root = bytes([tree_root[0] ^ 1]) + tree_root[1:]
    note = f"rekor.throwaway.test - 1\n{size}\n{b64(tree_root)}\n"
    signature = log_key.sign(note.encode(), ec.ECDSA(hashes.SHA256()))
    hint = hashlib.sha256(log_spki).digest()[:4]
    envelope = note + "\n" + f"\u2014 rekor.throwaway.test {b64(hint + signature)}\n"
    return {"logIndex": str(index), "rootHash": b64(tree_root), "treeSize": str(size),
            "hashes": [b64(h) for h in audit], "checkpoint": {"envelope": envelope}}


SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1"
BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def dsse(key, registry, repository, digest):
    """cosign 3's image signature: an in-toto statement of `digest` in a DSSE envelope signed
    by `key`. Returns the statement's bytes, the envelope (bundle JSON) and the signature."""
    statement = json.dumps({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": f"{registry}/{repository}", "digest": {"sha256": digest.split(":", 1)[1]}}],
        "predicateType": SIGN_PREDICATE,
        "predicate": {},
    }).encode()
    kind = b"application/vnd.in-toto+json"
    pae = b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(statement), statement)
    signature = key.sign(pae, ec.ECDSA(hashes.SHA256()))
    envelope = {"payload": b64(statement), "payloadType": kind.decode(), "signatures": [{"sig": b64(signature)}]}
    return statement, envelope, signature


def append_layer(registry, repository, digest, payload, annotations):
    """Writes the `.sig` artifact of `digest` with one simplesigning layer."""
    base = f"http://{registry}"
    layer = push_blob(base, repository, payload)
    layer.update(mediaType=SIMPLESIGNING, annotations=annotations)
    config = json.dumps({"architecture": "", "os": "", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}}).encode()
    config_descriptor = push_blob(base, repository, config)
    config_descriptor["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config_descriptor, "layers": [layer]}
    request("PUT", f"{base}/v2/{repository}/manifests/{signature_tag(digest)}", json.dumps(manifest).encode(),
            {"Content-Type": OCI_MANIFEST})


def push_referrer(registry, repository, digest, bundle):
    """cosign 3's storage: a manifest of artifact type bundle whose subject is `digest`, and,
    for a registry without the referrers API, the referrers tag `sha256-<hex>` (an index)."""
    import urllib.error

    base = f"http://{registry}"
    _, subject_bytes = request("GET", f"{base}/v2/{repository}/manifests/{digest}", headers={"Accept": OCI_MANIFEST})
    layer = push_blob(base, repository, bundle)
    layer["mediaType"] = BUNDLE_V03
    empty = push_blob(base, repository, b"{}")
    empty["mediaType"] = "application/vnd.oci.empty.v1+json"
    annotations = {"dev.sigstore.bundle.content": "dsse-envelope", "dev.sigstore.bundle.predicateType": SIGN_PREDICATE}
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": BUNDLE_V03,
        "subject": {"mediaType": OCI_MANIFEST, "digest": digest, "size": len(subject_bytes)},
        "config": empty, "layers": [layer], "annotations": annotations,
    }).encode()
    manifest_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    request("PUT", f"{base}/v2/{repository}/manifests/{manifest_digest}", manifest, {"Content-Type": OCI_MANIFEST})
    tag = "sha256-" + digest.split(":", 1)[1]
    try:
        _, existing = request("GET", f"{base}/v2/{repository}/manifests/{tag}", headers={"Accept": OCI_INDEX})
        index = json.loads(existing)
    except urllib.error.HTTPError:
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": []}
    index["manifests"].append({"mediaType": OCI_MANIFEST, "digest": manifest_digest, "size": len(manifest),
                               "artifactType": BUNDLE_V03, "annotations": annotations})
    request("PUT", f"{base}/v2/{repository}/manifests/{tag}", json.dumps(index).encode(), {"Content-Type": OCI_INDEX})


def bundle_key(registry, repository, digest, key_out, pub_out):
    """cosign 3's `sign --key`: a P-256 key (KEY_OUT, PUB_OUT) and a bundle referring to
    `digest` whose DSSE statement it signed."""
    key = new_key(key_out, pub_out, serialization.PrivateFormat.PKCS8)
    _, envelope, _ = dsse(key, registry, repository, digest)
    bundle = {
        "mediaType": BUNDLE_V03,
        "verificationMaterial": {"publicKey": {"hint": ""}, "tlogEntries": []},
        "dsseEnvelope": envelope,
    }
    push_referrer(registry, repository, digest, json.dumps(bundle).encode())
    return 0


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    commands = {"sign": sign, "verify": verify, "encrypted-key": encrypted_key, "keyless": keyless,
                "bundle-key": bundle_key}
    sys.exit(commands[command](*args))

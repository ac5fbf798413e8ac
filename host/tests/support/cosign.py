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


def sign(registry, repository, digest, key_out, pub_out):
    key = ec.generate_private_key(ec.SECP256R1())
    with open(key_out, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                  serialization.NoEncryption()))
    with open(pub_out, "wb") as f:
        f.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo))
    payload = json.dumps({
        "critical": {
            "identity": {"docker-reference": f"{registry}/{repository}"},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": None,
    }).encode()
    signature = base64.b64encode(key.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()
    base = f"http://{registry}"
    layer = push_blob(base, repository, payload)
    layer.update(mediaType=SIMPLESIGNING, annotations={SIGNATURE: signature})
    config = json.dumps({"architecture": "", "os": "", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [layer["digest"]]}}).encode()
    config_descriptor = push_blob(base, repository, config)
    config_descriptor["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config_descriptor, "layers": [layer]}
    request("PUT", f"{base}/v2/{repository}/manifests/{signature_tag(digest)}", json.dumps(manifest).encode(),
            {"Content-Type": OCI_MANIFEST})
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


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    sys.exit({"sign": sign, "verify": verify, "encrypted-key": encrypted_key}[command](*args))

//! Keyless signatures: a Sigstore bundle checked offline against the operator's trust root.
//!
//! A keyless signature is made with a short-lived certificate that a Fulcio CA issued to an
//! OIDC identity, and recorded in a Rekor transparency log. The operator names the identity
//! and its issuer exactly (`verify: {identity, issuer, trusted_root}`) and gives the trust root
//! as a file (`trusted_root.json`, Sigstore's `TrustedRoot`: the CAs, the CT logs, the Rekor
//! logs); nothing is fetched, and no identity is accepted by default.
//!
//! Where the signature is, either of cosign's layouts:
//! - cosign 3: a Sigstore bundle (`application/vnd.dev.sigstore.bundle.v0.3+json`) in a
//!   manifest referring to the artifact (OCI 1.1 referrers, or the referrers tag
//!   `sha256-<hex>` where the registry has no referrers API), whose DSSE envelope holds an
//!   in-toto statement of predicate `https://sigstore.dev/cosign/sign/v1` with the artifact's
//!   digest as subject;
//! - cosign 2: the `sha256-<hex>.sig` artifact of key-based signatures (`sign.rs`), whose
//!   layer also carries the signing certificate (`dev.sigstore.cosign/certificate`) and the
//!   Rekor entry with its signed timestamp (`dev.sigstore.cosign/bundle`): a Sigstore bundle
//!   (v0.1) in annotations, rebuilt as one; its payload must then name the digest.
//!
//! Either bundle is checked by the `sigstore` crate (the certificate chains to a CA of the
//! trust root at signing time, its embedded SCT verifies with a CT log of the trust root, it
//! names the identity and the issuer, it made the signature, the log entry is this
//! signature's) and here (the log's signed entry timestamp, required because it alone signs
//! the `integratedTime` the certificate is checked at, verifies with a Rekor key of the trust
//! root, and an inclusion proof, when the bundle has one, leads to a checkpoint that key
//! signed: the crate leaves both undone).

use super::sign::{self, SigLayer, Signatures};
use super::{OciError, Result};
use base64::Engine as _;
use sigstore::bundle::Bundle;
use sigstore::bundle::verify::{ArtifactDigest, Verifier, policy::Identity};
use sigstore::crypto::{CosignVerificationKey, Signature};
use sigstore::trust::ManualTrustRoot;
use sigstore_protobuf_specs::dev::sigstore::bundle::v1::{VerificationMaterial, bundle, verification_material};
use sigstore_protobuf_specs::dev::sigstore::common::v1::{
    HashAlgorithm, HashOutput, LogId, MessageSignature, X509Certificate,
};
use sigstore_protobuf_specs::dev::sigstore::rekor::v1::{
    InclusionPromise, InclusionProof, KindVersion, TransparencyLogEntry,
};
use sigstore_protobuf_specs::dev::sigstore::trustroot::v1::TrustedRoot;
use std::path::Path;

/// The annotation holding a keyless signature's certificate (PEM).
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The annotation holding its Rekor entry and signed entry timestamp (JSON).
pub const REKOR_BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";
/// A Sigstore bundle of the first profile: an inclusion promise, no proof needed.
const BUNDLE_V01: &str = "application/vnd.dev.sigstore.bundle+json;version=0.1";
/// A DSSE envelope's payload type for an in-toto statement.
const IN_TOTO: &str = "application/vnd.in-toto+json";
/// The predicate type of a cosign 3 image signature.
const SIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";

fn b64(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(text.trim()).ok()
}

/// The operator's trust root, read from a `trusted_root.json`.
pub struct TrustRoot {
    /// Every certificate of every CA's chain (DER): each may anchor a chain.
    cas: Vec<Vec<u8>>,
    /// The CT logs' keys (SPKI DER).
    ctlogs: Vec<Vec<u8>>,
    /// The Rekor logs: their log id and key (SPKI DER).
    tlogs: Vec<(Vec<u8>, Vec<u8>)>,
}

impl TrustRoot {
    /// Reads `path`; says what is wrong with it.
    pub fn read(path: &Path) -> Result<Self> {
        let bad = |why: String| OciError::Signature(format!("trusted_root {}: {why}", path.display()));
        let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        let root: TrustedRoot =
            serde_json::from_slice(&bytes).map_err(|e| bad(format!("not a Sigstore trusted root ({e})")))?;
        let cas: Vec<Vec<u8>> = root
            .certificate_authorities
            .iter()
            .filter_map(|ca| ca.cert_chain.as_ref())
            .flat_map(|chain| chain.certificates.iter().map(|c| c.raw_bytes.clone()))
            .collect();
        let key = |log: &sigstore_protobuf_specs::dev::sigstore::trustroot::v1::TransparencyLogInstance| {
            log.public_key.as_ref().and_then(|k| k.raw_bytes.clone())
        };
        let ctlogs: Vec<Vec<u8>> = root.ctlogs.iter().filter_map(key).collect();
        let tlogs: Vec<(Vec<u8>, Vec<u8>)> =
            root.tlogs.iter().filter_map(|log| Some((log.log_id.as_ref()?.key_id.clone(), key(log)?))).collect();
        for (what, empty) in
            [("certificateAuthorities", cas.is_empty()), ("ctlogs", ctlogs.is_empty()), ("tlogs", tlogs.is_empty())]
        {
            if empty {
                return Err(bad(format!("no {what}")));
            }
        }
        Ok(TrustRoot { cas, ctlogs, tlogs })
    }

    fn verifier(&self) -> std::result::Result<Verifier, String> {
        let manual = ManualTrustRoot {
            fulcio_certs: self.cas.iter().map(|der| der.clone().into()).collect(),
            rekor_keys: Default::default(),
            ctfe_keys: self.ctlogs.iter().enumerate().map(|(i, key)| (i.to_string(), key.clone())).collect(),
        };
        Verifier::new(Default::default(), manual).map_err(|e| format!("the trust root: {e}"))
    }

    /// The key of the Rekor log `log_id`, when the trust root has it.
    fn tlog_key(&self, log_id: &[u8]) -> Option<&[u8]> {
        self.tlogs.iter().find(|(id, _)| id == log_id).map(|(_, key)| key.as_slice())
    }
}

/// Whom a keyless signature must come from: both matched exactly.
pub struct Signer<'a> {
    /// The certificate's subject alternative name (an email or a URI).
    pub identity: &'a str,
    /// The OIDC issuer that vouched for it.
    pub issuer: &'a str,
}

/// Whether one of `signatures` is a keyless signature of `digest` (of `repository`, where the
/// layout names it) by `signer` under `root`, or why none is.
pub async fn verify(
    signatures: &Signatures,
    (digest, repository): (&str, &str),
    root: &TrustRoot,
    signer: &Signer<'_>,
) -> Result<()> {
    if signatures.is_empty() {
        return Err(OciError::Signature(format!("unsigned: no signature for {digest}")));
    }
    let verifier = root.verifier().map_err(OciError::Signature)?;
    let mut reasons = Vec::new();
    for layer in &signatures.layers {
        match verify_layer(layer, (digest, repository), root, &verifier, signer).await {
            Ok(()) => return Ok(()),
            Err(why) => reasons.push(why),
        }
    }
    for bundle in &signatures.bundles {
        match verify_bundle(bundle, digest, root, &verifier, signer).await {
            Ok(()) => return Ok(()),
            Err(why) => reasons.push(why),
        }
    }
    reasons.dedup();
    Err(OciError::Signature(format!(
        "none of {} signature(s) is a keyless signature by {} ({}) ({})",
        signatures.len(),
        signer.identity,
        signer.issuer,
        reasons.join("; ")
    )))
}

/// A Sigstore bundle from its JSON.
pub fn parse_bundle(text: &str) -> std::result::Result<Bundle, String> {
    serde_json::from_str(text).map_err(|e| format!("a bundle that does not parse ({e})"))
}

/// What a cosign 3 image signature signed (DSSE's pre-authentication encoding of its in-toto
/// statement) and the signature, once the statement is an image signature (not another
/// attestation) whose subject is `digest`.
pub fn image_signature(bundle: &Bundle, digest: &str) -> std::result::Result<(Vec<u8>, Vec<u8>), String> {
    let Some(bundle::Content::DsseEnvelope(envelope)) = &bundle.content else {
        return Err("a bundle with no DSSE envelope (not a cosign image signature)".into());
    };
    if envelope.payload_type != IN_TOTO {
        return Err(format!("a DSSE envelope of {}, not an in-toto statement", envelope.payload_type));
    }
    let [signature] = envelope.signatures.as_slice() else {
        return Err(format!("a DSSE envelope with {} signatures, not one", envelope.signatures.len()));
    };
    let statement: serde_json::Value =
        serde_json::from_slice(&envelope.payload).map_err(|_| "an in-toto statement that is not JSON".to_string())?;
    match statement["predicateType"].as_str() {
        Some(SIGN_PREDICATE) => {}
        other => return Err(format!("an attestation of {}, not an image signature", other.unwrap_or("nothing"))),
    }
    let hex = super::digest_hex(digest).map_err(|e| e.to_string())?;
    let subjects = statement["subject"].as_array().map(Vec::as_slice).unwrap_or_default();
    if !subjects.iter().any(|subject| subject["digest"]["sha256"].as_str() == Some(hex)) {
        return Err("a signature of another artifact (no subject is this digest)".into());
    }
    let (kind, payload) = (envelope.payload_type.as_bytes(), envelope.payload.as_slice());
    let mut signed = format!("DSSEv1 {} ", kind.len()).into_bytes();
    signed.extend_from_slice(kind);
    signed.extend_from_slice(format!(" {} ", payload.len()).as_bytes());
    signed.extend_from_slice(payload);
    Ok((signed, signature.sig.clone()))
}

/// A bundle referring to the artifact (cosign 3): an image signature of `digest` by `signer`.
async fn verify_bundle(
    text: &str,
    digest: &str,
    root: &TrustRoot,
    verifier: &Verifier,
    signer: &Signer<'_>,
) -> std::result::Result<(), String> {
    let bundle = parse_bundle(text)?;
    image_signature(&bundle, digest)?;
    let digest: [u8; 32] = hex::decode(super::digest_hex(digest).map_err(|e| e.to_string())?)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or("a digest that is not SHA-256")?;
    check_bundle(bundle, ArtifactDigest::Sha256(digest), root, verifier, signer).await
}

/// cosign's `dev.sigstore.cosign/bundle`: a Rekor entry and its signed entry timestamp.
#[derive(serde::Deserialize)]
struct RekorBundle {
    #[serde(rename = "SignedEntryTimestamp")]
    signed_entry_timestamp: String,
    #[serde(rename = "Payload")]
    payload: RekorPayload,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RekorPayload {
    body: String,
    integrated_time: i64,
    log_index: i64,
    #[serde(rename = "logID")]
    log_id: String,
}

/// A `.sig` layer in cosign's keyless layout (cosign 2).
async fn verify_layer(
    layer: &SigLayer,
    (digest, repository): (&str, &str),
    root: &TrustRoot,
    verifier: &Verifier,
    signer: &Signer<'_>,
) -> std::result::Result<(), String> {
    let bundle = bundle_of(layer)?;
    let payload_digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&layer.payload).into();
    check_bundle(bundle, ArtifactDigest::Sha256(payload_digest), root, verifier, signer).await?;
    sign::check_payload(&layer.payload, (digest, repository))
}

/// The Sigstore bundle a keyless layer carries in its annotations.
fn bundle_of(layer: &SigLayer) -> std::result::Result<Bundle, String> {
    let certificate = layer.certificate.as_deref().ok_or("a key-based signature (no certificate)")?;
    let rekor = layer.rekor_bundle.as_deref().ok_or("a certificate with no transparency-log entry")?;
    let certificate = pem_der(certificate).ok_or("a certificate field that holds no PEM certificate")?;
    let rekor: RekorBundle =
        serde_json::from_str(rekor).map_err(|e| format!("a transparency-log entry that is not cosign's ({e})"))?;
    let signature = b64(&layer.signature).ok_or("a signature that is not base64")?;
    let (Some(body), Some(set), Ok(log_id)) =
        (b64(&rekor.payload.body), b64(&rekor.signed_entry_timestamp), hex::decode(&rekor.payload.log_id))
    else {
        return Err("a transparency-log entry with a malformed field".into());
    };
    let payload_digest: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(&layer.payload).into();
    let entry = TransparencyLogEntry {
        log_index: rekor.payload.log_index,
        log_id: Some(LogId { key_id: log_id }),
        kind_version: Some(KindVersion { kind: "hashedrekord".into(), version: "0.0.1".into() }),
        integrated_time: rekor.payload.integrated_time,
        inclusion_promise: Some(InclusionPromise { signed_entry_timestamp: set }),
        inclusion_proof: None,
        canonicalized_body: body,
    };
    Ok(Bundle {
        media_type: BUNDLE_V01.into(),
        verification_material: Some(VerificationMaterial {
            content: Some(verification_material::Content::Certificate(X509Certificate { raw_bytes: certificate })),
            tlog_entries: vec![entry],
            timestamp_verification_data: None,
        }),
        content: Some(bundle::Content::MessageSignature(MessageSignature {
            message_digest: Some(HashOutput {
                algorithm: HashAlgorithm::Sha2256 as i32,
                digest: payload_digest.to_vec(),
            }),
            signature,
        })),
    })
}

/// The DER of the first PEM block of `text`, when it is a certificate (not, say, a bare
/// public key, which would name no identity and chain to no CA).
fn pem_der(text: &str) -> Option<Vec<u8>> {
    let mut lines = text.lines().map(str::trim).skip_while(|line| !line.starts_with("-----BEGIN"));
    if lines.next()? != "-----BEGIN CERTIFICATE-----" {
        return None;
    }
    let body: String = lines.take_while(|line| !line.starts_with("-----END")).collect();
    b64(&body).filter(|der| !der.is_empty())
}

/// Checks `bundle` over `input` with the `sigstore` crate, then its log entry here.
async fn check_bundle(
    bundle: Bundle,
    input: ArtifactDigest,
    root: &TrustRoot,
    verifier: &Verifier,
    signer: &Signer<'_>,
) -> std::result::Result<(), String> {
    let entry = bundle
        .verification_material
        .as_ref()
        .and_then(|m| m.tlog_entries.first())
        .cloned()
        .ok_or("a bundle with no transparency-log entry")?;
    verifier
        .verify_digest_with(input, bundle, &Identity::new(signer.identity, signer.issuer), true)
        .await
        .map_err(|e| crate::store::with_causes(&e))?;
    check_entry(&entry, root)
}

/// The log entry was logged by a Rekor of the trust root: its signed entry timestamp verifies,
/// and its inclusion proof, when there is one, leads to a checkpoint the log signed.
///
/// The signed entry timestamp is required: it is what signs `integratedTime`, the time at
/// which the certificate must have been valid (the `sigstore` crate checks the certificate at
/// that time). An inclusion proof alone proves the entry is in the log, not when it was
/// logged: with it, a signature made with an expired certificate could claim any time. (An
/// RFC 3161 timestamp would cover it too; those are not read here, so a bundle with only one
/// is refused.)
fn check_entry(entry: &TransparencyLogEntry, root: &TrustRoot) -> std::result::Result<(), String> {
    let log_id = entry.log_id.as_ref().map(|id| id.key_id.as_slice()).unwrap_or_default();
    let key = root.tlog_key(log_id).ok_or_else(|| {
        format!("logged by a transparency log the trust root does not name ({})", hex::encode(log_id))
    })?;
    let key = CosignVerificationKey::try_from_der(key).map_err(|e| format!("the trust root's log key: {e}"))?;
    let promise = entry.inclusion_promise.as_ref().ok_or(
        "a log entry without a signed entry timestamp: nothing signs its integratedTime (an inclusion proof alone \
         does not)",
    )?;
    let signed = serde_json::json!({
        "body": base64::engine::general_purpose::STANDARD.encode(&entry.canonicalized_body),
        "integratedTime": entry.integrated_time,
        "logID": hex::encode(log_id),
        "logIndex": entry.log_index,
    });
    // serde_json's map is ordered by key and writes no spaces: RFC 8785 for these values.
    let signed = serde_json::to_vec(&signed).expect("JSON serialises");
    key.verify_signature(Signature::Raw(&promise.signed_entry_timestamp), &signed)
        .map_err(|_| "a signed entry timestamp the transparency log did not sign".to_string())?;
    match &entry.inclusion_proof {
        Some(proof) => check_inclusion(proof, &entry.canonicalized_body, &key),
        None => Ok(()),
    }
}

/// RFC 6962's inclusion proof of `body`, and the checkpoint (a signed note) naming its root.
fn check_inclusion(
    proof: &InclusionProof,
    body: &[u8],
    key: &CosignVerificationKey,
) -> std::result::Result<(), String> {
    use sha2::{Digest as _, Sha256};
    let (Ok(index), Ok(size)) = (u64::try_from(proof.log_index), u64::try_from(proof.tree_size)) else {
        return Err("an inclusion proof out of range".into());
    };
    let leaf = Sha256::new().chain_update([0u8]).chain_update(body).finalize().to_vec();
    let root = root_of(index, size, leaf, &proof.hashes).ok_or("an inclusion proof out of range")?;
    if root != proof.root_hash {
        return Err("an inclusion proof that does not lead to its root".into());
    }
    let note = proof.checkpoint.as_ref().map(|c| c.envelope.as_str()).ok_or("an inclusion proof with no checkpoint")?;
    let (text, signatures) = note.split_once("\n\n").ok_or("a checkpoint that is not a signed note")?;
    let text = format!("{text}\n");
    let mut lines = text.lines().skip(1);
    let (Some(tree_size), Some(root)) = (lines.next(), lines.next()) else {
        return Err("a checkpoint without a size and a root".into());
    };
    if tree_size != proof.tree_size.to_string() || b64(root).as_deref() != Some(&proof.root_hash[..]) {
        return Err("a checkpoint for another tree".into());
    }
    let signed = signatures.lines().filter_map(|line| line.strip_prefix("\u{2014} ")).any(|line| {
        let Some(raw) = line.rsplit(' ').next().and_then(b64) else { return false };
        // A key hint of four bytes, then the signature.
        raw.len() > 4 && key.verify_signature(Signature::Raw(&raw[4..]), text.as_bytes()).is_ok()
    });
    if signed { Ok(()) } else { Err("a checkpoint the transparency log did not sign".into()) }
}

/// The root a leaf hash at `index` of a tree of `size` leads to through `path` (RFC 9162,
/// 2.1.3.2), or `None` when the proof does not fit the tree.
fn root_of(index: u64, size: u64, leaf: Vec<u8>, path: &[Vec<u8>]) -> Option<Vec<u8>> {
    use sha2::{Digest as _, Sha256};
    let node = |left: &[u8], right: &[u8]| -> Vec<u8> {
        Sha256::new().chain_update([1u8]).chain_update(left).chain_update(right).finalize().to_vec()
    };
    if index >= size {
        return None;
    }
    let (mut fn_, mut sn, mut hash) = (index, size - 1, leaf);
    for sibling in path {
        if sn == 0 {
            return None;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            hash = node(sibling, &hash);
            while fn_ & 1 == 0 && fn_ != 0 {
                fn_ >>= 1;
                sn >>= 1;
            }
        } else {
            hash = node(&hash, sibling);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    (sn == 0).then_some(hash)
}

#[cfg(test)]
mod tests {
    use super::root_of;
    use sha2::{Digest as _, Sha256};

    fn hash(parts: &[&[u8]]) -> Vec<u8> {
        parts.iter().fold(Sha256::new(), |h, p| h.chain_update(p)).finalize().to_vec()
    }

    /// The largest power of two below `n`.
    fn split(n: usize) -> usize {
        let mut k = 1;
        while k * 2 < n {
            k *= 2;
        }
        k
    }

    /// RFC 6962's MTH and PATH, as the RFC writes them (recursively).
    fn tree(leaves: &[Vec<u8>]) -> Vec<u8> {
        if leaves.len() == 1 {
            return leaves[0].clone();
        }
        let k = split(leaves.len());
        hash(&[&[1], &tree(&leaves[..k]), &tree(&leaves[k..])])
    }

    fn path(m: usize, leaves: &[Vec<u8>]) -> Vec<Vec<u8>> {
        if leaves.len() == 1 {
            return Vec::new();
        }
        let k = split(leaves.len());
        if m < k {
            let mut p = path(m, &leaves[..k]);
            p.push(tree(&leaves[k..]));
            p
        } else {
            let mut p = path(m - k, &leaves[k..]);
            p.push(tree(&leaves[..k]));
            p
        }
    }

    #[test]
    fn every_leaf_of_every_small_tree_leads_to_its_root_and_nothing_else_does() {
        for size in 1..=17usize {
            let leaves: Vec<Vec<u8>> = (0..size).map(|i| hash(&[&[0], &[i as u8]])).collect();
            let root = tree(&leaves);
            for index in 0..size {
                let proof = path(index, &leaves);
                let (i, n) = (index as u64, size as u64);
                assert_eq!(root_of(i, n, leaves[index].clone(), &proof), Some(root.clone()), "{index} of {size}");
                let other = (index + 1) % size;
                if other != index {
                    assert_ne!(root_of(i, n, leaves[other].clone(), &proof), Some(root.clone()));
                }
                assert_eq!(root_of(n, n, leaves[index].clone(), &proof), None, "an index past the tree");
                let mut longer = proof.clone();
                longer.push(root.clone());
                assert_ne!(root_of(i, n, leaves[index].clone(), &longer), Some(root.clone()));
            }
        }
    }
}

//! Signatures in cosign's key-based layout, so that `cosign sign --key` signatures verify
//! here and ours verify with `cosign verify --key`.
//!
//! The signatures of the manifest `sha256:<hex>` are the artifact tagged `sha256-<hex>.sig`
//! in the same repository: an OCI image manifest whose layers are simplesigning payloads
//! (`application/vnd.dev.cosign.simplesigning.v1+json`: `critical.image.
//! docker-manifest-digest` is the signed digest), each carrying the base64 DER ECDSA P-256
//! signature of its payload (SHA-256) in the annotation `dev.cosignproject.cosign/signature`.
//! Signing appends a layer; any layer that verifies with the key verifies the artifact.
//!
//! Keys: PEM, P-256: PKCS#8 (`PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`) private keys, or
//! cosign's encrypted one (`ENCRYPTED SIGSTORE PRIVATE KEY`, opened with `COSIGN_PASSWORD`:
//! `encrypted.rs`); SPKI (`PUBLIC KEY`) public keys.

use super::artifact::{Descriptor, Manifest};
use super::registry::Registry;
use super::{OciError, Result, io};
use base64::Engine as _;
use oci_client::Reference;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _, EncodePublicKey as _};
use std::path::{Path, PathBuf};

/// A signature layer's media type.
pub const SIMPLESIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation holding a layer's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The type a payload names.
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// One signature: a payload and its signature (base64 DER), as a layer carries them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SigLayer {
    /// The simplesigning payload's bytes.
    #[serde(with = "b64")]
    pub payload: Vec<u8>,
    /// The annotation's value.
    pub signature: String,
    /// A keyless signature's certificate (PEM), from `dev.sigstore.cosign/certificate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    /// Its transparency-log entry (cosign's JSON), from `dev.sigstore.cosign/bundle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rekor_bundle: Option<String>,
}

/// Every signature of one digest, as fetched (and cached).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Signatures {
    /// The layers of its `.sig` artifact (cosign 1 and 2).
    pub layers: Vec<SigLayer>,
    /// The Sigstore bundles referring to it (cosign 3), as JSON.
    #[serde(default)]
    pub bundles: Vec<String>,
}

impl Signatures {
    /// How many there are.
    pub fn len(&self) -> usize {
        self.layers.len() + self.bundles.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

mod b64 {
    use base64::Engine as _;
    pub fn serialize<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(d)?;
        base64::engine::general_purpose::STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// The tag of the signatures of `digest`: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> Result<String> {
    Ok(format!("sha256-{}.sig", super::digest_hex(digest)?))
}

/// The repository a signature of an artifact of `reference` names (its payload's
/// `docker-reference`): `registry/name`, without tag or digest.
pub fn signed_repository(reference: &Reference) -> String {
    format!("{}/{}", reference.registry(), reference.repository())
}

/// The simplesigning payload signing `digest` of `repository` (`registry/name`).
pub fn payload(repository: &str, digest: &str) -> Vec<u8> {
    let payload = serde_json::json!({
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    });
    serde_json::to_vec(&payload).expect("JSON serialises")
}

/// `reference`'s repository with the signature tag of `digest`.
fn signature_ref(reference: &Reference, digest: &str) -> Result<Reference> {
    let (registry, repository) = (reference.registry().to_string(), reference.repository().to_string());
    Ok(Reference::with_tag(registry, repository, signature_tag(digest)?))
}

/// The signatures of `digest` in `reference`'s repository (none when it has no `.sig`).
async fn fetch(registry: &Registry, reference: &Reference, digest: &str) -> Result<Vec<SigLayer>> {
    let at = signature_ref(reference, digest)?;
    let Some(bytes) = registry.manifest_if_any(&at).await? else { return Ok(Vec::new()) };
    let manifest = Manifest::parse(&bytes)?;
    let mut layers = Vec::new();
    for layer in manifest.layers.iter().filter(|l| l.media_type == SIMPLESIGNING) {
        let Some(signature) = layer.annotations.get(SIGNATURE_ANNOTATION) else { continue };
        let payload = registry.document(&at, layer).await?;
        let annotation = |name: &str| layer.annotations.get(name).cloned();
        layers.push(SigLayer {
            payload,
            signature: signature.clone(),
            certificate: annotation(super::keyless::CERTIFICATE_ANNOTATION),
            rekor_bundle: annotation(super::keyless::REKOR_BUNDLE_ANNOTATION),
        });
    }
    Ok(layers)
}

/// A Sigstore bundle's media type, and the artifact type of the manifest holding one: cosign 3
/// stores an image's signatures as such manifests referring to it (OCI 1.1 referrers).
pub const BUNDLE: &str = "application/vnd.dev.sigstore.bundle";
/// At most this many bundles of one digest are fetched.
const MAX_BUNDLES: usize = 16;

/// Every signature of `digest`: the `.sig` layers and the bundles referring to it.
pub async fn fetch_all(registry: &Registry, reference: &Reference, digest: &str) -> Result<Signatures> {
    let layers = fetch(registry, reference, digest).await?;
    let bundles = fetch_bundles(registry, reference, digest).await?;
    Ok(Signatures { layers, bundles })
}

/// The Sigstore bundles referring to `digest` in `reference`'s repository (cosign 3's layout):
/// the referrers API, else the referrers tag; each manifest checked against its digest.
async fn fetch_bundles(registry: &Registry, reference: &Reference, digest: &str) -> Result<Vec<String>> {
    let subject = reference.clone_with_digest(digest.to_string());
    let mut bundles = Vec::new();
    for referrer in registry.referrers(&subject, BUNDLE).await?.into_iter().take(MAX_BUNDLES) {
        let at = reference.clone_with_digest(referrer.clone());
        let bytes = registry.manifest(&at).await?;
        super::check_digest("a bundle's manifest", &bytes, &referrer)?;
        let manifest = Manifest::parse(&bytes)?;
        for layer in manifest.layers.iter().filter(|l| l.media_type.starts_with(BUNDLE)) {
            let blob = registry.document(&at, layer).await?;
            bundles.push(String::from_utf8(blob).map_err(|_| OciError::Layout("a bundle that is not UTF-8".into()))?);
        }
    }
    Ok(bundles)
}

/// Whether one of `signatures` signs `digest` of `repository` (`registry/path`) with `key`
/// (`key_name` for messages), or why none does.
pub fn verify(
    signatures: &Signatures,
    (digest, repository): (&str, &str),
    key: &VerifyingKey,
    key_name: &str,
) -> Result<()> {
    if signatures.is_empty() {
        return Err(OciError::Signature(format!("unsigned: no signature for {digest}")));
    }
    let layers = signatures.layers.iter().map(|layer| verify_one(layer, (digest, repository), key));
    let bundles = signatures.bundles.iter().map(|bundle| verify_bundle(bundle, digest, key));
    let mut reasons = Vec::new();
    for outcome in layers.chain(bundles) {
        match outcome {
            Ok(()) => return Ok(()),
            Err(why) => reasons.push(why),
        }
    }
    reasons.dedup();
    Err(OciError::Signature(format!(
        "none of {} signature(s) verifies with {key_name} ({})",
        signatures.len(),
        reasons.join("; ")
    )))
}

/// A Sigstore bundle (cosign 3's `sign --key`): its DSSE statement signs `digest` with `key`.
/// No transparency log is asked of a key: the key is the trust.
fn verify_bundle(text: &str, digest: &str, key: &VerifyingKey) -> Result<(), String> {
    let bundle = super::keyless::parse_bundle(text)?;
    let (signed, raw) = super::keyless::image_signature(&bundle, digest)?;
    let signature = p256_signature(&raw)?;
    key.verify(&signed, &signature).map_err(|_| "a bundle signed by another key or altered".to_string())
}

fn verify_one(layer: &SigLayer, (digest, repository): (&str, &str), key: &VerifyingKey) -> Result<(), String> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(layer.signature.trim())
        .map_err(|_| "a signature that is not base64".to_string())?;
    let signature = p256_signature(&raw)?;
    key.verify(&layer.payload, &signature).map_err(|_| "signed by another key or altered".to_string())?;
    check_payload(&layer.payload, (digest, repository))
}

/// An ECDSA P-256 signature, DER (as cosign writes it) or raw `r || s`.
fn p256_signature(raw: &[u8]) -> Result<Signature, String> {
    Signature::from_der(raw)
        .or_else(|_| Signature::from_slice(raw))
        .map_err(|_| "a signature that is not ECDSA P-256".into())
}

/// A signed simplesigning payload names `digest`, in `repository`: a signature made for an
/// artifact in another repository (copied with its digest) signs nothing here.
pub fn check_payload(payload: &[u8], (digest, repository): (&str, &str)) -> Result<(), String> {
    let payload: serde_json::Value =
        serde_json::from_slice(payload).map_err(|_| "a payload that is not JSON".to_string())?;
    let critical = &payload["critical"];
    if critical["type"] != PAYLOAD_TYPE {
        return Err(format!("a payload of type {}", critical["type"]));
    }
    match critical["image"]["docker-manifest-digest"].as_str() {
        Some(signed) if signed == digest => {}
        Some(signed) => return Err(format!("a signature of {signed}, another artifact")),
        None => return Err("a payload naming no digest".into()),
    }
    // Docker Hub goes by two names (cosign writes `index.docker.io`).
    let hub = |name: &str| name.strip_prefix("index.docker.io/").map_or(name.to_owned(), |r| format!("docker.io/{r}"));
    match critical["identity"]["docker-reference"].as_str() {
        Some(signed) if hub(signed) == hub(repository) => Ok(()),
        Some(signed) => Err(format!("a signature for {signed}, another repository")),
        None => Err("a payload naming no repository (docker-reference)".into()),
    }
}

/// Signs `digest` of `reference`'s repository with `key`: appends a layer to its `.sig`
/// artifact (made when there is none). Returns the `.sig` manifest's new digest.
pub async fn sign(registry: &Registry, reference: &Reference, digest: &str, key: &SigningKey) -> Result<String> {
    let at = signature_ref(reference, digest)?;
    let payload = payload(&signed_repository(reference), digest);
    let signature: Signature = key.sign(&payload);
    let encoded = base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes());
    let mut layer = Descriptor::of(SIMPLESIGNING, &payload);
    layer.annotations.insert(SIGNATURE_ANNOTATION.into(), encoded);
    let mut layers = match registry.manifest_if_any(&at).await? {
        Some(bytes) => Manifest::parse(&bytes)?.layers,
        None => Vec::new(),
    };
    layers.retain(|l| l != &layer);
    layers.push(layer.clone());
    let config = image_config(&layers);
    let config_descriptor = Descriptor::of("application/vnd.oci.image.config.v1+json", &config);
    registry.push_blob(&at, &layer, &payload).await?;
    registry.push_blob(&at, &config_descriptor, &config).await?;
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(super::MANIFEST.into()),
        config: config_descriptor,
        layers,
        annotations: Default::default(),
    };
    let bytes = manifest.to_bytes();
    registry.push_manifest(&at, &bytes).await?;
    Ok(super::digest_of(&bytes))
}

/// The image config cosign writes for a signature artifact.
fn image_config(layers: &[Descriptor]) -> Vec<u8> {
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    let config = serde_json::json!({
        "architecture": "", "os": "", "config": {},
        "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    serde_json::to_vec(&config).expect("JSON serialises")
}

fn key_error(path: &Path, message: impl Into<String>) -> OciError {
    OciError::Key { path: path.to_path_buf(), message: message.into() }
}

/// Reads a private key (PKCS#8 or SEC1 PEM, P-256, unencrypted).
pub fn signing_key(path: &Path) -> Result<SigningKey> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    if super::encrypted::is_cosign(&text) {
        let var = super::encrypted::PASSWORD_VAR;
        let password = std::env::var(var).map_err(|_| key_error(path, format!("cosign's encrypted key: set {var}")))?;
        return Ok(SigningKey::from(&super::encrypted::open(&text, path, &password)?));
    }
    if text.contains("ENCRYPTED") {
        let why = "an encrypted PKCS#8 key is not supported: use cosign's (with COSIGN_PASSWORD), or an \
                   unencrypted PKCS#8 or SEC1 P-256 key (`skillhost skill keygen`)";
        return Err(key_error(path, why));
    }
    let secret = if text.contains("BEGIN EC PRIVATE KEY") {
        p256::SecretKey::from_sec1_pem(&text).map_err(|e| key_error(path, format!("not a SEC1 P-256 key: {e}")))?
    } else {
        p256::SecretKey::from_pkcs8_pem(&text).map_err(|e| key_error(path, format!("not a PKCS#8 P-256 key: {e}")))?
    };
    Ok(SigningKey::from(&secret))
}

/// Reads a public key (SPKI PEM, P-256).
pub fn verifying_key(path: &Path) -> Result<VerifyingKey> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    let public = p256::PublicKey::from_public_key_pem(&text)
        .map_err(|e| key_error(path, format!("not a P-256 public key (SPKI PEM): {e}")))?;
    Ok(VerifyingKey::from(&public))
}

/// Writes a new key pair: `<out>.key` (PKCS#8 PEM, mode 0600) and `<out>.pub` (SPKI PEM).
/// Refuses to overwrite either.
pub fn keygen(out: &Path) -> Result<(PathBuf, PathBuf)> {
    let (private, public) = (with_suffix(out, "key"), with_suffix(out, "pub"));
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    for path in [&private, &public] {
        if path.exists() {
            return Err(key_error(path, "exists already; not overwritten"));
        }
    }
    let secret = loop {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| key_error(out, format!("no randomness from the OS: {e}")))?;
        // All but a 2^-32 share of 32-byte strings are valid scalars.
        if let Ok(secret) = p256::SecretKey::from_slice(&bytes) {
            break secret;
        }
    };
    let pem = secret.to_pkcs8_pem(p256::pkcs8::LineEnding::LF).map_err(|e| key_error(&private, e.to_string()))?;
    let public_pem = secret
        .public_key()
        .to_public_key_pem(p256::pkcs8::LineEnding::LF)
        .map_err(|e| key_error(&public, e.to_string()))?;
    write_private(&private, pem.as_bytes())?;
    std::fs::write(&public, public_pem).map_err(io(&public))?;
    Ok((private, public))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(io(path))?;
    file.write_all(bytes).map_err(io(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_for_its_digest_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let (private, public) = keygen(&dir.path().join("team")).unwrap();
        let (key, verifier) = (signing_key(&private).unwrap(), verifying_key(&public).unwrap());
        let digest = format!("sha256:{}", "ab".repeat(32));
        let payload = payload("127.0.0.1:5000/team/x", &digest);
        let signature: Signature = key.sign(&payload);
        let signature = base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes());
        let layers = vec![SigLayer { payload, signature, certificate: None, rekor_bundle: None }];
        let layers = Signatures { layers, bundles: Vec::new() };
        let here = "127.0.0.1:5000/team/x";
        verify(&layers, (&digest, here), &verifier, "team.pub").unwrap();
        let other = format!("sha256:{}", "cd".repeat(32));
        let error = verify(&layers, (&other, here), &verifier, "team.pub").unwrap_err().to_string();
        assert!(error.contains("another artifact"), "{error}");
        let elsewhere = verify(&layers, (&digest, "127.0.0.1:5000/vendor/x"), &verifier, "team.pub").unwrap_err();
        assert!(elsewhere.to_string().contains("another repository"), "{elsewhere}");
        let (_, public2) = keygen(&dir.path().join("other")).unwrap();
        let error = verify(&layers, (&digest, here), &verifying_key(&public2).unwrap(), "other.pub").unwrap_err();
        assert!(error.to_string().contains("another key"), "{error}");
        let none = Signatures::default();
        assert!(verify(&none, (&digest, here), &verifier, "team.pub").unwrap_err().to_string().contains("unsigned"));
        assert!(keygen(&dir.path().join("team")).is_err(), "never overwrites");
    }
}

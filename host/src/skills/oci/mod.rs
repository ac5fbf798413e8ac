//! Skills as OCI artifacts: published to any OCI registry, pulled by reference, their digest
//! and signature checked before anything is compiled (docs/distribution.md).
//!
//! Layout:
//! - `artifact.rs` — the artifact: the CNCF wasm layout (config
//!   `application/vnd.wasm.config.v0+json`, the component as an `application/wasm` layer)
//!   plus the skill's other distributable files ([`super::files`]) as one deterministic tar
//!   layer ([`FILES_LAYER`]); packing a folder, unpacking into one.
//! - `registry.rs` — the registry client: plain HTTP only to loopback or under `insecure`,
//!   credentials from the command line or Docker's `config.json`; pulls counted on the bytes
//!   received (layers streamed to disk up to `skills.oci_max_bytes`, documents up to 4 MiB),
//!   `oci-client` for the token exchange and pushes.
//! - `sign.rs` — cosign's key-based layout: `sha256-<hex>.sig`, simplesigning payloads,
//!   ECDSA P-256 signatures in the `dev.cosignproject.cosign/signature` annotation; keys.
//! - `source.rs` — `skills.oci` entries turned into verified folders in the cache
//!   (`<sandbox.cache_dir>/oci/`), content-addressed, so a start without the registry works.
//! - `diff.rs` — what a new version asks for that the old one did not (`skill diff`), and
//!   the check of a digest-pinned grant.

pub mod artifact;
pub mod diff;
mod encrypted;
mod keyless;
mod load;
pub mod registry;
pub mod sign;
pub mod source;

pub use artifact::{Packed, Provenance};
pub use registry::{Access, Registry};
pub use source::{Origin, Signer};

/// The manifest's media type.
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config blob's media type (the CNCF wasm artifact layout).
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The component layer's media type.
pub const WASM_LAYER: &str = "application/wasm";
/// The media type of the layer holding the skill's other distributable files.
pub const FILES_LAYER: &str = "application/vnd.skillhost.skill.files.v1.tar";
/// The annotation naming the skill (the name never comes from the reference).
pub const NAME_ANNOTATION: &str = "dev.skillhost.skill.name";
/// The annotation naming the WIT package the component was built against.
pub const WIT_ANNOTATION: &str = "dev.skillhost.skill.wit";

/// Why an artifact could not be published, fetched or trusted. Each message names the
/// reason; callers add the reference.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference does not parse, or says what is not allowed.
    #[error("{0}")]
    Reference(String),
    /// The registry could not be reached.
    #[error("cannot reach the registry: {0}")]
    Unreachable(String),
    /// The registry answered with an error.
    #[error("the registry refused: {0}")]
    Registry(String),
    /// Content that does not hash to the digest that names it.
    #[error("digest mismatch: {what} should be {expected}, the registry sent {actual}")]
    Digest {
        /// The manifest or which blob.
        what: String,
        /// The digest it is named by.
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// More bytes than allowed: the registry sent (or declared) past the bound.
    #[error("{what} is over {limit} bytes: the download stopped there")]
    TooLarge {
        /// What was being read.
        what: String,
        /// The bound, in bytes.
        limit: u64,
    },
    /// Not a skill artifact, or a malformed one.
    #[error("not a skill artifact: {0}")]
    Layout(String),
    /// The signature check failed.
    #[error("signature: {0}")]
    Signature(String),
    /// A key could not be read or used.
    #[error("key {path}: {message}")]
    Key {
        /// The key file.
        path: std::path::PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A file of the cache or the skill folder.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// The result of this module's functions.
pub type Result<T, E = OciError> = std::result::Result<T, E>;

fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> OciError + '_ {
    move |source| OciError::Io { path: path.to_path_buf(), source }
}

/// `sha256:<hex>` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// The hex of a `sha256:<64 hex>` digest, or why it is not one.
pub fn digest_hex(digest: &str) -> Result<&str> {
    let hex = digest.strip_prefix("sha256:").unwrap_or_default();
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(hex)
    } else {
        Err(OciError::Layout(format!("`{digest}` is not a sha256 digest")))
    }
}

/// Checks that `bytes` hash to `expected`.
fn check_digest(what: &str, bytes: &[u8], expected: &str) -> Result<()> {
    let actual = digest_of(bytes);
    if actual == expected {
        Ok(())
    } else {
        Err(OciError::Digest { what: what.into(), expected: expected.into(), actual })
    }
}

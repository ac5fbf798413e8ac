//! `skills.oci`: skills loaded from OCI registries by reference (docs/distribution.md).

use serde::Deserialize;
use std::path::PathBuf;

/// One `skills.oci` entry: a skill published with `skillhost skill push`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OciSkill {
    /// The reference: `registry/repository@sha256:<hex>` (a digest pin), or with a tag
    /// (`:1.2`) only under `allow_tags: true`.
    #[serde(rename = "ref")]
    pub reference: String,
    /// Whose signature the artifact must carry; required unless `allow_unsigned: true`.
    #[serde(default)]
    pub verify: Option<Verify>,
    /// Loads the artifact without a signature (a digest pin still holds).
    #[serde(default)]
    pub allow_unsigned: bool,
    /// Accepts a reference by tag without a digest; the digest it resolves to is logged.
    #[serde(default)]
    pub allow_tags: bool,
    /// Plain HTTP to a registry that is not on loopback (loopback always may).
    #[serde(default)]
    pub insecure: bool,
}

/// `verify`: a public key, or (keyless) a certificate identity and issuer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum Verify {
    /// `{key: path}`: an ECDSA P-256 public key (SPKI PEM, as `skill keygen` and
    /// `cosign generate-key-pair` write it), relative to the config's folder.
    Key {
        /// The key file.
        key: PathBuf,
    },
    /// `{identity, issuer, trusted_root}`: a Sigstore bundle's certificate, matched exactly.
    Keyless {
        /// The certificate's subject (an email or a workflow URI), exactly.
        identity: String,
        /// The OIDC issuer, exactly.
        issuer: String,
        /// The trust root file (Sigstore `trusted_root.json`).
        trusted_root: PathBuf,
    },
}

impl OciSkill {
    /// Checks what can be checked before anything is pulled: a reference that parses, a
    /// `verify` or `allow_unsigned`.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.reference.trim().is_empty() {
            return Err("ref: empty".into());
        }
        if self.verify.is_none() && !self.allow_unsigned {
            return Err(format!(
                "`{}`: verify is required (verify: {{key: keys/team.pub}}), or allow_unsigned: true",
                self.reference
            ));
        }
        Ok(())
    }
}

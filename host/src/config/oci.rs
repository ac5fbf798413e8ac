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
    /// The skill's name here, which the artifact must carry (default: the repository's last
    /// path segment in snake_case): a publisher cannot take another skill's name.
    #[serde(default)]
    pub name: Option<String>,
    /// It may replace a skill folder or built-in of its name (said at start); without it,
    /// such an entry is refused and the folder or built-in serves.
    #[serde(default)]
    pub replaces: bool,
}

/// `verify`: a public key, or (keyless) a certificate identity and issuer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "VerifyKeys")]
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

/// `verify` as written: which of its keys are there.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifyKeys {
    key: Option<PathBuf>,
    identity: Option<String>,
    issuer: Option<String>,
    trusted_root: Option<PathBuf>,
}

impl TryFrom<VerifyKeys> for Verify {
    type Error = String;

    fn try_from(keys: VerifyKeys) -> Result<Self, String> {
        let keyless = keys.identity.is_some() || keys.issuer.is_some() || keys.trusted_root.is_some();
        match (keys.key, keyless) {
            (Some(_), true) => Err("verify: either `key`, or `identity`, `issuer` and `trusted_root`; not both".into()),
            (Some(key), false) => Ok(Verify::Key { key }),
            (None, false) => Err("verify: `key` (a public key file), or keyless `identity`, `issuer` and \
                                  `trusted_root`"
                .into()),
            (None, true) => match (keys.identity, keys.issuer, keys.trusted_root) {
                (Some(identity), Some(issuer), Some(trusted_root)) => {
                    Ok(Verify::Keyless { identity, issuer, trusted_root })
                }
                _ => Err("verify: keyless needs all of `identity`, `issuer` and `trusted_root` (matched exactly, \
                          never by a default)"
                    .into()),
            },
        }
    }
}

impl OciSkill {
    /// The skill's name here: `name`, else the repository's last path segment in
    /// snake_case (`registry/team/http-checker:1.0` is `http_checker`).
    pub fn skill_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            let repository = self.repository();
            repository.rsplit('/').next().unwrap_or(repository).replace('-', "_")
        })
    }

    /// The repository it comes from, `registry/path` without tag or digest (what a grant's
    /// `source` names).
    pub fn repository(&self) -> &str {
        repository_of(&self.reference)
    }

    /// Checks what can be checked before anything is pulled: a reference that parses, a
    /// `verify` or `allow_unsigned`.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.reference.trim().is_empty() {
            return Err("ref: empty".into());
        }
        if let Some(name) = &self.name {
            super::check_name(name).map_err(|e| format!("`{}`: name `{name}` {e}", self.reference))?;
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

/// `registry/path` of a reference, without its tag or digest.
pub fn repository_of(reference: &str) -> &str {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    match without_digest.rsplit_once(':') {
        // A colon after the last slash is a tag's; before it, a registry's port.
        Some((repository, tag)) if !tag.contains('/') => repository,
        _ => without_digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verify(yaml: &str) -> Result<Verify, String> {
        serde_yaml_ng::from_str::<Verify>(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn an_entry_names_its_skill_and_its_repository() {
        let entry = |reference: &str| OciSkill {
            reference: reference.into(),
            verify: None,
            allow_unsigned: true,
            allow_tags: true,
            insecure: false,
            name: None,
            replaces: false,
        };
        for (reference, name, repository) in [
            ("127.0.0.1:5000/team/http-checker:1.0", "http_checker", "127.0.0.1:5000/team/http-checker"),
            ("127.0.0.1:5000/team/probe@sha256:ab", "probe", "127.0.0.1:5000/team/probe"),
            ("127.0.0.1:5000/team/probe:2@sha256:ab", "probe", "127.0.0.1:5000/team/probe"),
            ("localhost:5000/x", "x", "localhost:5000/x"),
        ] {
            assert_eq!((entry(reference).skill_name().as_str(), entry(reference).repository()), (name, repository));
        }
        let named = OciSkill { name: Some("weather".into()), ..entry("r.example/vendor/wx:1") };
        assert_eq!(named.skill_name(), "weather");
    }

    #[test]
    fn verify_is_a_key_or_all_of_keyless_and_says_which_when_neither() {
        assert_eq!(verify("{key: k.pub}").unwrap(), Verify::Key { key: "k.pub".into() });
        let keyless = verify("{identity: a@b.c, issuer: https://i, trusted_root: t.json}").unwrap();
        assert!(matches!(keyless, Verify::Keyless { .. }));
        assert!(verify("{key: k.pub, issuer: https://i}").unwrap_err().contains("not both"));
        assert!(verify("{identity: a@b.c}").unwrap_err().contains("needs all of"));
        assert!(verify("{}").unwrap_err().contains("a public key file"));
        assert!(verify("{kee: k.pub}").unwrap_err().contains("kee"));
    }
}

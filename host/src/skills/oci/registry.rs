//! The registry client: `oci-client` over rustls, with the transport and credentials a
//! reference calls for.
//!
//! Plain HTTP is used only for a registry on loopback (`localhost`, `127.0.0.0/8`, `[::1]`)
//! or when the caller says `insecure`; everything else is HTTPS. Credentials: those given
//! (`--username` and `--password-stdin`), else the Docker `config.json`'s
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`: `auths.<registry>.auth`, or
//! its `username` and `password`), else none. Credential helpers (`credsStore`) are not run.

use super::artifact::{Descriptor, MAX_BLOB_BYTES};
use super::{OciError, Result};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use std::time::Duration;

/// How to reach a registry.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// Plain HTTP to a registry that is not on loopback.
    pub insecure: bool,
    /// Credentials given on the command line (user, password).
    pub credentials: Option<(String, String)>,
}

/// A client for the registry one reference names.
pub struct Registry {
    client: Client,
    auth: RegistryAuth,
}

/// Parses `text` as an OCI reference (`registry/repository[:tag][@sha256:<hex>]`).
pub fn parse(text: &str) -> Result<Reference> {
    text.trim().parse::<Reference>().map_err(|e| OciError::Reference(format!("`{text}` is not a reference: {e}")))
}

/// Whether `registry` (`host[:port]`) is on this machine's loopback.
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => registry.rsplit_once(':').map_or(registry, |(host, _)| host),
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Registry {
    /// A client for `reference`'s registry.
    pub fn new(reference: &Reference, access: &Access) -> Self {
        let registry = reference.resolve_registry().to_string();
        let protocol = if access.insecure || is_loopback(&registry) {
            ClientProtocol::HttpsExcept(vec![registry.clone()])
        } else {
            ClientProtocol::Https
        };
        let config = ClientConfig {
            protocol,
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            platform_resolver: None,
            ..Default::default()
        };
        let auth = match &access.credentials {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => docker_credentials(&registry).unwrap_or(RegistryAuth::Anonymous),
        };
        Registry { client: Client::new(config), auth }
    }

    /// The manifest `reference` names (by tag or digest): its bytes, unchecked.
    pub async fn manifest(&self, reference: &Reference) -> Result<Vec<u8>> {
        let accepted = [super::MANIFEST];
        let pulled = self.client.pull_manifest_raw(reference, &self.auth, &accepted).await;
        let (bytes, _) = pulled.map_err(|e| match e {
            OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) => {
                OciError::Digest { what: "the manifest".into(), expected, actual }
            }
            e => classify(e),
        })?;
        Ok(bytes.to_vec())
    }

    /// Like [`Registry::manifest`], `None` when the registry has no such manifest.
    pub async fn manifest_if_any(&self, reference: &Reference) -> Result<Option<Vec<u8>>> {
        match self.manifest(reference).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(OciError::Registry(message)) if message.starts_with(NOT_FOUND) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The blob `descriptor` names, from `reference`'s repository; the client checks its
    /// digest as it streams.
    pub async fn blob(&self, reference: &Reference, descriptor: &Descriptor) -> Result<Vec<u8>> {
        if descriptor.size > MAX_BLOB_BYTES {
            return Err(OciError::Layout(format!("blob {} is over {MAX_BLOB_BYTES} bytes", descriptor.digest)));
        }
        let wanted = OciDescriptor {
            media_type: descriptor.media_type.clone(),
            digest: descriptor.digest.clone(),
            size: i64::try_from(descriptor.size).unwrap_or(i64::MAX),
            ..Default::default()
        };
        self.client.store_auth_if_needed(reference.resolve_registry(), &self.auth).await;
        let mut bytes = Vec::with_capacity(usize::try_from(descriptor.size).unwrap_or(0));
        self.client.pull_blob(reference, &wanted, &mut bytes).await.map_err(|e| match e {
            OciDistributionError::DigestError(DigestError::VerificationError { actual, .. }) => OciError::Digest {
                what: format!("the {} layer", descriptor.media_type),
                expected: descriptor.digest.clone(),
                actual,
            },
            e => classify(e),
        })?;
        super::check_digest(&format!("blob {}", descriptor.digest), &bytes, &descriptor.digest)?;
        Ok(bytes)
    }

    /// The digests of the manifests referring to `subject` (by digest) whose artifact type
    /// starts with `artifact_type`: the referrers API, else the referrers tag (`sha256-<hex>`).
    pub async fn referrers(&self, subject: &Reference, artifact_type: &str) -> Result<Vec<String>> {
        self.client.store_auth_if_needed(subject.resolve_registry(), &self.auth).await;
        let index = self.client.pull_referrers(subject, None).await.map_err(classify)?;
        Ok(index
            .manifests
            .into_iter()
            .filter(|entry| entry.artifact_type.as_deref().is_some_and(|t| t.starts_with(artifact_type)))
            .map(|entry| entry.digest)
            .collect())
    }

    /// Pushes `bytes` as the blob `descriptor` names (skipped when the registry has it).
    pub async fn push_blob(&self, reference: &Reference, descriptor: &Descriptor, bytes: &[u8]) -> Result<()> {
        self.client.store_auth_if_needed(reference.resolve_registry(), &self.auth).await;
        if self.client.blob_exists(reference, &descriptor.digest).await.map_err(classify)? {
            return Ok(());
        }
        self.client.push_blob(reference, bytes.to_vec(), &descriptor.digest).await.map_err(classify)?;
        Ok(())
    }

    /// Pushes `manifest` (its exact bytes) under `reference` (a tag, or its own digest).
    pub async fn push_manifest(&self, reference: &Reference, manifest: &[u8]) -> Result<()> {
        self.client.store_auth_if_needed(reference.resolve_registry(), &self.auth).await;
        let content_type = reqwest::header::HeaderValue::from_static(super::MANIFEST);
        self.client.push_manifest_raw(reference, manifest.to_vec(), content_type).await.map_err(classify)?;
        Ok(())
    }
}

/// The start of the message of a registry's "no such manifest or blob".
const NOT_FOUND: &str = "not found";

/// `error` and its causes, `: `-separated.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(&format!(": {next}"));
        cause = next.source();
    }
    text
}

/// An `oci-client` error as ours: unreachable, not found, or what the registry said.
fn classify(error: OciDistributionError) -> OciError {
    match &error {
        OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => OciError::Unreachable(chain(e)),
        OciDistributionError::ImageManifestNotFoundError(m) => OciError::Registry(format!("{NOT_FOUND}: {m}")),
        OciDistributionError::ServerError { code: 404, url, .. } => OciError::Registry(format!("{NOT_FOUND}: {url}")),
        OciDistributionError::RegistryError { envelope, url } => {
            let unknown = [OciErrorCode::ManifestUnknown, OciErrorCode::BlobUnknown, OciErrorCode::NameUnknown];
            if envelope.errors.iter().any(|e| unknown.contains(&e.code)) {
                OciError::Registry(format!("{NOT_FOUND}: {url}"))
            } else {
                OciError::Registry(format!("{envelope} ({url})"))
            }
        }
        _ => OciError::Registry(chain(&error)),
    }
}

/// The Docker `config.json` credentials for `registry`, if any.
fn docker_credentials(registry: &str) -> Option<RegistryAuth> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| std::path::PathBuf::from(home).join(".docker")))?;
    let text = std::fs::read_to_string(dir.join("config.json")).ok()?;
    let config: serde_json::Value = serde_json::from_str(&text).ok()?;
    let auths = config.get("auths")?.as_object()?;
    let entry = auths.iter().find(|(key, _)| {
        let key = key.trim_start_matches("https://").trim_start_matches("http://");
        key.split('/').next() == Some(registry)
    })?;
    let entry = entry.1;
    if let Some(auth) = entry.get("auth").and_then(|a| a.as_str()) {
        use base64::Engine as _;
        let decoded = base64::engine::general_purpose::STANDARD.decode(auth).ok()?;
        let (user, password) =
            String::from_utf8(decoded).ok()?.split_once(':').map(|(u, p)| (u.to_owned(), p.to_owned()))?;
        return Some(RegistryAuth::Basic(user, password));
    }
    let user = entry.get("username")?.as_str()?.to_owned();
    let password = entry.get("password")?.as_str()?.to_owned();
    Some(RegistryAuth::Basic(user, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_registries_are_loopback() {
        for yes in ["localhost:5000", "127.0.0.1:5000", "127.3.2.1", "[::1]:5000", "localhost"] {
            assert!(is_loopback(yes), "{yes}");
        }
        for no in ["registry.example.com", "10.0.0.1:5000", "localhost.example.com:5000", "[fe80::1]:5000"] {
            assert!(!is_loopback(no), "{no}");
        }
    }
}

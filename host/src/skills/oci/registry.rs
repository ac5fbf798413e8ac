//! The registry client: `oci-client` over rustls, with the transport and credentials a
//! reference calls for.
//!
//! Plain HTTP is used only for a registry on loopback (`localhost`, `127.0.0.0/8`, `[::1]`)
//! or when the caller says `insecure`; everything else is HTTPS. Credentials: those given
//! (`--username` and `--password-stdin`), else the Docker `config.json`'s
//! (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`: `auths.<registry>.auth`, or
//! its `username` and `password`), else none. Credential helpers (`credsStore`) are not run.

use super::artifact::Descriptor;
use super::{OciError, Result, io};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciEnvelope, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use reqwest::header::HeaderValue;
use std::collections::HashMap;
use std::path::Path;
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
///
/// Pulls go through our own bounded reads ([`Registry::manifest`], [`Registry::blob_to`],
/// [`Registry::referrers`]); `oci-client` finds the credentials a pull needs (its token
/// exchange) and pushes.
pub struct Registry {
    client: Client,
    auth: RegistryAuth,
    http: reqwest::Client,
    /// `scheme://host[:port]`.
    base: String,
    /// The `Authorization` each repository's pulls carry, found once.
    authorizations: tokio::sync::Mutex<HashMap<String, Option<HeaderValue>>>,
    max_blob: u64,
}

/// The most a manifest, a referrers index, a signature payload or a bundle may have.
pub const MAX_DOCUMENT_BYTES: u64 = 4 << 20;

/// The default of `skills.oci_max_bytes`.
pub const DEFAULT_MAX_BLOB_BYTES: u64 = crate::config::DEFAULT_OCI_MAX_BYTES;

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
    /// A client for `reference`'s registry; blobs stop at [`DEFAULT_MAX_BLOB_BYTES`].
    pub fn new(reference: &Reference, access: &Access) -> Self {
        let registry = reference.resolve_registry().to_string();
        let plain = access.insecure || is_loopback(&registry);
        let protocol = if plain { ClientProtocol::HttpsExcept(vec![registry.clone()]) } else { ClientProtocol::Https };
        let (connect, read) = (Duration::from_secs(10), Duration::from_secs(60));
        let config = ClientConfig {
            protocol,
            connect_timeout: Some(connect),
            read_timeout: Some(read),
            platform_resolver: None,
            ..Default::default()
        };
        let auth = match &access.credentials {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => docker_credentials(&registry).unwrap_or(RegistryAuth::Anonymous),
        };
        let http = reqwest::Client::builder()
            .connect_timeout(connect)
            .read_timeout(read)
            .user_agent(concat!("skillhost/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a client without custom TLS builds");
        let base = format!("{}://{registry}", if plain { "http" } else { "https" });
        Registry {
            client: Client::new(config),
            auth,
            http,
            base,
            authorizations: tokio::sync::Mutex::default(),
            max_blob: DEFAULT_MAX_BLOB_BYTES,
        }
    }

    /// The same client, its blobs stopped at `bytes` received (`skills.oci_max_bytes`).
    #[must_use]
    pub fn max_blob_bytes(mut self, bytes: u64) -> Self {
        self.max_blob = bytes;
        self
    }

    /// The manifest `reference` names (by tag or digest), at most [`MAX_DOCUMENT_BYTES`];
    /// checked against the digest when the reference has one.
    pub async fn manifest(&self, reference: &Reference) -> Result<Vec<u8>> {
        let name = reference.digest().or(reference.tag()).unwrap_or("latest");
        let url = format!("{}/v2/{}/manifests/{name}", self.base, reference.repository());
        let response = self.get(reference, &url, &[super::MANIFEST, INDEX]).await?;
        let bytes = read_bounded(response, MAX_DOCUMENT_BYTES, "the manifest").await?;
        if let Some(pinned) = reference.digest() {
            super::check_digest("the manifest", &bytes, pinned)?;
        }
        Ok(bytes)
    }

    /// Like [`Registry::manifest`], `None` when the registry has no such manifest.
    pub async fn manifest_if_any(&self, reference: &Reference) -> Result<Option<Vec<u8>>> {
        match self.manifest(reference).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(OciError::Registry(message)) if message.starts_with(NOT_FOUND) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The blob `descriptor` names, from `reference`'s repository, written to `to` (created)
    /// as it arrives: hashed and counted on the bytes received, stopped at the client's
    /// bound whatever the registry declares. A blob that fails is removed.
    pub async fn blob_to(&self, reference: &Reference, descriptor: &Descriptor, to: &Path) -> Result<()> {
        let mut file = tokio::fs::File::create_new(to).await.map_err(io(to))?;
        let written = self.stream_blob(reference, descriptor, self.max_blob, &mut file).await;
        let flushed = match written {
            Ok(()) => file.sync_all().await.map_err(io(to)),
            Err(e) => Err(e),
        };
        if flushed.is_err() {
            drop(file);
            let _ = tokio::fs::remove_file(to).await;
        }
        flushed
    }

    /// A small blob (a signature payload, a bundle) in memory, at most [`MAX_DOCUMENT_BYTES`].
    pub async fn document(&self, reference: &Reference, descriptor: &Descriptor) -> Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.stream_blob(reference, descriptor, MAX_DOCUMENT_BYTES, &mut bytes).await?;
        Ok(bytes)
    }

    async fn stream_blob(
        &self,
        reference: &Reference,
        descriptor: &Descriptor,
        limit: u64,
        out: &mut (impl tokio::io::AsyncWrite + Unpin),
    ) -> Result<()> {
        use sha2::Digest as _;
        use tokio::io::AsyncWriteExt as _;
        let what = format!("blob {}", descriptor.digest);
        if descriptor.size > limit {
            return Err(OciError::TooLarge { what: format!("{what} (declared {} bytes)", descriptor.size), limit });
        }
        super::digest_hex(&descriptor.digest)?;
        let url = format!("{}/v2/{}/blobs/{}", self.base, reference.repository(), descriptor.digest);
        let mut response = self.get(reference, &url, &["*/*"]).await?;
        refuse_declared(&response, limit, &what)?;
        let (mut hasher, mut received) = (sha2::Sha256::new(), 0u64);
        while let Some(chunk) = response.chunk().await.map_err(|e| transport(&e))? {
            received += chunk.len() as u64;
            if received > limit {
                return Err(OciError::TooLarge { what, limit });
            }
            hasher.update(&chunk);
            out.write_all(&chunk).await.map_err(|e| OciError::Io { path: what.clone().into(), source: e })?;
        }
        out.flush().await.map_err(|e| OciError::Io { path: what.clone().into(), source: e })?;
        let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
        if actual != descriptor.digest {
            let what = format!("the {} layer", descriptor.media_type);
            return Err(OciError::Digest { what, expected: descriptor.digest.clone(), actual });
        }
        Ok(())
    }

    /// The digests of the manifests referring to `subject` (by digest) whose artifact type
    /// starts with `artifact_type`: the referrers API, else the referrers tag (`sha256-<hex>`).
    /// Either index is read up to [`MAX_DOCUMENT_BYTES`].
    pub async fn referrers(&self, subject: &Reference, artifact_type: &str) -> Result<Vec<String>> {
        let digest = subject.digest().ok_or_else(|| OciError::Reference("referrers of a tag".into()))?;
        super::digest_hex(digest)?;
        let url = format!("{}/v2/{}/referrers/{digest}", self.base, subject.repository());
        let bytes = match self.get(subject, &url, &[INDEX]).await {
            Ok(response) => read_bounded(response, MAX_DOCUMENT_BYTES, "the referrers index").await?,
            // No referrers API: the referrers tag, if there is one.
            Err(OciError::Registry(message)) if message.starts_with(NOT_FOUND) => {
                let tag = Reference::with_tag(
                    subject.registry().to_string(),
                    subject.repository().to_string(),
                    digest.replace(':', "-"),
                );
                match self.manifest_if_any(&tag).await? {
                    Some(bytes) => bytes,
                    None => return Ok(Vec::new()),
                }
            }
            Err(e) => return Err(e),
        };
        let index: ReferrersIndex = serde_json::from_slice(&bytes)
            .map_err(|e| OciError::Layout(format!("the referrers index of {digest}: {e}")))?;
        Ok(index
            .manifests
            .into_iter()
            .filter(|entry| entry.artifact_type.as_deref().is_some_and(|t| t.starts_with(artifact_type)))
            .map(|entry| entry.digest)
            .collect())
    }

    /// A GET of `url` in `reference`'s repository with its credentials: the response when
    /// it is a success, else what the registry said.
    async fn get(&self, reference: &Reference, url: &str, accept: &[&str]) -> Result<reqwest::Response> {
        let mut request = self.http.get(url).header(reqwest::header::ACCEPT, accept.join(", "));
        if let Some(value) = self.authorization(reference).await? {
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        let response = request.send().await.map_err(|e| transport(&e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = read_bounded(response, 64 << 10, "an error answer").await.unwrap_or_default();
        let error = match serde_json::from_slice::<OciEnvelope>(&body) {
            Ok(envelope) => OciDistributionError::RegistryError { envelope, url: url.to_string() },
            Err(_) => OciDistributionError::ServerError {
                code: status.as_u16(),
                url: url.to_string(),
                message: String::from_utf8_lossy(&body).chars().take(200).collect(),
            },
        };
        Err(classify(error))
    }

    /// The `Authorization` value for pulls from `reference`'s repository: the registry's
    /// bearer token when it asks for one, else the credentials, else none.
    async fn authorization(&self, reference: &Reference) -> Result<Option<HeaderValue>> {
        let mut known = self.authorizations.lock().await;
        if let Some(value) = known.get(reference.repository()) {
            return Ok(value.clone());
        }
        let token = self.client.auth(reference, &self.auth, RegistryOperation::Pull).await.map_err(classify)?;
        let text = match (token, &self.auth) {
            (Some(token), _) => Some(format!("Bearer {token}")),
            (None, RegistryAuth::Basic(user, password)) => {
                use base64::Engine as _;
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
                ))
            }
            (None, _) => None,
        };
        let mut value = match text {
            Some(text) => Some(
                HeaderValue::from_str(&text)
                    .map_err(|_| OciError::Registry("a token that cannot be sent as a header".into()))?,
            ),
            None => None,
        };
        if let Some(value) = value.as_mut() {
            value.set_sensitive(true);
        }
        known.insert(reference.repository().to_string(), value.clone());
        Ok(value)
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

/// An image index's media type (a referrers answer is one).
const INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// The part of an image index the referrers answer is read for.
#[derive(serde::Deserialize)]
struct ReferrersIndex {
    #[serde(default)]
    manifests: Vec<ReferrersEntry>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReferrersEntry {
    digest: String,
    #[serde(default)]
    artifact_type: Option<String>,
}

/// Refuses a response whose declared length is already over `limit`.
fn refuse_declared(response: &reqwest::Response, limit: u64, what: &str) -> Result<()> {
    match response.content_length() {
        Some(declared) if declared > limit => {
            Err(OciError::TooLarge { what: format!("{what} (declared {declared} bytes)"), limit })
        }
        _ => Ok(()),
    }
}

/// The body of `response`, stopped once it passes `limit` bytes received.
async fn read_bounded(mut response: reqwest::Response, limit: u64, what: &str) -> Result<Vec<u8>> {
    refuse_declared(&response, limit, what)?;
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport(&e))? {
        if (bytes.len() + chunk.len()) as u64 > limit {
            return Err(OciError::TooLarge { what: what.to_string(), limit });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// A transport failure: unreachable (connect, timeout), else what broke.
fn transport(error: &reqwest::Error) -> OciError {
    if error.is_connect() || error.is_timeout() {
        OciError::Unreachable(chain(error))
    } else {
        OciError::Registry(chain(error))
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

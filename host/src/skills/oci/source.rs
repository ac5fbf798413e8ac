//! `skills.oci` entries, pulled and verified into skill folders in the cache.
//!
//! The cache is `<sandbox.cache_dir>/oci/`, content-addressed: `manifests/sha256-<hex>` (the
//! manifest's bytes, checked against their name whenever read), `signatures/sha256-<hex>.json`
//! (the signature layers last fetched, verified again with the configured key on every
//! load), `skills/sha256-<hex>/<name>/` (the unpacked folder, written under a temporary name
//! and renamed into place whole) and `tags/<sha256 of the reference>` (what a tag resolved
//! to, for `allow_tags` entries started without the registry). Everything is checked before
//! a folder is handed to the loader: the reference (a digest, unless `allow_tags`), the
//! manifest's digest, the signature, the layout and WIT version, every layer's digest.

use super::artifact::{self, Manifest};
use super::registry::{self, Access, Registry};
use super::{OciError, Result, digest_hex, io, keyless, sign};
use crate::config::{LoadedConfig, OciSkill, Verify};
use crate::skills::loader::WASM_FILE;
use oci_client::Reference;
use std::path::{Path, PathBuf};

/// Where a loaded skill came from (`skill list`, `/api/skills`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Origin {
    /// The reference as configured.
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
    /// Who signed it.
    pub signer: Signer,
    /// The skill's name its entry serves (`name:`, or the repository's last segment).
    #[serde(skip)]
    pub name: String,
    /// Its entry may replace a folder or built-in of that name (`replaces: true`).
    #[serde(skip)]
    pub replaces: bool,
}

/// Whose signature verified an artifact.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signer {
    /// A signature by this key (the path as configured).
    Key(String),
    /// A keyless signature by this identity, vouched for by this issuer.
    Keyless {
        /// The certificate's identity, as configured.
        identity: String,
        /// Its OIDC issuer, as configured.
        issuer: String,
    },
    /// Loaded under `allow_unsigned`.
    Unsigned,
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Signer::Key(key) => write!(f, "signed, key {key}"),
            Signer::Keyless { identity, issuer } => write!(f, "signed keyless by {identity} ({issuer})"),
            Signer::Unsigned => f.write_str("unsigned (allow_unsigned)"),
        }
    }
}

/// A verified skill folder.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The skill's name (the artifact's).
    pub name: String,
    /// Its folder in the cache.
    pub dir: PathBuf,
    /// Where it came from.
    pub origin: Origin,
}

/// Whether the registry may be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    /// Ask it for what the cache lacks (and for signatures and tags, falling back on the
    /// cache when it cannot be reached).
    Allowed,
    /// The cache only (a server answering at once): what it lacks is an error for which
    /// [`is_not_cached`] holds.
    CacheOnly,
}

/// The message of what the cache lacks under [`Network::CacheOnly`].
const NOT_CACHED: &str = "not in the cache";

/// Whether `error` only says the cache lacks something (a later load with the network
/// fetches it).
pub fn is_not_cached(error: &OciError) -> bool {
    matches!(error, OciError::Unreachable(m) if m == NOT_CACHED)
}

/// The content-addressed cache under `<cache_dir>/oci/`.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

impl Cache {
    /// The cache in `cache_dir` (`sandbox.cache_dir`).
    pub fn new(cache_dir: &Path) -> Self {
        Cache { root: cache_dir.join("oci") }
    }

    fn manifest_path(&self, digest: &str) -> Result<PathBuf> {
        Ok(self.root.join("manifests").join(format!("sha256-{}", digest_hex(digest)?)))
    }

    /// The cached manifest of `digest`, if it is there and hashes to it.
    fn manifest(&self, digest: &str) -> Result<Option<Vec<u8>>> {
        let path = self.manifest_path(digest)?;
        match std::fs::read(&path) {
            Ok(bytes) if super::digest_of(&bytes) == digest => Ok(Some(bytes)),
            Ok(_) => {
                tracing::warn!(file = %path.display(), "a cached manifest does not match its digest: fetched again");
                Ok(None)
            }
            Err(_) => Ok(None),
        }
    }

    fn skill_dir(&self, digest: &str, name: &str) -> Result<PathBuf> {
        Ok(self.root.join("skills").join(format!("sha256-{}", digest_hex(digest)?)).join(name))
    }

    fn signatures_path(&self, digest: &str) -> Result<PathBuf> {
        Ok(self.root.join("signatures").join(format!("sha256-{}.json", digest_hex(digest)?)))
    }

    fn tag_path(&self, reference: &str) -> PathBuf {
        self.root.join("tags").join(&super::digest_of(reference.as_bytes())["sha256:".len()..])
    }

    /// Writes `bytes` at `path` through a temporary file renamed into place.
    fn write(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let dir = path.parent().expect("cache files are in folders");
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let temp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
        std::fs::write(temp.path(), bytes).map_err(io(temp.path()))?;
        temp.persist(path).map_err(|e| OciError::Io { path: path.to_path_buf(), source: e.error })?;
        Ok(())
    }
}

/// Pulls (or finds in `cache`) and verifies the skill `entry` names.
pub async fn resolve(entry: &OciSkill, config: &LoadedConfig, cache: &Cache, network: Network) -> Result<Pulled> {
    let reference = registry::parse(&entry.reference)?;
    let registry = Registry::new(&reference, &Access { insecure: entry.insecure, credentials: None })
        .max_blob_bytes(config.config.skills.oci_max_bytes);
    let (digest, fetched) = digest_of_entry(entry, &reference, &registry, cache, network).await?;
    let resolved_tag = fetched.is_some().then(|| cache.tag_path(&entry.reference));
    let manifest = match fetched {
        Some(bytes) => bytes,
        None => manifest_bytes(&reference, &digest, &registry, cache, network).await?,
    };
    let skill = artifact::Skill::of(&Manifest::parse(&manifest)?)?;
    check_wit(&skill)?;
    let signer = check_signature(entry, config, &reference, &digest, &registry, cache, network).await?;
    // Verified: what a tag resolved to is kept now, never before.
    if let Some(tag_file) = resolved_tag {
        cache.write(&tag_file, digest.as_bytes())?;
    }
    let dir = cache.skill_dir(&digest, &skill.name)?;
    if dir.is_dir()
        && let Err(changed) = intact(&skill, &dir)
    {
        tracing::warn!(reference = %entry.reference, "the cached copy changed since it was verified ({changed}): pulled again");
        let digest_dir = dir.parent().expect("a skill folder is in its digest's folder");
        std::fs::remove_dir_all(digest_dir).map_err(io(digest_dir))?;
        if network == Network::CacheOnly {
            // Pending: pulled again by the load that may ask the registry.
            return Err(not_cached());
        }
    }
    if !dir.is_dir() {
        fetch_folder(&skill, &reference, &registry, &dir, network).await?;
    }
    // Kept once (again when the kept copy no longer matches its digest).
    if cache.manifest(&digest)?.is_none() {
        cache.write(&cache.manifest_path(&digest)?, &manifest)?;
    }
    let (name, replaces) = (entry.skill_name(), entry.replaces);
    let origin = Origin { reference: entry.reference.clone(), digest, signer, name, replaces };
    Ok(Pulled { name: skill.name, dir, origin })
}

/// The digest `entry` names, and the manifest's bytes when finding it fetched them (a tag).
async fn digest_of_entry(
    entry: &OciSkill,
    reference: &Reference,
    registry: &Registry,
    cache: &Cache,
    network: Network,
) -> Result<(String, Option<Vec<u8>>)> {
    if let Some(digest) = reference.digest() {
        digest_hex(digest)?;
        return Ok((digest.to_string(), None));
    }
    if !entry.allow_tags {
        return Err(OciError::Reference(
            "a tag without a digest: pin it (`@sha256:<hex>`, as `skill push` printed), or set allow_tags: true".into(),
        ));
    }
    let tag_file = cache.tag_path(&entry.reference);
    let cached = || -> Result<String> {
        let text = std::fs::read_to_string(&tag_file).map_err(|_| not_cached())?;
        Ok(text.trim().to_string())
    };
    if network == Network::CacheOnly {
        return cached().map(|digest| (digest, None));
    }
    match registry.manifest(reference).await {
        Ok(bytes) => {
            let digest = super::digest_of(&bytes);
            tracing::warn!(reference = %entry.reference, %digest, "a tag resolved (allow_tags): pin this digest");
            Ok((digest, Some(bytes)))
        }
        Err(OciError::Unreachable(why)) => {
            let digest = cached().map_err(|_| OciError::Unreachable(format!("{why}, and no cached copy")))?;
            tracing::warn!(reference = %entry.reference, %digest, "registry unreachable: the tag's last digest");
            Ok((digest, None))
        }
        Err(e) => Err(e),
    }
}

/// Beside a cached skill's folder (in its digest's folder, out of the skill's sight): each
/// file's SHA-256 when it was unpacked from the verified layers.
const FILES_RECORD: &str = "files.json";

/// Each file under `dir` (relative path, `/`-separated) and its `sha256:<hex>`.
fn file_digests(dir: &Path) -> Result<std::collections::BTreeMap<String, String>> {
    fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, String>) -> Result<()> {
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let path = entry.map_err(io(dir))?.path();
            let kind = std::fs::symlink_metadata(&path).map_err(io(&path))?.file_type();
            if kind.is_dir() {
                walk(root, &path, out)?;
                continue;
            }
            let relative = path.strip_prefix(root).expect("under the root").to_string_lossy().replace('\\', "/");
            // A link or anything but a plain file is never unpacked: a changed folder.
            let digest = match kind.is_file() {
                true => super::digest_of(&std::fs::read(&path).map_err(io(&path))?),
                false => "not a plain file".into(),
            };
            out.insert(relative, digest);
        }
        Ok(())
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

/// `Ok` when the cached folder `dir` of `skill` is what was unpacked from its verified layers:
/// its component hashes to the manifest's layer digest, and every file to its record; else
/// which file changed (or that the record is missing).
fn intact(skill: &artifact::Skill, dir: &Path) -> std::result::Result<(), String> {
    let record = dir.parent().map(|d| d.join(FILES_RECORD)).unwrap_or_default();
    let recorded: std::collections::BTreeMap<String, String> = std::fs::read(&record)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| "no record of its files".to_owned())?;
    let now = file_digests(dir).map_err(|e| e.to_string())?;
    if let Some(layer) = &skill.wasm
        && now.get(WASM_FILE) != Some(&layer.digest)
    {
        return Err(format!("{WASM_FILE} is not the verified component"));
    }
    let changed = now.iter().find(|(path, digest)| recorded.get(*path) != Some(digest)).map(|(path, _)| path.clone());
    let removed = recorded.keys().find(|path| !now.contains_key(*path)).cloned();
    match changed.or(removed) {
        Some(path) => Err(format!("{path} differs")),
        None => Ok(()),
    }
}

fn not_cached() -> OciError {
    OciError::Unreachable(NOT_CACHED.into())
}

/// The manifest of `digest`: from the cache, else the registry; checked against the digest.
async fn manifest_bytes(
    reference: &Reference,
    digest: &str,
    registry: &Registry,
    cache: &Cache,
    network: Network,
) -> Result<Vec<u8>> {
    if let Some(bytes) = cache.manifest(digest)? {
        return Ok(bytes);
    }
    if network == Network::CacheOnly {
        return Err(not_cached());
    }
    let pinned = reference.clone_with_digest(digest.to_string());
    let bytes = registry.manifest(&pinned).await.map_err(|e| match e {
        OciError::Unreachable(why) => OciError::Unreachable(format!("{why}, and no cached copy")),
        e => e,
    })?;
    // `Registry::manifest` checked it against the pinned digest.
    Ok(bytes)
}

/// Refuses a component built against a contract this host does not speak.
fn check_wit(skill: &artifact::Skill) -> Result<()> {
    let ours = crate::sandbox::TOOLS_INTERFACE.rsplit('@').next().unwrap_or_default();
    match &skill.wit {
        Some(theirs) if theirs != ours => Err(OciError::Layout(format!(
            "built against skillhost:skill@{theirs}; this host speaks skillhost:skill@{ours}: rebuild it with the \
             current SDK and push it again"
        ))),
        _ => Ok(()),
    }
}

/// Checks `entry`'s signature requirement for `digest`; who signed.
async fn check_signature(
    entry: &OciSkill,
    config: &LoadedConfig,
    reference: &Reference,
    digest: &str,
    registry: &Registry,
    cache: &Cache,
    network: Network,
) -> Result<Signer> {
    // What a signature's payload must name: the repository the entry pulls from.
    let repository = sign::signed_repository(reference);
    let key_path = match &entry.verify {
        None if entry.allow_unsigned => return Ok(Signer::Unsigned),
        None => return Err(OciError::Signature("no verify key, and allow_unsigned is not set".into())),
        Some(Verify::Key { key }) => key,
        Some(Verify::Keyless { identity, issuer, trusted_root }) => {
            let root = keyless::TrustRoot::read(&config.resolve(trusted_root))?;
            let (signatures, fresh) = signatures(reference, digest, registry, cache, network).await?;
            let subject = (digest, repository.as_str());
            keyless::verify(&signatures, subject, &root, &keyless::Signer { identity, issuer }).await?;
            keep_signatures(cache, digest, &signatures, fresh)?;
            return Ok(Signer::Keyless { identity: identity.clone(), issuer: issuer.clone() });
        }
    };
    let key = sign::verifying_key(&config.resolve(key_path))?;
    let (signatures, fresh) = signatures(reference, digest, registry, cache, network).await?;
    let shown = key_path.display().to_string();
    sign::verify(&signatures, (digest, repository.as_str()), &key, &shown)?;
    keep_signatures(cache, digest, &signatures, fresh)?;
    Ok(Signer::Key(shown))
}

/// Keeps signatures fetched from the registry once they verified (never before: a bad
/// answer does not replace the last good ones).
fn keep_signatures(cache: &Cache, digest: &str, signatures: &sign::Signatures, fresh: bool) -> Result<()> {
    if fresh {
        cache.write(&cache.signatures_path(digest)?, &serde_json::to_vec(signatures).expect("JSON serialises"))?;
    }
    Ok(())
}

/// Verifies the artifact `digest` of `reference` as `entry` says (a key, a keyless identity,
/// or unsigned when it allows that), its signatures fetched into a throwaway cache: what
/// `skill pull` and `skill diff` check before anything is written or run.
pub async fn verify(
    entry: &OciSkill,
    config: &LoadedConfig,
    (reference, digest): (&Reference, &str),
    registry: &Registry,
) -> Result<Signer> {
    let scratch = tempfile::tempdir().map_err(io(Path::new("a temporary folder")))?;
    let cache = Cache::new(scratch.path());
    check_signature(entry, config, reference, digest, registry, &cache, Network::Allowed).await
}

/// The signatures of `digest` (cosign's `.sig` layers and Sigstore bundles referring to it):
/// fetched when the registry answers (`true`: to keep once they verified), else the cached
/// ones.
async fn signatures(
    reference: &Reference,
    digest: &str,
    registry: &Registry,
    cache: &Cache,
    network: Network,
) -> Result<(sign::Signatures, bool)> {
    let path = cache.signatures_path(digest)?;
    let cached = || -> Option<sign::Signatures> { serde_json::from_slice(&std::fs::read(&path).ok()?).ok() };
    if network == Network::CacheOnly {
        return cached().map(|s| (s, false)).ok_or_else(not_cached);
    }
    match sign::fetch_all(registry, reference, digest).await {
        Ok(signatures) => Ok((signatures, true)),
        Err(OciError::Unreachable(why)) => {
            cached().map(|s| (s, false)).ok_or_else(|| OciError::Unreachable(format!("{why}, and no cached signature")))
        }
        Err(e) => Err(e),
    }
}

/// Fetches the skill's layers into `to` (created, or empty): the component streamed to
/// `skill.wasm`, the files layer streamed to a scratch file beside `to` and unpacked. Every
/// blob is hashed and counted as it arrives ([`Registry::blob_to`]); the caller removes `to`
/// when this fails.
pub async fn fetch_into(registry: &Registry, reference: &Reference, skill: &artifact::Skill, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(io(to))?;
    if let Some(layer) = &skill.wasm {
        registry.blob_to(reference, layer, &to.join(crate::skills::loader::WASM_FILE)).await?;
    }
    let beside = to.parent().unwrap_or(to);
    let scratch = tempfile::Builder::new().prefix(".files-").tempdir_in(beside).map_err(io(beside))?;
    let tar = scratch.path().join("files.tar");
    registry.blob_to(reference, &skill.files, &tar).await?;
    artifact::unpack(&tar, to)
}

/// Fetches the skill's layers and unpacks them into `dir`, whole or not at all.
async fn fetch_folder(
    skill: &artifact::Skill,
    reference: &Reference,
    registry: &Registry,
    dir: &Path,
    network: Network,
) -> Result<()> {
    if network == Network::CacheOnly {
        return Err(not_cached());
    }
    let digest_dir = dir.parent().expect("a skill folder is in its digest's folder");
    let skills = digest_dir.parent().expect("and that in skills/");
    std::fs::create_dir_all(skills).map_err(io(skills))?;
    let temp = tempfile::Builder::new().prefix(".pulling-").tempdir_in(skills).map_err(io(skills))?;
    let unpacked = temp.path().join(&skill.name);
    fetch_into(registry, reference, skill, &unpacked).await?;
    // What every file hashed to when unpacked from the verified layers: checked at each load.
    let record = serde_json::to_vec(&file_digests(&unpacked)?).expect("JSON serialises");
    std::fs::write(temp.path().join(FILES_RECORD), record).map_err(io(temp.path()))?;
    match std::fs::rename(temp.path(), digest_dir) {
        Ok(()) => {
            // Renamed: nothing left to remove.
            let _ = temp.keep();
            Ok(())
        }
        // Another load placed the same content first.
        Err(_) if dir.is_dir() => Ok(()),
        Err(e) => Err(OciError::Io { path: digest_dir.to_path_buf(), source: e }),
    }
}

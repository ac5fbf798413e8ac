//! The artifact a skill is published as, and the folder it unpacks into.
//!
//! The manifest (`application/vnd.oci.image.manifest.v1+json`) has the CNCF wasm layout's
//! config (`application/vnd.wasm.config.v0+json`), the component as an `application/wasm`
//! layer (absent for a skill with no `skill.wasm`), and the skill's other distributable files
//! as one tar layer of [`super::FILES_LAYER`]. The tar is deterministic: entries sorted by
//! path, mode 0644, owner 0, time 0, no user or group names; with `SOURCE_DATE_EPOCH` set
//! (the `created` time), the same folder always packs to the same digest.

use super::{OciError, Result, digest_of, io};
use crate::skills::files::{self, Distributable, MAX_FILE_BYTES};
use crate::skills::loader::WASM_FILE;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// An OCI content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the blob is.
    pub media_type: String,
    /// `sha256:<hex>` of its bytes.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its annotations (a cosign signature's lives here).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    /// The descriptor of `bytes` as `media_type`.
    pub fn of(media_type: &str, bytes: &[u8]) -> Self {
        Descriptor {
            media_type: media_type.into(),
            digest: digest_of(bytes),
            size: bytes.len() as u64,
            annotations: BTreeMap::new(),
        }
    }
}

/// An OCI image manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`super::MANIFEST`].
    #[serde(default)]
    pub media_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers, in order.
    pub layers: Vec<Descriptor>,
    /// Provenance and the skill's name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Manifest {
    /// Parses manifest bytes (any OCI image manifest; [`Skill::of`] checks it is a skill's).
    pub fn parse(bytes: &[u8]) -> Result<Manifest> {
        let manifest: Manifest =
            serde_json::from_slice(bytes).map_err(|e| OciError::Layout(format!("the manifest does not parse: {e}")))?;
        if manifest.schema_version != 2 {
            return Err(OciError::Layout(format!("schemaVersion {}, not 2", manifest.schema_version)));
        }
        Ok(manifest)
    }

    /// The manifest's bytes (compact JSON, keys in order).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a manifest serialises")
    }
}

/// Where a published skill comes from: the manifest's `org.opencontainers.image.*`.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    /// `org.opencontainers.image.source`: where its sources are (a repository URL).
    pub source: Option<String>,
    /// `org.opencontainers.image.revision`: the commit.
    pub revision: Option<String>,
    /// `org.opencontainers.image.version`.
    pub version: Option<String>,
    /// `org.opencontainers.image.created`, RFC 3339.
    pub created: String,
}

impl Provenance {
    /// `created` from `SOURCE_DATE_EPOCH` when set (reproducible builds), else now.
    pub fn created_now() -> Result<String> {
        let seconds = match std::env::var("SOURCE_DATE_EPOCH") {
            Ok(text) => text
                .trim()
                .parse::<i64>()
                .map_err(|_| OciError::Reference(format!("SOURCE_DATE_EPOCH={text:?} is not a number of seconds")))?,
            Err(_) => chrono::Utc::now().timestamp(),
        };
        let time = chrono::DateTime::from_timestamp(seconds, 0)
            .ok_or_else(|| OciError::Reference(format!("SOURCE_DATE_EPOCH={seconds} is out of range")))?;
        Ok(time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    }
}

/// A packed skill: the manifest's bytes and digest, and every blob it names.
#[derive(Debug, Clone)]
pub struct Packed {
    /// The manifest's bytes, as pushed.
    pub manifest: Vec<u8>,
    /// `sha256:<hex>` of [`Packed::manifest`].
    pub digest: String,
    /// The config and layers: (descriptor, bytes).
    pub blobs: Vec<(Descriptor, Vec<u8>)>,
}

/// Packs the skill folder `dir`, which loads as skill `name`.
pub fn pack(dir: &Path, name: &str, provenance: &Provenance) -> Result<Packed> {
    let set = files::distributable(dir).map_err(|e| OciError::Layout(e.to_string()))?;
    files::warn_refused(name, &set);
    let wasm = match set.files.iter().find(|f| f.path == Path::new(WASM_FILE)) {
        Some(file) => Some(std::fs::read(&file.source).map_err(io(&file.source))?),
        None => None,
    };
    let tar = files_tar(&set)?;
    let wit = wasm.as_deref().and_then(wit_version);
    let mut layers = Vec::new();
    if let Some(wasm) = wasm {
        layers.push((Descriptor::of(super::WASM_LAYER, &wasm), wasm));
    }
    layers.push((Descriptor::of(super::FILES_LAYER, &tar), tar));
    let config = wasm_config(&layers, wit.as_deref(), &provenance.created);
    let config = (Descriptor::of(super::WASM_CONFIG, &config), config);
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(super::MANIFEST.into()),
        config: config.0.clone(),
        layers: layers.iter().map(|(d, _)| d.clone()).collect(),
        annotations: annotations(name, wit.as_deref(), provenance),
    };
    let manifest = manifest.to_bytes();
    let digest = digest_of(&manifest);
    let mut blobs = vec![config];
    blobs.extend(layers);
    Ok(Packed { manifest, digest, blobs })
}

fn annotations(name: &str, wit: Option<&str>, provenance: &Provenance) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    let mut put = |key: &str, value: Option<&str>| {
        if let Some(value) = value {
            annotations.insert(key.to_string(), value.to_string());
        }
    };
    put(super::NAME_ANNOTATION, Some(name));
    put(super::WIT_ANNOTATION, wit);
    put("org.opencontainers.image.created", Some(&provenance.created));
    put("org.opencontainers.image.source", provenance.source.as_deref());
    put("org.opencontainers.image.revision", provenance.revision.as_deref());
    put("org.opencontainers.image.version", provenance.version.as_deref());
    annotations
}

/// The CNCF wasm config: the component's layer, its world's export, `wasip2`.
fn wasm_config(layers: &[(Descriptor, Vec<u8>)], wit: Option<&str>, created: &str) -> Vec<u8> {
    let wasm: Vec<&str> =
        layers.iter().filter(|(d, _)| d.media_type == super::WASM_LAYER).map(|(d, _)| d.digest.as_str()).collect();
    let exports: Vec<String> = wit.map(|v| format!("skillhost:skill/tools@{v}")).into_iter().collect();
    let config = serde_json::json!({
        "created": created,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": wasm,
        "component": {"exports": exports, "imports": [], "target": null},
    });
    serde_json::to_vec(&config).expect("JSON serialises")
}

/// The version of `skillhost:skill` the component exports its tools under, read from the
/// export's name in its bytes (`skillhost:skill/tools@<version>`).
pub fn wit_version(wasm: &[u8]) -> Option<String> {
    const PREFIX: &[u8] = b"skillhost:skill/tools@";
    let at = wasm.windows(PREFIX.len()).position(|w| w == PREFIX)? + PREFIX.len();
    let version: Vec<u8> = wasm[at..]
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
        .copied()
        .collect();
    (!version.is_empty()).then(|| String::from_utf8_lossy(&version).into_owned())
}

/// The deterministic tar of every distributable file but the component.
fn files_tar(set: &Distributable) -> Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    tar.mode(tar::HeaderMode::Deterministic);
    for file in set.files.iter().filter(|f| f.path != Path::new(WASM_FILE)) {
        let bytes = std::fs::read(&file.source).map_err(io(&file.source))?;
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, &file.path, bytes.as_slice()).map_err(io(&file.path))?;
    }
    tar.into_inner().map_err(io(Path::new("the files layer")))
}

/// A skill artifact's manifest, checked: its name, WIT version and the blobs to fetch.
#[derive(Debug, Clone)]
pub struct Skill {
    /// The skill's name (the annotation; checked as a skill name).
    pub name: String,
    /// The WIT package version it was built against, when it says.
    pub wit: Option<String>,
    /// The component's layer.
    pub wasm: Option<Descriptor>,
    /// The files layer.
    pub files: Descriptor,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
}

impl Skill {
    /// Checks that `manifest` is a skill's: the wasm config, at most one component layer,
    /// exactly one files layer, nothing else, a valid name. (Sizes are the registry
    /// client's to bound, on the bytes received: [`super::Registry::blob_to`].)
    pub fn of(manifest: &Manifest) -> Result<Skill> {
        let layout = |m: String| OciError::Layout(m);
        if manifest.config.media_type != super::WASM_CONFIG {
            return Err(layout(format!("config is {}, not {}", manifest.config.media_type, super::WASM_CONFIG)));
        }
        let (mut wasm, mut files) = (None, None);
        for layer in &manifest.layers {
            super::digest_hex(&layer.digest)?;
            let slot = match layer.media_type.as_str() {
                super::WASM_LAYER => &mut wasm,
                super::FILES_LAYER => &mut files,
                other => return Err(layout(format!("a layer of media type {other}"))),
            };
            if slot.replace(layer.clone()).is_some() {
                return Err(layout(format!("two layers of media type {}", layer.media_type)));
            }
        }
        let files = files.ok_or_else(|| layout(format!("no {} layer", super::FILES_LAYER)))?;
        let name = manifest.annotations.get(super::NAME_ANNOTATION).cloned();
        let name = name.ok_or_else(|| layout(format!("no {} annotation", super::NAME_ANNOTATION)))?;
        crate::skills::admit::check_skill_name(&name).map_err(|e| layout(format!("skill name `{name}`: {e}")))?;
        let wit = manifest.annotations.get(super::WIT_ANNOTATION).cloned();
        Ok(Skill { name, wit, wasm, files, annotations: manifest.annotations.clone() })
    }
}

/// Unpacks the files layer, the tar file `tar` (already checked against its digest), into
/// `to` (which exists and holds at most the component). An entry that is not a plain file at
/// a plain relative path, a second `skill.wasm`, or a file over the size a skill's file may
/// have is refused.
pub fn unpack(tar: &Path, to: &Path) -> Result<()> {
    let file = std::fs::File::open(tar).map_err(io(tar))?;
    let mut archive = tar::Archive::new(std::io::BufReader::new(file));
    for entry in archive.entries().map_err(io(to))? {
        let mut entry = entry.map_err(io(to))?;
        let kind = entry.header().entry_type();
        let path = entry.path().map_err(io(to))?.into_owned();
        if kind.is_dir() {
            continue;
        }
        let relative = checked_path(&path, kind, entry.size())?;
        let target = to.join(&relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut out = std::fs::OpenOptions::new().write(true).create_new(true).open(&target).map_err(io(&target))?;
        std::io::copy(&mut entry, &mut out).map_err(io(&target))?;
    }
    Ok(())
}

/// `path` of a tar entry of `kind` and `size`, if the folder may hold it.
fn checked_path(path: &Path, kind: tar::EntryType, size: u64) -> Result<PathBuf> {
    let bad = |why: &str| OciError::Layout(format!("files layer: {}: {why}", path.display()));
    if !kind.is_file() {
        return Err(bad("not a plain file"));
    }
    if path.as_os_str().is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(bad("not a plain relative path"));
    }
    if path == Path::new(WASM_FILE) {
        return Err(bad("the component comes in its own layer"));
    }
    let component = path.starts_with(".build") && path.extension().is_some_and(|e| e == "wasm");
    if size > MAX_FILE_BYTES && !component {
        return Err(bad("over the 16 MiB a skill's file may have"));
    }
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_out_of_the_folder_or_a_link_is_refused() {
        let regular = tar::EntryType::Regular;
        assert!(checked_path(Path::new("data/a.csv"), regular, 3).is_ok());
        assert!(checked_path(Path::new("../x"), regular, 3).is_err());
        assert!(checked_path(Path::new("/etc/passwd"), regular, 3).is_err());
        assert!(checked_path(Path::new("a/./b"), regular, 3).is_ok(), "`.` is dropped by Path::components");
        assert!(checked_path(Path::new("a"), tar::EntryType::Symlink, 0).is_err());
        assert!(checked_path(Path::new("skill.wasm"), regular, 3).is_err());
        assert!(checked_path(Path::new("big.bin"), regular, MAX_FILE_BYTES + 1).is_err());
        assert!(checked_path(Path::new(".build/t.wasm"), regular, MAX_FILE_BYTES + 1).is_ok());
    }

    #[test]
    fn the_wit_version_is_read_from_the_export_name() {
        assert_eq!(wit_version(b"\0asm..skillhost:skill/tools@0.1.0\x02.."), Some("0.1.0".into()));
        assert_eq!(wit_version(b"\0asm no export"), None);
    }
}

//! A skill's prompt file and reference files as MCP resources, read-only:
//! `skill://<skill>/<path>` for `prompt.md` / `SKILL.md` and every file its prompt lists
//! beside it (`reference.md`, `references/...`, `scripts/...`). Only those paths are served,
//! and only when the file, resolved through any symlink, is still inside the skill's folder
//! and at most [`MAX_RESOURCE_BYTES`]. UTF-8 text is served as text, anything else as a
//! base64 blob.

use crate::skills::{Skill, SkillSet};
use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{Resource, ResourceContents};
use std::io::Read as _;
use std::path::Path;

/// The URI scheme of skill resources.
pub const SCHEME: &str = crate::skills::served::FILES_SCHEME;
/// The largest file served, in bytes.
pub const MAX_RESOURCE_BYTES: u64 = 1 << 20;

/// Every skill's resources, skills in name order.
pub(super) fn list(skills: &SkillSet) -> Vec<Resource> {
    skills.skills.values().flat_map(|skill| paths(skill).into_iter().map(move |path| resource(skill, &path))).collect()
}

/// The paths a skill serves: its prompt file (when it has a prompt on disk), then its
/// reference files.
fn paths(skill: &Skill) -> Vec<String> {
    let prompt = skill.prompt.file;
    let has_prompt = !prompt.is_empty() && skill.dir.join(prompt).is_file();
    has_prompt.then(|| prompt.to_owned()).into_iter().chain(skill.prompt.references.iter().cloned()).collect()
}

fn resource(skill: &Skill, path: &str) -> Resource {
    let description = if path == skill.prompt.file {
        format!("The prompt of skill `{}`", skill.name)
    } else {
        format!("A reference file of skill `{}`", skill.name)
    };
    let mut resource = Resource::new(format!("{SCHEME}{}/{path}", skill.name), path.to_owned())
        .with_description(description)
        .with_mime_type(mime_type(path));
    if let Ok(meta) = std::fs::symlink_metadata(skill.dir.join(path)) {
        resource = resource.with_size(meta.len());
    }
    resource
}

/// `resources/read` of `uri`.
pub(super) fn read(skills: &SkillSet, uri: &str) -> Result<ResourceContents, ErrorData> {
    let not_found =
        || ErrorData::resource_not_found(format!("no resource `{uri}`"), Some(serde_json::json!({"uri": uri})));
    let (name, path) = uri.strip_prefix(SCHEME).and_then(|rest| rest.split_once('/')).ok_or_else(not_found)?;
    let skill = skills.skills.get(name).ok_or_else(not_found)?;
    if !paths(skill).iter().any(|p| p == path) {
        return Err(not_found());
    }
    let bytes = read_confined(&skill.dir, path).map_err(|e| {
        tracing::warn!(%uri, "resource not served: {e}");
        ErrorData::invalid_params(format!("resource `{uri}` cannot be read: {e}"), None)
    })?;
    Ok(contents(uri, mime_type(path), bytes))
}

/// `bytes` served as `uri`: UTF-8 text as text, anything else as a base64 blob.
pub(super) fn contents(uri: &str, mime: &str, bytes: Vec<u8>) -> ResourceContents {
    match String::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(mime.into()),
            text,
            meta: None,
        },
        Ok(text) => blob(uri, mime, text.as_bytes()),
        Err(e) => blob(uri, mime, e.as_bytes()),
    }
}

fn blob(uri: &str, mime: &str, bytes: &[u8]) -> ResourceContents {
    let blob = base64::engine::general_purpose::STANDARD.encode(bytes);
    ResourceContents::BlobResourceContents { uri: uri.to_owned(), mime_type: Some(mime.into()), blob, meta: None }
}

/// Reads `dir/path` when it resolves (symlinks followed) to a regular file inside `dir` of
/// at most [`MAX_RESOURCE_BYTES`].
pub(super) fn read_confined(dir: &Path, path: &str) -> Result<Vec<u8>, Unreadable> {
    let root = dir.canonicalize().map_err(Unreadable::Folder)?;
    let file = root.join(path).canonicalize()?;
    if !file.starts_with(&root) {
        return Err(Unreadable::Outside);
    }
    let handle = std::fs::File::open(&file)?;
    if !handle.metadata()?.is_file() {
        return Err(Unreadable::NotAFile);
    }
    // One byte past the cap rather than trust the size: the file may grow meanwhile.
    let mut bytes = Vec::new();
    handle.take(MAX_RESOURCE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_RESOURCE_BYTES {
        return Err(Unreadable::TooLarge);
    }
    Ok(bytes)
}

/// Why a skill's file is not served as a resource.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unreadable {
    /// The skill's folder itself.
    #[error("the skill folder: {0}")]
    Folder(std::io::Error),
    /// Reading the file.
    #[error("{0}")]
    File(#[from] std::io::Error),
    /// Its real path is not in the folder.
    #[error("it leaves the skill's folder")]
    Outside,
    /// A directory, a device, a pipe.
    #[error("not a regular file")]
    NotAFile,
    /// Over the cap.
    #[error("larger than {MAX_RESOURCE_BYTES} bytes")]
    TooLarge,
}

/// The MIME type of a file, by its extension.
pub(super) fn mime_type(path: &str) -> &'static str {
    let extension = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match extension.as_str() {
        "md" | "markdown" => "text/markdown",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "html" | "htm" => "text/html",
        "csv" => "text/csv",
        "py" => "text/x-python",
        "js" | "mjs" => "text/javascript",
        "sh" => "text/x-shellscript",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "txt" | "text" | "" => "text/plain",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confinement_refuses_a_symlink_out_and_oversized_files() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "s3cr3t").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.md"), "# notes").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("link.txt")).unwrap();
        std::fs::write(dir.path().join("big.txt"), vec![b'a'; MAX_RESOURCE_BYTES as usize + 1]).unwrap();
        assert_eq!(read_confined(dir.path(), "notes.md").unwrap(), b"# notes");
        assert!(read_confined(dir.path(), "link.txt").unwrap_err().to_string().contains("leaves"));
        assert!(read_confined(dir.path(), "../x").is_err());
        assert!(read_confined(dir.path(), "big.txt").unwrap_err().to_string().contains("larger"));
        assert_eq!(mime_type("references/a.PNG"), "image/png");
        assert_eq!(mime_type("README"), "text/plain");
    }
}

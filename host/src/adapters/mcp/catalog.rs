//! The Skills extension (`io.modelcontextprotocol/skills`, SEP-2640), serving: every skill with
//! a prompt as an Agent Skill, through `skills/list`, `skills/get`, `resources/read` and
//! `resources/directory/read`.
//!
//! A skill is served as `skill://<name>/SKILL.md`, `<name>` being its `SKILL.md`'s `name` as
//! written, else its host name with `_` turned to `-` (the extension's names are kebab-case).
//! Its manifest lists that file and the reference files its prompt lists, each with its
//! `sha256:` digest and size; nothing else of its folder is served (never `skill.wasm`, its
//! sources or build output). A `SKILL.md` with a `name` and a `description` is served as it
//! is; a skill whose prompt is a `prompt.md` (or a `SKILL.md` lacking either) is served a
//! `SKILL.md` made of its frontmatter with those two added and its prompt. A skill whose files
//! cannot all be read, or that passes the extension's limits (512 files, 16 MiB), is not
//! served (and logged). The catalog is made from the skills as loaded, for each request: what
//! a reload changes is served at once.

use super::resources::read_confined;
use crate::skills::{Skill as HostSkill, SkillSet};
use rmcp::ErrorData;
use rmcp::model::{
    DIRECTORY_MIME_TYPE, Resource, ResourceContents, Skill, SkillFrontmatter, SkillResource, SkillResources,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// At most this many files a skill (its `SKILL.md` included).
pub const FILE_LIMIT: usize = 512;
/// At most this many bytes a skill.
pub const BYTE_LIMIT: u64 = 16 * 1024 * 1024;

const SCHEME: &str = "skill://";
const SKILL_MD: &str = "SKILL.md";

/// The skills served, their files and directories.
#[derive(Default)]
pub struct Catalog {
    /// The entries, by name.
    pub skills: Vec<Skill>,
    /// Every file served, by URI: its bytes.
    files: BTreeMap<String, Vec<u8>>,
    /// Every directory, by URI (`skill://<name>`, `skill://<name>/references`): its children.
    directories: BTreeMap<String, Vec<Resource>>,
    /// The host names of the skills served.
    hosts: BTreeSet<String>,
}

/// A skill's files: path in its folder, bytes.
type Files = Vec<(String, Vec<u8>)>;

/// The name a skill is served under.
pub fn served_name(skill: &HostSkill) -> String {
    match (skill.prompt.file == SKILL_MD).then_some(skill.prompt.name.as_deref()).flatten() {
        Some(name) => name.to_owned(),
        None => skill.name.replace('_', "-"),
    }
}

impl Catalog {
    /// The catalog of `skills`, in name order.
    pub fn of(skills: &SkillSet) -> Catalog {
        let mut catalog = Catalog::default();
        let mut names = BTreeSet::new();
        for skill in skills.skills.values() {
            if skill.prompt.body.trim().is_empty() {
                continue;
            }
            match entry(skill) {
                Ok((served, files)) if names.insert(served.frontmatter.name.clone()) => {
                    catalog.hosts.insert(skill.name.clone());
                    catalog.add(served, files);
                }
                Ok((served, _)) => {
                    tracing::warn!(
                        skill = skill.name,
                        "not served as an Agent Skill: another has the name `{}`",
                        served.name()
                    )
                }
                Err(why) => tracing::warn!(skill = skill.name, "not served as an Agent Skill: {why}"),
            }
        }
        catalog.skills.sort_by(|a, b| a.uri.cmp(&b.uri));
        catalog
    }

    fn add(&mut self, skill: Skill, files: Files) {
        let base = format!("{SCHEME}{}", skill.frontmatter.name);
        let mut directories: BTreeMap<String, Vec<Resource>> = BTreeMap::new();
        directories.insert(base.clone(), Vec::new());
        for (path, bytes) in files {
            let uri = format!("{base}/{path}");
            let mut parent = base.clone();
            let segments: Vec<&str> = path.split('/').collect();
            for (i, segment) in segments.iter().enumerate() {
                let here = format!("{parent}/{segment}");
                let children = directories.entry(parent.clone()).or_default();
                let last = i + 1 == segments.len();
                if !children.iter().any(|c| c.uri == here) {
                    let child = match last {
                        true => Resource::new(here.clone(), (*segment).to_owned())
                            .with_mime_type(super::resources::mime_type(segment))
                            .with_size(bytes.len() as u64),
                        false => Resource::new(here.clone(), (*segment).to_owned()).with_mime_type(DIRECTORY_MIME_TYPE),
                    };
                    children.push(child);
                }
                if !last {
                    directories.entry(here.clone()).or_default();
                }
                parent = here;
            }
            self.files.insert(uri, bytes);
        }
        self.directories.extend(directories);
        self.skills.push(skill);
    }

    /// `skills/get`: the entry whose `uri` is `uri`; -32602 for any other.
    pub fn get(&self, uri: &str) -> Result<Skill, ErrorData> {
        let found = self.skills.iter().find(|s| s.uri == uri).cloned();
        found.ok_or_else(|| ErrorData::invalid_params(format!("no skill `{uri}`"), None))
    }

    /// `resources/read` of a file the catalog serves; `None` for any other URI.
    pub fn read(&self, uri: &str) -> Option<ResourceContents> {
        let bytes = self.files.get(uri)?;
        let mime = super::resources::mime_type(uri);
        Some(super::resources::contents(uri, mime, bytes.clone()))
    }

    /// `resources/directory/read`: the children of a directory of a skill; -32602 for any
    /// other URI.
    pub fn directory(&self, uri: &str) -> Result<Vec<Resource>, ErrorData> {
        let uri = uri.strip_suffix('/').unwrap_or(uri);
        let children = self.directories.get(uri).cloned();
        children.ok_or_else(|| ErrorData::invalid_params(format!("`{uri}` is not a directory of a served skill"), None))
    }

    /// Whether `uri` is the host-named `skill://<skill>/SKILL.md` of a skill served here under
    /// its own name, which `resources/list` lists instead.
    pub fn lists(&self, uri: &str) -> bool {
        let host = uri.strip_prefix(SCHEME).and_then(|rest| rest.strip_suffix("/SKILL.md"));
        host.is_some_and(|host| self.hosts.contains(host))
    }

    /// The `SKILL.md` of each skill, for `resources/list`.
    pub fn listed(&self) -> Vec<Resource> {
        self.skills
            .iter()
            .map(|s| {
                let size = self.files.get(&s.uri).map_or(0, Vec::len) as u64;
                Resource::new(s.uri.clone(), s.frontmatter.name.clone())
                    .with_description(s.frontmatter.description.clone())
                    .with_mime_type("text/markdown")
                    .with_size(size)
            })
            .collect()
    }
}

/// A skill's entry and its files (path, bytes), `SKILL.md` first; `Err(why)` when it cannot
/// be served.
fn entry(skill: &HostSkill) -> Result<(Skill, Files), String> {
    let name = served_name(skill);
    let (frontmatter, manifest) = manifest(skill, &name)?;
    let mut files = vec![(SKILL_MD.to_owned(), manifest)];
    for path in &skill.prompt.references {
        if path == SKILL_MD {
            continue;
        }
        let bytes = read_confined(&skill.dir, path).map_err(|e| format!("its file `{path}` cannot be served: {e}"))?;
        files.push((path.clone(), bytes));
    }
    let total: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    if files.len() > FILE_LIMIT || total > BYTE_LIMIT {
        return Err(format!(
            "{} files and {total} bytes pass the extension's limits ({FILE_LIMIT} files, {BYTE_LIMIT} bytes)",
            files.len()
        ));
    }
    let base = format!("{SCHEME}{name}");
    let resources = files.iter().map(|(path, bytes)| SkillResource::from_bytes(format!("{base}/{path}"), bytes));
    let served = Skill::new(format!("{base}/{SKILL_MD}"), frontmatter, SkillResources::Files(resources.collect()));
    served.validate().map_err(|e| format!("its entry breaks the extension's rules: {e}"))?;
    Ok((served, files))
}

/// A skill's frontmatter and the bytes of its served `SKILL.md`: its own when it names itself
/// and says what it does, else one made of its frontmatter and prompt.
fn manifest(skill: &HostSkill, name: &str) -> Result<(SkillFrontmatter, Vec<u8>), String> {
    let fields = &skill.prompt.frontmatter;
    let text = |key: &str| fields.get(key).and_then(Value::as_str).filter(|v| !v.trim().is_empty());
    let extra: serde_json::Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| *k != "name" && *k != "description")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if skill.prompt.file == SKILL_MD
        && text("name") == Some(name)
        && let Some(description) = text("description")
    {
        let bytes = read_confined(&skill.dir, SKILL_MD).map_err(|e| format!("its SKILL.md cannot be served: {e}"))?;
        let mut frontmatter = SkillFrontmatter::new(name, description);
        frontmatter.extra = extra;
        return Ok((frontmatter, bytes));
    }
    let own = Some(skill.prompt.description.as_str()).filter(|d| !d.trim().is_empty());
    let description = match own.or(text("description")) {
        Some(description) => description.to_owned(),
        None => format!("The skill `{}` of this server.", skill.name),
    };
    let mut header = serde_json::Map::new();
    header.insert("name".into(), Value::String(name.to_owned()));
    header.insert("description".into(), Value::String(description.clone()));
    header.extend(extra.clone());
    let yaml = serde_yaml_ng::to_string(&header).map_err(|e| format!("its frontmatter cannot be written: {e}"))?;
    let bytes = format!("---\n{yaml}---\n{}\n", skill.prompt.body.trim_end()).into_bytes();
    let mut frontmatter = SkillFrontmatter::new(name, description);
    frontmatter.extra = extra;
    Ok((frontmatter, bytes))
}

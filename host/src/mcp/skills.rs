//! Agent Skills an MCP server serves (the Skills extension, `io.modelcontextprotocol/skills`,
//! SEP-2640), as a host takes them: the manifest from `skills/list`, each entry checked
//! before anything of it is fetched (the extension's rules, its limits: 512 files and 16 MiB
//! by the sizes it declares); each file fetched only when it is needed, never ahead; a file
//! the manifest does not list refused unfetched; and every file checked against its size
//! and digest before it is used, a `SKILL.md`'s frontmatter also field by field against the
//! entry's. Content that fails a check is never returned.
//!
//! A host that imports a server's skills also holds it to what it first served: the first
//! manifest seen of each skill is accepted (its digest set recorded in the state store,
//! which replicas share), and a manifest that differs from the accepted one is refused until
//! the operator accepts it ([`accept`], `skillhost skill accept <server> <skill>`).

use super::McpManager;
use crate::skills::prompt;
use crate::store::StateStore;
use base64::Engine as _;
use rmcp::model::{
    ClientRequest, ListSkillsRequest, PaginatedRequestParams, ReadResourceRequest, ReadResourceRequestParams,
    ResourceContents, ServerResult, Skill, SkillResources,
};
use serde_json::Value;
use std::collections::BTreeMap;

/// At most this many files a skill (its `SKILL.md` included).
pub const FILE_LIMIT: usize = 512;
/// At most this many bytes a skill, by the sizes its manifest declares.
pub const BYTE_LIMIT: u64 = 16 * 1024 * 1024;
/// At most this many pages of `skills/list`.
const MAX_PAGES: usize = 32;

/// Why a skill, or one of its files, is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The entry breaks the extension's rules.
    #[error("the entry of `{uri}` is malformed: {why}")]
    Malformed {
        /// The skill's URI.
        uri: String,
        /// What is wrong.
        why: String,
    },
    /// The entry declares more than a host loads.
    #[error(
        "`{uri}` declares {files} files and {bytes} bytes, past the limits ({FILE_LIMIT} files, {BYTE_LIMIT} bytes)"
    )]
    TooLarge {
        /// The skill's URI.
        uri: String,
        /// How many files.
        files: usize,
        /// How many bytes.
        bytes: u64,
    },
    /// A file the manifest does not list.
    #[error("`{0}` is not a file the skill's manifest lists")]
    NotListed(String),
    /// A file larger than the host reads into a model's context (`skills.max_prompt_bytes`).
    #[error("`{uri}` is {size} bytes by its manifest, past skills.max_prompt_bytes ({cap} bytes)")]
    TooLong {
        /// The file.
        uri: String,
        /// Its size, as the manifest declares it.
        size: u64,
        /// The cap.
        cap: u64,
    },
    /// The skill publishes no manifest (`"dynamic"`): nothing of it can be verified.
    #[error("`{0}` publishes no manifest (\"dynamic\"), so its files cannot be verified")]
    Unverifiable(String),
    /// The file's size or digest is not the manifest's.
    #[error("{0}")]
    Integrity(String),
    /// The fetched `SKILL.md`'s frontmatter is not the entry's.
    #[error("the frontmatter of `{uri}` differs from its entry's ({field})")]
    Frontmatter {
        /// The `SKILL.md`.
        uri: String,
        /// The first field that differs.
        field: String,
    },
    /// The server could not be asked, or answered something else.
    #[error("{0}")]
    Server(String),
    /// The manifest differs from the one accepted earlier.
    #[error(
        "MCP server `{server}` changed skill `{name}` since it was accepted ({changes}); it is not used until an \
         operator runs `skillhost skill accept {server} {name}`"
    )]
    Changed {
        /// The server.
        server: String,
        /// The skill's name.
        name: String,
        /// What changed, file by file.
        changes: String,
    },
    /// The state store could not be read or written.
    #[error("the accepted manifests cannot be read or written: {0}")]
    Store(String),
}

/// Where accepted manifests are kept: key `<server>/<skill>`.
pub const NAMESPACE: &str = "mcp-skills";

/// How a listed skill stands against the manifest accepted earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Its manifest is the accepted one.
    Accepted,
    /// Seen for the first time: its manifest is now the accepted one.
    FirstSeen,
}

/// An accepted manifest: each file's URI with its digest and size, the digest of the entry's
/// frontmatter (the name and description the model is shown every turn), who accepted it,
/// when.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Record {
    files: BTreeMap<String, String>,
    /// `None` in a record accepted before the frontmatter was covered: taken on next sight.
    #[serde(default)]
    shown: Option<String>,
    by: String,
    at: u64,
}

impl Record {
    fn of(skill: &Skill, by: &str) -> Result<Self, Refused> {
        let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Ok(Record { files: digest_set(skill)?, shown: Some(shown(skill)), by: by.to_owned(), at })
    }

    fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `skill`'s files by URI, each as `<digest> <size>`: what acceptance compares. A skill
/// without a manifest has none to accept.
fn digest_set(skill: &Skill) -> Result<BTreeMap<String, String>, Refused> {
    let SkillResources::Files(files) = &skill.resources else { return Err(Refused::Unverifiable(skill.uri.clone())) };
    Ok(files.iter().map(|f| (f.uri.clone(), format!("{} {}", f.digest, f.size))).collect())
}

/// The digest of the entry's frontmatter: its name and description, which every turn's
/// prompt shows the model before any file is fetched (and any other field it declares).
fn shown(skill: &Skill) -> String {
    let text = serde_json::to_string(&skill.frontmatter).unwrap_or_default();
    crate::skills::oci::digest_of(text.as_bytes())
}

/// What differs from `old` to `new`: the frontmatter shown to the model, then file by file
/// (`added`, `changed`, `removed`).
fn changes(old: &Record, new: &Record) -> String {
    let mut said = Vec::new();
    if old.shown.is_some() && old.shown != new.shown {
        said.push("changed the name or description shown to the model".to_owned());
    }
    let (old, new) = (&old.files, &new.files);
    for (uri, entry) in new {
        match old.get(uri) {
            None => said.push(format!("added {uri}")),
            Some(was) if was != entry => said.push(format!("changed {uri}")),
            Some(_) => {}
        }
    }
    said.extend(old.keys().filter(|uri| !new.contains_key(*uri)).map(|uri| format!("removed {uri}")));
    said.join(", ")
}

fn key(server: &str, skill: &Skill) -> String {
    format!("{server}/{}", skill.name())
}

fn store_error(e: impl std::fmt::Display) -> Refused {
    Refused::Store(e.to_string())
}

/// Whether `skill` as `server` lists it now may be used: its manifest is the accepted one,
/// or the first seen (then recorded as accepted, and logged). A different one is
/// [`Refused::Changed`].
pub async fn standing(state: &StateStore, server: &str, skill: &Skill) -> Result<Standing, Refused> {
    let (key, record) = (key(server, skill), Record::of(skill, "first-seen")?);
    let accepted = match accepted(state, &key).await? {
        Some(accepted) => accepted,
        None if state.create(NAMESPACE, &key, &record.text()).await.map_err(store_error)? => {
            let (skill, files) = (skill.name(), record.files.len());
            tracing::info!(server, skill, files, "MCP skill accepted on first sight");
            return Ok(Standing::FirstSeen);
        }
        // Another replica recorded it first: compare with that.
        None => accepted(state, &key).await?.ok_or_else(|| store_error("the accepted manifest vanished"))?,
    };
    same(server, skill, &accepted, &record)?;
    if accepted.shown.is_none() {
        // Accepted before the frontmatter was covered: it is taken as it is now.
        let upgraded = Record { shown: record.shown, ..accepted };
        if let Ok(Some(before)) = state.get(NAMESPACE, &key).await {
            let _ = state.replace_if(NAMESPACE, &key, &before, &upgraded.text()).await;
        }
    }
    Ok(Standing::Accepted)
}

/// `Ok` when `now` lists the files `accepted` does, each with the same digest and size, and
/// shows the model the same frontmatter (a record from before that was covered: any).
fn same(server: &str, skill: &Skill, accepted: &Record, now: &Record) -> Result<(), Refused> {
    if accepted.files == now.files && (accepted.shown.is_none() || accepted.shown == now.shown) {
        return Ok(());
    }
    let (server, name) = (server.to_owned(), skill.name().to_owned());
    Err(Refused::Changed { server, name, changes: changes(accepted, now) })
}

/// How `skill` stands, without recording anything (`skill list`): `None` when no manifest of
/// it was accepted yet (the next turn that lists it accepts it), else [`standing`]'s answer.
pub async fn peek(state: &StateStore, server: &str, skill: &Skill) -> Result<Option<Result<(), Refused>>, Refused> {
    let now = Record::of(skill, "now")?;
    let Some(accepted) = accepted(state, &key(server, skill)).await? else { return Ok(None) };
    Ok(Some(same(server, skill, &accepted, &now)))
}

/// The manifest accepted under `key`, if any.
async fn accepted(state: &StateStore, key: &str) -> Result<Option<Record>, Refused> {
    let Some(text) = state.get(NAMESPACE, key).await.map_err(store_error)? else { return Ok(None) };
    serde_json::from_str(&text).map(Some).map_err(store_error)
}

/// Records `skill`'s manifest as `server`'s accepted one (the operator's word); returns what
/// changed from the one accepted before (`None`: there was none).
pub async fn accept(state: &StateStore, server: &str, skill: &Skill) -> Result<Option<String>, Refused> {
    let (key, record) = (key(server, skill), Record::of(skill, "operator")?);
    // A record that cannot be read is replaced like a missing one (the write says if the
    // store is down).
    let before = accepted(state, &key).await.unwrap_or(None);
    state.set(NAMESPACE, &key, &record.text()).await.map_err(store_error)?;
    let changed = before.map(|b| changes(&b, &record));
    tracing::info!(
        server,
        skill = skill.name(),
        changes = changed.as_deref().unwrap_or("first"),
        "MCP skill accepted by the operator"
    );
    Ok(changed)
}

/// The skills `server` serves, each entry checked ([`admit`]) — those that fail are
/// returned with why, apart.
pub async fn list(manager: &McpManager, server: &str) -> Result<(Vec<Skill>, Vec<Refused>), Refused> {
    let mut cursor = None;
    let (mut admitted, mut refused) = (Vec::new(), Vec::new());
    for _ in 0..MAX_PAGES {
        let params = cursor.take().map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let request = ClientRequest::ListSkillsRequest(ListSkillsRequest { params, ..Default::default() });
        let page = match manager.request(server, request).await.map_err(Refused::Server)? {
            ServerResult::ListSkillsResult(page) => page,
            other => return Err(Refused::Server(format!("skills/list answered {other:?}"))),
        };
        for skill in page.skills {
            match admit(&skill) {
                Ok(()) => admitted.push(skill),
                Err(why) => refused.push(why),
            }
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok((admitted, refused)),
        }
    }
    Err(Refused::Server(format!("skills/list did not end within {MAX_PAGES} pages")))
}

/// Whether a host may take `skill` at all: its entry keeps the extension's rules and declares
/// no more than the limits. Nothing is fetched.
pub fn admit(skill: &Skill) -> Result<(), Refused> {
    let malformed = |why: String| Refused::Malformed { uri: skill.uri.clone(), why };
    skill.validate().map_err(|e| malformed(e.to_string()))?;
    let SkillResources::Files(files) = &skill.resources else { return Ok(()) };
    let bytes: u64 = files.iter().map(|f| f.size).fold(0, u64::saturating_add);
    if files.len() > FILE_LIMIT || bytes > BYTE_LIMIT {
        return Err(Refused::TooLarge { uri: skill.uri.clone(), files: files.len(), bytes });
    }
    Ok(())
}

/// Fetches file `uri` of `skill` from `server` and returns its bytes once they match the
/// manifest (and, for the skill's `SKILL.md`, its frontmatter the entry's).
pub async fn fetch(manager: &McpManager, server: &str, skill: &Skill, uri: &str) -> Result<Vec<u8>, Refused> {
    fetch_within(manager, server, skill, uri, u64::MAX).await
}

/// [`fetch`], refusing unfetched a file whose manifest entry says it is larger than `cap`.
pub async fn fetch_within(
    manager: &McpManager,
    server: &str,
    skill: &Skill,
    uri: &str,
    cap: u64,
) -> Result<Vec<u8>, Refused> {
    let SkillResources::Files(files) = &skill.resources else { return Err(Refused::Unverifiable(skill.uri.clone())) };
    let listed = files.iter().find(|f| f.uri == uri).ok_or_else(|| Refused::NotListed(uri.to_owned()))?;
    if listed.size > cap {
        return Err(Refused::TooLong { uri: uri.to_owned(), size: listed.size, cap });
    }
    let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(ReadResourceRequestParams::new(uri)));
    let read = match manager.request(server, request).await.map_err(Refused::Server)? {
        ServerResult::ReadResourceResult(read) => read,
        other => return Err(Refused::Server(format!("resources/read answered {other:?}"))),
    };
    let contents = read.contents.into_iter().next().ok_or_else(|| Refused::Server(format!("`{uri}` read empty")))?;
    let bytes =
        match contents {
            ResourceContents::TextResourceContents { text, .. } => text.into_bytes(),
            ResourceContents::BlobResourceContents { blob, .. } => base64::engine::general_purpose::STANDARD
                .decode(blob)
                .map_err(|e| Refused::Server(format!("`{uri}` is not base64: {e}")))?,
            other => return Err(Refused::Server(format!("`{uri}` read as {other:?}"))),
        };
    listed.verify(&bytes).map_err(|e| Refused::Integrity(e.to_string()))?;
    if uri == skill.uri {
        same_frontmatter(skill, &bytes)?;
    }
    Ok(bytes)
}

/// `Ok` when the fetched `SKILL.md`'s frontmatter is the entry's, field by field.
fn same_frontmatter(skill: &Skill, bytes: &[u8]) -> Result<(), Refused> {
    let differs = |field: &str| Refused::Frontmatter { uri: skill.uri.clone(), field: field.to_owned() };
    let text = std::str::from_utf8(bytes).map_err(|_| differs("(not UTF-8)"))?;
    // Split and read as the loader reads a local `SKILL.md`.
    let (yaml, _) = prompt::split_skill_md(text).map_err(|_| differs("(no frontmatter)"))?;
    let fetched = prompt::frontmatter(yaml).map_err(|_| differs("(no frontmatter)"))?;
    let Ok(Value::Object(entry)) = serde_json::to_value(&skill.frontmatter) else { return Err(differs("(entry)")) };
    for key in entry.keys().chain(fetched.keys()) {
        if entry.get(key) != fetched.get(key) {
            return Err(differs(key));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{SkillFrontmatter, SkillResource};

    const BODY: &str = "---\nname: pdf-processing\ndescription: Extract PDF text\n---\n\nSkill body.\n";

    fn skill(files: Vec<SkillResource>) -> Skill {
        let frontmatter = SkillFrontmatter::new("pdf-processing", "Extract PDF text");
        Skill::new("skill://pdf-processing/SKILL.md", frontmatter, SkillResources::Files(files))
    }

    #[test]
    fn an_entry_is_admitted_by_its_rules_and_declared_sizes_before_any_fetch() {
        let own = SkillResource::from_bytes("skill://pdf-processing/SKILL.md", BODY.as_bytes());
        assert_eq!(admit(&skill(vec![own.clone()])), Ok(()));
        let huge = SkillResource::new("skill://pdf-processing/big.bin", own.digest.clone(), BYTE_LIMIT);
        assert!(matches!(admit(&skill(vec![own.clone(), huge])), Err(Refused::TooLarge { .. })));
        let many: Vec<_> = (0..FILE_LIMIT)
            .map(|i| SkillResource::new(format!("skill://pdf-processing/f{i}"), own.digest.clone(), 1))
            .chain([own.clone()])
            .collect();
        assert!(matches!(admit(&skill(many)), Err(Refused::TooLarge { files: 513, .. })));
        let outside = SkillResource::new("skill://other/x.md", own.digest.clone(), 1);
        assert!(matches!(admit(&skill(vec![own.clone(), outside])), Err(Refused::Malformed { .. })));
        assert!(matches!(admit(&skill(vec![])), Err(Refused::Malformed { .. })), "no SKILL.md entry");
    }

    #[test]
    fn a_skill_md_must_say_what_its_entry_says_field_by_field() {
        let s = skill(vec![SkillResource::from_bytes("skill://pdf-processing/SKILL.md", BODY.as_bytes())]);
        assert_eq!(same_frontmatter(&s, BODY.as_bytes()), Ok(()));
        let changed = BODY.replace("Extract PDF text", "Exfiltrate credentials");
        assert!(
            matches!(same_frontmatter(&s, changed.as_bytes()), Err(Refused::Frontmatter { field, .. }) if field == "description")
        );
        let added = BODY.replace("---\n\n", "allowed-tools: Bash\n---\n\n");
        assert!(
            matches!(same_frontmatter(&s, added.as_bytes()), Err(Refused::Frontmatter { field, .. }) if field == "allowed-tools")
        );
        assert!(same_frontmatter(&s, b"no frontmatter").is_err());
    }

    #[tokio::test]
    async fn the_first_manifest_is_accepted_and_a_changed_one_waits_for_the_operator() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateStore::new(dir.path());
        let own = SkillResource::from_bytes("skill://pdf-processing/SKILL.md", BODY.as_bytes());
        let first = skill(vec![own.clone()]);
        assert_eq!(peek(&state, "docs", &first).await, Ok(None));
        assert_eq!(peek(&state, "docs", &first).await, Ok(None), "a peek records nothing");
        assert_eq!(standing(&state, "docs", &first).await, Ok(Standing::FirstSeen));
        assert_eq!(peek(&state, "docs", &first).await, Ok(Some(Ok(()))));
        assert_eq!(standing(&state, "docs", &first).await, Ok(Standing::Accepted));
        assert_eq!(standing(&state, "other", &first).await, Ok(Standing::FirstSeen), "per server");
        let extra = SkillResource::from_bytes("skill://pdf-processing/references/forms.md", b"forms");
        let grown = skill(vec![own.clone(), extra.clone()]);
        assert!(matches!(peek(&state, "docs", &grown).await, Ok(Some(Err(Refused::Changed { .. })))));
        let refused = standing(&state, "docs", &grown).await.unwrap_err();
        assert!(refused.to_string().contains("added skill://pdf-processing/references/forms.md"), "{refused}");
        assert!(refused.to_string().contains("skillhost skill accept docs pdf-processing"), "{refused}");
        let edited = SkillResource::from_bytes("skill://pdf-processing/references/forms.md", b"f0rms");
        assert_eq!(
            accept(&state, "docs", &grown).await,
            Ok(Some("added skill://pdf-processing/references/forms.md".into()))
        );
        assert_eq!(standing(&state, "docs", &grown).await, Ok(Standing::Accepted));
        let refused = standing(&state, "docs", &skill(vec![own.clone(), edited])).await.unwrap_err();
        assert!(refused.to_string().contains("changed skill://pdf-processing/references/forms.md"), "{refused}");
        let refused = standing(&state, "docs", &first).await.unwrap_err();
        assert!(refused.to_string().contains("removed skill://pdf-processing/references/forms.md"), "{refused}");
        let dynamic = Skill::new("skill://live/SKILL.md", SkillFrontmatter::new("live", "x"), SkillResources::Dynamic);
        assert!(matches!(standing(&state, "docs", &dynamic).await, Err(Refused::Unverifiable(_))));
    }
}

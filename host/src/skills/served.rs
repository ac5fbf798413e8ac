//! What a skill serves to MCP clients beyond tools, in the host's own form: resources under
//! its own URIs, resource templates, and prompts with arguments (the optional `resources` and
//! `prompts` exports, listed once when the skill loads).

use super::content::{Content, ResourceContents};
use crate::sandbox::ServedLists;
use crate::sandbox::bindings::guest::prompts as wit_prompts;
use crate::sandbox::bindings::skillhost::skill::blocks as wit_blocks;

/// The scheme of the resources the host serves from a skill's own files
/// (`skill://<skill>/<path>`); a skill's own resources use any other.
pub const FILES_SCHEME: &str = "skill://";

/// Everything a skill serves beyond tools (empty for a component without the exports).
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// Resources under the skill's own URIs.
    pub resources: Vec<ResourceDef>,
    /// Families of resources under URI templates.
    pub templates: Vec<ResourceDef>,
    /// Prompts with arguments.
    pub prompts: Vec<PromptDef>,
    /// The MCP client capabilities each tool that needs some cannot run without, by tool
    /// (its own name).
    pub client_needs: std::collections::BTreeMap<String, Vec<String>>,
    /// How each tool that may run as an MCP task does, by tool (its own name); a tool not
    /// here never does.
    pub tasks: std::collections::BTreeMap<String, TaskSupport>,
}

/// How a tool may run as a task of the MCP Tasks extension (the `task-support` export).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskSupport {
    /// Only as a task (a client without the extension is refused); else when the client
    /// declared it.
    pub required: bool,
    /// The task begins when the tool calls `tasks.detach`, not with the call.
    pub detaches: bool,
}

/// The client capabilities a tool may need.
pub const CLIENT_CAPABILITIES: [&str; 3] = ["sampling", "elicitation", "roots"];

/// One resource, or one template (`uri` is then the RFC 6570 template).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// Its URI, or its template.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// Its MIME type, when known.
    pub mime_type: Option<String>,
}

/// One prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptDef {
    /// Its name (unprefixed).
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it is for.
    pub description: String,
    /// Its arguments.
    pub arguments: Vec<PromptArgument>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// What it is.
    pub description: Option<String>,
    /// Whether the prompt needs it.
    pub required: bool,
}

/// Who speaks a prompt's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

/// A prompt made from its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompted {
    /// What it is, when the skill says.
    pub description: Option<String>,
    /// Its messages: who speaks, and what (text, an image, audio or an embedded resource).
    pub messages: Vec<(Role, Content)>,
}

/// Why a resource or prompt was not served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServeError {
    /// The skill serves nothing of that name or URI.
    #[error("not found")]
    NotFound,
    /// The client's arguments do not fit, described.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// Serving it failed, described.
    #[error("{0}")]
    Failed(String),
}

impl Served {
    /// The lists a component gave, checked: no resource under `skill://` (the host's own
    /// files), prompt names as tool names are, nothing listed twice.
    pub(super) fn checked(lists: ServedLists) -> Result<Served, String> {
        let resource = |uri: String, name: String, title, description, mime_type| {
            if uri.starts_with(FILES_SCHEME) {
                return Err(format!("resource `{uri}`: `skill://` is the host's own scheme"));
            }
            Ok(ResourceDef { uri, name, title, description, mime_type })
        };
        let resources = lists
            .resources
            .into_iter()
            .map(|r| resource(r.uri, r.name, r.title, r.description, r.mime_type))
            .collect::<Result<Vec<_>, _>>()?;
        let templates = lists
            .templates
            .into_iter()
            .map(|t| resource(t.uri_template, t.name, t.title, t.description, t.mime_type))
            .collect::<Result<Vec<_>, _>>()?;
        let mut prompts = Vec::new();
        for p in lists.prompts {
            crate::config::check_name(&p.name).map_err(|e| format!("prompt name `{}` {e}", p.name))?;
            let arguments = p
                .arguments
                .into_iter()
                .map(|a| PromptArgument { name: a.name, description: a.description, required: a.required })
                .collect();
            prompts.push(PromptDef { name: p.name, title: p.title, description: p.description, arguments });
        }
        for (kind, names) in [
            ("resource", resources.iter().chain(&templates).map(|r| r.uri.as_str()).collect::<Vec<_>>()),
            ("prompt", prompts.iter().map(|p| p.name.as_str()).collect()),
        ] {
            let mut seen = std::collections::HashSet::new();
            if let Some(twice) = names.into_iter().find(|n| !seen.insert(*n)) {
                return Err(format!("{kind} `{twice}` is listed twice"));
            }
        }
        let mut client_needs = std::collections::BTreeMap::new();
        for (tool, needs) in lists.client_needs {
            if let Some(unknown) = needs.iter().find(|n| !CLIENT_CAPABILITIES.contains(&n.as_str())) {
                return Err(format!(
                    "tool `{tool}` needs client capability `{unknown}`; one of {}",
                    CLIENT_CAPABILITIES.join(", ")
                ));
            }
            if client_needs.insert(tool.clone(), needs).is_some() {
                return Err(format!("the client capabilities of tool `{tool}` are listed twice"));
            }
        }
        let mut tasks = std::collections::BTreeMap::new();
        for tool in lists.task_tools {
            use crate::sandbox::bindings::guest::task_support::Support;
            let required = match tool.support {
                Support::Forbidden => continue,
                Support::Optional => false,
                Support::Required => true,
            };
            if tasks.insert(tool.name.clone(), TaskSupport { required, detaches: tool.detaches }).is_some() {
                return Err(format!("the task support of tool `{}` is listed twice", tool.name));
            }
        }
        Ok(Served { resources, templates, prompts, client_needs, tasks })
    }

    /// Whether the skill serves `uri`: a resource it lists, or one of its templates matches.
    pub fn serves(&self, uri: &str) -> bool {
        self.resources.iter().any(|r| r.uri == uri) || self.templates.iter().any(|t| matches_template(&t.uri, uri))
    }

    /// The prompt called `name` (unprefixed).
    pub fn prompt(&self, name: &str) -> Option<&PromptDef> {
        self.prompts.iter().find(|p| p.name == name)
    }
}

/// Whether `uri` is one of `template`'s resources (RFC 6570 level 1: `{name}` stands for one
/// or more characters other than `/`, `?` and `#`; an unclosed `{` is text). In time linear
/// in the URI (times the template's length, which the skill chose): the template is read as
/// a sequence of characters and placeholders, and the URI is run through all the places
/// the template can be at once (a Thompson simulation), so a hostile URI of megabytes
/// against a template of several placeholders costs one pass, not one per split.
pub fn matches_template(template: &str, uri: &str) -> bool {
    let parts = template_parts(template);
    // `at[i]`: the URI read so far can end with the template read up to part `i`;
    // `within[i]`: ...inside placeholder `i`, which has taken one character or more.
    let (mut at, mut within) = (vec![false; parts.len() + 1], vec![false; parts.len()]);
    at[0] = true;
    let mut next = (vec![false; parts.len() + 1], vec![false; parts.len()]);
    for c in uri.chars() {
        next.0.fill(false);
        next.1.fill(false);
        let mut any = false;
        for (i, part) in parts.iter().enumerate() {
            match part {
                Part::Char(expected) if at[i] && *expected == c => next.0[i + 1] = true,
                Part::Value if (at[i] || within[i]) && !SEPARATORS.contains(&c) => next.1[i] = true,
                _ => continue,
            }
            any = true;
        }
        if !any {
            return false;
        }
        // A placeholder that has taken a character may end here.
        for i in 0..parts.len() {
            if next.1[i] {
                next.0[i + 1] = true;
            }
        }
        std::mem::swap(&mut at, &mut next.0);
        std::mem::swap(&mut within, &mut next.1);
    }
    at[parts.len()]
}

/// What a placeholder's value may not contain.
const SEPARATORS: [char; 3] = ['/', '?', '#'];

/// One piece of a URI template: a character to match, or a placeholder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Char(char),
    Value,
}

/// `template` as its pieces: `{...}` (up to the first `}`) is a placeholder, anything else,
/// an unclosed `{` included, is text.
fn template_parts(template: &str) -> Vec<Part> {
    let mut parts = Vec::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else { break };
        parts.extend(rest[..open].chars().map(Part::Char));
        parts.push(Part::Value);
        rest = &rest[close + 1..];
    }
    parts.extend(rest.chars().map(Part::Char));
    parts
}

/// An embedded resource of the WIT as the host has it.
pub(super) fn embedded(r: wit_blocks::EmbeddedResource) -> Content {
    let contents = match r.contents {
        wit_blocks::ResourceContents::Text(text) => ResourceContents::Text(text),
        wit_blocks::ResourceContents::Blob(data) => ResourceContents::Blob(data),
    };
    Content::Resource { uri: r.uri, mime_type: r.mime_type, contents }
}

impl From<wit_prompts::PromptResult> for Prompted {
    fn from(r: wit_prompts::PromptResult) -> Self {
        let messages = r
            .messages
            .into_iter()
            .map(|m| {
                let role = match m.role {
                    wit_prompts::Role::User => Role::User,
                    wit_prompts::Role::Assistant => Role::Assistant,
                };
                let content = match m.content {
                    wit_prompts::PromptContent::Text(text) => Content::Text(text),
                    wit_prompts::PromptContent::Image(i) => Content::Image { mime_type: i.mime_type, data: i.data },
                    wit_prompts::PromptContent::Audio(a) => Content::Audio { mime_type: a.mime_type, data: a.data },
                    wit_prompts::PromptContent::Embedded(e) => embedded(e),
                };
                (role, content)
            })
            .collect();
        Prompted { description: r.description, messages }
    }
}

impl From<wit_prompts::PromptError> for ServeError {
    fn from(e: wit_prompts::PromptError) -> Self {
        match e {
            wit_prompts::PromptError::NotFound => ServeError::NotFound,
            wit_prompts::PromptError::InvalidArguments(why) => ServeError::InvalidArguments(why),
            wit_prompts::PromptError::Failed(why) => ServeError::Failed(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Served, matches_template};
    use crate::sandbox::ServedLists;
    use crate::sandbox::bindings::guest::{prompts, resources};

    fn resource(uri: &str) -> resources::ResourceDef {
        resources::ResourceDef { uri: uri.into(), name: "r".into(), title: None, description: None, mime_type: None }
    }

    fn prompt(name: &str) -> prompts::PromptDef {
        prompts::PromptDef { name: name.into(), title: None, description: "d".into(), arguments: Vec::new() }
    }

    #[test]
    fn what_a_skill_serves_is_checked_when_it_loads() {
        let lists =
            |resources, prompts| ServedLists { resources, templates: Vec::new(), prompts, ..Default::default() };
        assert!(Served::checked(lists(vec![resource("test://a")], vec![prompt("p")])).is_ok());
        let files = Served::checked(lists(vec![resource("skill://x/a.md")], vec![])).unwrap_err();
        assert!(files.contains("host's own scheme"), "{files}");
        let twice = Served::checked(lists(vec![resource("test://a"), resource("test://a")], vec![])).unwrap_err();
        assert!(twice.contains("listed twice"), "{twice}");
        let bad = Served::checked(lists(vec![], vec![prompt("Bad Name")])).unwrap_err();
        assert!(bad.contains("prompt name `Bad Name`"), "{bad}");
        let same = Served::checked(lists(vec![], vec![prompt("p"), prompt("p")])).unwrap_err();
        assert!(same.contains("prompt `p` is listed twice"), "{same}");
        let needs = |n: &[(&str, &[&str])]| ServedLists {
            client_needs: n.iter().map(|(t, c)| (t.to_string(), c.iter().map(|c| c.to_string()).collect())).collect(),
            ..Default::default()
        };
        let served = Served::checked(needs(&[("ask", &["sampling", "roots"])])).unwrap();
        assert_eq!(served.client_needs["ask"], ["sampling", "roots"]);
        let unknown = Served::checked(needs(&[("ask", &["telepathy"])])).unwrap_err();
        assert!(unknown.contains("client capability `telepathy`"), "{unknown}");
        let again = Served::checked(needs(&[("ask", &["sampling"]), ("ask", &["roots"])])).unwrap_err();
        assert!(again.contains("listed twice"), "{again}");
        use crate::sandbox::bindings::guest::task_support::{Support, TaskTool};
        let tasks = |t: &[(&str, Support)]| ServedLists {
            task_tools: t.iter().map(|(n, s)| TaskTool { name: n.to_string(), support: *s, detaches: false }).collect(),
            ..Default::default()
        };
        let served = Served::checked(tasks(&[("a", Support::Required), ("b", Support::Forbidden)])).unwrap();
        assert_eq!(served.tasks["a"], super::TaskSupport { required: true, detaches: false });
        assert!(!served.tasks.contains_key("b"), "a forbidden tool is simply not a task tool");
        let twice = Served::checked(tasks(&[("a", Support::Optional), ("a", Support::Required)])).unwrap_err();
        assert!(twice.contains("task support of tool `a` is listed twice"), "{twice}");
    }

    #[test]
    fn a_template_matches_its_resources_only() {
        let t = "test://template/{id}/data";
        assert!(matches_template(t, "test://template/123/data"));
        assert!(matches_template(t, "test://template/a-b/data"));
        for other in
            ["test://template//data", "test://template/1/2/data", "test://template/1/datas", "test://other/1/data"]
        {
            assert!(!matches_template(t, other), "{other}");
        }
        assert!(matches_template("x://{a}-{b}", "x://1-2"));
        assert!(matches_template("x://plain", "x://plain") && !matches_template("x://plain", "x://plain2"));
    }

    /// The matcher before it ran in linear time: backtracking over every split.
    fn backtracking(template: &str, uri: &str) -> bool {
        let Some(open) = template.find('{') else { return template == uri };
        let Some(close) = template[open..].find('}').map(|c| open + c) else { return template == uri };
        let (literal, rest) = (&template[..open], &template[close + 1..]);
        let Some(tail) = uri.strip_prefix(literal) else { return false };
        let value_end = tail.find(['/', '?', '#']).unwrap_or(tail.len());
        (1..=value_end).any(|len| backtracking(rest, &tail[len..]))
    }

    /// Every string of `alphabet` up to `max` characters.
    fn strings(alphabet: &[char], max: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..max {
            last = last.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn the_linear_matcher_matches_exactly_what_the_backtracking_one_did() {
        // Every template and URI of up to 4 and 5 characters over the characters that
        // matter (placeholders, separators, a literal that also appears in values), and
        // templates of several placeholders against URIs of up to 6.
        let alphabet = ['a', '-', '/', '?', '{'];
        let pairs = [(strings(&['{', '}', 'a', '-', '/'], 4), strings(&alphabet, 5))];
        let several = ["{}-{}", "a{b}-{c}/", "{x}{y}", "{}/{}-{}", "{a-{b}}-"].map(str::to_owned).to_vec();
        for (templates, uris) in pairs.into_iter().chain([(several, strings(&alphabet, 6))]) {
            for template in &templates {
                for uri in &uris {
                    assert_eq!(matches_template(template, uri), backtracking(template, uri), "{template:?} ~ {uri:?}");
                }
            }
        }
        for (template, uri) in [("x://{a}{b}", "x://ab"), ("x://{a}{b}", "x://a"), ("é{ü}ß", "éaaß"), ("{", "{")] {
            assert_eq!(matches_template(template, uri), backtracking(template, uri), "{template} ~ {uri}");
        }
    }

    #[test]
    fn a_hostile_uri_is_read_in_one_pass() {
        // What took the backtracking matcher time quadratic in the URI per placeholder: a
        // long run of values and separators-to-be that never completes.
        let uri = format!("notes://{}/", "a-".repeat(2 * 1024 * 1024));
        assert!(!matches_template("notes://{day}-{slot}", &uri));
        assert!(matches_template("notes://{day}-{slot}", &uri[..uri.len() - 1]));
    }
}

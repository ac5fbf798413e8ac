//! What one skill may reach: the intersection of what its manifest asks for and what the
//! operator's config grants. Nothing is reachable by default.

use crate::config::Destination;
use crate::store::state::{Conversation, Namespace, StateScope};
use crate::store::{MemoryStore, StateStore};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};

/// The result of an MCP tool call made on a skill's behalf.
pub type McpFuture<'a> = Pin<Box<dyn Future<Output = Result<String, McpCallError>> + Send + 'a>>;

/// Why an MCP call made by a skill failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpCallError {
    /// No server of that name is configured, or the skill may not use it.
    UnknownServer(String),
    /// The server reported the tool call as failed.
    ToolFailed(String),
    /// Anything else.
    Other(String),
}

/// Calls MCP tools for skills (the `mcp` import). Implemented by the MCP client; absent when
/// the operator configured no MCP servers.
pub trait McpBridge: Send + Sync {
    /// Calls `tool` on `server` with JSON `arguments`, for `skill`.
    fn call_tool<'a>(&'a self, skill: &'a str, server: &'a str, tool: &'a str, arguments: &'a str) -> McpFuture<'a>;
}

/// The result of a message sent on a skill's behalf.
pub type NotifyFuture<'a> = Pin<Box<dyn Future<Output = Result<(), NotifyError>> + Send + 'a>>;

/// Why a message a skill sent was not delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotifyError {
    /// No adapter of the destination's platform serves the skill's agent in this process.
    Unavailable(String),
    /// The platform refused it, could not be reached, or a guard suppressed it.
    Failed(String),
}

/// One message a skill sends on its own (the `notify` import), already checked against the
/// skill's grants.
#[derive(Debug, Clone, Copy)]
pub struct Notice<'a> {
    /// The sending skill.
    pub skill: &'a str,
    /// Where it goes.
    pub destination: &'a Destination,
    /// The text (Markdown).
    pub text: &'a str,
    /// Whether the agent then runs a turn with the text as the incoming message.
    pub wake: bool,
}

/// Delivers skills' messages through the agent's chat adapters. Implemented by the adapters'
/// outbox; absent where no adapter can serve (`skill list`, `skill validate`).
pub trait Notifier: Send + Sync {
    /// Delivers `notice`.
    fn send<'a>(&'a self, notice: Notice<'a>) -> NotifyFuture<'a>;
}

/// Which list of a skill changed (the `lists` import).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// Its tools.
    Tools,
    /// Its prompts.
    Prompts,
    /// Its resources.
    Resources,
}

/// Hears that a skill's lists changed while it serves: the app, which describes the skill
/// again and swaps it in. Absent where nothing serves (`call`, `skill list`).
pub trait ListsWatcher: Send + Sync {
    /// `skill`'s `which` list changed; must not block.
    fn changed(&self, skill: &str, which: ListKind);
}

/// What a skill may send (the `notify` import).
#[derive(Clone, Default)]
pub struct NotifyGrant {
    /// Whether the manifest asks for `notify`.
    pub asked: bool,
    /// The destinations the operator grants (`skills.grants.<skill>.notify`).
    pub granted: Vec<Destination>,
    /// Who delivers.
    pub notifier: Option<Arc<dyn Notifier>>,
}

/// Where a component that asks for its own files (`[capabilities] files = "self"`) sees them.
pub const SKILL_FOLDER: &str = "/skill";

/// A skill's own files, which its component reads at [`SKILL_FOLDER`]: a read-only copy
/// of its distributable files the loader made (`skills::files`), removed when the last call
/// environment holding it is dropped (the skill was unloaded or replaced).
#[derive(Debug, Clone)]
pub struct SkillFiles {
    dir: Arc<tempfile::TempDir>,
    /// How many files it holds.
    pub files: usize,
    /// How many bytes they hold.
    pub bytes: u64,
}

impl SkillFiles {
    /// The copy in `dir`, holding `files` files of `bytes` bytes.
    pub fn new(dir: tempfile::TempDir, files: usize, bytes: u64) -> Self {
        SkillFiles { dir: Arc::new(dir), files, bytes }
    }

    /// Where the copy is on the host.
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// A list of host patterns: `*` (anything), `*.example.com` (subdomains), `example.com`
/// (any port), `example.com:8080` (that port).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostList(Vec<String>);

impl HostList {
    /// From patterns as written in a manifest or config.
    pub fn new(patterns: impl IntoIterator<Item = impl Into<String>>) -> Self {
        HostList(patterns.into_iter().map(|p| p.into().to_ascii_lowercase()).collect())
    }

    /// The patterns, as written (lowercase).
    pub fn patterns(&self) -> &[String] {
        &self.0
    }

    /// Whether `host` (lowercase, no brackets) on `port` matches a pattern.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        self.0.iter().any(|pattern| pattern_matches(pattern, host, port))
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn pattern_matches(pattern: &str, host: &str, port: u16) -> bool {
    if pattern == "*" {
        return true;
    }
    let (pattern_host, pattern_port) = match pattern.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.ends_with(']') => (h, p.parse::<u16>().ok()),
        _ => (pattern, None),
    };
    let pattern_host = pattern_host.trim_start_matches('[').trim_end_matches(']');
    if pattern_port.is_some_and(|p| p != port) {
        return false;
    }
    match pattern_host.strip_prefix("*.") {
        Some(domain) => {
            host.len() > domain.len()
                && host.ends_with(domain)
                && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
        }
        None => pattern_host == host,
    }
}

/// Everything a skill's calls may reach.
pub struct Capabilities {
    /// The skill's name (log attribution, state namespace).
    pub skill: String,
    /// The memory root, when both manifest and grant allow it.
    pub memory: Option<MemoryStore>,
    /// The state store; `None` for code with no state (the function runtime's).
    pub state: Option<StateStore>,
    /// Whether its keys are per conversation or the skill's (its manifest's `state`).
    pub state_scope: StateScope,
    /// How long a per-conversation entry lives past its last get or set
    /// (`skills.state_ttl_seconds`).
    pub state_ttl: std::time::Duration,
    /// Hosts the manifest asks for.
    pub http_requested: HostList,
    /// Hosts the operator grants.
    pub http_granted: HostList,
    /// The MCP bridge, when MCP servers are configured.
    pub mcp: Option<Arc<dyn McpBridge>>,
    /// The guest's WASI environment: the variables the manifest names and the operator
    /// grants, with their values. Often credentials: never logged.
    pub env: Vec<(String, String)>,
    /// Messages of its own.
    pub notify: NotifyGrant,
    /// Its own files, when its manifest asks (`files = "self"`; no grant needed).
    pub files: Option<SkillFiles>,
    /// Who hears that its lists changed (the `lists` import).
    pub lists: Option<Arc<dyn ListsWatcher>>,
}

impl Capabilities {
    /// The namespace of the keys a call serving `conversation` sees (`None`: a lifecycle
    /// hook, which sees the skill's). No other skill shares it.
    pub fn state_namespace(&self, conversation: Option<&Conversation>) -> Namespace {
        Namespace::of(&self.skill, self.state_scope, conversation, self.state_ttl)
    }

    /// Whether an HTTP request to `host:port` is allowed.
    pub fn http_allowed(&self, host: &str, port: u16) -> bool {
        self.http_requested.matches(host, port) && self.http_granted.matches(host, port)
    }
}

/// The HTTP client shared by every skill: no redirects (a redirect could leave the allowed
/// hosts), no proxy from the environment, bounded connect time. Built on first use (it reads
/// the system's root certificates, which a start need not wait for).
pub fn http_client() -> &'static reqwest::Client {
    static CLIENT: LazyLock<reqwest::Client> = LazyLock::new(|| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(std::time::Duration::from_secs(10))
            .user_agent(concat!("skillhost/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("a client with static settings builds")
    });
    &CLIENT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        let list = HostList::new(["example.com", "*.internal", "127.0.0.1:8080", "[::1]:9"]);
        assert!(list.matches("example.com", 443));
        assert!(!list.matches("evil-example.com", 443));
        assert!(list.matches("db.internal", 80));
        assert!(!list.matches("internal", 80));
        assert!(!list.matches("xinternal", 80));
        assert!(list.matches("127.0.0.1", 8080));
        assert!(!list.matches("127.0.0.1", 8081));
        assert!(list.matches("::1", 9));
        assert!(HostList::new(["*"]).matches("anything", 1));
        assert!(!HostList::default().matches("example.com", 80));
    }
}

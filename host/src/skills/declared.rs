//! Tools declared in config (`skills.declared`), checked: each record becomes the tool
//! `declared__<name>` with its schema compiled and its type's `config_json` parsed into what
//! runs it (`tools::declared` runs them). A bad record is one load problem naming the record
//! and the key; the others load.

use super::contract::{Human, ToolDef, ToolHints};
use super::loader::LoadProblem;
use super::skill::ToolSpec;
use crate::config::{DeclaredLevel, DeclaredRecord, LoadedConfig, SkillType};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The prefix of every declared tool (`declared__weather`).
pub const DECLARED: &str = "declared";
/// The spec's timeout of `http` and `mcp` records.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The DuckDuckGo Instant Answer API.
pub const DUCKDUCKGO: &str = "https://api.duckduckgo.com/";
/// Meta's Graph API, its version included: the base of `whatsapp_send` and `instagram_post`.
pub const GRAPH_API: &str = "https://graph.facebook.com/v23.0";

/// One declared tool, ready to run.
#[derive(Debug)]
pub struct Declared {
    /// Its name, schema and level (`declared__<name>`).
    pub spec: ToolSpec,
    /// Its record's `skill_type`.
    pub skill_type: SkillType,
    /// Offered to the model (`is_active`).
    pub active: bool,
    /// What runs it.
    pub kind: Kind,
    /// Its record's place in `skills.declared` (a load problem names it).
    pub record: usize,
}

impl Declared {
    /// Whether the function runtime runs it (a `function` record, `code_execution`).
    pub fn needs_runtime(&self) -> bool {
        matches!(self.kind, Kind::Function(_) | Kind::Builtin(Builtin::CodeExecution))
    }
}

/// What runs a declared tool.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A REST call.
    Http(HttpTool),
    /// The spec's single-tool JSON-RPC call.
    Mcp(McpTool),
    /// A built-in action.
    Builtin(Builtin),
    /// A read-only query over a configured database (`Query`), or its schema (`Schema`, the
    /// companion `declared__<name>_schema` tool).
    Database(DatabaseTool),
    /// Python code whose `run(args)` the function runtime calls, sandboxed.
    Function(FunctionTool),
}

/// A `function` record.
#[derive(Debug, Clone)]
pub struct FunctionTool {
    /// The Python source; it defines `run(args)` (checked at load).
    pub code: Arc<str>,
}

/// A `database` record's tool.
#[derive(Debug, Clone)]
pub struct DatabaseTool {
    /// Where it is (a relative SQLite path already resolved beside the config).
    pub url: crate::config::DatabaseUrl,
    /// The most rows returned.
    pub max_rows: u32,
    /// The longest a query runs.
    pub timeout: Duration,
    /// Whether this is the companion schema tool.
    pub schema: bool,
}

/// An `http` record.
#[derive(Debug, Clone)]
pub struct HttpTool {
    /// The address; the model's arguments never change its host, scheme or port.
    pub url: url::Url,
    /// `GET` (arguments as query parameters) or `POST` (a JSON body).
    pub method: HttpMethod,
    /// Sent with every call.
    pub headers: Vec<(String, String)>,
    /// The whole call's limit.
    pub timeout: Duration,
}

/// An `http` record's method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// Arguments as query parameters.
    Get,
    /// Arguments as a JSON body (the spec's default).
    Post,
}

/// An `mcp` record.
#[derive(Debug, Clone)]
pub struct McpTool {
    /// `{url}/call` (the url as written when it already ends with `/call`).
    pub url: url::Url,
    /// The header that carries `auth_value`, with its value.
    pub auth: Option<(&'static str, String)>,
    /// The tool's name on the server (the record's `name`).
    pub remote_name: String,
}

/// A `builtin` record's action.
#[derive(Debug, Clone)]
pub enum Builtin {
    /// The DuckDuckGo Instant Answer API's first five related topics.
    WebSearch {
        /// The API's base (a proxy, a test server).
        base_url: url::Url,
    },
    /// A Markdown entry in the conversation's journal under the memory root.
    JournalWrite,
    /// A bar, line or pie chart as an SVG file under the memory root.
    TextToChart,
    /// The model's Python code, run in the function runtime.
    CodeExecution,
    /// A nested turn on another agent of this process.
    Delegate {
        /// The agent (`to_agent_id`); the model names it (`to_agent_slug`) when absent.
        to: Option<String>,
    },
    /// A text message through the WhatsApp Cloud API, from `phone_number_id`.
    WhatsappSend(GraphAccount),
    /// An image post through the Instagram Graph API, as `ig_user_id`: a media container,
    /// then its publication.
    InstagramPost(GraphAccount),
}

/// The account a social built-in publishes as, on Meta's Graph API.
#[derive(Clone)]
pub struct GraphAccount {
    /// The API's base, its version included ([`GRAPH_API`] unless `base_url` says otherwise).
    pub base_url: url::Url,
    /// `phone_number_id` (WhatsApp) or `ig_user_id` (Instagram): the path's first segment.
    pub id: String,
    /// `access_token`: sent only as `Authorization: Bearer`, never in a URL, a log line or
    /// an error (`Debug` leaves it out).
    pub token: String,
}

impl GraphAccount {
    /// `{base_url}/{id}/{edge}`.
    pub fn url(&self, edge: &str) -> url::Url {
        let mut url = self.base_url.clone();
        // An http(s) URL (checked at load) always has path segments; `extend` escapes each.
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().extend([&self.id, edge]);
        }
        url
    }
}

impl std::fmt::Debug for GraphAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphAccount").field("base_url", &self.base_url).field("id", &self.id).finish_non_exhaustive()
    }
}

impl Builtin {
    /// What the model is told when the record gives no description.
    pub fn description(&self) -> &'static str {
        match self {
            Builtin::WebSearch { .. } => "Search the web: the first five related results (title and URL) for a query.",
            Builtin::JournalWrite => "Write a Markdown entry in this conversation's journal (one file per day).",
            Builtin::TextToChart => {
                "Draw a bar, line or pie chart from labels and series; returns the SVG file's path."
            }
            Builtin::Delegate { .. } => {
                "Hand a task to another agent of this deployment (by its key in `agents`), which works on it \
                 with its own skills, and get its answer."
            }
            Builtin::CodeExecution => {
                "Run Python code in a sandbox (standard library only; no files, network or environment; \
                 a few seconds at most). The result is what it prints, then the value of its last line \
                 when that is an expression."
            }
            Builtin::WhatsappSend(_) => {
                "Send a WhatsApp text message to a phone number (international format, digits only) from \
                 this deployment's WhatsApp Business number; returns the message's id."
            }
            Builtin::InstagramPost(_) => {
                "Publish an image, from a public URL, with a caption on this deployment's Instagram \
                 account; returns the post's media id."
            }
        }
    }
}

/// The declared tools of one config, and the records that did not load.
#[derive(Default, Clone)]
pub struct DeclaredSet {
    /// Every record that loaded, active or not, in config order.
    pub tools: Vec<Arc<Declared>>,
    /// The function runtime, when a record needs it (see [`check_code`]).
    pub runtime: Option<Arc<super::Skill>>,
}

impl std::fmt::Debug for DeclaredSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclaredSet").field("tools", &self.tools).field("runtime", &self.runtime.is_some()).finish()
    }
}

impl DeclaredSet {
    /// The tool called `full_name` (`declared__weather`).
    pub fn get(&self, full_name: &str) -> Option<&Arc<Declared>> {
        self.tools.iter().find(|t| t.spec.full_name == full_name)
    }
}

/// Checks every record of `skills.declared`; each bad one is a problem of its own.
pub fn load(config: &LoadedConfig, problems: &mut Vec<LoadProblem>) -> DeclaredSet {
    let mut set = DeclaredSet::default();
    let mut seen = HashSet::new();
    for (index, record) in config.config.skills.declared.iter().enumerate() {
        let full_name = format!("{DECLARED}__{}", record.name);
        let problem = |message: String| LoadProblem {
            skill: full_name.clone(),
            file: PathBuf::from(format!("skills.declared[{index}]")),
            message,
        };
        if !seen.insert(record.name.clone()) {
            problems.push(problem("a second record with this name".into()));
            continue;
        }
        let loaded = declared(config, record, index);
        let taken = |tools: &[Declared]| {
            tools.iter().find(|t| set.get(&t.spec.full_name).is_some()).map(|t| t.spec.full_name.clone())
        };
        match loaded {
            Ok(tools) => match taken(&tools) {
                Some(name) => problems.push(problem(format!("`{name}` is also the name of another record's tool"))),
                None => set.tools.extend(tools.into_iter().map(Arc::new)),
            },
            Err(message) => problems.push(problem(message)),
        }
    }
    set
}

/// The tools of `record`: one, or a database's two.
fn declared(config: &LoadedConfig, record: &DeclaredRecord, index: usize) -> Result<Vec<Declared>, String> {
    let settings = &record.config_json;
    let (kind, schema) = match record.skill_type {
        SkillType::Http => http(settings)?,
        SkillType::Mcp => mcp(settings, &record.name)?,
        SkillType::Builtin => builtin(settings, &record.name)?,
        SkillType::Database => return database(config, record, index),
        SkillType::Function => function(settings)?,
    };
    Ok(vec![tool(record, index, &record.name, kind, schema, None)?])
}

/// The checked tool `declared__<name>` of `record`, with `description` over the record's.
fn tool(
    record: &DeclaredRecord,
    index: usize,
    name: &str,
    kind: Kind,
    schema: Value,
    description: Option<String>,
) -> Result<Declared, String> {
    let human = match record.human {
        // The built-ins that publish ask first unless the record says otherwise.
        None if matches!(kind, Kind::Builtin(Builtin::WhatsappSend(_) | Builtin::InstagramPost(_))) => Human::Approve,
        None | Some(None) => Human::None,
        Some(Some(DeclaredLevel::Approve)) => Human::Approve,
        Some(Some(DeclaredLevel::Confirm)) => Human::Confirm,
    };
    let description = match (description, &kind, record.description.trim()) {
        (Some(description), _, _) => description,
        (None, Kind::Builtin(builtin), "") => builtin.description().to_owned(),
        (None, _, written) => written.to_owned(),
    };
    let def = ToolDef {
        name: name.to_owned(),
        description,
        input_schema: schema.to_string(),
        human,
        expose_result: false,
        declares_coverage: false,
        output_schema: None,
        hints: ToolHints::default(),
    };
    let spec = ToolSpec::new(DECLARED, def).map_err(|e| {
        e.replacen("tool name", "name", 1)
            .replacen("tool `", "`", 1)
            .replace("input schema", "config_json.input_schema")
    })?;
    Ok(Declared { spec, skill_type: record.skill_type, active: record.is_active, kind, record: index })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DatabaseSettings {
    db_id: String,
}

/// A `database` record: the query tool `declared__<name>` and its companion
/// `declared__<name>_schema`.
fn database(config: &LoadedConfig, record: &DeclaredRecord, index: usize) -> Result<Vec<Declared>, String> {
    let s: DatabaseSettings = settings(&record.config_json)?;
    let databases = &config.config.databases;
    let database = databases.get(&s.db_id).ok_or_else(|| {
        let known: Vec<&str> = databases.keys().map(String::as_str).collect();
        format!("config_json.db_id: no database `{}` in `databases` (configured: {})", s.db_id, known.join(", "))
    })?;
    let url = match database.parsed_url().map_err(|e| format!("databases.{}.{e}", s.db_id))? {
        crate::config::DatabaseUrl::Sqlite(path) => crate::config::DatabaseUrl::Sqlite(config.resolve(&path)),
        other => other,
    };
    let query = DatabaseTool {
        url,
        max_rows: database.max_rows,
        timeout: Duration::from_millis(database.statement_timeout_ms),
        schema: false,
    };
    let companion = DatabaseTool { schema: true, ..query.clone() };
    let schema_name = format!("{}_schema", record.name);
    let about = if record.description.trim().is_empty() {
        format!("database `{}`", s.db_id)
    } else {
        record.description.trim().to_owned()
    };
    let sql = json!({"type": "object", "properties": {"sql": {"type": "string", "description": "One SELECT (or WITH ... SELECT) statement."}}, "required": ["sql"], "additionalProperties": false});
    let query_about = format!(
        "Run one read-only SQL query (SELECT or WITH ... SELECT) on {about}; at most {} rows come back. \
         Call {DECLARED}__{schema_name} first for its tables and columns.",
        database.max_rows
    );
    let schema_about =
        format!("The tables, columns, types and comments of {about}, to write SQL for {DECLARED}__{}.", record.name);
    let no_input = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let mut schema = tool(record, index, &schema_name, Kind::Database(companion), no_input, Some(schema_about))?;
    schema.spec.human = Human::None; // reading the schema asks nobody, whatever the record's level
    Ok(vec![tool(record, index, &record.name, Kind::Database(query), sql, Some(query_about))?, schema])
}

/// A record's `input_schema`, or an object of string arguments.
fn input_schema(schema: Option<Value>) -> Value {
    schema.unwrap_or_else(|| json!({"type": "object", "additionalProperties": {"type": "string"}}))
}

/// `config_json` as the type's settings; the error names the key.
fn settings<T: serde::de::DeserializeOwned>(config: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(config.clone()).map_err(|e| {
        let path = e.path().to_string();
        match path.as_str() {
            "." | "" => format!("config_json: {}", e.inner()),
            path => format!("config_json.{path}: {}", e.inner()),
        }
    })
}

fn absolute_url(text: &str, key: &str) -> Result<url::Url, String> {
    let url = url::Url::parse(text).map_err(|e| format!("config_json.{key}: `{text}` is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("config_json.{key}: `{text}` is not an http(s) URL with a host"));
    }
    Ok(url)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSettings {
    url: String,
    #[serde(default = "post")]
    method: HttpMethod,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    input_schema: Option<Value>,
    timeout_seconds: Option<f64>,
}

fn post() -> HttpMethod {
    HttpMethod::Post
}

fn http(config: &Value) -> Result<(Kind, Value), String> {
    let s: HttpSettings = settings(config)?;
    let url = absolute_url(&s.url, "url")?;
    for (name, value) in &s.headers {
        let valid = reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok()
            && reqwest::header::HeaderValue::from_str(value).is_ok();
        if !valid {
            return Err(format!("config_json.headers: `{name}` is not a valid header name and value"));
        }
    }
    let timeout = match s.timeout_seconds {
        None => DEFAULT_TIMEOUT,
        Some(t) if t > 0.0 && t <= 3600.0 => Duration::from_secs_f64(t),
        Some(t) => return Err(format!("config_json.timeout_seconds: {t} is not between 0 and 3600")),
    };
    let headers = s.headers.into_iter().collect();
    Ok((Kind::Http(HttpTool { url, method: s.method, headers, timeout }), input_schema(s.input_schema)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct McpSettings {
    url: String,
    #[serde(default)]
    auth_type: AuthType,
    auth_value: Option<String>,
    input_schema: Option<Value>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum AuthType {
    #[default]
    None,
    ApiKey,
    Bearer,
    Oauth2,
}

fn mcp(config: &Value, name: &str) -> Result<(Kind, Value), String> {
    let s: McpSettings = settings(config)?;
    let written = s.url.trim_end_matches('/');
    let url = if written.ends_with("/call") { written.to_owned() } else { format!("{written}/call") };
    let url = absolute_url(&url, "url")?;
    let value = || s.auth_value.clone().filter(|v| !v.is_empty());
    let auth = match s.auth_type {
        AuthType::None => None,
        kind => {
            let value = value().ok_or_else(|| "config_json.auth_value: needed by auth_type".to_owned())?;
            match kind {
                AuthType::ApiKey => Some(("x-api-key", value)),
                _ => Some(("authorization", format!("Bearer {value}"))),
            }
        }
    };
    Ok((Kind::Mcp(McpTool { url, auth, remote_name: name.to_owned() }), input_schema(s.input_schema)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BuiltinSettings {
    function_name: Option<String>,
    base_url: Option<String>,
    to_agent_id: Option<String>,
    access_token: Option<String>,
    phone_number_id: Option<String>,
    ig_user_id: Option<String>,
}

impl BuiltinSettings {
    /// Refuses a key `function` does not take: it would be accepted and then ignored.
    fn check_keys(&self, function: &str) -> Result<(), String> {
        const SOCIAL: &[&str] = &["whatsapp_send", "instagram_post"];
        let keys: [(&str, bool, &[&str]); 5] = [
            ("base_url", self.base_url.is_some(), &["web_search", "whatsapp_send", "instagram_post"]),
            ("to_agent_id", self.to_agent_id.is_some(), &["delegate_to_agent"]),
            ("access_token", self.access_token.is_some(), SOCIAL),
            ("phone_number_id", self.phone_number_id.is_some(), &["whatsapp_send"]),
            ("ig_user_id", self.ig_user_id.is_some(), &["instagram_post"]),
        ];
        for (key, written, takers) in keys {
            if written && !takers.contains(&function) {
                return Err(format!("config_json.{key}: {function} takes no {key} (only {})", takers.join(", ")));
            }
        }
        Ok(())
    }
}

fn builtin(config: &Value, name: &str) -> Result<(Kind, Value), String> {
    let s: BuiltinSettings = settings(config)?;
    let function = s.function_name.as_deref().unwrap_or(name);
    s.check_keys(function)?;
    let string = |description: &str| json!({"type": "string", "description": description});
    Ok(match function {
        "web_search" => {
            let base_url = absolute_url(s.base_url.as_deref().unwrap_or(DUCKDUCKGO), "base_url")?;
            let schema = json!({"type": "object", "properties": {"query": string("What to search for.")}, "required": ["query"], "additionalProperties": false});
            (Kind::Builtin(Builtin::WebSearch { base_url }), schema)
        }
        "journal_write" => {
            let schema = json!({"type": "object", "properties": {"entry": string("The entry, in Markdown.")}, "required": ["entry"], "additionalProperties": false});
            (Kind::Builtin(Builtin::JournalWrite), schema)
        }
        "text_to_chart" => (Kind::Builtin(Builtin::TextToChart), chart_schema()),
        "whatsapp_send" | "instagram_post" => social(&s, function)?,
        "code_execution" => {
            let schema = json!({"type": "object", "properties": {"code": string("Python source to run.")}, "required": ["code"], "additionalProperties": false});
            (Kind::Builtin(Builtin::CodeExecution), schema)
        }
        "delegate_to_agent" => delegate(s.to_agent_id),
        other => {
            return Err(format!(
                "config_json.function_name: unknown builtin `{other}` (web_search, journal_write, text_to_chart, \
                 whatsapp_send, instagram_post, code_execution, delegate_to_agent)"
            ));
        }
    })
}

/// `delegate_to_agent`: the model names the agent unless `to_agent_id` fixes it.
fn delegate(to: Option<String>) -> (Kind, Value) {
    let string = |description: &str| json!({"type": "string", "description": description});
    let mut properties = serde_json::Map::new();
    let mut required = vec!["task"];
    if to.is_none() {
        properties.insert("to_agent_slug".into(), string("The agent to hand the task to (its key)."));
        required.insert(0, "to_agent_slug");
    }
    properties.insert("task".into(), string("What the agent should do."));
    properties.insert("context".into(), string("What it needs to know to do it."));
    let schema =
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    (Kind::Builtin(Builtin::Delegate { to }), schema)
}

/// `whatsapp_send` (`access_token`, `phone_number_id`) or `instagram_post` (`access_token`,
/// `ig_user_id`), with its fixed input (operators' prompts name these arguments).
fn social(s: &BuiltinSettings, function: &str) -> Result<(Kind, Value), String> {
    let whatsapp = function == "whatsapp_send";
    let (id_key, id) = if whatsapp { ("phone_number_id", &s.phone_number_id) } else { ("ig_user_id", &s.ig_user_id) };
    let needed = |key: &str, value: &Option<String>| match value.as_deref().map(str::trim) {
        Some(value) if !value.is_empty() => Ok(value.to_owned()),
        _ => Err(format!("config_json.{key}: needed by {function} (the account's credentials, or their ${{ENV}})")),
    };
    let token = needed("access_token", &s.access_token)?;
    let id = needed(id_key, id)?;
    if !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("config_json.{id_key}: `{id}` is not a Graph API id (digits only)"));
    }
    let base_url = absolute_url(s.base_url.as_deref().unwrap_or(GRAPH_API), "base_url")?;
    if base_url.query().is_some() || base_url.fragment().is_some() {
        return Err("config_json.base_url: a query or fragment has no place in the API's base".into());
    }
    let account = GraphAccount { base_url, id, token };
    let text = |description: &str, max: u32| json!({"type": "string", "minLength": 1, "maxLength": max, "description": description});
    Ok(if whatsapp {
        let properties = json!({
            "to": text("The recipient's phone number, international format with its country code (15551234567).", 32),
            "text": text("The message.", 4096),
        });
        let schema = json!({"type": "object", "properties": properties, "required": ["to", "text"], "additionalProperties": false});
        (Kind::Builtin(Builtin::WhatsappSend(account)), schema)
    } else {
        let properties = json!({
            "image_url": text("A public http(s) URL of the image (JPEG); images only.", 2048),
            "caption": {"type": "string", "maxLength": 2200, "description": "The post's caption."},
        });
        let schema = json!({"type": "object", "properties": properties, "required": ["image_url"], "additionalProperties": false});
        (Kind::Builtin(Builtin::InstagramPost(account)), schema)
    })
}

/// The input of `text_to_chart`.
fn chart_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["bar", "line", "pie"], "description": "The chart's kind."},
            "title": {"type": "string", "description": "Its title."},
            "labels": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 100, "description": "The categories (x axis, or the slices)."},
            "series": {
                "type": "array", "minItems": 1, "maxItems": 10,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "values": {"type": "array", "items": {"type": "number"}, "maxItems": 100}
                    },
                    "required": ["name", "values"],
                    "additionalProperties": false
                },
                "description": "One or more series, one value per label (a pie takes one series)."
            }
        },
        "required": ["kind", "labels", "series"],
        "additionalProperties": false
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionSettings {
    language: String,
    code: String,
    input_schema: Option<Value>,
}

fn function(config: &Value) -> Result<(Kind, Value), String> {
    let s: FunctionSettings = settings(config)?;
    if s.language != "python" {
        return Err(format!("config_json.language: `{}` is not supported (python)", s.language));
    }
    if s.code.trim().is_empty() {
        return Err("config_json.code: empty".into());
    }
    Ok((Kind::Function(FunctionTool { code: s.code.into() }), input_schema(s.input_schema)))
}

/// Whether a record of `config` would need the function runtime (to compile it early).
pub fn wants_runtime(config: &LoadedConfig) -> bool {
    config.config.skills.declared.iter().any(|record| match record.skill_type {
        SkillType::Function => true,
        SkillType::Builtin => {
            let function = record.config_json.get("function_name").and_then(Value::as_str);
            function.unwrap_or(&record.name) == "code_execution"
        }
        _ => false,
    })
}

/// Loads the function runtime when a record needs it and checks every `function` record's
/// code with it (a syntax error is a problem with its line, as is code without `run`). A
/// record it cannot serve is a problem of its own; the others stay.
pub async fn check_code(set: &mut DeclaredSet, loader: &super::Loader, problems: &mut Vec<LoadProblem>) {
    if !set.tools.iter().any(|t| t.needs_runtime()) {
        return;
    }
    let problem = |tool: &Declared, message: String| LoadProblem {
        skill: tool.spec.full_name.clone(),
        file: PathBuf::from(format!("skills.declared[{}]", tool.record)),
        message,
    };
    let runtime = match loader.function_runtime().await {
        Ok(runtime) => Arc::new(runtime),
        Err(why) => {
            for tool in set.tools.iter().filter(|t| t.needs_runtime()) {
                problems.push(problem(tool, format!("the function runtime is not available: {why}")));
            }
            set.tools.retain(|t| !t.needs_runtime());
            return;
        }
    };
    let ctx = crate::sandbox::CallContext::standalone("load");
    let mut kept = Vec::with_capacity(set.tools.len());
    for tool in std::mem::take(&mut set.tools) {
        let Kind::Function(function) = &tool.kind else {
            kept.push(tool);
            continue;
        };
        let input = json!({"code": &*function.code, "mode": "function"});
        let checked = match runtime.call("check", &input, &ctx).await {
            Ok(outcome) => serde_json::from_str::<Value>(&outcome.value.content)
                .map_err(|e| format!("the function runtime answered something else: {e}")),
            Err(e) => Err(format!("checking the code failed: {e}")),
        };
        match checked {
            Ok(answer) if answer["ok"] == json!(true) => kept.push(tool),
            Ok(answer) => {
                let error = answer["error"].as_str().unwrap_or("the code does not compile");
                let line = answer["line"].as_u64().map(|l| format!(" (line {l})")).unwrap_or_default();
                problems.push(problem(&tool, format!("config_json.code: {error}{line}")));
            }
            Err(why) => problems.push(problem(&tool, why)),
        }
    }
    set.tools = kept;
    set.runtime = Some(runtime);
}

//! `skills.declared`: tools an operator adds by writing a record, no code and no build (the
//! skill-types spec's `skill_type` + `config_json`). The record's shape is checked here; each
//! type's `config_json` is checked when the tools load (`skills::declared`), so that one bad
//! record is one load problem and the others still load.

use serde::{Deserialize, Deserializer};

/// One record of `skills.declared`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredRecord {
    /// The tool is `declared__<name>` (snake_case).
    pub name: String,
    /// What runs it.
    pub skill_type: SkillType,
    /// Shown to the model.
    #[serde(default)]
    pub description: String,
    /// `false`: left out of the tool list (still validated).
    #[serde(default = "active")]
    pub is_active: bool,
    /// The approval level: `approve`, `confirm`, or `null` (none). Absent (`None`): the
    /// type's own, which is none except for the built-ins that publish (`whatsapp_send`,
    /// `instagram_post`: `approve`). `human.overrides` still have the last word.
    #[serde(default, deserialize_with = "written")]
    pub human: Option<Option<DeclaredLevel>>,
    /// The type's settings: a mapping, or the spec's JSON text.
    #[serde(default = "empty_object", deserialize_with = "mapping_or_json_text")]
    pub config_json: serde_json::Value,
}

fn active() -> bool {
    true
}

fn empty_object() -> serde_json::Value {
    serde_json::json!({})
}

/// `skill_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkillType {
    /// One of the built-in actions (`function_name`).
    Builtin,
    /// A single tool behind the spec's JSON-RPC `POST {url}/call`.
    Mcp,
    /// Any REST address.
    Http,
    /// Code run in the sandbox.
    Function,
    /// Read-only SQL over a configured database.
    Database,
}

impl SkillType {
    /// Its name in config.
    pub fn as_str(self) -> &'static str {
        match self {
            SkillType::Builtin => "builtin",
            SkillType::Mcp => "mcp",
            SkillType::Http => "http",
            SkillType::Function => "function",
            SkillType::Database => "database",
        }
    }
}

/// A declared tool's approval level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeclaredLevel {
    /// Approve / deny.
    Approve,
    /// The typed confirmation.
    Confirm,
}

/// A key that is present, `null` included (`Some(None)`), told apart from an absent one
/// (`None`, through `#[serde(default)]`).
fn written<'de, D: Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// `config_json` as a YAML mapping, or as the JSON text the spec stores.
fn mapping_or_json_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<serde_json::Value, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    let value = match value {
        serde_json::Value::String(text) => serde_json::from_str(&text)
            .map_err(|e| serde::de::Error::custom(format!("config_json is text but not JSON: {e}")))?,
        serde_json::Value::Null => empty_object(),
        other => other,
    };
    if !value.is_object() {
        return Err(serde::de::Error::custom("config_json must be a mapping (or JSON text of an object)"));
    }
    Ok(value)
}

/// `databases.<id>`: a connection `database` records name (`config_json.db_id`). Only reads
/// ever run on it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Database {
    /// `sqlite:///absolute/path.db` (or `sqlite://relative/path.db`, beside the config), or
    /// `postgres://user:password@host:port/db`.
    pub url: String,
    /// The most rows a query returns (more are cut, and the result says so). Default 200.
    #[serde(default = "max_rows")]
    pub max_rows: u32,
    /// The longest a query may run, in milliseconds. Default 10 000.
    #[serde(default = "statement_timeout_ms")]
    pub statement_timeout_ms: u64,
}

fn max_rows() -> u32 {
    200
}

fn statement_timeout_ms() -> u64 {
    10_000
}

/// Where a database is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// A SQLite file (relative paths are resolved beside the config).
    Sqlite(std::path::PathBuf),
    /// A PostgreSQL server (the URL as written).
    Postgres(String),
}

impl Database {
    /// Its URL, checked; the error never repeats the URL (it may hold a password).
    pub fn parsed_url(&self) -> Result<DatabaseUrl, String> {
        if let Some(path) = self.url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err("url: sqlite:// needs a file path (sqlite:///data/sales.db)".into());
            }
            return Ok(DatabaseUrl::Sqlite(path.into()));
        }
        if self.url.starts_with("postgres://") || self.url.starts_with("postgresql://") {
            return Ok(DatabaseUrl::Postgres(self.url.clone()));
        }
        Err("url: write sqlite:///path/to/file.db or postgres://user@host:port/db".into())
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        self.parsed_url()?;
        if self.max_rows == 0 || self.max_rows > 100_000 {
            return Err(format!("max_rows: {} is not between 1 and 100000", self.max_rows));
        }
        if self.statement_timeout_ms == 0 {
            return Err("statement_timeout_ms: must be more than 0".into());
        }
        Ok(())
    }
}

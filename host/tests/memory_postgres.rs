//! `learning.memory.backend: postgres` through the real binary and its built-in `memory`
//! skill, on a throwaway PostgreSQL 15 cluster: processes in two folders share the memory,
//! a quota holds, and a config with no database to connect to is refused, naming the keys.

mod support;

use serde_json::Value;
use skillhost_tests::Workspace;
use skillhost_tests::postgres::Postgres;
use std::process::Command;

/// A workspace whose memory is on `url`: through the state's database (`via_state`), or
/// through a `learning.memory.postgres` block of its own with the state on disk. `extra`:
/// more config.
fn workspace(url: &str, via_state: bool, extra: &str) -> Workspace {
    let ws = Workspace::new();
    let pg = format!("{{url: '{url}?sslmode=disable', connect_timeout_seconds: 2}}");
    let yaml = match via_state {
        true => format!("learning:\n  memory: {{backend: postgres}}\nstate:\n  backend: postgres\n  postgres: {pg}\n"),
        false => format!("learning:\n  memory: {{backend: postgres, postgres: {pg}}}\n"),
    };
    std::fs::write(ws.path().join("config.yaml"), format!("skills:\n  builtins: [memory]\n{yaml}{extra}")).unwrap();
    ws
}

/// `skillhost call memory__<tool> <input>` in `ws`: its exit code and its output as JSON.
fn call(ws: &Workspace, tool: &str, input: &str) -> (i32, Value) {
    let (code, value, _) = call_logged(ws, tool, input);
    (code, value)
}

/// [`call`], and what it logged.
fn call_logged(ws: &Workspace, tool: &str, input: &str) -> (i32, Value, String) {
    let out = support::skillhost(ws, &["call", &format!("memory__{tool}"), input], "");
    let value = serde_json::from_str(&out.stdout).unwrap_or(Value::String(out.stdout.clone() + &out.stderr));
    (out.code, value, out.stderr)
}

#[test]
fn two_processes_in_two_folders_share_the_memory_and_nothing_is_written_to_disk() {
    let pg = Postgres::start();
    pg.psql("postgres", "CREATE DATABASE shared");
    let url = pg.url("postgres", "shared");
    let (one, two) = (workspace(&url, true, ""), workspace(&url, false, ""));
    let write = r#"{"path": "notes/db.md", "content": "Disk full on db-1\n"}"#;
    let (code, written) = call(&one, "memory_write", write);
    assert_eq!(code, 0, "{written}");
    let (code, read) = call(&two, "memory_read", r#"{"path": "./notes//db.md"}"#);
    assert_eq!(code, 0, "{read}");
    assert_eq!(read["content"], "Disk full on db-1\n", "{read}");
    let append = r#"{"path": "notes/db.md", "content": "fixed by rotating logs\n", "mode": "append"}"#;
    assert_eq!(call(&two, "memory_write", append).0, 0);
    let (_, found) = call(&one, "memory_search", r#"{"query": "ROTATING"}"#);
    assert_eq!(found["hits"][0]["path"], "notes/db.md", "{found}");
    assert_eq!(found["hits"][0]["line"], 2, "{found}");
    let stored = pg.psql("shared", "SELECT ns || ':' || path || ':' || bytes FROM skillhost_memory");
    assert_eq!(stored.trim(), "memory:notes/db.md:41");
    for ws in [&one, &two] {
        assert!(!ws.path().join("memory").exists(), "no memory folder on disk");
    }
    // Another memory root (an agent's `memory.path`, say) is apart.
    let other = workspace(&url, true, "");
    let yaml = std::fs::read_to_string(other.path().join("config.yaml")).unwrap();
    let yaml = yaml.replace("{backend: postgres}", "{backend: postgres, filesystem: {path: ./memory/triage}}");
    std::fs::write(other.path().join("config.yaml"), yaml).unwrap();
    let (code, read) = call(&other, "memory_read", r#"{"path": "notes/db.md"}"#);
    assert_eq!((code, &read["exists"]), (0, &Value::Bool(false)), "{read}");
}

#[test]
fn a_quota_holds_on_postgres_and_a_file_is_not_a_directory() {
    let pg = Postgres::start();
    pg.psql("postgres", "CREATE DATABASE quota");
    let url = pg.url("postgres", "quota");
    let ws = workspace(&url, false, "sandbox:\n  defaults: {memory_quota_files: 1}\n");
    assert_eq!(call(&ws, "memory_write", r#"{"path": "a.md", "content": "one"}"#).0, 0);
    let (_, refused, log) = call_logged(&ws, "memory_write", r#"{"path": "b.md", "content": "two"}"#);
    // The WIT's `too-large` carries no text; the host's log names the limit.
    assert_eq!(refused["error"], "memory: too large", "{refused}");
    assert!(log.contains("at most 1 files (limit memory_quota_files)"), "{log}");
    assert_eq!(pg.psql("quota", "SELECT count(*) FROM skillhost_memory").trim(), "1");
    // Overwriting the one file does not grow the root: allowed.
    assert_eq!(call(&ws, "memory_write", r#"{"path": "a.md", "content": "uno"}"#).0, 0);
    let (_, refused) = call(&ws, "memory_read", r#"{"path": "a.md/x"}"#);
    assert!(refused.to_string().contains("a parent is not a directory"), "{refused}");
}

#[test]
fn memory_on_postgres_with_no_database_to_connect_to_is_refused_naming_the_keys() {
    let ws = Workspace::new();
    let yaml = "skills:\n  builtins: [memory]\nlearning:\n  memory: {backend: postgres}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_skillhost"));
    command.current_dir(ws.path()).args(["call", "memory__memory_read", r#"{"path": "a"}"#]).env_remove("PGHOST");
    let out = support::run_bounded(command, "");
    assert_ne!(out.code, 0);
    for key in ["learning.memory.backend is postgres", "learning.memory.postgres.url", "state.backend: postgres"] {
        assert!(out.stderr.contains(key), "{key}: {}", out.stderr);
    }
    // A block for a backend not chosen is refused, not ignored.
    let yaml = "learning:\n  memory: {postgres: {url: 'postgres://h/d'}}\n";
    std::fs::write(ws.path().join("config.yaml"), yaml).unwrap();
    let out = support::skillhost(&ws, &["skill", "validate"], "");
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("learning.memory.postgres is set but learning.memory.backend is filesystem"),
        "{}",
        out.stderr
    );
}

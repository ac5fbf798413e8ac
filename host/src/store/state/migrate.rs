//! The SQLite database's schema versions, and the one-time import of the old format: one
//! `<namespace>.json` file (a JSON object of string values) per namespace in the state
//! directory. The files are only read, never changed or removed, so a downgrade still finds
//! them as they were.

use super::{StateError, check_namespace, db::sql};
use std::collections::BTreeMap;
use std::path::Path;

/// The schema's versions, in order, each run once (the database's `user_version` is the
/// last one run). A released migration is never changed: a change is a new one. The first
/// is written to run over a database made before versions were counted (which holds it
/// already).
pub const MIGRATIONS: &[(u32, &str, &str)] = &[
    (1, "key-value state", super::db::SCHEMA),
    (
        2,
        "expiring entries",
        // Seconds since the epoch; NULL: never. The partial index serves the sweep.
        "ALTER TABLE entries ADD COLUMN expires_at REAL;
        CREATE INDEX entries_expiry ON entries (expires_at) WHERE expires_at IS NOT NULL;",
    ),
];

/// The version this binary migrates to.
pub fn latest() -> u32 {
    MIGRATIONS.last().map_or(0, |m| m.0)
}

/// Runs the migrations `tx`'s database has not run yet, in the caller's transaction (with
/// the JSON import after the first), and records the version. A database of a newer version
/// is refused, not written.
pub fn migrate(tx: &rusqlite::Transaction<'_>, root: &Path) -> Result<(), StateError> {
    let version: u32 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(sql)?;
    if version > latest() {
        return Err(StateError::Other(format!(
            "the state database in {} is at schema version {version}, newer than this skillhost knows ({}); \
             run the newer skillhost",
            root.display(),
            latest()
        )));
    }
    for (number, name, statements) in MIGRATIONS.iter().filter(|m| m.0 > version) {
        tx.execute_batch(statements).map_err(sql)?;
        if *number == 1 {
            import_json(tx, root)?;
        }
        tracing::debug!(version = number, name, dir = %root.display(), "migrated the state database");
    }
    // `PRAGMA` takes no bound parameters; the number is ours.
    tx.execute_batch(&format!("PRAGMA user_version = {}", latest())).map_err(sql)
}

/// The `meta` row recording that the import ran.
const DONE: &str = "json_import";

/// Imports every old namespace file under `root`, once per database. Runs inside the
/// caller's transaction: a corrupt file fails it, nothing is marked done, and the error
/// (naming the file) repeats until the file is fixed or removed, so nothing is lost.
pub fn import_json(tx: &rusqlite::Transaction<'_>, root: &Path) -> Result<(), StateError> {
    let done: Option<String> =
        rusqlite::OptionalExtension::optional(
            tx.query_row("SELECT value FROM meta WHERE name = ?1", [DONE], |r| r.get(0)),
        )
        .map_err(sql)?;
    if done.is_some() {
        return Ok(());
    }
    let mut imported = 0usize;
    for (ns, path) in namespace_files(root)? {
        let bytes = std::fs::read(&path).map_err(|e| StateError::Other(format!("reading {}: {e}", path.display())))?;
        let map: BTreeMap<String, String> = serde_json::from_slice(&bytes)
            .map_err(|e| StateError::Other(format!("state file {} is corrupt: {e}", path.display())))?;
        // A row already present was written after the files were last used: it wins.
        let mut insert = tx
            .prepare_cached("INSERT OR IGNORE INTO entries (ns, key, value, bytes) VALUES (?1, ?2, ?3, ?4)")
            .map_err(sql)?;
        for (key, value) in &map {
            insert.execute(rusqlite::params![ns, key, value, (key.len() + value.len()) as i64]).map_err(sql)?;
        }
        imported += 1;
    }
    tx.execute("INSERT INTO meta (name, value) VALUES (?1, ?2)", rusqlite::params![DONE, imported.to_string()])
        .map_err(sql)?;
    if imported > 0 {
        tracing::info!(namespaces = imported, dir = %root.display(), "imported the old JSON state files");
    }
    Ok(())
}

/// The `<namespace>.json` files directly under `root` whose name is a valid namespace.
fn namespace_files(root: &Path) -> Result<Vec<(String, std::path::PathBuf)>, StateError> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StateError::Other(format!("listing {}: {e}", root.display()))),
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        let ns = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".json"));
        if let Some(ns) = ns.filter(|ns| is_file && check_namespace(ns).is_ok()) {
            files.push((ns.to_string(), path.clone()));
        }
    }
    files.sort();
    Ok(files)
}

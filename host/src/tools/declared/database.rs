//! `database` records: one read-only SQL statement on a configured database, and the schema
//! for writing it.
//!
//! A write is refused twice over. First by a real SQL parser (`sqlparser`): exactly one
//! statement, a query (`SELECT`, `WITH ... SELECT`, `VALUES`, set operations of those) with no
//! data-modifying CTE, no `SELECT ... INTO`, no row locks. Then by the connection itself, so
//! that a parser miss (a function that writes) still cannot write: SQLite opened read-only with
//! `query_only`, and each statement checked by SQLite as read-only before it runs; PostgreSQL
//! in a `READ ONLY` transaction with a `statement_timeout`, the query run through a cursor
//! (which accepts only a query, and fetches no more rows than asked), then rolled back.

use super::Failure;
use crate::config::DatabaseUrl;
use crate::skills::declared::DatabaseTool;
use serde_json::{Map, Value, json};
use sqlparser::ast::{Query, SetExpr, Statement};
use sqlparser::dialect::{Dialect, PostgreSqlDialect, SQLiteDialect};
use sqlparser::parser::Parser;
use std::time::Duration;

/// Runs the tool: the schema, or the query `input.sql`.
pub async fn run(tool: &DatabaseTool, input: &Value) -> Result<Value, Failure> {
    if tool.schema {
        return match &tool.url {
            DatabaseUrl::Sqlite(path) => sqlite_schema(path.clone(), tool.timeout).await,
            DatabaseUrl::Postgres(url) => postgres_schema(url, tool.timeout).await,
        };
    }
    let sql = input.get("sql").and_then(Value::as_str).unwrap_or_default();
    match &tool.url {
        DatabaseUrl::Sqlite(path) => {
            let sql = read_only(sql, &SQLiteDialect {})?;
            sqlite_query(path.clone(), sql, tool.max_rows, tool.timeout).await
        }
        DatabaseUrl::Postgres(url) => {
            let sql = read_only(sql, &PostgreSqlDialect {})?;
            postgres_query(url, &sql, tool.max_rows, tool.timeout).await
        }
    }
}

/// `sql` when it is exactly one read-only query, without a trailing `;`.
pub fn read_only(sql: &str, dialect: &dyn Dialect) -> Result<String, Failure> {
    let refused = |why: String| (why, "refused");
    let statements =
        Parser::parse_sql(dialect, sql).map_err(|e| (format!("the SQL does not parse: {e}"), "invalid_sql"))?;
    let statement = match statements.as_slice() {
        [one] => one,
        [] => return Err(refused("no statement".into())),
        _ => return Err(refused(format!("{} statements; only one SELECT runs", statements.len()))),
    };
    match statement {
        Statement::Query(query) => query_only(query).map_err(refused)?,
        other => {
            let kind = other.to_string().split_whitespace().next().unwrap_or_default().to_uppercase();
            return Err(refused(format!("only SELECT (or WITH ... SELECT) runs here, not {kind}")));
        }
    }
    Ok(sql.trim().trim_end_matches(';').trim_end().to_owned())
}

/// Whether `query` only reads: every CTE and every branch a query, no `INTO`, no locks.
fn query_only(query: &Query) -> Result<(), String> {
    if let Some(with) = &query.with {
        for cte in &with.cte_tables {
            query_only(&cte.query)?;
        }
    }
    if !query.locks.is_empty() {
        return Err("row locks (FOR UPDATE / FOR SHARE) are not reads".into());
    }
    set_only(&query.body)
}

fn set_only(body: &SetExpr) -> Result<(), String> {
    match body {
        SetExpr::Select(select) if select.into.is_some() => Err("SELECT ... INTO creates a table".into()),
        SetExpr::Select(_) | SetExpr::Values(_) | SetExpr::Table(_) => Ok(()),
        SetExpr::Query(query) => query_only(query),
        SetExpr::SetOperation { left, right, .. } => set_only(left).and_then(|()| set_only(right)),
        _ => Err("a data-modifying statement inside the query".into()),
    }
}

/// A SQLite value as JSON.
fn sqlite_json(value: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => json!(n),
        ValueRef::Real(x) => json!(x),
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => json!({"blob_bytes": b.len()}),
    }
}

/// Opens `path` read-only, with `query_only` on, and runs `work` with it on a blocking thread,
/// interrupted at `timeout`.
async fn with_sqlite<T: Send + 'static>(
    path: std::path::PathBuf,
    timeout: Duration,
    work: impl FnOnce(&rusqlite::Connection) -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = rusqlite::Connection::open_with_flags(&path, flags)
        .map_err(|e| (format!("cannot open the database: {e}"), "connection"))?;
    conn.pragma_update(None, "query_only", true)
        .map_err(|e| (format!("cannot make it read-only: {e}"), "connection"))?;
    let interrupt = conn.get_interrupt_handle();
    let job = tokio::task::spawn_blocking(move || work(&conn));
    match tokio::time::timeout(timeout, job).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err((format!("the query stopped: {e}"), "internal")),
        Err(_) => {
            interrupt.interrupt();
            Err((format!("the query ran longer than {} ms", timeout.as_millis()), "timeout"))
        }
    }
}

async fn sqlite_query(path: std::path::PathBuf, sql: String, max: u32, timeout: Duration) -> Result<Value, Failure> {
    with_sqlite(path, timeout, move |conn| {
        let failed = |e: rusqlite::Error| (format!("the database refused the query: {e}"), "sql_error");
        let mut statement = conn.prepare(&sql).map_err(failed)?;
        if !statement.readonly() {
            return Err(("SQLite says this statement writes".into(), "refused"));
        }
        let columns: Vec<String> = statement.column_names().into_iter().map(str::to_owned).collect();
        let mut rows = statement.query([]).map_err(failed)?;
        let (mut out, mut truncated) = (Vec::new(), false);
        while let Some(row) = rows.next().map_err(failed)? {
            if out.len() == max as usize {
                truncated = true;
                break;
            }
            let mut object = Map::new();
            for (i, name) in columns.iter().enumerate() {
                object.insert(name.clone(), row.get_ref(i).map(sqlite_json).unwrap_or(Value::Null));
            }
            out.push(Value::Object(object));
        }
        Ok(json!({"columns": columns, "rows": out, "row_count": out.len(), "truncated": truncated}))
    })
    .await
}

async fn sqlite_schema(path: std::path::PathBuf, timeout: Duration) -> Result<Value, Failure> {
    with_sqlite(path, timeout, |conn| {
        let failed = |e: rusqlite::Error| (format!("cannot read the schema: {e}"), "sql_error");
        let mut tables = conn
            .prepare("SELECT type, name, sql FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name")
            .map_err(failed)?;
        let found: Vec<(String, String, Option<String>)> = tables
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(failed)?
            .collect::<Result<_, _>>()
            .map_err(failed)?;
        let mut out = Vec::new();
        for (kind, name, sql) in found {
            let mut info = conn.prepare("SELECT name, type, pk FROM pragma_table_info(?1)").map_err(failed)?;
            let columns: Vec<Value> = info
                .query_map([&name], |r| {
                    Ok(json!({"name": r.get::<_, String>(0)?, "type": r.get::<_, String>(1)?, "primary_key": r.get::<_, i64>(2)? > 0}))
                })
                .map_err(failed)?
                .collect::<Result<_, _>>()
                .map_err(failed)?;
            // The CREATE statement keeps the author's `--` comments: the schema's descriptions.
            out.push(json!({"name": name, "kind": kind, "columns": columns, "definition": sql}));
        }
        Ok(json!({"dialect": "sqlite", "tables": out}))
    })
    .await
}

/// A read-only transaction on a new connection, its statements bounded by `timeout`.
async fn postgres(url: &str, timeout: Duration) -> Result<tokio_postgres::Client, Failure> {
    let connect = tokio_postgres::connect(url, tokio_postgres::NoTls);
    let (client, connection) = match tokio::time::timeout(Duration::from_secs(10), connect).await {
        Ok(Ok(connected)) => connected,
        // The error never carries the URL (it may hold a password).
        Ok(Err(e)) => return Err((format!("cannot connect to the database: {e}"), "connection")),
        Err(_) => return Err(("cannot connect to the database: no answer within 10 s".into(), "connection")),
    };
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("database connection closed: {e}");
        }
    });
    let begin = format!("BEGIN READ ONLY; SET LOCAL statement_timeout = {}", timeout.as_millis().max(1));
    client
        .batch_execute(&begin)
        .await
        .map_err(|e| (format!("cannot start a read-only transaction: {e}"), "connection"))?;
    Ok(client)
}

/// The rows of `messages` as JSON objects (values as PostgreSQL's text), and the columns.
fn rows(messages: Vec<tokio_postgres::SimpleQueryMessage>) -> (Vec<String>, Vec<Value>) {
    let (mut columns, mut out) = (Vec::new(), Vec::new());
    for message in messages {
        match message {
            tokio_postgres::SimpleQueryMessage::RowDescription(description) => {
                columns = description.iter().map(|c| c.name().to_owned()).collect();
            }
            tokio_postgres::SimpleQueryMessage::Row(row) => {
                let mut object = Map::new();
                for (i, column) in row.columns().iter().enumerate() {
                    let value = row.get(i).map_or(Value::Null, |v| Value::String(v.to_owned()));
                    object.insert(column.name().to_owned(), value);
                }
                if columns.is_empty() {
                    columns = row.columns().iter().map(|c| c.name().to_owned()).collect();
                }
                out.push(Value::Object(object));
            }
            _ => {}
        }
    }
    (columns, out)
}

fn sql_error(e: tokio_postgres::Error) -> Failure {
    let timeout = e.code() == Some(&tokio_postgres::error::SqlState::QUERY_CANCELED);
    let message = e.as_db_error().map_or_else(|| e.to_string(), |db| db.message().to_owned());
    if timeout {
        (format!("the query ran too long: {message}"), "timeout")
    } else {
        (format!("the database refused the query: {message}"), "sql_error")
    }
}

async fn postgres_query(url: &str, sql: &str, max: u32, timeout: Duration) -> Result<Value, Failure> {
    let work = async {
        let client = postgres(url, timeout).await?;
        client
            .batch_execute(&format!("DECLARE skillhost_query NO SCROLL CURSOR FOR {sql}\n"))
            .await
            .map_err(sql_error)?;
        let fetched =
            client.simple_query(&format!("FETCH {} FROM skillhost_query", max + 1)).await.map_err(sql_error)?;
        let _ = client.batch_execute("ROLLBACK").await;
        let (columns, mut rows) = rows(fetched);
        let truncated = rows.len() > max as usize;
        rows.truncate(max as usize);
        Ok(json!({"columns": columns, "row_count": rows.len(), "rows": rows, "truncated": truncated}))
    };
    bounded(work, timeout).await
}

async fn postgres_schema(url: &str, timeout: Duration) -> Result<Value, Failure> {
    let work = async {
        let client = postgres(url, timeout).await?;
        let sql = "SELECT c.table_schema, c.table_name, c.column_name, c.data_type, \
                   col_description(format('%I.%I', c.table_schema, c.table_name)::regclass, c.ordinal_position::int), \
                   obj_description(format('%I.%I', c.table_schema, c.table_name)::regclass, 'pg_class') \
                   FROM information_schema.columns c \
                   WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') \
                   ORDER BY c.table_schema, c.table_name, c.ordinal_position";
        let messages = client.simple_query(sql).await.map_err(sql_error)?;
        let _ = client.batch_execute("ROLLBACK").await;
        let mut tables: Vec<Value> = Vec::new();
        for message in messages {
            let tokio_postgres::SimpleQueryMessage::Row(row) = message else { continue };
            let text = |i: usize| row.get(i).map(str::to_owned);
            let name = format!("{}.{}", text(0).unwrap_or_default(), text(1).unwrap_or_default());
            if tables.last().is_none_or(|t| t["name"] != name.as_str()) {
                tables.push(json!({"name": name, "comment": text(5), "columns": []}));
            }
            let column = json!({"name": text(2), "type": text(3), "comment": text(4)});
            if let Some(columns) = tables.last_mut().and_then(|t| t["columns"].as_array_mut()) {
                columns.push(column);
            }
        }
        Ok(json!({"dialect": "postgresql", "tables": tables}))
    };
    bounded(work, timeout).await
}

/// `work`, given a little longer than the server's own `statement_timeout` to say so.
async fn bounded(work: impl Future<Output = Result<Value, Failure>>, timeout: Duration) -> Result<Value, Failure> {
    match tokio::time::timeout(timeout + Duration::from_secs(5), work).await {
        Ok(result) => result,
        Err(_) => Err((format!("the query ran longer than {} ms", timeout.as_millis()), "timeout")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_read_only_query_passes_the_parser() {
        let pg = PostgreSqlDialect {};
        for sql in [
            "SELECT 1",
            "select * from t where a = 'x;y';",
            "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
            "SELECT 1 UNION SELECT 2",
            "VALUES (1), (2)",
        ] {
            assert!(read_only(sql, &pg).is_ok(), "{sql}: {:?}", read_only(sql, &pg));
        }
        assert_eq!(read_only("SELECT 1;  ", &pg).unwrap(), "SELECT 1");
        for sql in [
            "DELETE FROM t",
            "SELECT 1; DROP TABLE t",
            "WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d",
            "SELECT * INTO copy FROM t",
            "SELECT * FROM t FOR UPDATE",
            "COPY t TO '/tmp/x'",
            "UPDATE t SET a = 1",
            "CREATE TABLE x (a int)",
            "",
        ] {
            let err = read_only(sql, &pg).unwrap_err();
            assert!(matches!(err.1, "refused" | "invalid_sql"), "{sql}: {err:?}");
        }
        let sqlite = SQLiteDialect {};
        assert!(read_only("PRAGMA writable_schema = ON", &sqlite).is_err());
        assert!(read_only("ATTACH DATABASE 'x.db' AS x", &sqlite).is_err());
        assert!(read_only("SELECT name FROM sqlite_schema", &sqlite).is_ok());
    }
}

//! `memory`: files under the memory root, for skills granted it.

use crate::sandbox::bindings::skillhost::skill::memory::{Error, Host, SearchHit, WriteMode};
use crate::sandbox::host_state::HostState;
use crate::store::{MemoryError, MemoryStore};

fn convert(e: MemoryError) -> Error {
    match e {
        MemoryError::InvalidPath { .. } => Error::InvalidPath(e.to_string()),
        MemoryError::InvalidJson { .. } => Error::InvalidJson(e.to_string()),
        MemoryError::TooLarge => Error::TooLarge,
        MemoryError::QuotaExceeded(_) => Error::TooLarge,
        MemoryError::Io(m) => Error::Other(m),
    }
}

impl HostState {
    fn memory(&self) -> Result<&MemoryStore, Error> {
        self.caps.memory.as_ref().ok_or(Error::Denied)
    }
}

impl Host for HostState {
    async fn read(&mut self, path: String) -> Result<Option<String>, Error> {
        self.memory()?.read(&path).await.map_err(convert)
    }

    /// Bounded by the skill's memory quota (`memory_quota_mb`, `memory_quota_files`). The
    /// WIT's `too-large` carries no text, so a quota refusal is also logged, naming the limit.
    async fn write(&mut self, path: String, content: String, mode: WriteMode) -> Result<(), Error> {
        let append = matches!(mode, WriteMode::Append);
        let quota = self.limits.memory_quota();
        let result = self.memory()?.write_within(&path, &content, append, &quota).await;
        if let Err(MemoryError::QuotaExceeded(why)) = &result {
            tracing::warn!(skill = %self.caps.skill, "memory write refused: {why}");
        }
        result.map_err(convert)
    }

    async fn read_json(&mut self, path: String) -> Result<Option<String>, Error> {
        self.memory()?.read_json(&path).await.map_err(convert)
    }

    async fn search(&mut self, query: String) -> Result<Vec<SearchHit>, Error> {
        let hits = self.memory()?.search(&query).await.map_err(convert)?;
        Ok(hits.into_iter().map(|h| SearchHit { path: h.path, line: h.line, text: h.text }).collect())
    }
}

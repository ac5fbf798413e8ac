//! The daily reflection (`learning.reflection`): after a turn, a background LLM call sums up
//! the exchange in a few lines and appends it to `daily/YYYY-MM-DD.md` (UTC date) under the
//! memory root, the file starting with a `# YYYY-MM-DD` heading.
//!
//! It runs on its own task so it never delays the answer; a failure is only logged, since a
//! missing diary entry harms nobody.

use super::round::ToolCallRecord;
use crate::llm::{Message, Provider, Request, ToolChoice};
use crate::store::MemoryStore;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The summariser's instructions.
pub const SYSTEM: &str = "You keep an assistant's work diary. Summarise the exchange below in two to four short \
lines of plain text: what the user wanted, what was done or found, and anything worth remembering next time. \
No preamble.";
/// The most output tokens a reflection may use.
const MAX_TOKENS: u32 = 400;
/// How long the summariser may take before the entry is given up.
const TIMEOUT: Duration = Duration::from_secs(120);
/// The most characters of the message and of the answer shown to the summariser.
const MAX_CHARS: usize = 8_000;

/// One finished exchange to reflect on.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The channel it happened on.
    pub channel_id: String,
    /// The user's message.
    pub message: String,
    /// The final answer.
    pub answer: String,
    /// The prefixed names of the tools that ran, in call order.
    pub tools: Vec<String>,
}

impl Exchange {
    /// The exchange of a finished turn.
    pub fn new(channel_id: &str, message: &str, answer: &str, calls: &[ToolCallRecord]) -> Self {
        Exchange {
            channel_id: channel_id.to_owned(),
            message: message.to_owned(),
            answer: answer.to_owned(),
            tools: calls.iter().filter(|r| r.executed).map(|r| r.tool_name.clone()).collect(),
        }
    }
}

/// Starts the reflection on its own task; the handle lets callers (tests, shutdown) wait.
pub fn spawn(
    provider: Arc<dyn Provider>,
    model: String,
    memory: MemoryStore,
    exchange: Exchange,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        match tokio::time::timeout(TIMEOUT, reflect(provider.as_ref(), &model, &memory, &exchange)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(channel = %exchange.channel_id, "reflection failed: {e}"),
            Err(_) => tracing::warn!(channel = %exchange.channel_id, "reflection timed out"),
        }
    })
}

async fn reflect(
    provider: &dyn Provider,
    model: &str,
    memory: &MemoryStore,
    exchange: &Exchange,
) -> Result<(), String> {
    let request = Request {
        model: model.to_owned(),
        system: SYSTEM.to_owned(),
        messages: vec![Message::user(prompt(exchange))],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: MAX_TOKENS,
    };
    let summary = provider.complete(&request, &mut |_| {}).await.map_err(|e| e.to_string())?.text();
    let summary = summary.trim();
    if summary.is_empty() {
        return Err("the model returned an empty summary".into());
    }
    let date = utc_date(SystemTime::now());
    let path = format!("daily/{date}.md");
    // Reflections of concurrent turns must not both see a missing file and both write the heading.
    // (Of this process: replicas sharing memory on PostgreSQL may each write one.)
    static APPEND: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _append = APPEND.lock().await;
    let exists = memory.read(&path).await.map_err(|e| e.to_string())?.is_some();
    let heading = if exists { String::new() } else { format!("# {date}\n") };
    let entry = format!("{heading}\n## {}\n\n{summary}\n", exchange.channel_id);
    memory.write(&path, &entry, true).await.map_err(|e| e.to_string())
}

fn prompt(exchange: &Exchange) -> String {
    let clip = |s: &str| s.chars().take(MAX_CHARS).collect::<String>();
    let tools = if exchange.tools.is_empty() { "none".to_owned() } else { exchange.tools.join(", ") };
    format!("User:\n{}\n\nTools used: {tools}\n\nAssistant:\n{}", clip(&exchange.message), clip(&exchange.answer))
}

/// `YYYY-MM-DD` of `time` in UTC (days-to-civil, proleptic Gregorian), so no date crate is
/// needed for one file name.
pub fn utc_date(time: SystemTime) -> String {
    let days = (time.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() / 86_400) as i64;
    let (year, month, day) = crate::tools::temporal::time::civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_in_utc() {
        let at = |secs: u64| utc_date(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01");
        assert_eq!(at(951_782_400), "2000-02-29");
        assert_eq!(at(1_764_547_199), "2025-11-30");
        assert_eq!(at(1_764_547_200), "2025-12-01");
    }
}

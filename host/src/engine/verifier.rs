//! The post-turn fact check (`VERIFY` skills, `verifier.model`): a second LLM call compares
//! the final answer with the tool results of the turn, and a contradiction is flagged in the
//! answer with `⚠️`.
//!
//! The checker must reply with a first line that is exactly `OK` or
//! `CONTRADICTION: <short explanation>`; anything else is a failed check. A failed check
//! (LLM error, timeout, unparseable reply) leaves the answer as it was: the check is an extra
//! safeguard, and a broken checker must not break or delay answers more than its timeout.

use super::round::ToolCallRecord;
use crate::llm::{Block, Message, Provider, Request, Role, ToolChoice};
use std::time::Duration;

/// The checker's instructions.
pub const SYSTEM: &str = "You are a fact checker. You get an assistant's answer and the raw results of the tools \
the assistant called while writing it. Decide whether the answer contradicts the tool results numerically or \
factually (wrong counts, sizes, versions, costs, names, states). Omissions and rounding that keeps the meaning are \
not contradictions. Reply with exactly one line: `OK` if there is no contradiction, or \
`CONTRADICTION: <one short sentence saying what the tools actually returned>`.";
/// The prefix of an annotated answer.
pub const WARNING: &str = "⚠️ ";
/// The most output tokens the checker may use; its reply is one line.
const MAX_TOKENS: u32 = 300;
/// The most characters of one tool result shown to the checker, to bound the request.
const MAX_RESULT_CHARS: usize = 20_000;

/// The checker's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No contradiction found.
    Ok,
    /// A contradiction, with the checker's explanation.
    Contradiction(String),
}

/// Whether the turn called (and ran) a tool of a skill that opted into verification. Refused
/// calls are not counted: they returned nothing the answer could contradict.
pub fn needed(records: &[ToolCallRecord]) -> bool {
    records.iter().any(|r| r.executed && r.verify)
}

/// Reads the checker's reply: its first non-empty line must be `OK` or
/// `CONTRADICTION: <explanation>` (case-insensitive keyword, surrounding backticks and
/// spaces tolerated). `None` when it is neither.
pub fn parse(reply: &str) -> Option<Verdict> {
    let line = reply.lines().map(|l| l.trim().trim_matches('`').trim()).find(|l| !l.is_empty())?;
    if line.eq_ignore_ascii_case("ok") || line.eq_ignore_ascii_case("ok.") {
        return Some(Verdict::Ok);
    }
    let (keyword, explanation) = line.split_once(':')?;
    let explanation = explanation.trim();
    (keyword.trim().eq_ignore_ascii_case("contradiction") && !explanation.is_empty())
        .then(|| Verdict::Contradiction(explanation.to_owned()))
}

/// The answer with the contradiction flagged in front of it.
pub fn annotate(answer: &str, explanation: &str) -> String {
    format!("{WARNING}{explanation}\n\n{answer}")
}

/// Replaces the text of the last assistant message (the answer) with `text`, where its first
/// text block was, so the persisted history carries the annotation.
pub(crate) fn replace_answer(messages: &mut [Message], text: &str) {
    let Some(last) = messages.iter_mut().rev().find(|m| m.role == Role::Assistant) else { return };
    let at = last.content.iter().position(|b| matches!(b, Block::Text(_))).unwrap_or(0);
    last.content.retain(|b| !matches!(b, Block::Text(_)));
    last.content.insert(at.min(last.content.len()), Block::Text(text.to_owned()));
}

/// The checker's user message: the tool calls with their results, then the answer.
pub fn prompt(answer: &str, records: &[ToolCallRecord]) -> String {
    let mut text = String::from("Tool results of this turn:\n");
    for r in records.iter().filter(|r| r.executed) {
        let content: String = r.outcome.content.chars().take(MAX_RESULT_CHARS).collect();
        let status = if r.outcome.is_error { " (error)" } else { "" };
        text.push_str(&format!("\n### {} {}{status}\n{content}\n", r.tool_name, r.input));
    }
    text.push_str(&format!("\nThe assistant's answer:\n\n{answer}\n\nReply with `OK` or `CONTRADICTION: ...`."));
    text
}

/// Checks `answer` and returns it, annotated when the checker finds a contradiction and
/// unchanged (with a warning logged) when the check fails.
pub async fn check(
    provider: &dyn Provider,
    model: &str,
    timeout: Duration,
    answer: String,
    records: &[ToolCallRecord],
) -> String {
    let request = Request {
        model: model.to_owned(),
        system: SYSTEM.to_owned(),
        messages: vec![Message::user(prompt(&answer, records))],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: MAX_TOKENS,
    };
    // The checker's text is not the answer: it must not reach the person's stream.
    let mut sink = |_| {};
    let reply = match tokio::time::timeout(timeout, provider.complete(&request, &mut sink)).await {
        Ok(Ok(response)) => response.text(),
        Ok(Err(e)) => {
            tracing::warn!("verifier request failed ({e}); answer left unchecked");
            return answer;
        }
        Err(_) => {
            tracing::warn!("verifier timed out after {} s; answer left unchecked", timeout.as_secs());
            return answer;
        }
    };
    match parse(&reply) {
        Some(Verdict::Ok) => answer,
        Some(Verdict::Contradiction(explanation)) => {
            tracing::info!("verifier found a contradiction: {explanation}");
            annotate(&answer, &explanation)
        }
        None => {
            tracing::warn!(reply = %reply.chars().take(200).collect::<String>(), "verifier reply unreadable; answer left unchecked");
            answer
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_two_verdicts() {
        assert_eq!(parse("OK"), Some(Verdict::Ok));
        assert_eq!(parse("\n `ok` \nmore"), Some(Verdict::Ok));
        let c = parse("CONTRADICTION: the tool said 3 pods, not 5\nextra");
        assert_eq!(c, Some(Verdict::Contradiction("the tool said 3 pods, not 5".into())));
        assert_eq!(parse("contradiction : x"), Some(Verdict::Contradiction("x".into())));
    }

    #[test]
    fn rejects_anything_else() {
        for reply in ["", "Looks fine to me", "CONTRADICTION:", "CONTRADICTION", "OKAY", "Note: fine"] {
            assert_eq!(parse(reply), None, "{reply:?}");
        }
    }

    #[test]
    fn annotation_leads_with_the_warning() {
        assert_eq!(annotate("5 pods.", "3 pods"), "⚠️ 3 pods\n\n5 pods.");
    }
}

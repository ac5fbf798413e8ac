//! `human__ask`, the question tool the interactive adapters offer for a turn (the API stream,
//! a chat thread): its declaration, its input checked, and its result from the resolution.

use crate::broker::Outcome as Resolution;
use crate::engine::Counterpart;
use crate::llm::ToolDecl;
use crate::tools::{ToolInfo, ToolOutcome};
use serde_json::{Value, json};
use std::time::Duration;

/// The question tool's name.
pub const ASK_TOOL: &str = "human__ask";
const MAX_QUESTION: usize = 2000;
const MAX_CHOICES: usize = 20;
const MAX_CHOICE: usize = 200;

/// What the model sees of `human__ask`.
pub fn decl() -> ToolDecl {
    let input_schema = json!({
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question, in one or two sentences."},
            "choices": {"type": "array", "items": {"type": "string"}, "description": "Suggested answers, if any."},
            "schema": {"type": "object", "description": "A JSON Schema the answer must fit, when you need structured input (the answer then comes back as JSON)."}
        },
        "required": ["question"]
    });
    let description = "Ask the person who started this request a question and wait for the answer. \
Use it only when you cannot proceed without their input.";
    ToolDecl { name: ASK_TOOL.into(), description: description.into(), input_schema: input_schema.into() }
}

/// Its info: answered by a person (never gated, never promoted).
pub fn info(name: &str) -> Option<ToolInfo> {
    (name == ASK_TOOL).then(|| ToolInfo { answered_by_person: true, ..ToolInfo::default() })
}

/// A question as the model asked it, checked.
#[derive(Debug, PartialEq)]
pub struct Asked {
    /// The question.
    pub prompt: String,
    /// Suggested answers.
    pub choices: Vec<String>,
    /// The JSON schema the answer must fit.
    pub schema: Option<Value>,
}

/// Why `human__ask` cannot ask with the input it was given.
#[derive(Debug, thiserror::Error)]
enum AskError {
    /// No question, or too long a one.
    #[error("`question` must be a string of 1 to {MAX_QUESTION} characters")]
    Question,
    /// A choice that is not a short string.
    #[error("each of `choices` must be a string of 1 to {MAX_CHOICE} characters")]
    Choice,
    /// Choices that are not a short list.
    #[error("`choices` must be an array of at most {MAX_CHOICES} strings")]
    Choices,
    /// A schema the broker's forms do not take.
    #[error(transparent)]
    Schema(#[from] crate::broker::form::FormError),
}

/// The question, its choices and its schema, checked.
fn question(input: &Value) -> Result<Asked, AskError> {
    let prompt = input.get("question").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    if prompt.is_empty() || prompt.chars().count() > MAX_QUESTION {
        return Err(AskError::Question);
    }
    let choices = match input.get("choices") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.len() <= MAX_CHOICES => items
            .iter()
            .map(|c| c.as_str().filter(|s| !s.is_empty() && s.chars().count() <= MAX_CHOICE).map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or(AskError::Choice)?,
        Some(_) => return Err(AskError::Choices),
    };
    let schema = match input.get("schema") {
        None | Some(Value::Null) => None,
        Some(schema) => {
            crate::broker::form::check(schema)?;
            Some(schema.clone())
        }
    };
    Ok(Asked { prompt: prompt.to_owned(), choices, schema })
}

/// An input the question could not be asked with.
fn invalid(problem: String, duration: Duration) -> ToolOutcome {
    ToolOutcome::error(&json!({"error": problem, "kind": "invalid_input"}), duration)
}

/// The tool's result for how the question ended, `timeout` being how long it waited.
/// (`form`: the question had a schema).
fn outcome(resolution: Resolution, duration: Duration, timeout: Duration, form: bool) -> ToolOutcome {
    match resolution {
        // A form's answer is JSON (the broker checked it against the schema).
        Resolution::Answered(answer) if form => {
            let answer = serde_json::from_str::<Value>(&answer).unwrap_or(Value::String(answer));
            ToolOutcome::text(json!({ "answer": answer }).to_string(), duration)
        }
        Resolution::Answered(answer) => ToolOutcome::text(json!({ "answer": answer }).to_string(), duration),
        Resolution::TimedOut => ToolOutcome::error(
            &json!({"error": format!("nobody answered within {} s", timeout.as_secs()), "kind": "question_timeout"}),
            duration,
        ),
        _ => ToolOutcome::error(&json!({"error": "the question was cancelled", "kind": "cancelled"}), duration),
    }
}

/// Runs one `human__ask` call: checks `input`, asks through `ask` (the adapter's own way,
/// which waits at most `timeout`) inside a `question` span (the adapter, the number of
/// choices, the outcome and the wait), and makes the tool's result.
pub async fn run<F>(
    adapter: &'static str,
    input: &Value,
    timeout: Duration,
    ask: impl FnOnce(Asked) -> F,
) -> ToolOutcome
where
    F: std::future::Future<Output = Option<Resolution>>,
{
    use tracing::Instrument as _;
    let started = std::time::Instant::now();
    let asked = match question(input) {
        Ok(q) => q,
        Err(problem) => return invalid(problem.to_string(), started.elapsed()),
    };
    let form = asked.schema.is_some();
    let span = tracing::info_span!(
        "question",
        otel.name = "question",
        skillhost.adapter = adapter,
        skillhost.question.choices = asked.choices.len(),
        skillhost.question.form = form,
        skillhost.question.outcome = tracing::field::Empty,
        skillhost.question.wait_ms = tracing::field::Empty,
    );
    let resolution = ask(asked).instrument(span.clone()).await;
    let waited = started.elapsed();
    span.record("skillhost.question.wait_ms", waited.as_millis() as u64);
    span.record("skillhost.question.outcome", resolution.as_ref().map_or("unavailable", Resolution::name));
    match resolution {
        Some(resolution) => outcome(resolution, waited, timeout, form),
        None => no_id(waited),
    }
}

/// Puts a question to the person at `counterpart`'s desk (the broker), waiting at most
/// `timeout`; `checkpoint`: the turn written down, when the wait can be resumed elsewhere.
/// `None` when the counterpart has no desk.
pub async fn put(
    counterpart: &dyn Counterpart,
    asked: &Asked,
    timeout: Duration,
    checkpoint: Option<String>,
    opened: Option<&(dyn Fn() -> Option<String> + Send + Sync)>,
) -> Option<Resolution> {
    let desk = counterpart.desk()?;
    let Asked { prompt, choices, schema } = asked;
    let schema = schema.as_ref();
    let question = crate::engine::desk::Question { prompt, choices, schema, timeout, checkpoint, opened };
    Some(crate::engine::desk::question(&desk, counterpart, question).await)
}

/// Nobody can be asked here (the counterpart has no desk).
fn no_id(duration: Duration) -> ToolOutcome {
    ToolOutcome::error(&json!({"error": "nobody can answer a question here", "kind": "cancelled"}), duration)
}

#[cfg(test)]
mod tests {
    use super::question;
    use serde_json::json;

    #[test]
    fn questions_are_checked() {
        let asked = question(&json!({"question": " Which? "})).unwrap();
        assert_eq!((asked.prompt.as_str(), asked.choices.len(), asked.schema), ("Which?", 0, None));
        assert_eq!(question(&json!({"question": "Which?", "choices": ["a"]})).unwrap().choices, ["a"]);
        let form = json!({"question": "How many?", "schema": {"type": "integer", "minimum": 1}});
        assert_eq!(question(&form).unwrap().schema, Some(json!({"type": "integer", "minimum": 1})));
        assert!(question(&json!({"question": "q", "schema": {"type": 5}})).unwrap_err().to_string().contains("schema"));
        assert!(question(&json!({"question": "q", "schema": "integer"})).is_err());
        assert!(question(&json!({"question": ""})).is_err());
        assert!(question(&json!({"question": 3})).is_err());
        assert!(question(&json!({"question": "q", "choices": "a"})).is_err());
        assert!(question(&json!({"question": "q", "choices": [1]})).is_err());
    }
}

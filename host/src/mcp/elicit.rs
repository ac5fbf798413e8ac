//! A server's `elicitation/create` as questions to a person: the form's fields are asked one
//! at a time through whatever [`Person`] the call runs for (the terminal, the API's
//! `question_requested`), and the answers become the `accept` content. The person declines by
//! answering `decline`; a question nobody answers (cancelled, timed out) cancels the form;
//! where nobody can be asked at all the form is declined.
//!
//! An empty answer, or [`KEEP`], takes the field's default (an optional field without one is
//! left out), so a person (or the conformance harness) can accept the server's defaults
//! quickly; `KEEP` is there for adapters that refuse empty answers (the API).

use crate::person::{Answer, Person, Question};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};

/// The answer that declines the whole form, whatever the field.
pub const DECLINE: &str = "decline";
/// The answer that takes the field's default, like an empty one.
pub const KEEP: &str = "-";
/// How often one field is asked again after an answer that does not fit it.
const ATTEMPTS: usize = 3;

/// Runs one elicitation from `server` through `person`.
pub async fn elicit(server: &str, params: ElicitRequestParams, person: &dyn Person) -> ElicitResult {
    let (message, schema) = match params {
        ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
            (message, serde_json::to_value(requested_schema).unwrap_or_default())
        }
        // Only form mode is declared; a URL request is refused rather than opened.
        _ => return ElicitResult::new(ElicitationAction::Decline),
    };
    form(&format!("MCP server `{server}` asks: {message}"), &schema, person).await
}

/// Asks the form of `schema` (an object schema) through `person`, field by field, each
/// question opening with `context`.
pub async fn form(context: &str, schema: &Value, person: &dyn Person) -> ElicitResult {
    let fields = fields(schema);
    if fields.is_empty() {
        let question =
            Question { prompt: format!("{context}\nAccept?"), choices: vec!["accept".into(), DECLINE.into()] };
        return match person.ask(question).await {
            Answer::Answered(a) if a.trim().eq_ignore_ascii_case(DECLINE) => {
                ElicitResult::new(ElicitationAction::Decline)
            }
            Answer::Answered(_) => ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(Map::new())),
            other => unanswered(other),
        };
    }
    let mut content = Map::new();
    for field in &fields {
        match ask_field(context, field, person).await {
            Ok(Some(value)) => {
                content.insert(field.name.clone(), value);
            }
            Ok(None) => {}
            Err(result) => return result,
        }
    }
    ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
}

/// The result when a question got no answer: declined where nobody can be asked, else cancelled.
fn unanswered(answer: Answer) -> ElicitResult {
    match answer {
        Answer::Unavailable(_) => ElicitResult::new(ElicitationAction::Decline),
        _ => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// One field of the form, as the person is asked it.
#[derive(Debug, Clone)]
struct Field {
    name: String,
    schema: Value,
    required: bool,
}

fn fields(schema: &Value) -> Vec<Field> {
    let required: Vec<&str> =
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return Vec::new() };
    properties
        .iter()
        .map(|(name, s)| Field { name: name.clone(), schema: s.clone(), required: required.contains(&name.as_str()) })
        .collect()
}

/// Asks for one field until the answer fits (at most [`ATTEMPTS`] times). `Ok(None)`: left out.
async fn ask_field(context: &str, field: &Field, person: &dyn Person) -> Result<Option<Value>, ElicitResult> {
    let choices = choices(&field.schema);
    let mut problem = String::new();
    for _ in 0..ATTEMPTS {
        let question =
            Question { prompt: format!("{context}\n{problem}{}", describe(field)), choices: choices.clone() };
        let answer = match person.ask(question).await {
            Answer::Answered(answer) => answer,
            other => return Err(unanswered(other)),
        };
        let answer = answer.trim();
        if answer.eq_ignore_ascii_case(DECLINE) {
            return Err(ElicitResult::new(ElicitationAction::Decline));
        }
        match parse(field, answer) {
            Ok(value) => return Ok(value),
            Err(why) => problem = format!("({why}) "),
        }
    }
    Err(ElicitResult::new(ElicitationAction::Cancel))
}

/// The field's line of the question: name or title, description, default, how to decline.
fn describe(field: &Field) -> String {
    let s = &field.schema;
    let label = s.get("title").and_then(Value::as_str).unwrap_or(&field.name);
    let mut line = format!("{label} ({})", kind(s));
    if let Some(description) = s.get("description").and_then(Value::as_str) {
        line.push_str(&format!(": {description}"));
    }
    match s.get("default") {
        Some(default) => line.push_str(&format!(" [`{KEEP}` or empty: {default}]")),
        None if !field.required => line.push_str(&format!(" [optional: `{KEEP}` or empty leaves it out]")),
        None => {}
    }
    line.push_str(&format!(" (answer `{DECLINE}` to refuse)"));
    line
}

fn kind(schema: &Value) -> &str {
    match schema.get("type").and_then(Value::as_str) {
        Some("array") => "one or more, comma-separated",
        Some("boolean") => "yes or no",
        Some(kind) => kind,
        None => "text",
    }
}

/// The allowed values of an enum field (plain, titled `oneOf`/`anyOf`, or multi-select items).
fn choices(schema: &Value) -> Vec<String> {
    let options = schema.get("items").unwrap_or(schema);
    if let Some(values) = options.get("enum").and_then(Value::as_array) {
        return values.iter().map(text).collect();
    }
    let titled = options.get("oneOf").or_else(|| options.get("anyOf")).and_then(Value::as_array);
    if let Some(titled) = titled {
        return titled.iter().filter_map(|o| o.get("const")).map(text).collect();
    }
    if schema.get("type").and_then(Value::as_str) == Some("boolean") {
        return vec!["yes".into(), "no".into()];
    }
    Vec::new()
}

fn text(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

/// The answer as the field's type; `Ok(None)` for an empty answer to an optional field.
fn parse(field: &Field, answer: &str) -> Result<Option<Value>, String> {
    let s = &field.schema;
    if answer.is_empty() || answer == KEEP {
        return match s.get("default") {
            Some(default) => Ok(Some(default.clone())),
            None if !field.required => Ok(None),
            None => Err("an answer is required".into()),
        };
    }
    let allowed = choices(s);
    let value = match s.get("type").and_then(Value::as_str) {
        Some("integer") => {
            answer.parse::<i64>().map(Value::from).map_err(|_| format!("`{answer}` is not an integer"))?
        }
        Some("number") => answer
            .parse::<f64>()
            .ok()
            .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
            .ok_or(format!("`{answer}` is not a number"))?,
        Some("boolean") => match answer.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" => Value::Bool(true),
            "n" | "no" | "false" | "0" => Value::Bool(false),
            _ => return Err(format!("`{answer}` is not yes or no")),
        },
        Some("array") => {
            let items: Vec<String> = answer.split(',').map(|i| i.trim().to_owned()).filter(|i| !i.is_empty()).collect();
            if let Some(bad) = items.iter().find(|i| !allowed.is_empty() && !allowed.contains(i)) {
                return Err(format!("`{bad}` is not one of {}", allowed.join(", ")));
            }
            Value::from(items)
        }
        _ if !allowed.is_empty() && !allowed.iter().any(|c| c == answer) => {
            return Err(format!("`{answer}` is not one of {}", allowed.join(", ")));
        }
        _ => Value::from(answer),
    };
    Ok(Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::person::Nobody;
    use serde_json::json;
    use std::sync::Mutex;

    /// Answers from a script, recording the questions.
    struct Script(Mutex<Vec<Answer>>, Mutex<Vec<Question>>);

    #[async_trait::async_trait]
    impl Person for Script {
        async fn ask(&self, question: Question) -> Answer {
            self.1.lock().unwrap().push(question);
            let mut answers = self.0.lock().unwrap();
            if answers.is_empty() { Answer::Cancelled } else { answers.remove(0) }
        }
    }

    fn script(answers: &[&str]) -> Script {
        Script(Mutex::new(answers.iter().map(|a| Answer::Answered((*a).into())).collect()), Mutex::default())
    }

    fn form(schema: Value) -> ElicitRequestParams {
        serde_json::from_value(json!({"mode": "form", "message": "Who?", "requestedSchema": schema})).unwrap()
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "age": {"type": "integer", "default": 30},
            "name": {"type": "string", "description": "Your name"},
            "ok": {"type": "boolean"},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"}
        }, "required": ["name"]})
    }

    #[tokio::test]
    async fn answers_become_typed_content_and_empty_answers_take_defaults() {
        let person = script(&["-", "Ada", "yes", "inactive"]);
        let result = elicit("s", form(schema()), &person).await;
        assert_eq!(result.action, ElicitationAction::Accept);
        assert_eq!(result.content, Some(json!({"age": 30, "name": "Ada", "ok": true, "status": "inactive"})));
        let asked = person.1.lock().unwrap();
        assert!(asked[1].prompt.contains("MCP server `s` asks: Who?") && asked[1].prompt.contains("Your name"));
        assert_eq!(asked[3].choices, ["active", "inactive"]);
    }

    #[tokio::test]
    async fn a_bad_answer_is_asked_again_and_decline_declines() {
        let person = script(&["old", "41", "decline"]);
        let result = elicit("s", form(schema()), &person).await;
        assert_eq!(result.action, ElicitationAction::Decline);
        assert!(person.1.lock().unwrap()[1].prompt.contains("`old` is not an integer"));
    }

    #[tokio::test]
    async fn nobody_declines_and_an_unanswered_question_cancels() {
        assert_eq!(elicit("s", form(schema()), &Nobody).await.action, ElicitationAction::Decline);
        let person = Script(Mutex::new(vec![Answer::TimedOut]), Mutex::default());
        assert_eq!(elicit("s", form(schema()), &person).await.action, ElicitationAction::Cancel);
    }
}

//! Forms: a question whose answer has a JSON schema. The schema travels with the entry's
//! presentation (`question_requested`'s `schema`), and every answer, from any surface, is
//! checked against it here before the decision is taken; what is stored is the answer's
//! JSON text.

use serde_json::Value;

/// The largest schema a question may carry, serialized.
pub const MAX_SCHEMA_BYTES: usize = 8 * 1024;

/// Why a schema or an answer was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormError {
    /// The schema is not a JSON Schema object.
    #[error("`schema` must be a JSON Schema object")]
    NotAnObject,
    /// The schema is too large.
    #[error("`schema` is {0} bytes; at most {MAX_SCHEMA_BYTES}")]
    TooLarge(usize),
    /// The schema does not compile.
    #[error("`schema` is not a valid JSON Schema: {0}")]
    Invalid(String),
    /// The answer does not fit (where, and why).
    #[error("the answer does not fit the question's schema{0}")]
    DoesNotFit(String),
}

/// Checks that `schema` can be a question's: a JSON object, at most [`MAX_SCHEMA_BYTES`], that
/// compiles as a JSON Schema.
pub fn check(schema: &Value) -> Result<(), FormError> {
    if !schema.is_object() {
        return Err(FormError::NotAnObject);
    }
    let size = schema.to_string().len();
    if size > MAX_SCHEMA_BYTES {
        return Err(FormError::TooLarge(size));
    }
    jsonschema::validator_for(schema).map(drop).map_err(|e| FormError::Invalid(e.to_string()))
}

/// The schema of an entry's answer, from its presentation; `None` for a free answer.
pub fn schema_of(presentation: Option<&str>) -> Option<Value> {
    let presentation: Value = serde_json::from_str(presentation?).ok()?;
    presentation.get("schema").filter(|s| s.is_object()).cloned()
}

/// `answer` made to fit `schema`: read as JSON when it is JSON that fits, else as a string
/// (a person typing `blue` for `{"type": "string"}`); the JSON text to store, or why it
/// does not fit.
pub fn conform(schema: &Value, answer: &str) -> Result<String, FormError> {
    let validator = jsonschema::validator_for(schema).map_err(|e| FormError::Invalid(e.to_string()))?;
    let parsed = serde_json::from_str::<Value>(answer).ok();
    let text = Value::String(answer.to_owned());
    let candidates = parsed.iter().chain(std::iter::once(&text));
    let mut first_error = None;
    for candidate in candidates {
        match validator.validate(candidate) {
            Ok(()) => return Ok(candidate.to_string()),
            Err(e) => {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { String::new() } else { format!(" at {at}") };
                first_error.get_or_insert(FormError::DoesNotFit(format!("{at}: {e}")));
            }
        }
    }
    Err(first_error.unwrap_or(FormError::DoesNotFit(String::new())))
}

#[cfg(test)]
mod tests {
    use super::{FormError, check, conform, schema_of};
    use serde_json::json;

    #[test]
    fn a_schema_must_be_an_object_that_compiles_and_is_small() {
        assert!(check(&json!({"type": "object", "properties": {"n": {"type": "integer"}}})).is_ok());
        assert_eq!(check(&json!("string")), Err(FormError::NotAnObject));
        assert!(matches!(check(&json!({"type": 12})), Err(FormError::Invalid(_))));
        let big = json!({"description": "x".repeat(9000)});
        assert!(matches!(check(&big), Err(FormError::TooLarge(_))));
    }

    #[test]
    fn answers_are_read_as_json_else_as_a_string() {
        let object = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        assert_eq!(conform(&object, r#"{"n": 3}"#).unwrap(), r#"{"n":3}"#);
        let refused = conform(&object, r#"{"n": "three"}"#).unwrap_err().to_string();
        assert!(refused.contains("/n"), "{refused}");
        assert!(conform(&object, "three").is_err());
        let string = json!({"type": "string", "enum": ["red", "blue"]});
        assert_eq!(conform(&string, "blue").unwrap(), r#""blue""#);
        assert_eq!(conform(&string, r#""red""#).unwrap(), r#""red""#);
        assert!(conform(&string, "green").is_err());
        // JSON that does not fit, but whose text does: the text.
        assert_eq!(conform(&json!({"type": "string"}), "42").unwrap(), r#""42""#);
        assert_eq!(conform(&json!({"type": "integer"}), "42").unwrap(), "42");
    }

    #[test]
    fn the_schema_comes_from_the_presentation() {
        let presented = json!({"question_id": "q", "schema": {"type": "integer"}}).to_string();
        assert_eq!(schema_of(Some(&presented)), Some(json!({"type": "integer"})));
        assert_eq!(schema_of(Some(r#"{"question_id": "q"}"#)), None);
        assert_eq!(schema_of(None), None);
    }
}

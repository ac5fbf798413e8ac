//! Coverage descriptors of MCP results: `CallToolResult._meta["mithai/coverage"]`, checked
//! with the same bounds as a native tool's `coverage` record. Anything invalid degrades to
//! unverified; only the categorical status and result state ever leave the engine.

use crate::skills::contract as wit;
use crate::tools::coverage::{self, CoverageEntry};
use serde_json::{Map, Value};

/// The `_meta` key of the descriptor (and, on `tools/list`, of the capability flag).
pub const META_KEY: &str = "mithai/coverage";

/// Whether a tool advertises coverage (`_meta: {"mithai/coverage": true}` on `tools/list`).
pub fn advertised(meta: Option<&Map<String, Value>>) -> bool {
    meta.and_then(|m| m.get(META_KEY)) == Some(&Value::Bool(true))
}

/// The coverage entry of one successful result: `None` when the tool neither advertises
/// coverage nor sent a descriptor; unverified when the descriptor is missing or invalid.
pub fn entry(meta: Option<&Map<String, Value>>, advertised: bool) -> Option<CoverageEntry> {
    match meta.and_then(|m| m.get(META_KEY)) {
        Some(descriptor) => Some(match parse(descriptor).as_ref().and_then(coverage::observe) {
            Some(observation) => CoverageEntry::Verified(observation),
            None => CoverageEntry::Unverified,
        }),
        None if advertised => Some(CoverageEntry::Unverified),
        None => None,
    }
}

/// The descriptor as a coverage record, when its shape is right (bounds are checked by
/// [`coverage::observe`]).
pub fn parse(descriptor: &Value) -> Option<wit::Coverage> {
    let object = descriptor.as_object()?;
    if object.get("version") != Some(&Value::from(1)) {
        return None;
    }
    let subject = match object.get("subject") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return None,
    };
    let scope = |key: &str| -> Result<Option<String>, ()> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v @ Value::Object(_)) => Ok(Some(v.to_string())),
            Some(_) => Err(()),
        }
    };
    let (attempted_scope, covered_scope) = (scope("attempted_scope").ok()?, scope("covered_scope").ok()?);
    let status = match object.get("status")?.as_str()? {
        "complete" => wit::CoverageStatus::Complete,
        "partial" => wit::CoverageStatus::Partial,
        _ => return None,
    };
    let result_state = match object.get("result_state")?.as_str()? {
        "data" => wit::ResultState::Data,
        "empty" => wit::ResultState::Empty,
        _ => return None,
    };
    Some(wit::Coverage { subject, attempted_scope, covered_scope, status, result_state })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::coverage::{Observation, ObservedStatus, ResultState};
    use serde_json::json;

    fn meta(descriptor: Value) -> Map<String, Value> {
        json!({ META_KEY: descriptor }).as_object().unwrap().clone()
    }

    fn valid() -> Value {
        json!({"version": 1, "subject": "events", "attempted_scope": {"window": "requested"},
               "covered_scope": {"window": "searched"}, "status": "partial", "result_state": "empty"})
    }

    #[test]
    fn valid_descriptor_keeps_only_categories() {
        let observed = Observation { status: ObservedStatus::Partial, result_state: ResultState::Empty };
        assert_eq!(entry(Some(&meta(valid())), false), Some(CoverageEntry::Verified(observed)));
    }

    #[test]
    fn every_bound_degrades_to_unverified() {
        let broken = [
            ("version", json!(2)),
            ("status", json!("mostly")),
            ("result_state", json!("some")),
            ("subject", json!("s".repeat(129))),
            ("subject", json!(7)),
            ("attempted_scope", json!(["window"])),
            ("covered_scope", json!({"a": {"b": {"c": {"d": {"e": 1}}}}})),
            ("covered_scope", json!({"k": "x".repeat(513)})),
            ("covered_scope", json!({"k".repeat(129): 1})),
            ("covered_scope", Value::Object((0..65).map(|i| (format!("k{i}"), json!(1))).collect())),
            ("covered_scope", json!({"a": (0..130).collect::<Vec<_>>()})),
            ("covered_scope", Value::Object((0..50).map(|i| (format!("k{i}"), json!("x".repeat(100)))).collect())),
        ];
        for (key, value) in broken {
            let mut descriptor = valid();
            descriptor[key] = value;
            assert_eq!(entry(Some(&meta(descriptor)), false), Some(CoverageEntry::Unverified), "{key}");
        }
        assert_eq!(entry(Some(&meta(json!("complete"))), false), Some(CoverageEntry::Unverified));
    }

    #[test]
    fn missing_descriptor_counts_only_when_advertised() {
        assert_eq!(entry(None, false), None);
        assert_eq!(entry(None, true), Some(CoverageEntry::Unverified));
        assert!(advertised(Some(&meta(json!(true)))));
        assert!(!advertised(Some(&meta(json!("yes")))));
    }
}

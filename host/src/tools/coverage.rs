//! The turn's public coverage summary: what the tools that declare coverage said they
//! searched, reduced to categorical `(status, result_state)` pairs.
//!
//! Native tools attach a `coverage` record to their result; MCP servers will feed the same
//! [`CoverageEntry`] list. Raw subjects and scopes are checked here (an invalid descriptor
//! counts as unverified) and never leave this module.

use crate::skills::contract::{self as wit, Coverage};
use serde::Serialize;
use serde_json::Value;

/// One call's valid coverage declaration: only the categorical values survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// `complete` or `partial`.
    pub status: ObservedStatus,
    /// `data` or `empty`.
    pub result_state: ResultState,
}

/// Whether a search covered everything asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservedStatus {
    /// Everything asked for was searched.
    Complete,
    /// Only part of it.
    Partial,
}

/// Whether the searched scope held data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultState {
    /// Data was found.
    Data,
    /// Nothing was found.
    Empty,
}

/// What one coverage-relevant call contributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoverageEntry {
    /// A valid declaration.
    Verified(Observation),
    /// A coverage-capable call without a valid declaration (it did not run, ran without
    /// one, or sent an invalid one).
    Unverified,
}

/// The summary's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SummaryStatus {
    /// Every entry is verified and complete.
    Complete,
    /// Some verified entry, plus a partial declaration or an unverified entry.
    Partial,
    /// Only unverified entries.
    Unknown,
    /// No coverage-relevant entry.
    NotApplicable,
}

/// The public `coverage` object of `wait=true` responses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CoverageSummary {
    /// The overall status.
    pub status: SummaryStatus,
    /// Each distinct `(status, result_state)` pair once, in first-seen order.
    pub observations: Vec<Observation>,
}

/// Reduces a turn's entries to the public summary.
pub fn summarize(entries: &[CoverageEntry]) -> CoverageSummary {
    let mut observations: Vec<Observation> = Vec::new();
    let mut unverified = false;
    for entry in entries {
        match entry {
            CoverageEntry::Verified(o) if !observations.contains(o) => observations.push(*o),
            CoverageEntry::Verified(_) => {}
            CoverageEntry::Unverified => unverified = true,
        }
    }
    let partial = observations.iter().any(|o| o.status == ObservedStatus::Partial);
    let status = match (observations.is_empty(), unverified) {
        (true, false) => SummaryStatus::NotApplicable,
        (true, true) => SummaryStatus::Unknown,
        (false, _) if partial || unverified => SummaryStatus::Partial,
        (false, _) => SummaryStatus::Complete,
    };
    CoverageSummary { status, observations }
}

/// A guest's coverage record, if its bounded fields are valid; `None` degrades to unverified.
pub fn observe(coverage: &Coverage) -> Option<Observation> {
    if coverage.subject.as_ref().is_some_and(|s| s.chars().count() > 128) {
        return None;
    }
    let scopes = [&coverage.attempted_scope, &coverage.covered_scope];
    if !scopes.iter().all(|s| s.as_deref().is_none_or(valid_scope)) {
        return None;
    }
    let status = match coverage.status {
        wit::CoverageStatus::Complete => ObservedStatus::Complete,
        wit::CoverageStatus::Partial => ObservedStatus::Partial,
    };
    let result_state = match coverage.result_state {
        wit::ResultState::Data => ResultState::Data,
        wit::ResultState::Empty => ResultState::Empty,
    };
    Some(Observation { status, result_state })
}

/// The spec's scope bounds: a JSON object, depth 4 (root 0), 64 members per container, 128
/// nodes, keys of 128 characters, strings of 512, 4096 bytes of compact JSON.
pub fn valid_scope(text: &str) -> bool {
    let Ok(value) = serde_json::from_str::<Value>(text) else { return false };
    if !value.is_object() || value.to_string().len() > 4096 {
        return false;
    }
    let mut nodes = 0usize;
    within_bounds(&value, 0, &mut nodes)
}

fn within_bounds(value: &Value, depth: usize, nodes: &mut usize) -> bool {
    *nodes += 1;
    if *nodes > 128 || depth > 4 {
        return false;
    }
    match value {
        Value::String(s) => s.chars().count() <= 512,
        Value::Array(items) => items.len() <= 64 && items.iter().all(|v| within_bounds(v, depth + 1, nodes)),
        Value::Object(map) => {
            map.len() <= 64 && map.iter().all(|(k, v)| k.chars().count() <= 128 && within_bounds(v, depth + 1, nodes))
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CoverageEntry::*;

    fn obs(status: ObservedStatus, result_state: ResultState) -> CoverageEntry {
        Verified(Observation { status, result_state })
    }

    #[test]
    fn no_entries_is_not_applicable() {
        assert_eq!(summarize(&[]), CoverageSummary { status: SummaryStatus::NotApplicable, observations: vec![] });
    }

    #[test]
    fn only_unverified_is_unknown() {
        assert_eq!(summarize(&[Unverified, Unverified]).status, SummaryStatus::Unknown);
    }

    #[test]
    fn complete_needs_every_entry_verified_and_complete() {
        let c = obs(ObservedStatus::Complete, ResultState::Data);
        assert_eq!(summarize(&[c, c]).status, SummaryStatus::Complete);
        assert_eq!(summarize(&[c, Unverified]).status, SummaryStatus::Partial);
        let p = obs(ObservedStatus::Partial, ResultState::Empty);
        assert_eq!(summarize(&[c, p]).status, SummaryStatus::Partial);
    }

    #[test]
    fn observations_are_distinct_pairs_in_order() {
        let a = obs(ObservedStatus::Complete, ResultState::Data);
        let b = obs(ObservedStatus::Partial, ResultState::Empty);
        let summary = summarize(&[a, b, a, Unverified, b]);
        let json = serde_json::to_value(&summary).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"status": "partial", "observations": [
                {"status": "complete", "result_state": "data"},
                {"status": "partial", "result_state": "empty"}
            ]})
        );
    }

    #[test]
    fn scopes_are_bounded() {
        assert!(valid_scope(r#"{"window": "requested"}"#));
        assert!(!valid_scope("[]"));
        assert!(!valid_scope("not json"));
        assert!(!valid_scope(r#"{"a": {"b": {"c": {"d": {"e": 1}}}}}"#));
        assert!(valid_scope(r#"{"a": {"b": {"c": {"d": 1}}}}"#));
        let long = format!(r#"{{"k": "{}"}}"#, "x".repeat(513));
        assert!(!valid_scope(&long));
        let many: serde_json::Map<String, Value> = (0..65).map(|i| (format!("k{i}"), Value::Null)).collect();
        assert!(!valid_scope(&Value::Object(many).to_string()));
    }

    #[test]
    fn invalid_descriptor_is_unverified() {
        let coverage = Coverage {
            subject: Some("s".repeat(129)),
            attempted_scope: None,
            covered_scope: None,
            status: wit::CoverageStatus::Complete,
            result_state: wit::ResultState::Data,
        };
        assert_eq!(observe(&coverage), None);
        let ok = wit::Coverage { subject: Some("events".into()), ..coverage };
        assert_eq!(
            observe(&ok),
            Some(Observation { status: ObservedStatus::Complete, result_state: ResultState::Data })
        );
    }
}

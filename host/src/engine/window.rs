//! The time window a tool call's arguments ask for, as the tool budget's long-range cap reads
//! it: from the arguments' own window fields, and (`long_range_service_name_heuristic`) from
//! spans written into service names.

use crate::tools::temporal::{self, Clock};
use serde_json::Value;

/// The time window a call's arguments ask for, in minutes, when they state one: `*_minutes`,
/// `*_hours`, `*_days` numbers; `lookback`/`window`/`range`/`since`/`duration` strings such as
/// `90m`, `24h`, `7d`, `2w`; or `start`/`end` pairs (also `start_time`/`end_time`,
/// `start_time_iso`/`end_time_iso`, `from`/`to`) of epoch seconds or milliseconds, RFC 3339
/// times or `now-…` (what `engine.temporal_guardrails` writes).
pub fn window_minutes(input: &Value) -> Option<f64> {
    let object = input.as_object()?;
    let mut found: Option<f64> = None;
    let mut keep = |m: f64| found = Some(found.map_or(m, |f| f.max(m)));
    for (key, value) in object {
        let key = key.to_ascii_lowercase();
        let unit = [("minutes", 1.0), ("hours", 60.0), ("days", 1440.0)]
            .into_iter()
            .find(|(u, _)| key == *u || key.ends_with(&format!("_{u}")));
        if let (Some((_, per)), Some(n)) = (unit, value.as_f64()) {
            keep(n * per);
        }
        let spans = ["lookback", "window", "range", "time_range", "since", "duration", "period"];
        if spans.contains(&key.as_str())
            && let Some(m) = value.as_str().and_then(duration_minutes)
        {
            keep(m);
        }
    }
    let now = temporal::SystemClock.now();
    let time = |keys: &[&str]| keys.iter().find_map(|k| temporal::time::instant(object.get(*k), now).ok().flatten());
    let (starts, ends) = (["start", "start_time", "start_time_iso", "from"], ["end", "end_time", "end_time_iso", "to"]);
    if let (Some(start), Some(end)) = (time(&starts), time(&ends)) {
        keep((end - start).abs() as f64 / 60.0);
    }
    found
}

/// Argument names that hold a service's name, for `long_range_service_name_heuristic`.
const SERVICE_KEYS: [&str; 5] = ["service", "service_name", "servicename", "services", "service_names"];

/// The longest time span written into a service-name argument, in minutes: `checkout 7d`,
/// `api-24h`, `payments last 3 days`, `web (past week)`, `auth yesterday`. Models sometimes
/// put the period into the service filter instead of the time arguments.
pub fn service_name_minutes(input: &Value) -> Option<f64> {
    let object = input.as_object()?;
    let values = object.iter().filter(|(k, _)| SERVICE_KEYS.contains(&k.to_ascii_lowercase().as_str()));
    let texts = values.flat_map(|(_, v)| match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    });
    texts.filter_map(phrase_minutes).reduce(f64::max)
}

/// The longest span among the words of `text`: `7d` in one word, `7 days` in two, `last`
/// or `past` before a unit (one of it), or `yesterday` (a day). Words are split at anything
/// but letters and digits, so `k8s` or `v2` never read as spans.
fn phrase_minutes(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let at = |i: usize, number: &str| words.get(i).and_then(|unit| duration_minutes(&format!("{number}{unit}")));
    let spans = words.iter().enumerate().filter_map(|(i, word)| match *word {
        "yesterday" => Some(1440.0),
        "last" | "past" => at(i + 1, "1"),
        _ if word.bytes().all(|b| b.is_ascii_digit()) => at(i + 1, word),
        _ => duration_minutes(word),
    });
    spans.reduce(f64::max)
}

fn duration_minutes(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    let per = match unit.trim() {
        "m" | "min" | "mins" | "minute" | "minutes" => 1.0,
        "h" | "hr" | "hrs" | "hour" | "hours" => 60.0,
        "d" | "day" | "days" => 1440.0,
        "w" | "week" | "weeks" => 10080.0,
        _ => return None,
    };
    Some(n * per)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn windows_from_arguments() {
        assert_eq!(window_minutes(&json!({"lookback_minutes": 90})), Some(90.0));
        assert_eq!(window_minutes(&json!({"hours": 2})), Some(120.0));
        assert_eq!(window_minutes(&json!({"window": "7d"})), Some(10080.0));
        assert_eq!(window_minutes(&json!({"start": 1_700_000_000, "end": 1_700_007_200})), Some(120.0));
        assert_eq!(window_minutes(&json!({"start": 1_700_000_000_000i64, "end": 1_700_000_600_000i64})), Some(10.0));
        assert_eq!(window_minutes(&json!({"service": "api"})), None);
        let iso = json!({"start_time_iso": "2026-02-09T10:00:00Z", "end_time_iso": "2026-02-09T13:00:00Z"});
        assert_eq!(window_minutes(&iso), Some(180.0), "the bounds temporal guardrails write");
        assert_eq!(window_minutes(&json!({"from": "alice", "to": "bob"})), None, "not times: no window");
    }

    #[test]
    fn spans_written_into_service_names() {
        for (service, minutes) in [
            (json!("checkout 7d"), Some(10080.0)),
            (json!("api-24h"), Some(1440.0)),
            (json!("payments last 3 days"), Some(4320.0)),
            (json!("web (past week)"), Some(10080.0)),
            (json!("auth yesterday"), Some(1440.0)),
            (json!(["a", "b_2h"]), Some(120.0)),
            (json!("k8s-v2-api"), None),
            (json!("checkout"), None),
        ] {
            assert_eq!(service_name_minutes(&json!({"service_name": service})), minutes, "{service}");
        }
    }
}

//! Each profile's rules on a fixed clock (2026-02-09T15:00:00Z), and the time forms.

use super::time::{self, Seconds};
use super::*;
use crate::config::TemporalProfile::{AlertsWindow, EpochRange, InstantTimeIso, IsoWindow};
use serde_json::json;

/// 2026-02-09T15:00:00Z.
const NOW: Seconds = 1_770_649_200;

fn guardrails() -> (Guardrails, Arc<FixedClock>) {
    let clock = Arc::new(FixedClock::at(NOW));
    (Guardrails::default().with_clock(clock.clone()), clock)
}

/// The arguments after `treatment`, and the note.
fn run(treatment: Treatment, args: Value) -> Result<(Value, Option<Value>), TemporalError> {
    let (g, _) = guardrails();
    g.normalize(treatment, args.as_object().unwrap()).map(|n| (Value::Object(n.arguments), n.note))
}

fn args(treatment: Treatment, input: Value) -> Value {
    run(treatment, input.clone()).unwrap_or_else(|e| panic!("{input}: {e}")).0
}

fn error(treatment: Treatment, input: Value) -> String {
    run(treatment, input.clone()).expect_err(&input.to_string()).to_string()
}

const ISO: Treatment = Treatment::Profile(IsoWindow);
const DISCOVERY: Treatment = Treatment::AttributeDiscovery { lookback: 300 };
const ALERTS: Treatment = Treatment::Profile(AlertsWindow);
const EPOCH: Treatment = Treatment::Profile(EpochRange);
const INSTANT: Treatment = Treatment::Profile(InstantTimeIso);

#[test]
fn times_are_read_in_every_documented_form() {
    let at = |v: Value| time::instant(Some(&v), NOW);
    let t = 1_770_649_445; // 2026-02-09T15:04:05Z
    for form in [
        json!("2026-02-09T15:04:05Z"),
        json!("2026-02-09t15:04:05z"),
        json!("2026-02-09T20:34:05.5+05:30"),
        json!("2026-02-09T07:04:05-0800"),
        json!("2026-02-09 15:04:05"),
        json!("2026-02-09T15:04:05"),
        json!(t),
        json!(t as f64 + 0.9),
        json!(t * 1000),
        json!("1770649445"),
    ] {
        assert_eq!(at(form.clone()), Ok(Some(t)), "{form}");
    }
    assert_eq!(at(json!("2026-02-09")), Ok(Some(1_770_595_200)), "a date is its midnight, UTC");
    assert_eq!(at(json!("now")), Ok(Some(NOW)));
    assert_eq!(at(json!(" NOW - 15m ")), Ok(Some(NOW - 900)));
    assert_eq!(at(json!("now-2h")), Ok(Some(NOW - 7200)));
    assert_eq!(at(json!("now-1w")), Ok(Some(NOW - 604_800)));
    assert_eq!(at(json!(null)), Ok(None));
    assert_eq!(at(json!("  ")), Ok(None), "an empty string is a missing value");
    for bad in [
        json!("yesterday"),
        json!("2026-02-30T00:00:00Z"),
        json!("2026-13-01T00:00:00Z"),
        json!("2026-02-09T25:00:00Z"),
        json!("2026-02-09T15:04:05+2400"),
        json!("2026-02-09T15:04:05 UTC"),
        json!("now+5m"),
        json!("now-5x"),
        json!("2026-02-09T15:04:05Zé"),
        json!(true),
        json!({"t": 1}),
    ] {
        assert!(at(bad.clone()).unwrap_err().contains("is not a time"), "{bad}");
    }
    assert!(at(json!(-5)).unwrap_err().contains("outside"), "before 1970");
    assert!(at(json!(1e20)).unwrap_err().contains("outside"), "past 9999");
}

#[test]
fn times_are_written_as_rfc3339_utc() {
    assert_eq!(time::rfc3339(0), "1970-01-01T00:00:00Z");
    assert_eq!(time::rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    assert_eq!(time::rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(time::rfc3339(time::MAX_SECONDS), "9999-12-31T23:59:59Z");
    for t in [0, 951_782_400, 1_709_164_800, NOW, 4_102_444_799] {
        assert_eq!(time::instant(Some(&json!(time::rfc3339(t))), NOW), Ok(Some(t)), "round trip of {t}");
    }
}

#[test]
fn spans_are_positive_numbers() {
    assert_eq!(time::span(Some(&json!(15)), 60.0), Ok(Some(900)));
    assert_eq!(time::span(Some(&json!("15")), 60.0), Ok(Some(900)));
    assert_eq!(time::span(Some(&json!(0.5)), 60.0), Ok(Some(30)));
    assert_eq!(time::span(Some(&json!(1e300)), 60.0), Ok(Some(time::MAX_SECONDS)), "saturates");
    assert_eq!(time::span(None, 60.0), Ok(None));
    for bad in [json!(0), json!(-1), json!("abc"), json!([1])] {
        assert!(time::span(Some(&bad), 60.0).is_err(), "{bad}");
    }
}

#[test]
fn iso_window_resolves_relative_windows_and_keeps_absolute_ones() {
    assert_eq!(run(ISO, json!({"service": "api"})).unwrap(), (json!({"service": "api"}), None), "nothing asked");
    let (resolved, note) = run(ISO, json!({"service": "api", "lookback_minutes": 90})).unwrap();
    assert_eq!(
        resolved,
        json!({"service": "api", "start_time_iso": "2026-02-09T13:30:00Z", "end_time_iso": "2026-02-09T15:00:00Z"})
    );
    let note = note.expect("a changed call is noted");
    assert_eq!(note["profile"], "iso_window");
    assert_eq!(note["sent"], json!({"start_time_iso": "2026-02-09T13:30:00Z", "end_time_iso": "2026-02-09T15:00:00Z"}));
    let absolute = json!({"start_time_iso": "2026-02-08T10:00:00Z", "end_time_iso": "2026-02-08T12:00:00Z"});
    assert_eq!(run(ISO, absolute.clone()).unwrap(), (absolute, None), "already canonical: untouched");
    let offset = json!({"start_time_iso": "2026-02-08T15:30:00+05:30", "end_time_iso": "2026-02-08 12:00:00"});
    assert_eq!(args(ISO, offset)["start_time_iso"], "2026-02-08T10:00:00Z");
    let relative = args(ISO, json!({"start_time_iso": "now-2h", "end_time_iso": "now-1h"}));
    assert_eq!(relative, json!({"start_time_iso": "2026-02-09T13:00:00Z", "end_time_iso": "2026-02-09T14:00:00Z"}));
}

#[test]
fn iso_window_fills_a_missing_bound() {
    let start_only = args(ISO, json!({"start_time_iso": "2026-02-09T12:00:00Z"}));
    assert_eq!(start_only["end_time_iso"], "2026-02-09T15:00:00Z", "the end defaults to now");
    let end_only = args(ISO, json!({"end_time_iso": "2026-02-09T12:00:00Z"}));
    assert_eq!(end_only["start_time_iso"], "2026-02-09T11:00:00Z", "the start defaults to an hour before the end");
    let end_and_lookback = args(ISO, json!({"end_time_iso": "2026-02-09T12:00:00Z", "lookback_minutes": 30}));
    assert_eq!(end_and_lookback["start_time_iso"], "2026-02-09T11:30:00Z");
    let start_and_lookback = args(ISO, json!({"start_time_iso": "2026-02-09T12:00:00Z", "lookback_minutes": 30}));
    assert_eq!(start_and_lookback["end_time_iso"], "2026-02-09T12:30:00Z");
    let both = json!({"start_time_iso": "2026-02-09T12:00:00Z", "end_time_iso": "2026-02-09T13:00:00Z", "lookback_minutes": 5});
    let (out, note) = run(ISO, both).unwrap();
    assert!(out.get("lookback_minutes").is_none() && out["start_time_iso"] == "2026-02-09T12:00:00Z", "{out}");
    assert!(note.unwrap()["changes"][0].as_str().unwrap().contains("lookback_minutes"));
}

#[test]
fn iso_window_orders_bounds_and_stops_at_now() {
    let reversed = json!({"start_time_iso": "2026-02-09T13:00:00Z", "end_time_iso": "2026-02-09T12:00:00Z"});
    let (out, note) = run(ISO, reversed).unwrap();
    assert_eq!(out, json!({"start_time_iso": "2026-02-09T12:00:00Z", "end_time_iso": "2026-02-09T13:00:00Z"}));
    assert!(note.unwrap()["changes"][0].as_str().unwrap().contains("swapped"));
    let future_end =
        args(ISO, json!({"start_time_iso": "2026-02-09T14:00:00Z", "end_time_iso": "2026-02-10T00:00:00Z"}));
    assert_eq!(future_end["end_time_iso"], "2026-02-09T15:00:00Z");
    let future = json!({"start_time_iso": "2026-03-01T00:00:00Z", "end_time_iso": "2026-03-02T00:00:00Z"});
    assert!(error(ISO, future).contains("not before now"));
    let start_only = error(ISO, json!({"start_time_iso": "2026-03-01T00:00:00Z"}));
    assert!(start_only.contains("starts at 2026-03-01T00:00:00Z, which is not before now"), "{start_only}");
    let epoch = error(EPOCH, json!({"start_time": "2026-03-01T00:00:00Z"}));
    assert!(epoch.contains("starts at 2026-03-01T00:00:00Z"), "{epoch}");
    let empty = json!({"start_time_iso": "2026-02-09T12:00:00Z", "end_time_iso": "2026-02-09T12:00:00Z"});
    assert!(error(ISO, empty).contains("empty"));
    assert!(error(ISO, json!({"lookback_minutes": 1e12})).contains("before 1970"));
}

#[test]
fn unusable_values_name_the_field_and_what_was_given() {
    let text = error(ISO, json!({"start_time_iso": "yesterday"}));
    assert!(text.contains("`start_time_iso` is not a time") && text.contains("\"yesterday\""), "{text}");
    assert!(error(ISO, json!({"lookback_minutes": -5})).contains("`lookback_minutes` is not a positive number"));
    let long = error(ISO, json!({"end_time_iso": "x".repeat(500)}));
    assert!(long.len() < 300, "the value is shortened: {long}");
    let refusal = refusal(&message("obs__get_logs", ISO, &run(ISO, json!({"end_time_iso": false})).unwrap_err()));
    let body: Value = serde_json::from_str(&refusal.content).unwrap();
    assert!(refusal.is_error && body["kind"] == ERROR_KIND, "{body}");
    assert!(body["error"].as_str().unwrap().contains("`obs__get_logs` was not run"), "{body}");
}

#[test]
fn attribute_discovery_is_always_explicit_and_clamped() {
    let nothing = args(DISCOVERY, json!({}));
    assert_eq!(nothing, json!({"start_time_iso": "2026-02-09T14:55:00Z", "end_time_iso": "2026-02-09T15:00:00Z"}));
    assert_eq!(args(DISCOVERY, json!({"lookback_minutes": 1440})), nothing, "a long look-back is clamped");
    let past = json!({"start_time_iso": "2026-02-01T00:00:00Z", "end_time_iso": "2026-02-01T06:00:00Z"});
    let (out, note) = run(DISCOVERY, past).unwrap();
    assert_eq!(out, json!({"start_time_iso": "2026-02-01T05:55:00Z", "end_time_iso": "2026-02-01T06:00:00Z"}));
    assert!(note.unwrap()["changes"][0].as_str().unwrap().contains("last 5 minutes"));
    let short = json!({"start_time_iso": "2026-02-09T14:58:00Z", "end_time_iso": "2026-02-09T14:59:00Z"});
    assert_eq!(run(DISCOVERY, short.clone()).unwrap(), (short, None), "within the clamp: untouched");
    let end_only = args(DISCOVERY, json!({"end_time_iso": "2026-02-09T12:00:00Z"}));
    assert_eq!(end_only["start_time_iso"], "2026-02-09T11:55:00Z", "the default window is the clamp");
}

#[test]
fn alerts_window_caps_the_look_back_at_an_hour() {
    assert_eq!(run(ALERTS, json!({"severity": "p1"})).unwrap(), (json!({"severity": "p1"}), None));
    let (out, note) = run(ALERTS, json!({"window": 7200})).unwrap();
    assert_eq!(out, json!({"window": 3600}));
    assert!(note.unwrap()["changes"][0].as_str().unwrap().contains("7200"));
    assert_eq!(args(ALERTS, json!({"lookback_minutes": 30})), json!({"window": 1800}));
    assert_eq!(args(ALERTS, json!({"window": "600", "lookback_minutes": 30})), json!({"window": 600}));
    assert_eq!(args(ALERTS, json!({"timestamp": 1_770_645_600})), json!({"time_iso": "2026-02-09T14:00:00Z"}));
    let both = args(ALERTS, json!({"time_iso": "2026-02-09T13:00:00Z", "timestamp": 1_770_645_600}));
    assert_eq!(both, json!({"time_iso": "2026-02-09T13:00:00Z"}), "time_iso is preferred");
    assert_eq!(args(ALERTS, json!({"time_iso": "2027-01-01T00:00:00Z"}))["time_iso"], "2026-02-09T15:00:00Z");
    assert!(error(ALERTS, json!({"window": 0})).contains("`window` is not a positive number"));
    assert!(error(ALERTS, json!({"timestamp": "soon"})).contains("`timestamp` is not a time"));
}

#[test]
fn epoch_range_writes_seconds_and_bounds_the_samples() {
    let reversed = json!({"start_time": 1_770_649_200, "end_time": 1_770_638_400});
    let (out, note) = run(EPOCH, reversed).unwrap();
    // 3 h = 10 800 s in at most 100 samples: a step of at least 110 s.
    assert_eq!(out, json!({"start_time": 1_770_638_400, "end_time": 1_770_649_200, "step": 110}));
    assert!(note.unwrap()["changes"][0].as_str().unwrap().contains("swapped"));
    let fine = args(EPOCH, json!({"start_time": 1_770_638_400, "end_time": 1_770_649_200, "step": 10}));
    assert_eq!(fine["step"], 110, "raised to the sample cap");
    let short = args(EPOCH, json!({"start_time": "2026-02-09T14:00:00Z", "end_time": "now", "step": 15}));
    assert_eq!(short, json!({"start_time": 1_770_645_600, "end_time": NOW, "step": 37}), "1 h in 100 samples");
    let defaults = args(EPOCH, json!({"start_time": "now-30m"}));
    assert_eq!(defaults, json!({"start_time": NOW - 1800, "end_time": NOW, "step": 60}), "end now, step 60");
    let millis = args(EPOCH, json!({"end_time": 1_770_645_600_000i64}));
    assert_eq!(millis["start_time"], 1_770_642_000, "an hour before a millisecond end");
    assert_eq!(run(EPOCH, json!({"rule": "x"})).unwrap(), (json!({"rule": "x"}), None));
    assert!(error(EPOCH, json!({"step": "x"})).contains("`step`"), "checked even without bounds");
}

#[test]
fn instant_time_iso_resolves_one_instant() {
    assert_eq!(run(INSTANT, json!({"query": "up"})).unwrap(), (json!({"query": "up"}), None));
    let ago = args(INSTANT, json!({"query": "up", "lookback_minutes": 30}));
    assert_eq!(ago, json!({"query": "up", "time_iso": "2026-02-09T14:30:00Z"}));
    assert_eq!(args(INSTANT, json!({"time_iso": "2030-01-01T00:00:00Z"}))["time_iso"], "2026-02-09T15:00:00Z");
    let both = args(INSTANT, json!({"time_iso": "1770645600", "lookback_minutes": 30}));
    assert_eq!(both, json!({"time_iso": "2026-02-09T14:00:00Z"}));
    assert!(error(INSTANT, json!({"time_iso": "last tuesday"})).contains("`time_iso`"));
}

#[test]
fn normalising_twice_changes_nothing_even_later() {
    let (g, clock) = guardrails();
    let inputs = [
        (ISO, json!({"lookback_minutes": 90, "end_time_iso": "2026-02-09T15:30:00Z"})),
        (DISCOVERY, json!({"lookback_minutes": 600})),
        (ALERTS, json!({"window": 9000, "timestamp": NOW + 50})),
        (EPOCH, json!({"start_time": "now-3d", "step": 1})),
        (INSTANT, json!({"lookback_minutes": 5})),
    ];
    for (treatment, input) in inputs {
        let once = g.normalize(treatment, input.as_object().unwrap()).unwrap();
        clock.advance(600); // an approval that took ten minutes
        let twice = g.normalize(treatment, &once.arguments).unwrap();
        assert_eq!((&twice.arguments, twice.note), (&once.arguments, None), "{input}");
    }
}

#[test]
fn treatments_by_name_most_specific_first() {
    let section = crate::config::TemporalGuardrails {
        tools: vec!["get_logs".into()],
        tool_profiles: [("obs__get_alerts".into(), AlertsWindow), ("get_alerts".into(), EpochRange)].into(),
        attribute_discovery_tools: vec!["get_log_attributes".into()],
        attribute_discovery_lookback_minutes: Some(7),
    };
    let g = Guardrails::from_config(&section);
    assert_eq!(g.treatment("obs__get_logs", "obs", "get_logs"), Some(ISO));
    assert_eq!(g.treatment("my_skill__get_logs", "obs", "get_logs"), Some(ISO), "an alias of the same tool");
    assert_eq!(g.treatment("obs__get_alerts", "obs", "get_alerts"), Some(ALERTS), "the prefixed entry wins");
    assert_eq!(g.treatment("prom__get_alerts", "prom", "get_alerts"), Some(EPOCH));
    let discovery = g.treatment("obs__get_log_attributes", "obs", "get_log_attributes");
    assert_eq!(discovery, Some(Treatment::AttributeDiscovery { lookback: 420 }));
    assert_eq!(g.treatment("obs__other", "obs", "other"), None);
    let off = Guardrails::from_config(&crate::config::TemporalGuardrails::default());
    assert!(!off.is_on() && off.treatment("obs__get_logs", "obs", "get_logs").is_none());
}

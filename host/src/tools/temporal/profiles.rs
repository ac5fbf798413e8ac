//! What each profile does to a call's arguments. docs/temporal-guardrails.md states the same
//! rules with examples; keep the two in step.
//!
//! Only a profile's own fields are read or written. Relative times are resolved against the
//! call's "now", so a retry (or the person approving) sees the bounds that will be searched.
//! Nothing asked, nothing added: a call stating no time leaves the server's default in
//! place, except attribute discovery, whose window is always made explicit and clamped.

use super::TemporalError;
use super::time::{self, Seconds};
use serde_json::{Map, Value, json};

/// The window `iso_window` fills in when only an end is given, and `epoch_range` when only
/// an end is given: one hour.
pub const DEFAULT_WINDOW: Seconds = 3600;
/// The longest `alerts_window` look-back: one hour.
pub const MAX_ALERTS_WINDOW: Seconds = 3600;
/// The most samples an `epoch_range` call may ask for (`span / step + 1`).
pub const MAX_SAMPLES: Seconds = 100;
/// The `epoch_range` step when none is given, unless the sample cap needs a larger one.
pub const DEFAULT_STEP: Seconds = 60;

/// One call's arguments being normalised.
pub(super) struct Work {
    pub args: Map<String, Value>,
    pub now: Seconds,
    pub changes: Vec<String>,
}

impl Work {
    fn instant(&self, field: &'static str) -> Result<Option<Seconds>, TemporalError> {
        time::instant(self.args.get(field), self.now).map_err(|why| self.bad(field, why))
    }

    fn span(&self, field: &'static str, unit: f64) -> Result<Option<Seconds>, TemporalError> {
        time::span(self.args.get(field), unit).map_err(|why| self.bad(field, why))
    }

    fn bad(&self, field: &'static str, why: String) -> TemporalError {
        let mut given = self.args.get(field).map(Value::to_string).unwrap_or_default();
        if given.len() > 80 {
            given = format!("{}...", given.chars().take(80).collect::<String>());
        }
        TemporalError::Field { field, why, given }
    }

    fn note(&mut self, change: impl Into<String>) {
        self.changes.push(change.into());
    }

    /// Drops `field`, noting why when the model had set it.
    fn drop_field(&mut self, field: &str, why: &str) {
        if self.args.remove(field).is_some_and(|v| !v.is_null()) && !why.is_empty() {
            self.note(format!("`{field}` dropped: {why}"));
        }
    }

    fn set(&mut self, field: &str, value: Value) {
        self.args.insert(field.to_owned(), value);
    }

    /// Orders the bounds, ends them no later than now, and refuses an empty window.
    fn settle(&mut self, mut start: Seconds, mut end: Seconds) -> Result<(Seconds, Seconds), TemporalError> {
        if start > end {
            (start, end) = (end, start);
            self.note("start and end swapped: the start came after the end");
        }
        if end > self.now {
            end = self.now;
            self.note("end moved back to now: it was in the future");
        }
        if start >= end {
            let future = start >= self.now;
            let start = time::rfc3339(start);
            return Err(if future { TemporalError::Future { start } } else { TemporalError::Empty { start } });
        }
        Ok((start, end))
    }

    /// An instant no later than now.
    fn not_future(&mut self, at: Seconds) -> Seconds {
        if at > self.now {
            self.note("time moved back to now: it was in the future");
            return self.now;
        }
        at
    }
}

/// `start_time_iso` / `end_time_iso` / `lookback_minutes`; with `clamp`, attribute
/// discovery: the window is at most `clamp` seconds (its last part), by default the last
/// `clamp` seconds before now.
pub(super) fn iso_window(w: &mut Work, clamp: Option<Seconds>) -> Result<(), TemporalError> {
    let (start, end, lookback) =
        (w.instant("start_time_iso")?, w.instant("end_time_iso")?, w.span("lookback_minutes", 60.0)?);
    let default = clamp.unwrap_or(DEFAULT_WINDOW);
    let (start, end) = match (start, end, lookback) {
        (None, None, None) if clamp.is_none() => return Ok(()),
        (Some(s), Some(e), look) => {
            if look.is_some() {
                w.note("`lookback_minutes` dropped: start_time_iso and end_time_iso set the window");
            }
            (s, e)
        }
        (Some(s), None, Some(look)) => (s, s.saturating_add(look)),
        // A start after now has no end to swap with: it is refused as in the future.
        (Some(s), None, None) => (s, w.now.max(s)),
        (None, Some(e), look) => (e - look.unwrap_or(default), e),
        (None, None, look) => (w.now - look.unwrap_or(default), w.now),
    };
    let (mut start, end) = w.settle(start, end)?;
    if let Some(clamp) = clamp.filter(|c| end - start > *c) {
        start = end - clamp;
        w.note(format!("window shortened to its last {} minutes (attribute discovery)", clamp / 60));
    }
    if start < 0 {
        return Err(TemporalError::BeforeEpoch);
    }
    w.drop_field("lookback_minutes", "");
    w.set("start_time_iso", json!(time::rfc3339(start)));
    w.set("end_time_iso", json!(time::rfc3339(end)));
    Ok(())
}

/// `time_iso` (or the older `timestamp`, Unix seconds) and `window` seconds (or
/// `lookback_minutes`), at most [`MAX_ALERTS_WINDOW`].
pub(super) fn alerts_window(w: &mut Work) -> Result<(), TemporalError> {
    let at = match (w.instant("time_iso")?, w.instant("timestamp")?) {
        (Some(at), stamp) => {
            if stamp.is_some() {
                w.drop_field("timestamp", "time_iso is preferred");
            }
            Some(at)
        }
        (None, stamp) => stamp,
    };
    if let Some(at) = at {
        let at = w.not_future(at);
        w.drop_field("timestamp", "");
        w.set("time_iso", json!(time::rfc3339(at)));
    }
    let window = match (w.span("window", 1.0)?, w.span("lookback_minutes", 60.0)?) {
        (Some(window), look) => {
            if look.is_some() {
                w.drop_field("lookback_minutes", "window is given");
            }
            Some(window)
        }
        (None, look) => look,
    };
    if let Some(mut window) = window {
        if window > MAX_ALERTS_WINDOW {
            w.note(format!(
                "window shortened from {window} to {MAX_ALERTS_WINDOW} seconds, the most this profile allows"
            ));
            window = MAX_ALERTS_WINDOW;
        }
        w.drop_field("lookback_minutes", "");
        w.set("window", json!(window));
    }
    Ok(())
}

/// `start_time` / `end_time` as Unix seconds and a `step` of at most [`MAX_SAMPLES`] samples.
pub(super) fn epoch_range(w: &mut Work) -> Result<(), TemporalError> {
    let (start, end, step) = (w.instant("start_time")?, w.instant("end_time")?, w.span("step", 1.0)?);
    let (start, end) = match (start, end) {
        (None, None) => return Ok(()),
        (Some(s), Some(e)) => (s, e),
        (Some(s), None) => (s, w.now.max(s)),
        (None, Some(e)) => (e - DEFAULT_WINDOW, e),
    };
    let (start, end) = w.settle(start, end)?;
    let fewest = (end - start + MAX_SAMPLES - 2) / (MAX_SAMPLES - 1);
    let step = match step {
        Some(step) if step < fewest => {
            w.note(format!("step raised from {step} to {fewest} seconds: at most {MAX_SAMPLES} samples"));
            fewest
        }
        Some(step) => step,
        None => fewest.max(DEFAULT_STEP),
    };
    w.set("start_time", json!(start));
    w.set("end_time", json!(end));
    w.set("step", json!(step));
    Ok(())
}

/// One `time_iso` instant, or `lookback_minutes` before now.
pub(super) fn instant_time_iso(w: &mut Work) -> Result<(), TemporalError> {
    let at = match (w.instant("time_iso")?, w.span("lookback_minutes", 60.0)?) {
        (None, None) => return Ok(()),
        (Some(at), look) => {
            if look.is_some() {
                w.drop_field("lookback_minutes", "time_iso is given");
            }
            at
        }
        (None, Some(look)) => (w.now - look).max(0),
    };
    let at = w.not_future(at);
    w.drop_field("lookback_minutes", "");
    w.set("time_iso", json!(time::rfc3339(at)));
    Ok(())
}

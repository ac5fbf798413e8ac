//! Points in time and spans as tool arguments give them: RFC 3339 (and the legacy
//! `YYYY-MM-DD HH:MM:SS`), `now` / `now-15m`, Unix seconds or milliseconds; and RFC 3339 out.
//! Whole seconds, UTC. The calendar arithmetic is Howard Hinnant's days-from-civil algorithm.

use serde_json::Value;

/// Seconds since 1970-01-01T00:00:00Z.
pub type Seconds = i64;

/// The last second accepted: 9999-12-31T23:59:59Z.
pub const MAX_SECONDS: Seconds = 253_402_300_799;

/// Epoch numbers above this are milliseconds (it is the year 5138 in seconds, 1973 in ms).
const MILLIS_ABOVE: f64 = 1e11;

/// Why a value is not a time.
pub const TIME_FORMS: &str = "an RFC 3339 time such as 2026-02-09T15:04:05Z, `now`, `now-15m`, or Unix seconds";

/// Reads a point in time; `Ok(None)` for a missing value (`null` or an empty string).
pub fn instant(value: Option<&Value>, now: Seconds) -> Result<Option<Seconds>, String> {
    let seconds = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(None),
        Some(Value::Number(n)) => n.as_f64().and_then(epoch),
        Some(Value::String(s)) => text_instant(s.trim(), now),
        Some(_) => None,
    };
    let seconds = seconds.ok_or_else(|| format!("is not a time (use {TIME_FORMS})"))?;
    if !(0..=MAX_SECONDS).contains(&seconds) {
        return Err("is outside 1970-01-01 .. 9999-12-31".into());
    }
    Ok(Some(seconds))
}

/// Reads a positive span given as a number of `unit` seconds (`lookback_minutes`: 60,
/// `window`: 1): a JSON number or a numeric string. Saturates far beyond any real window.
pub fn span(value: Option<&Value>, unit: f64) -> Result<Option<Seconds>, String> {
    let number = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(None),
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    };
    match number {
        Some(n) if n.is_finite() && n > 0.0 => Ok(Some((n * unit).round().clamp(1.0, MAX_SECONDS as f64) as Seconds)),
        _ => Err("is not a positive number".into()),
    }
}

/// `2026-02-09T15:04:05Z`.
pub fn rfc3339(seconds: Seconds) -> String {
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// Epoch seconds, or milliseconds past [`MILLIS_ABOVE`]; fractions are dropped.
fn epoch(n: f64) -> Option<Seconds> {
    let seconds = if n.abs() > MILLIS_ABOVE { n / 1000.0 } else { n };
    seconds.is_finite().then(|| seconds.clamp(-1e15, 1e15).floor() as Seconds)
}

fn text_instant(text: &str, now: Seconds) -> Option<Seconds> {
    let lower = text.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("now") {
        let rest = rest.trim_start();
        if rest.is_empty() {
            return Some(now);
        }
        let ago = duration(rest.strip_prefix('-')?.trim_start())?;
        return Some(now - ago);
    }
    if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return epoch(text.parse().ok()?);
    }
    date_time(&lower)
}

/// `15m`, `2h`, `1d`, `1w`, `30s` (also `15 minutes` and the like).
fn duration(text: &str) -> Option<Seconds> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let per = match unit.trim() {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 604_800,
        _ => return None,
    };
    number.parse::<Seconds>().ok()?.checked_mul(per).filter(|s| *s <= MAX_SECONDS)
}

/// `YYYY-MM-DD`, optionally `T` or a space and `HH:MM[:SS[.fff]]`, optionally `Z` or an
/// offset `±HH:MM` / `±HHMM`; no offset is UTC. Lowercase input.
fn date_time(text: &str) -> Option<Seconds> {
    let b = text.as_bytes();
    let num = |at: usize, len: usize| -> Option<i64> {
        let part = text.get(at..at + len)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (y, m, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || !(1..=12).contains(&m) || d < 1 || d > days_in(y, m) {
        return None;
    }
    let date = days_from_civil(y, m, d) * 86_400;
    if b.len() == 10 {
        return Some(date);
    }
    if !matches!(b.get(10), Some(b't' | b' ')) || b.get(13) != Some(&b':') {
        return None;
    }
    let (h, min) = (num(11, 2)?, num(14, 2)?);
    let mut at = 16;
    let mut s = 0;
    if b.get(at) == Some(&b':') {
        s = num(17, 2)?;
        at = 19;
        if b.get(at) == Some(&b'.') {
            at += 1 + b[at + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        }
    }
    if h > 23 || min > 59 || s > 60 {
        return None;
    }
    let offset = offset(text.get(at..)?)?;
    Some(date + h * 3600 + min * 60 + s.min(59) - offset)
}

/// `""` or `z` is UTC; `+05:30`, `-0800`.
fn offset(text: &str) -> Option<Seconds> {
    let sign = match text.as_bytes().first() {
        None => return Some(0),
        Some(b'z') if text.len() == 1 => return Some(0),
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return None,
    };
    let digits: String = text[1..].chars().filter(|c| *c != ':').collect();
    let colon_ok = text.len() == 6 && text.as_bytes()[3] == b':' || text.len() == 5;
    if digits.len() != 4 || !colon_ok || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i64, i64) = (digits[..2].parse().ok()?, digits[2..].parse().ok()?);
    (h <= 23 && m <= 59).then_some(sign * (h * 3600 + m * 60))
}

fn days_in(y: i64, m: i64) -> i64 {
    match m {
        4 | 6 | 9 | 11 => 30,
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `(year, month, day)` of a count of days since 1970-01-01 (proleptic Gregorian).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

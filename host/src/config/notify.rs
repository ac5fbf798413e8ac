//! What skills that speak first are allowed: the destinations of the `notify` import
//! (`skills.grants.<skill>.notify`), and the intervals of schedules (`[schedule] every` in a
//! skill's manifest, `skills.schedule_minimum`).

use serde::{Deserialize, Deserializer};
use std::fmt;
use std::time::Duration;

/// A chat platform a skill's message can go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Platform {
    /// A Slack channel (or a direct message's conversation) by id.
    Slack,
    /// A Telegram chat by id.
    Telegram,
}

impl Platform {
    /// Its name in destinations and configs (`slack`, `telegram`).
    pub fn name(self) -> &'static str {
        match self {
            Platform::Slack => "slack",
            Platform::Telegram => "telegram",
        }
    }
}

/// Where a skill's message goes: `slack:<channel id>` or `telegram:<chat id>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Destination {
    /// The platform.
    pub platform: Platform,
    /// The platform's id of the conversation.
    pub id: String,
}

impl Destination {
    /// Parses `slack:C0ALERTS` or `telegram:-1001234`.
    pub fn parse(text: &str) -> Result<Destination, String> {
        let (platform, id) = text
            .split_once(':')
            .ok_or_else(|| format!("`{text}` is not a destination: write slack:<channel id> or telegram:<chat id>"))?;
        let platform = match platform {
            "slack" => Platform::Slack,
            "telegram" => Platform::Telegram,
            other => return Err(format!("`{text}`: unknown platform `{other}` (slack or telegram)")),
        };
        let valid = match platform {
            // Slack ids are upper-case letters and digits (C..., G..., D...).
            Platform::Slack => {
                !id.is_empty() && id.len() <= 32 && id.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            }
            Platform::Telegram => id.parse::<i64>().is_ok_and(|n| n != 0),
        };
        if !valid {
            let what = match platform {
                Platform::Slack => "a Slack channel id (upper-case letters and digits, as C0ALERTS)",
                Platform::Telegram => "a Telegram chat id (an integer, negative for groups)",
            };
            return Err(format!("`{text}`: `{id}` is not {what}"));
        }
        Ok(Destination { platform, id: id.to_owned() })
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.platform.name(), self.id)
    }
}

impl<'de> Deserialize<'de> for Destination {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Destination::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A time between two runs: `500ms`, `30s`, `5m`, `1h` (a whole number and its unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Interval(pub Duration);

impl Interval {
    /// Parses `30s`, `5m`, `1h`, `500ms`; zero is refused.
    pub fn parse(text: &str) -> Result<Interval, String> {
        let text = text.trim();
        let digits = text.bytes().take_while(u8::is_ascii_digit).count();
        let (number, unit) = text.split_at(digits);
        let number: u64 = number.parse().map_err(|_| format!("`{text}` is not an interval such as 30s, 5m or 1h"))?;
        let millis = match unit.trim() {
            "ms" => Some(number),
            "s" => number.checked_mul(1000),
            "m" => number.checked_mul(60_000),
            "h" => number.checked_mul(3_600_000),
            _ => return Err(format!("`{text}`: the unit is ms, s, m or h (as 30s, 5m, 1h)")),
        };
        match millis {
            Some(0) => Err(format!("`{text}`: an interval must be longer than zero")),
            Some(ms) if ms <= MAX_INTERVAL_MS => Ok(Interval(Duration::from_millis(ms))),
            _ => Err(format!("`{text}`: at most a week")),
        }
    }
}

/// The longest interval: a week.
const MAX_INTERVAL_MS: u64 = 7 * 24 * 3_600_000;

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        match ms {
            ms if ms % 3_600_000 == 0 => write!(f, "{}h", ms / 3_600_000),
            ms if ms % 60_000 == 0 => write!(f, "{}m", ms / 60_000),
            ms if ms % 1000 == 0 => write!(f, "{}s", ms / 1000),
            ms => write!(f, "{ms}ms"),
        }
    }
}

impl<'de> Deserialize<'de> for Interval {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A visitor, so that the error is raised where the path tracking sees the key.
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Interval;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an interval such as 30s, 5m or 1h")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Interval, E> {
                Interval::parse(text).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

/// `skills.schedule_minimum` when the config names none.
pub const DEFAULT_SCHEDULE_MINIMUM: Interval = Interval(Duration::from_secs(10));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        let d = Destination::parse("slack:C0ALERTS").unwrap();
        assert_eq!((d.platform, d.id.as_str()), (Platform::Slack, "C0ALERTS"));
        assert_eq!(d.to_string(), "slack:C0ALERTS");
        assert_eq!(Destination::parse("telegram:-1001234").unwrap().id, "-1001234");
        for bad in ["C0ALERTS", "slack:", "slack:c0alerts", "slack:C0 X", "telegram:abc", "telegram:0", "mail:a@b"] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
        assert!(Destination::parse("discord:1").unwrap_err().contains("unknown platform `discord`"));
    }

    #[test]
    fn intervals() {
        assert_eq!(Interval::parse("30s").unwrap().0, Duration::from_secs(30));
        assert_eq!(Interval::parse("5m").unwrap().0, Duration::from_secs(300));
        assert_eq!(Interval::parse("1h").unwrap().0, Duration::from_secs(3600));
        assert_eq!(Interval::parse("250ms").unwrap().0, Duration::from_millis(250));
        assert_eq!(Interval::parse("90s").unwrap().to_string(), "90s");
        assert_eq!(Interval::parse("120s").unwrap().to_string(), "2m");
        for bad in ["", "0s", "10", "s", "1d", "-1s", "1.5s", "169h"] {
            assert!(Interval::parse(bad).is_err(), "{bad}");
        }
    }
}

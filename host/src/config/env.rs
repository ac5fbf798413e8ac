//! `${VAR}` references in config values: the placeholders that carry them through the YAML
//! parser, what one string value becomes, how a value that is exactly one reference is typed,
//! and the warnings for unset variables.
//!
//! Variables are never substituted into the YAML text: a value is data and cannot add keys,
//! items, tags or comments, whatever characters it holds. Before parsing, each reference is
//! swapped for a placeholder, [`OPEN`] `NAME` [`CLOSE`]: two private-use characters that YAML
//! reads as ordinary scalar text in every context, so that a reference in a flow collection
//! (`ui: {port: ${PORT}}`, where YAML would end a plain scalar at the `{`) still parses. The
//! placeholders depend on the names only, never on the values; `interp.rs` expands them in
//! the parsed string values and turns them back into `${NAME}` in keys and messages.

use std::borrow::Cow;
use std::cell::RefCell;

/// Opens a reference's placeholder (U+E000, private use).
pub(super) const OPEN: char = '\u{E000}';
/// Closes a reference's placeholder (U+E001, private use).
pub(super) const CLOSE: char = '\u{E001}';

/// `text` with each `${NAME}` swapped for its placeholder. Text that already holds a
/// placeholder character is refused: it would read as a reference nobody wrote.
pub(super) fn mark(text: &str) -> Result<Cow<'_, str>, String> {
    if let Some(index) = text.lines().position(|line| line.contains([OPEN, CLOSE])) {
        return Err(format!("line {}: the characters U+E000 and U+E001 are reserved; remove them", index + 1));
    }
    if !text.contains("${") {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}').map(|end| (&after[..end], end)) {
            Some((name, end)) if is_var_name(name) => {
                out.extend([OPEN].into_iter().chain(name.chars()).chain([CLOSE]));
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

/// `value` with placeholders turned back into the `${NAME}` the operator wrote (for keys,
/// which are never interpolated, and for messages).
pub(super) fn restore(value: &str) -> Cow<'_, str> {
    if !value.contains([OPEN, CLOSE]) {
        return Cow::Borrowed(value);
    }
    Cow::Owned(value.replace(OPEN, "${").replace(CLOSE, "}"))
}

/// The variables of one load: the lookup, and which referenced variables were not set.
pub(super) struct Vars<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    /// The config text as written, to name the lines of a warning.
    text: &'a str,
    /// The text the parser reads (with placeholders), to tell plain scalars.
    marked: &'a str,
    unset: RefCell<Vec<String>>,
}

impl<'a> Vars<'a> {
    /// `marked` is [`mark`] of `text`, the text the parser reads.
    pub(super) fn new(text: &'a str, marked: &'a str, lookup: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Vars { lookup, text, marked, unset: RefCell::default() }
    }

    /// `value` with every placeholder replaced by the variable's value (an unset one by an
    /// empty string, remembered for a warning).
    pub(super) fn expand<'s>(&self, value: &'s str) -> Cow<'s, str> {
        if !value.contains(OPEN) {
            return Cow::Borrowed(value);
        }
        let mut out = String::with_capacity(value.len());
        let mut rest = value;
        while let Some(start) = rest.find(OPEN) {
            out.push_str(&rest[..start]);
            let after = &rest[start + OPEN.len_utf8()..];
            // `mark` writes whole placeholders only: a close always follows.
            let end = after.find(CLOSE).unwrap_or(after.len());
            out.push_str(&self.get(&after[..end]));
            rest = after.get(end + CLOSE.len_utf8()..).unwrap_or("");
        }
        out.push_str(rest);
        Cow::Owned(out)
    }

    /// The variable's value when `value` is exactly one reference.
    pub(super) fn whole(&self, value: &str) -> Option<String> {
        let name = value.strip_prefix(OPEN)?.strip_suffix(CLOSE)?;
        is_var_name(name).then(|| self.get(name))
    }

    fn get(&self, name: &str) -> String {
        (self.lookup)(name).unwrap_or_else(|| {
            let mut unset = self.unset.borrow_mut();
            if !unset.iter().any(|n| n == name) {
                unset.push(name.to_owned());
            }
            String::new()
        })
    }

    /// Whether `value`, borrowed from the parsed text by the parser, was written as a plain
    /// (unquoted) scalar. The parser reports no style, but a quoted scalar's text starts right
    /// after its quote, and a plain one never does. Text not borrowed from the config (an
    /// escaped or block scalar) is not plain.
    pub(super) fn is_plain(&self, value: &str) -> bool {
        let base = self.marked.as_ptr() as usize;
        let at = value.as_ptr() as usize;
        if at < base || at + value.len() > base + self.marked.len() {
            return false;
        }
        let offset = at - base;
        offset == 0 || !matches!(self.marked.as_bytes()[offset - 1], b'"' | b'\'')
    }

    /// One warning per unset variable, naming the lines that refer to it.
    pub(super) fn warnings(&self) -> Vec<String> {
        let unset = self.unset.borrow();
        unset.iter().map(|name| warning(self.text, name)).collect()
    }
}

fn warning(text: &str, name: &str) -> String {
    let reference = format!("${{{name}}}");
    let lines: Vec<String> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with('#') && line.contains(&reference))
        .map(|(index, _)| (index + 1).to_string())
        .collect();
    let at = match lines.len() {
        0 => String::new(),
        1 => format!("line {}: ", lines[0]),
        _ => format!("lines {}: ", lines.join(", ")),
    };
    format!("{at}environment variable {name} is not set; using an empty string")
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// What a plain YAML scalar with some text is (YAML 1.2 core schema, as the parser applies it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Plain {
    /// Empty, `~`, `null`.
    Null,
    /// `true` / `false` (also capitalised or upper case).
    Bool(bool),
    /// A non-negative integer: decimal, `0x` or `0o`.
    Unsigned(u64),
    /// A negative integer.
    Signed(i64),
    /// A float, `.inf`, `.nan`.
    Float(f64),
    /// Anything else: the text.
    Text,
}

impl Plain {
    /// Types `text` as YAML types a plain scalar of that text. Never more than a scalar: text
    /// that would be a mapping, a list, a tag or a comment in YAML is [`Plain::Text`].
    pub(super) fn of(text: &str) -> Plain {
        match text {
            "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
            "true" | "True" | "TRUE" => return Plain::Bool(true),
            "false" | "False" | "FALSE" => return Plain::Bool(false),
            ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Plain::Float(f64::INFINITY),
            "-.inf" | "-.Inf" | "-.INF" => return Plain::Float(f64::NEG_INFINITY),
            ".nan" | ".NaN" | ".NAN" => return Plain::Float(f64::NAN),
            _ => {}
        }
        let unsigned = text.strip_prefix('+').unwrap_or(text);
        if text.starts_with('+') && unsigned.starts_with(['+', '-']) {
            return Plain::Text;
        }
        let radix = |prefix: &str, radix| {
            let digits = unsigned.strip_prefix(prefix).filter(|d| !d.starts_with(['+', '-']))?;
            u64::from_str_radix(digits, radix).ok()
        };
        if let Some(n) = radix("0x", 16).or_else(|| radix("0o", 8)) {
            return Plain::Unsigned(n);
        }
        // Only digits or a dot start a number: Rust's own spellings YAML does not have (`inf`,
        // `NaN`) stay text, and so does a leading zero before more digits (`0123`, YAML 1.2).
        let magnitude = unsigned.strip_prefix('-').unwrap_or(unsigned);
        let leading_zero =
            magnitude.len() > 1 && magnitude.starts_with('0') && magnitude.bytes().all(|b| b.is_ascii_digit());
        if !magnitude.starts_with(|c: char| c.is_ascii_digit() || c == '.') || leading_zero {
            return Plain::Text;
        }
        if let Ok(n) = unsigned.parse::<u64>() {
            Plain::Unsigned(n)
        } else if let Ok(n) = unsigned.parse::<i64>() {
            Plain::Signed(n)
        } else {
            match unsigned.parse::<f64>() {
                Ok(f) if f.is_finite() => Plain::Float(f),
                _ => Plain::Text,
            }
        }
    }
}

//! The model's Markdown for a chat platform: split into messages at a size limit without
//! breaking a code block, and converted to Slack's mrkdwn or Telegram's HTML. The converters
//! escape everything they do not turn into markup, so any model output makes a message the
//! platform accepts.

/// Splits `text` into parts of at most `limit` characters: at a blank line, else a line
/// break, else a space, else anywhere (never inside a character). A code block cut in two is
/// closed at the end of one part and opened again at the start of the next.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    const FENCE: &str = "```";
    // Room for the fence a cut may add at each end.
    let limit = limit.max(64) - 2 * (FENCE.len() + 1);
    let mut parts = Vec::new();
    let mut rest = text.trim_end();
    let mut reopen = false;
    while !rest.is_empty() {
        let mut part = String::new();
        if reopen {
            part.push_str(FENCE);
            part.push('\n');
        }
        let cut = if rest.chars().count() <= limit { rest.len() } else { cut_point(rest, limit) };
        let (head, tail) = rest.split_at(cut);
        part.push_str(head.trim_end());
        let open = (reopen as usize + head.matches(FENCE).count()) % 2 == 1;
        if open && !tail.trim().is_empty() {
            part.push('\n');
            part.push_str(FENCE);
        }
        reopen = open;
        parts.push(part);
        rest = tail.trim_start_matches([' ', '\n']);
    }
    parts
}

/// Where to cut `text` (longer than `limit` characters): the byte index of the best break.
fn cut_point(text: &str, limit: usize) -> usize {
    let hard = text.char_indices().nth(limit).map_or(text.len(), |(i, _)| i);
    let window = &text[..hard];
    let floor = hard / 2; // never cut so early that parts become tiny
    for sep in ["\n\n", "\n", " "] {
        if let Some(at) = window.rfind(sep).filter(|&at| at > floor) {
            return at + sep.len();
        }
    }
    hard
}

/// How one platform writes the markup the converter produces.
struct Markup {
    bold: (&'static str, &'static str),
    italic: (&'static str, &'static str),
    strike: (&'static str, &'static str),
    code: (&'static str, &'static str),
    /// A fenced block, its language given.
    block: fn(&str, &str) -> String,
    link: fn(&str, &str) -> String,
    escape: fn(&str) -> String,
}

/// Slack's mrkdwn: `*bold*`, `_italic_`, `~strike~`, `<url|text>`; `&`, `<`, `>` escaped.
pub fn to_slack(markdown: &str) -> String {
    const SLACK: Markup = Markup {
        bold: ("*", "*"),
        italic: ("_", "_"),
        strike: ("~", "~"),
        code: ("`", "`"),
        block: |_, code| format!("```\n{code}\n```"),
        link: |text, url| format!("<{}|{}>", url.replace('|', "%7C"), text.replace(['<', '>', '|'], "")),
        escape: slack_escape,
    };
    convert(markdown, &SLACK)
}

/// Telegram's HTML parse mode: `<b>`, `<i>`, `<s>`, `<code>`, `<pre>`, `<a href>`; `&`, `<`,
/// `>` (and `"` in attributes) escaped.
pub fn to_telegram(markdown: &str) -> String {
    const TELEGRAM: Markup = Markup {
        bold: ("<b>", "</b>"),
        italic: ("<i>", "</i>"),
        strike: ("<s>", "</s>"),
        code: ("<code>", "</code>"),
        block: |lang, code| match lang {
            "" => format!("<pre>{code}</pre>"),
            lang => format!("<pre><code class=\"language-{}\">{code}</code></pre>", html_escape(lang).replace('"', "")),
        },
        link: |text, url| format!("<a href=\"{}\">{text}</a>", url.replace('"', "%22")),
        escape: html_escape,
    };
    convert(markdown, &TELEGRAM)
}

/// `&`, `<`, `>` as entities: what Slack requires of any text.
pub fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// `&`, `<`, `>` as entities, for Telegram's HTML.
pub fn html_escape(text: &str) -> String {
    slack_escape(text)
}

fn convert(markdown: &str, m: &Markup) -> String {
    let mut out = Vec::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            let mut code = Vec::new();
            for inner in lines.by_ref() {
                if inner.trim_start().starts_with("```") {
                    break;
                }
                code.push(inner);
            }
            out.push((m.block)(lang.trim(), &(m.escape)(&code.join("\n"))));
            continue;
        }
        let indent = &line[..line.len() - trimmed.len()];
        if let Some(heading) = heading(trimmed) {
            out.push(format!("{}{}{}", m.bold.0, inline(heading, m), m.bold.1));
        } else if let Some(item) = trimmed.strip_prefix("- ").or_else(|| trimmed.strip_prefix("* ")) {
            out.push(format!("{indent}• {}", inline(item, m)));
        } else {
            out.push(format!("{indent}{}", inline(trimmed, m)));
        }
    }
    out.join("\n")
}

/// A `#`..`######` heading's text.
fn heading(line: &str) -> Option<&str> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes).then(|| line[hashes..].strip_prefix(' ')).flatten().map(str::trim)
}

/// One line's inline Markdown: code spans, links, bold, italic, strike; the rest escaped.
fn inline(text: &str, m: &Markup) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        if let Some(done) = span(rest, m) {
            out.push_str(&done.0);
            i += done.1;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push_str(&(m.escape)(c.encode_utf8(&mut [0; 4])));
        i += c.len_utf8();
    }
    out
}

/// The markup for a span starting at the beginning of `rest`, and the bytes it consumed.
fn span(rest: &str, m: &Markup) -> Option<(String, usize)> {
    if let Some(body) = rest.strip_prefix('`') {
        let end = body.find('`').filter(|&e| e > 0)?;
        return Some((format!("{}{}{}", m.code.0, (m.escape)(&body[..end]), m.code.1), end + 2));
    }
    if let Some(body) = rest.strip_prefix('[') {
        let close = body.find("](")?;
        let url_start = close + 2;
        let url_end = url_start + body[url_start..].find(')')?;
        let (label, url) = (&body[..close], &body[url_start..url_end]);
        if label.is_empty()
            || !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("mailto:"))
        {
            return None;
        }
        return Some(((m.link)(&inline(label, m), &(m.escape)(url)), url_end + 2));
    }
    for (delim, style) in [("**", m.bold), ("__", m.bold), ("~~", m.strike), ("*", m.italic), ("_", m.italic)] {
        let Some(body) = rest.strip_prefix(delim) else { continue };
        if body.starts_with(' ') || body.starts_with(delim) {
            continue;
        }
        let Some(end) = body.find(delim).filter(|&e| e > 0 && !body[..e].ends_with(' ')) else { continue };
        // `snake_case` stays as written: an underscore inside a word.
        let after = body[end + delim.len()..].chars().next();
        if delim.starts_with('_') && after.is_some_and(char::is_alphanumeric) {
            continue;
        }
        return Some((format!("{}{}{}", style.0, inline(&body[..end], m), style.1), end + 2 * delim.len()));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_breaks_and_keeps_code_blocks_whole() {
        assert_eq!(split("short", 100), ["short"]);
        let text = format!("{}\n\n{}", "a".repeat(60), "b".repeat(60));
        assert_eq!(split(&text, 100), ["a".repeat(60), "b".repeat(60)]);
        let long = format!("intro\n```\n{}\n```\nafter", "x ".repeat(100));
        let parts = split(&long, 100);
        assert!(parts.len() > 2, "{parts:?}");
        for part in &parts {
            assert!(part.chars().count() <= 100, "{part}");
            assert_eq!(part.matches("```").count() % 2, 0, "every part's code block is closed: {part}");
        }
        assert!(split(&"é".repeat(500), 100).iter().all(|p| p.chars().count() <= 100));
        assert!(split("", 100).is_empty());
    }

    #[test]
    fn slack_mrkdwn() {
        assert_eq!(to_slack("**bold** and *it* and `a<b`"), "*bold* and _it_ and `a&lt;b`");
        assert_eq!(to_slack("# Title\n- one\n- two"), "*Title*\n• one\n• two");
        assert_eq!(to_slack("[docs](https://x.io/a?b=1&c=2)"), "<https://x.io/a?b=1&amp;c=2|docs>");
        assert_eq!(to_slack("run snake_case_name & 1 < 2"), "run snake_case_name &amp; 1 &lt; 2");
        assert_eq!(to_slack("```rust\nlet a = 1 < 2;\n```"), "```\nlet a = 1 &lt; 2;\n```");
    }

    #[test]
    fn telegram_html_is_always_well_formed() {
        assert_eq!(to_telegram("**b** _i_ ~~s~~ `c`"), "<b>b</b> <i>i</i> <s>s</s> <code>c</code>");
        assert_eq!(to_telegram("[a](https://x.io/\"q)"), "<a href=\"https://x.io/%22q\">a</a>");
        assert_eq!(to_telegram("_*[]()~ <tag> & **unclosed"), "_*[]()~ &lt;tag&gt; &amp; **unclosed");
        assert_eq!(to_telegram("```py\nx<1\n```"), "<pre><code class=\"language-py\">x&lt;1</code></pre>");
        assert_eq!(to_telegram("[not a link](javascript:x)"), "[not a link](javascript:x)");
    }
}

//! `${VAR}` substitution in config text.

/// Replaces every `${NAME}` in `text` with the variable's value from `lookup`.
///
/// An unset variable becomes an empty string and a warning (as the spec says). Lines that are
/// comments are left alone. A value holding a line break is refused: substituted into YAML it
/// could add keys the operator never wrote.
pub fn interpolate(text: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(text.len());
    let mut warnings = Vec::new();
    for (index, line) in text.split_inclusive('\n').enumerate() {
        if line.trim_start().starts_with('#') {
            out.push_str(line);
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                rest = "";
                break;
            };
            let name = &after[..end];
            if !is_var_name(name) {
                out.push_str(&rest[start..start + 3 + end]);
            } else {
                match lookup(name) {
                    Some(value) if value.contains(['\n', '\r']) => {
                        return Err(format!(
                            "line {}: environment variable {name} holds a line break; \
                             multi-line values cannot be substituted into config.yaml",
                            index + 1
                        ));
                    }
                    Some(value) => out.push_str(&value),
                    None => warnings.push(format!(
                        "line {}: environment variable {name} is not set; using an empty string",
                        index + 1
                    )),
                }
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
    }
    Ok((out, warnings))
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

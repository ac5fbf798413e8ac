//! The rule for names that prefix tool names: skills, their tools, and MCP servers.
//!
//! The model sees `<prefix>__<tool>`, and lookup splits a name at its first `__`. The spec's
//! snake_case (`[a-z][a-z0-9_]*`) without `__` and without a trailing `_` makes that split
//! exact: a prefix holds no `__` and does not end in `_`, a tool does not start with `_`, so
//! the first `__` of `prefix__tool` is the separator. Without it, skill `cx_` tool `y` and
//! skill `cx` tool `_y` would both be `cx___y`.

/// Checks `name` against the rule; the error says what breaks it, for a message that
/// starts with the kind of name and the name itself.
pub fn check_name(name: &str) -> Result<(), String> {
    let problem = if name.is_empty() {
        "is empty"
    } else if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        "does not start with a lowercase letter"
    } else if !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        "holds a character other than a-z, 0-9 and `_`"
    } else if name.contains("__") {
        "contains `__`, the separator of tool names"
    } else if name.ends_with('_') {
        "ends with `_`"
    } else {
        return Ok(());
    };
    Err(format!("{problem}; names are snake_case: [a-z][a-z0-9_]*, without `__` or a trailing `_`"))
}

/// Checks an environment variable's name (a skill's `[capabilities] env`, an operator's
/// `skills.grants.<skill>.env`): the portable `[A-Za-z_][A-Za-z0-9_]*`, no pattern.
pub fn check_env_name(name: &str) -> Result<(), String> {
    let portable = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if portable {
        Ok(())
    } else {
        Err(format!("`{name}` is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*, no patterns)"))
    }
}

#[cfg(test)]
mod tests {
    use super::{check_env_name, check_name};

    #[test]
    fn environment_variable_names_are_portable_and_literal() {
        for good in ["A", "_X", "SERVICE_API_KEY", "key2"] {
            assert_eq!(check_env_name(good), Ok(()), "{good}");
        }
        for bad in ["", "2X", "A-B", "*", "AWS_*", "A=B", "A B"] {
            assert!(check_env_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn snake_case_without_double_or_trailing_underscores() {
        for good in ["a", "cx", "http_checker", "v2", "a1_b2_c3"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        let cases = [
            ("", "empty"),
            ("_y", "lowercase letter"),
            ("2fa", "lowercase letter"),
            ("Cx", "lowercase letter"),
            ("c-x", "other than"),
            ("cé", "other than"),
            ("c x", "other than"),
            ("a__b", "`__`"),
            ("cx_", "ends with"),
        ];
        for (bad, why) in cases {
            let err = check_name(bad).unwrap_err();
            assert!(err.contains(why) && err.contains("snake_case"), "{bad}: {err}");
        }
    }
}

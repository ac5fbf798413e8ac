//! The `tool-target` answer, checked: what a call queries, for the API stream's `tool_started`.

/// A valid `tool-target` answer: each field already checked (target 1–128 characters,
/// query kind 1–32 of `[a-z_]`); an invalid one is `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolTarget {
    /// The entity queried.
    pub target: Option<String>,
    /// The kind of data.
    pub query_kind: Option<String>,
}

impl ToolTarget {
    /// Keeps the valid fields of a hook's answer; `None` when none is left.
    pub fn checked(target: Option<String>, query_kind: Option<String>) -> Option<Self> {
        let target = target.filter(|t| (1..=128).contains(&t.chars().count()));
        let query_kind = query_kind
            .filter(|k| (1..=32).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
        (target.is_some() || query_kind.is_some()).then_some(ToolTarget { target, query_kind })
    }
}

#[cfg(test)]
mod tests {
    use super::ToolTarget;

    #[test]
    fn invalid_target_fields_are_dropped_not_truncated() {
        let t = |target: &str, kind: &str| ToolTarget::checked(Some(target.into()), Some(kind.into()));
        assert_eq!(
            t("payments", "logs"),
            Some(ToolTarget { target: Some("payments".into()), query_kind: Some("logs".into()) })
        );
        assert_eq!(t("", "Logs"), None);
        assert_eq!(t(&"x".repeat(129), "metrics_2"), None);
        assert_eq!(t(&"x".repeat(128), &"k".repeat(33)).unwrap().query_kind, None);
        assert_eq!(t("", "query_kind").unwrap().target, None);
    }
}

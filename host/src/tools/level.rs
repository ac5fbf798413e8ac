//! Approval levels, and what a person's approvals are counted against.

/// The approval a call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Run without asking.
    Auto,
    /// Ask for approve/deny.
    Approve,
    /// Ask for the confirmation challenge.
    Confirm,
}

impl Level {
    /// The spec's name of the level (`none` for auto).
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Auto => "none",
            Level::Approve => "approve",
            Level::Confirm => "confirm",
        }
    }
}

impl From<crate::skills::contract::Asked> for Level {
    fn from(asked: crate::skills::contract::Asked) -> Self {
        match asked {
            crate::skills::contract::Asked::Approve => Level::Approve,
            crate::skills::contract::Asked::Confirm => Level::Confirm,
        }
    }
}

impl From<crate::config::OverrideLevel> for Level {
    fn from(level: crate::config::OverrideLevel) -> Self {
        match level {
            crate::config::OverrideLevel::Approve => Level::Approve,
            crate::config::OverrideLevel::Confirm => Level::Confirm,
        }
    }
}

/// The challenge a person types to confirm a `confirm`-level call.
pub const CONFIRMATION_CHALLENGE: &str = "CONFIRM";

/// What approvals are counted against: a tool, optionally narrowed to a subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotionKey {
    /// The prefixed tool name.
    pub tool: String,
    /// A finer grain within the tool (e.g. a shell command), when the tool has one.
    pub subject: Option<String>,
}

impl PromotionKey {
    /// The key of a whole tool.
    pub fn tool(name: &str) -> Self {
        PromotionKey { tool: name.to_owned(), subject: None }
    }
}

//! `engine.tool_budget` (legacy alias `engine.log_tool_budget`): per-turn caps on calls of
//! operator-chosen tools, whoever provides them (skills or MCP servers).
//!
//! Calls are admitted in the order the model made them. A call past a cap is not run; the
//! model is told so without counters or codes. After such a round the turn either gets one
//! corrective round offering only the tools that can still run (`replan_enabled`), or goes
//! straight to a tools-free answer built honestly from the evidence gathered so far.

use super::deadline::WrapUp;
use super::window::{service_name_minutes, window_minutes};
use crate::config;
use crate::llm::ToolDecl;
use crate::tools::ToolOutcome;
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::time::Duration;

/// The wrap-up when the budget ends the tool loop: an honest partial answer from the results
/// so far, or, when the model gives no text, a fixed sentence (the `fallback` disposition).
pub const BUDGET_SPENT: WrapUp = WrapUp {
    instruction: "The tool budget for this request is spent: no more tool calls can run. \
        Answer now from the results you already have. Say plainly which parts you could not check, and do not guess them.",
    fallback: "I could not finish this request: its tool budget was spent before I had an answer. \
        Ask again, more narrowly, to try once more.",
};

/// The caps in force.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolBudgetPolicy {
    /// Budgeted tools: a prefixed name (`server__get_logs`) or an unprefixed one (`get_logs`,
    /// any provider's tool of that name).
    pub tools: Vec<String>,
    /// Calls of budgeted tools per turn.
    pub max_per_turn: Option<u32>,
    /// Long-range calls of budgeted tools per turn.
    pub max_long_range_per_turn: Option<u32>,
    /// A call whose time window spans more than this is long range.
    pub long_range_threshold_minutes: u32,
    /// A time span written into a service-name argument counts as the call's window too.
    pub service_name_heuristic: bool,
    /// Offer one corrective round when a cap is reached.
    pub replan_enabled: bool,
}

impl ToolBudgetPolicy {
    /// The policy of the `engine` section; `None` when off. `tool_budget` wins over the legacy
    /// `log_tool_budget`, which alone is on unless `enabled: false`.
    pub fn from_config(engine: &config::Engine) -> Option<Self> {
        let (section, legacy) = match (&engine.tool_budget, &engine.log_tool_budget) {
            (Some(section), _) => (section, false),
            (None, Some(section)) => (section, true),
            (None, None) => return None,
        };
        if !section.enabled.unwrap_or(legacy) || section.tools.is_empty() {
            return None;
        }
        Some(ToolBudgetPolicy {
            tools: section.tools.clone(),
            max_per_turn: section.max_per_turn,
            max_long_range_per_turn: section.max_long_range_per_turn,
            long_range_threshold_minutes: section.long_range_threshold_minutes.unwrap_or(60),
            service_name_heuristic: section.long_range_service_name_heuristic,
            replan_enabled: section.replan_enabled,
        })
    }

    /// Whether calls of `name` (prefixed) are budgeted.
    pub fn covers(&self, name: &str) -> bool {
        let unprefixed = name.split_once(crate::skills::skill::SEPARATOR).map(|(_, t)| t);
        self.tools.iter().any(|t| t == name || Some(t.as_str()) == unprefixed)
    }

    /// Whether a call with `input` counts toward the long-range cap.
    pub fn is_long_range(&self, input: &Value) -> bool {
        let stated = window_minutes(input);
        let guessed = if self.service_name_heuristic { service_name_minutes(input) } else { None };
        stated.into_iter().chain(guessed).any(|m| m > f64::from(self.long_range_threshold_minutes))
    }
}

/// How the turn goes on after a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRound {
    /// Nothing was refused: as usual.
    Continue,
    /// Calls were refused: one corrective round, offering only tools that can still run.
    Replan,
    /// Calls were refused: answer now, tools-free, from the evidence gathered (counted by
    /// [`TurnBudget::answered`] once the answer is known).
    Synthesize,
}

#[derive(Debug, Default)]
struct Counters {
    used: u32,
    long_range: u32,
    refused_this_round: u32,
    replanned: bool,
}

/// One turn's budget.
#[derive(Debug, Default)]
pub struct TurnBudget {
    policy: Option<ToolBudgetPolicy>,
    counters: Mutex<Counters>,
}

impl TurnBudget {
    /// A fresh budget (`None`: no caps).
    pub fn new(policy: Option<ToolBudgetPolicy>) -> Self {
        TurnBudget { policy, counters: Mutex::default() }
    }

    /// Admits one call, in call order: `Some(result)` is the refusal the model gets instead.
    pub fn admit(&self, name: &str, input: &Value) -> Option<ToolOutcome> {
        let policy = self.policy.as_ref().filter(|p| p.covers(name))?;
        let mut c = self.counters.lock();
        let long_range = policy.is_long_range(input);
        let over = policy.max_per_turn.is_some_and(|max| c.used >= max)
            || (long_range && policy.max_long_range_per_turn.is_some_and(|max| c.long_range >= max));
        if over {
            c.refused_this_round += 1;
            tracing::info!(tool = %name, metric = "mithai.tool_budget.blocked_calls", "tool budget: call not run");
            crate::metrics::budget_blocked();
            let error = json!({"error": "this call was not run: the budget for this tool in this request is spent. \
                Use the results you already have, or other tools."});
            return Some(ToolOutcome::error(&error, Duration::ZERO));
        }
        c.used += 1;
        c.long_range += u32::from(long_range);
        None
    }

    /// Closes a round: how the turn goes on.
    pub fn after_round(&self) -> AfterRound {
        let Some(policy) = &self.policy else { return AfterRound::Continue };
        let mut c = self.counters.lock();
        if std::mem::take(&mut c.refused_this_round) == 0 {
            return AfterRound::Continue;
        }
        if policy.replan_enabled && !c.replanned {
            c.replanned = true;
            crate::metrics::budget_recovery("replanned");
            tracing::info!(
                metric = "mithai.tool_budget.recoveries",
                disposition = "replanned",
                "tool budget: one corrective round"
            );
            return AfterRound::Replan;
        }
        AfterRound::Synthesize
    }

    /// Counts the answer after [`AfterRound::Synthesize`]: `synthesized` from the evidence, or
    /// `fallback` when the wrap-up gave no text and the turn answered the fixed sentence.
    pub fn answered(&self, fell_back: bool) {
        let disposition = if fell_back { "fallback" } else { "synthesized" };
        crate::metrics::budget_recovery(disposition);
        tracing::info!(
            metric = "mithai.tool_budget.recoveries",
            disposition,
            "tool budget: answered without more calls"
        );
    }

    /// The tools to offer: budgeted ones leave once the per-turn cap is spent.
    pub fn offered(&self, decls: Vec<ToolDecl>) -> Vec<ToolDecl> {
        let Some(policy) = &self.policy else { return decls };
        let spent = policy.max_per_turn.is_some_and(|max| self.counters.lock().used >= max);
        decls.into_iter().filter(|d| !(spent && policy.covers(&d.name))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max: Option<u32>, long: Option<u32>, replan: bool) -> ToolBudgetPolicy {
        ToolBudgetPolicy {
            tools: vec!["get_logs".into()],
            max_per_turn: max,
            max_long_range_per_turn: long,
            long_range_threshold_minutes: 60,
            service_name_heuristic: false,
            replan_enabled: replan,
        }
    }

    #[test]
    fn service_name_heuristic_counts_toward_the_long_range_cap() {
        let mut on = policy(None, Some(1), false);
        let input = json!({"service": "checkout last 2 days"});
        assert!(!on.is_long_range(&input), "off unless configured");
        on.service_name_heuristic = true;
        assert!(on.is_long_range(&input));
        assert!(!on.is_long_range(&json!({"service": "checkout 30m"})), "short spans are not long range");
        let budget = TurnBudget::new(Some(on));
        assert!(budget.admit("get_logs", &input).is_none());
        assert!(budget.admit("get_logs", &json!({"service": "api 2d"})).is_some(), "the second long-range call");
        assert!(budget.admit("get_logs", &json!({"service": "api"})).is_none(), "others still run");
    }

    #[test]
    fn per_turn_cap_covers_prefixed_and_unprefixed_names() {
        let budget = TurnBudget::new(Some(policy(Some(2), None, false)));
        assert!(budget.admit("obs__get_logs", &json!({})).is_none());
        assert!(budget.admit("logs__get_logs", &json!({})).is_none());
        assert!(budget.admit("obs__other", &json!({})).is_none(), "unconfigured tools stay available");
        let refused = budget.admit("obs__get_logs", &json!({})).expect("third call refused");
        assert!(refused.is_error && !refused.content.contains('2'), "no counters reach the model: {}", refused.content);
        let decls = vec![
            ToolDecl { name: "obs__get_logs".into(), description: String::new(), input_schema: json!({}).into() },
            ToolDecl { name: "obs__other".into(), description: String::new(), input_schema: json!({}).into() },
        ];
        assert_eq!(budget.offered(decls).iter().map(|d| d.name.as_str()).collect::<Vec<_>>(), ["obs__other"]);
        assert_eq!(budget.after_round(), AfterRound::Synthesize);
    }

    #[test]
    fn long_range_cap_and_one_replan() {
        let budget = TurnBudget::new(Some(policy(None, Some(1), true)));
        assert!(budget.admit("get_logs", &json!({"window": "24h"})).is_none());
        assert!(budget.admit("get_logs", &json!({"window": "30m"})).is_none(), "short windows are not capped");
        assert!(budget.admit("get_logs", &json!({"window": "2d"})).is_some());
        assert_eq!(budget.after_round(), AfterRound::Replan);
        assert_eq!(budget.after_round(), AfterRound::Continue, "a round without refusals");
        assert!(budget.admit("get_logs", &json!({"hours": 5})).is_some());
        assert_eq!(budget.after_round(), AfterRound::Synthesize, "exactly one corrective round");
    }

    #[test]
    fn config_and_legacy_alias() {
        let section =
            config::ToolBudget { tools: vec!["get_logs".into()], max_per_turn: Some(3), ..Default::default() };
        let legacy = config::Engine { log_tool_budget: Some(section.clone()), ..Default::default() };
        assert!(ToolBudgetPolicy::from_config(&legacy).is_some(), "the legacy key alone is on");
        let new = config::Engine { tool_budget: Some(section.clone()), ..Default::default() };
        assert!(ToolBudgetPolicy::from_config(&new).is_none(), "the new key is off unless enabled");
        let on = config::ToolBudget { enabled: Some(true), ..section };
        assert_eq!(
            ToolBudgetPolicy::from_config(&config::Engine { tool_budget: Some(on), ..Default::default() })
                .unwrap()
                .max_per_turn,
            Some(3)
        );
    }
}

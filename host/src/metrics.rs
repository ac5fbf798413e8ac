//! Prometheus metrics: one process-wide registry every layer records into (like `tracing`,
//! it is read by all and uses none), served as text at `GET /metrics` on the API port.
//!
//! Label sets are bounded: agent keys, provider and model names, tool names (what the loaded
//! skills and connected servers offer), outcome and kind words; never an id, an input, a
//! prompt or an answer. The tool budget's counters keep the spec's names
//! (`mithai.tool_budget.recoveries`, `.blocked_calls`, `.suppressed_retries`), spelled the
//! Prometheus way.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::LazyLock;
use std::time::Duration;

/// A label set: (name, value) pairs.
type Labels = Vec<(&'static str, String)>;
type Counters = Family<Labels, Counter>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Every metric of the process.
pub struct Metrics {
    registry: Registry,
    turns: Counters,
    turn_seconds: Histograms,
    llm_requests: Counters,
    llm_tokens: Counters,
    tool_calls: Counters,
    tool_seconds: Histograms,
    sandbox_failures: Counters,
    approvals_pending: Gauge,
    approvals: Counters,
    approval_wait_seconds: Histograms,
    questions: Counters,
    mcp_up: Family<Labels, Gauge>,
    mcp_reconnects: Counters,
    budget_recoveries: Counters,
    budget_blocked: Counter,
    budget_suppressed: Counter,
    streams_open: Gauge,
    spans_dropped: Counters,
}

/// Seconds from 5 ms to about 164 s, doubling.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

/// Seconds from 100 ms to about 27 min, doubling (a person's wait).
fn wait_seconds() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 2.0, 15))
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::default();
        let turns = Counters::default();
        registry.register(
            "skillhost_turns",
            "Turns answered, by agent and outcome (completed, time_boxed, failed)",
            turns.clone(),
        );
        let turn_seconds = Histograms::new_with_constructor(seconds as fn() -> Histogram);
        registry.register("skillhost_turn_duration_seconds", "How long turns took, by agent", turn_seconds.clone());
        let llm_requests = Counters::default();
        registry.register(
            "skillhost_llm_requests",
            "LLM requests, by provider, model and outcome (ok, error)",
            llm_requests.clone(),
        );
        let llm_tokens = Counters::default();
        registry.register(
            "skillhost_llm_tokens",
            "LLM tokens, by provider, model and direction (input, output)",
            llm_tokens.clone(),
        );
        let tool_calls = Counters::default();
        registry.register(
            "skillhost_tool_calls",
            "Tool calls, by tool, kind (component, native, script, mcp, declared, ...) and outcome (ok, error, refused)",
            tool_calls.clone(),
        );
        let tool_seconds = Histograms::new_with_constructor(seconds as fn() -> Histogram);
        registry.register(
            "skillhost_tool_call_duration_seconds",
            "How long tool calls that ran took, by kind",
            tool_seconds.clone(),
        );
        let sandbox_failures = Counters::default();
        registry.register(
            "skillhost_sandbox_failures",
            "Calls the sandbox stopped, by kind (fuel, deadline, memory, trap, oversize)",
            sandbox_failures.clone(),
        );
        let approvals_pending = Gauge::default();
        registry.register(
            "skillhost_approvals_pending",
            "Approvals waiting for a person now",
            approvals_pending.clone(),
        );
        let approvals = Counters::default();
        registry.register(
            "skillhost_approvals",
            "Approval requests put to a person, by outcome (approved, denied, timed_out, cancelled)",
            approvals.clone(),
        );
        let approval_wait_seconds = Histograms::new_with_constructor(wait_seconds as fn() -> Histogram);
        registry.register(
            "skillhost_approval_wait_seconds",
            "How long approvals waited for a decision",
            approval_wait_seconds.clone(),
        );
        let questions = Counters::default();
        registry.register(
            "skillhost_questions",
            "Questions put to a person, by outcome (answered, declined, timed_out, unavailable)",
            questions.clone(),
        );
        let spans_dropped = Counters::default();
        registry.register(
            "skillhost_trace_spans_dropped",
            "Finished spans not exported, by reason (queue_full: the export queue was full; export_failed: the receiver refused them)",
            spans_dropped.clone(),
        );
        let mcp_up = Family::<Labels, Gauge>::default();
        registry.register(
            "skillhost_mcp_server_up",
            "Whether each configured MCP server is connected (1) or not (0)",
            mcp_up.clone(),
        );
        let mcp_reconnects = Counters::default();
        registry.register(
            "skillhost_mcp_reconnects",
            "Reconnections to MCP servers after a loss, by server",
            mcp_reconnects.clone(),
        );
        let budget_recoveries = Counters::default();
        registry.register(
            "mithai_tool_budget_recoveries",
            "Turns whose tool budget ran out, by disposition (replanned, synthesized, fallback)",
            budget_recoveries.clone(),
        );
        let budget_blocked = Counter::default();
        registry.register(
            "mithai_tool_budget_blocked_calls",
            "Calls not run because the tool budget was spent",
            budget_blocked.clone(),
        );
        let budget_suppressed = Counter::default();
        registry.register(
            "mithai_tool_budget_suppressed_retries",
            "Prerequisite retries not run because the tool budget was spent",
            budget_suppressed.clone(),
        );
        let streams_open = Gauge::default();
        registry.register("skillhost_sse_streams_open", "approval-v1 streams open now", streams_open.clone());
        let build = Family::<Labels, Gauge>::default();
        build.get_or_create(&vec![("version", env!("CARGO_PKG_VERSION").to_owned())]).set(1);
        registry.register("skillhost_build_info", "The running build (always 1)", build);
        Metrics {
            registry,
            turns,
            turn_seconds,
            llm_requests,
            llm_tokens,
            tool_calls,
            tool_seconds,
            sandbox_failures,
            approvals_pending,
            approvals,
            approval_wait_seconds,
            questions,
            mcp_up,
            mcp_reconnects,
            budget_recoveries,
            budget_blocked,
            budget_suppressed,
            streams_open,
            spans_dropped,
        }
    }

    /// Every metric, in the Prometheus text format (OpenMetrics, ending in `# EOF`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// The process's metrics.
pub fn get() -> &'static Metrics {
    static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);
    &METRICS
}

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A turn ended: `outcome` is `completed`, `time_boxed` or `failed`.
pub fn turn(agent: Option<&str>, outcome: &str, took: Duration) {
    let agent = agent.unwrap_or("default").to_owned();
    let m = get();
    m.turns.get_or_create(&vec![("agent", agent.clone()), ("outcome", outcome.to_owned())]).inc();
    m.turn_seconds.get_or_create(&vec![("agent", agent)]).observe(took.as_secs_f64());
}

/// An LLM request ended, with the tokens it used when it succeeded.
pub fn llm_request(provider: &str, model: &str, ok: bool, tokens: Option<(u64, u64)>) {
    let m = get();
    let labels = |extra: (&'static str, &str)| {
        vec![("provider", provider.to_owned()), ("model", model.to_owned()), (extra.0, extra.1.to_owned())]
    };
    m.llm_requests.get_or_create(&labels(("outcome", if ok { "ok" } else { "error" }))).inc();
    if let Some((input, output)) = tokens {
        m.llm_tokens.get_or_create(&labels(("direction", "input"))).inc_by(input);
        m.llm_tokens.get_or_create(&labels(("direction", "output"))).inc_by(output);
    }
}

/// A tool call was answered: `outcome` is `ok`, `error` (it ran and failed) or `refused`
/// (it never ran); `took` is set for calls that ran.
pub fn tool_call(tool: &str, kind: &str, outcome: &str, took: Option<Duration>) {
    let m = get();
    let labels = vec![("tool", tool.to_owned()), ("kind", kind.to_owned()), ("outcome", outcome.to_owned())];
    m.tool_calls.get_or_create(&labels).inc();
    if let Some(took) = took {
        m.tool_seconds.get_or_create(&vec![("kind", kind.to_owned())]).observe(took.as_secs_f64());
    }
}

/// The sandbox kind of a failed call's error kind, if the sandbox stopped it.
pub fn sandbox_failure_kind(error_kind: &str) -> Option<&'static str> {
    Some(match error_kind {
        "fuel_exhausted" => "fuel",
        "deadline" => "deadline",
        "memory_cap" => "memory",
        "trap" | "stack_overflow" => "trap",
        "result_too_large" => "oversize",
        _ => return None,
    })
}

/// The sandbox stopped a call (`kind` from [`sandbox_failure_kind`]).
pub fn sandbox_failure(kind: &str) {
    get().sandbox_failures.get_or_create(&vec![("kind", kind.to_owned())]).inc();
}

/// An approval is put to a person; the guard counts it pending until dropped.
pub fn approval_pending() -> Pending {
    get().approvals_pending.inc();
    Pending(())
}

/// An approval waiting (see [`approval_pending`]).
pub struct Pending(());

impl Drop for Pending {
    fn drop(&mut self) {
        get().approvals_pending.dec();
    }
}

/// An approval was decided (or not) after `waited`.
pub fn approval(outcome: &str, waited: Duration) {
    let m = get();
    m.approvals.get_or_create(&vec![("outcome", outcome.to_owned())]).inc();
    m.approval_wait_seconds.get_or_create(&Vec::new()).observe(waited.as_secs_f64());
}

/// A question was put to a person.
pub fn question(outcome: &str) {
    get().questions.get_or_create(&vec![("outcome", outcome.to_owned())]).inc();
}

/// `n` finished spans were not exported, for `reason` (`queue_full`, `export_failed`).
pub fn spans_dropped(reason: &'static str, n: u64) {
    get().spans_dropped.get_or_create(&vec![("reason", reason.to_owned())]).inc_by(n);
}

/// An MCP server came up or went down.
pub fn mcp_server(server: &str, up: bool) {
    get().mcp_up.get_or_create(&vec![("server", server.to_owned())]).set(i64::from(up));
}

/// An MCP server was connected again after a loss.
pub fn mcp_reconnect(server: &str) {
    get().mcp_reconnects.get_or_create(&vec![("server", server.to_owned())]).inc();
}

/// `mithai.tool_budget.recoveries`, by disposition.
pub fn budget_recovery(disposition: &str) {
    get().budget_recoveries.get_or_create(&vec![("disposition", disposition.to_owned())]).inc();
}

/// `mithai.tool_budget.blocked_calls`.
pub fn budget_blocked() {
    get().budget_blocked.inc();
}

/// `mithai.tool_budget.suppressed_retries`.
pub fn budget_suppressed() {
    get().budget_suppressed.inc();
}

/// An approval-v1 stream opened; the guard counts it open until dropped.
pub fn stream_open() -> Stream {
    get().streams_open.inc();
    Stream(())
}

/// An open stream (see [`stream_open`]).
pub struct Stream(());

impl Drop for Stream {
    fn drop(&mut self) {
        get().streams_open.dec();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn renders_what_was_recorded() {
        super::tool_call("probe__echo", "component", "ok", Some(std::time::Duration::from_millis(3)));
        super::sandbox_failure("fuel");
        let text = super::get().render();
        assert!(
            text.contains("skillhost_tool_calls_total{tool=\"probe__echo\",kind=\"component\",outcome=\"ok\"}"),
            "{text}"
        );
        assert!(text.contains("skillhost_sandbox_failures_total{kind=\"fuel\"}"), "{text}");
        assert!(text.contains("skillhost_build_info{version=\""), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}

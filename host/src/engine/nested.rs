//! Nested turns: a delegation to another agent of this process (`delegate_to_agent`) and a
//! `sub_agent` SKILL.md skill's `<skill>__run`. A nested turn is a conversation of its own
//! (the task is its only message; nothing is kept in a history) that runs inside one call of
//! the outer turn:
//!
//! - under the outer turn's deadline (shared: a person's wait gives time back to both);
//! - its gated calls put to the outer turn's person, through the outer counterpart, under the
//!   nested agent's own approval policy; their tool and approval events reach the outer
//!   stream, its text does not (the answer is the call's result);
//! - a delegation runs the other agent's prompt, skills and tool budget; a sub-agent skill
//!   runs its body as the only system prompt, only its own tools, and the outer tool budget;
//! - a delegation back to an agent already in the chain (A -> B -> A) is refused, as is one
//!   more than [`MAX_DEPTH`] agents deep. The chain travels with the rounds, out of the
//!   skills' reach (not in route attributes a tool could rewrite);
//! - in a turn that is written down while it waits (a chat turn on a shared store), its
//!   waits are written down inside the outer turn's ([`super::checkpoint`]): resumed on
//!   another replica, the outer call runs the nested turn again from where it stopped.

use super::checkpoint::{Durable, Given, Nested};
use super::counterpart::{ApprovalOutcome, Counterpart};
use super::events::{EngineEvent, EventSink};
use super::on_demand::TurnSkills;
use super::request::TurnRequest;
use super::round::{NestedRunner, Nesting, Round};
use super::tool_budget::TurnBudget;
use super::turn::{Beginning, Engine};
use crate::llm::Message;
use crate::person::{Answer, Question, Reply, Sampling};
use crate::sandbox::{CallContext, RouteAttributes};
use crate::tools::{NestedTarget, NestedTurn, Tools};
use std::time::Duration;

/// The most agents a delegation chain holds, the first one included (A -> B -> C).
pub const MAX_DEPTH: usize = 3;

#[async_trait::async_trait]
impl NestedRunner for Engine {
    async fn run_nested(&self, turn: NestedTurn, outer: &Round<'_>, chain: &[String]) -> Result<String, String> {
        match turn.target.clone() {
            NestedTarget::Skill(skill) => self.sub_agent(&skill, turn, outer, chain).await,
            NestedTarget::Agent(to) => {
                let path = admit(chain, self.settings().agent.as_deref().unwrap_or_default(), &to)?;
                let Some(peer) = self.peers.get(&to) else {
                    let running = self.peers.names().join(", ");
                    return Err(format!(
                        "no agent `{to}` runs in this process (running: {running}); `skillhost run` serves every agent in `agents`"
                    ));
                };
                tracing::info!(from = %path.last().map(String::as_str).unwrap_or_default(), to = %to, "delegating a task");
                peer.run_delegated(turn, outer, &path).await
            }
        }
    }

    async fn join_skill(&self, skill: &str) -> Result<Vec<String>, String> {
        self.joined(skill).await.map_err(|e| e.to_string())
    }

    /// One request to the agent's model with the sampling's messages and system prompt, no
    /// tools, at most the agent's own `max_tokens`.
    async fn sample(&self, sampling: &Sampling, outer: &Round<'_>) -> Result<Reply, String> {
        let provider = self.provider().ok_or("the agent has no model to sample from")?;
        let messages = sampling
            .messages
            .iter()
            .map(|m| match m.by_assistant {
                true => Message::assistant(vec![crate::llm::Block::Text(m.text.clone())]),
                false => Message::user(m.text.clone()),
            })
            .collect();
        let model = self.settings().model.clone();
        let request = crate::llm::Request {
            model: model.clone(),
            system: sampling.system_prompt.clone().unwrap_or_default(),
            messages,
            tools: Vec::new(),
            tool_choice: crate::llm::ToolChoice::Auto,
            max_tokens: sampling.max_tokens.min(self.settings().max_tokens),
        };
        let response = provider.complete(&request, &mut |_| {}).await.map_err(|e| format!("the model failed: {e}"))?;
        outer.spent.add(response.usage);
        let stop_reason = match &response.stop {
            crate::llm::StopReason::EndTurn => "endTurn".to_owned(),
            crate::llm::StopReason::MaxTokens => "maxTokens".to_owned(),
            crate::llm::StopReason::ToolUse => "toolUse".to_owned(),
            crate::llm::StopReason::Other(other) => other.clone(),
        };
        Ok(Reply::Sampled { text: response.text(), model, stop_reason: Some(stop_reason) })
    }

    async fn run_delegated(&self, turn: NestedTurn, outer: &Round<'_>, chain: &[String]) -> Result<String, String> {
        // A conversation of its own: nothing loaded on demand yet, nothing kept after; with
        // every skill it may be offered, like any turn.
        let loaded = self.ready_for_turn().await.map_err(|e| format!("agent not ready: {e}"))?;
        let skills = TurnSkills::fresh(&loaded.on_demand, &loaded.tools).await;
        let (system, tools) = (self.system_prompt(&loaded, &skills).await, loaded.with_sub_agents(&skills.tools));
        let budget = self.tool_budget();
        self.nested_turn(system, &tools, turn, outer, &budget, chain).await
    }
}

/// The chain a delegation from `me` to `to` makes, or why it is refused: a loop, or more
/// than [`MAX_DEPTH`] agents.
fn admit(chain: &[String], me: &str, to: &str) -> Result<Vec<String>, String> {
    let mut path = chain.to_vec();
    path.push(me.to_owned());
    if path.iter().any(|a| a == to) {
        return Err(format!("a delegation loop is refused: {} -> {to}", path.join(" -> ")));
    }
    if path.len() >= MAX_DEPTH {
        let path = path.join(" -> ");
        return Err(format!("delegations go at most {MAX_DEPTH} agents deep: {path} -> {to} is refused"));
    }
    Ok(path)
}

impl Engine {
    /// A sub-agent skill's turn: the body alone as the system prompt, only its own tools.
    async fn sub_agent(
        &self,
        skill: &str,
        turn: NestedTurn,
        outer: &Round<'_>,
        chain: &[String],
    ) -> Result<String, String> {
        let loaded = self.loaded();
        let found = loaded.skills.skills.get(skill).filter(|_| loaded.sub_agents.contains(skill));
        let Some(found) = found else { return Err(format!("no sub-agent skill `{skill}`")) };
        let system = found.prompt.system_text(&found.dir).trim().to_owned();
        let tools = loaded.tools.only_skill(skill);
        self.nested_turn(system, &tools, turn, outer, outer.tool_budget, chain).await
    }

    /// Runs `turn`'s task as a fresh conversation inside a call of `outer`'s, or, in a
    /// resumed outer round, goes on from where it was written down.
    async fn nested_turn(
        &self,
        system: String,
        tools: &Tools,
        turn: NestedTurn,
        outer: &Round<'_>,
        budget: &TurnBudget,
        chain: &[String],
    ) -> Result<String, String> {
        let Some(provider) = self.provider() else {
            return Err("this agent has no LLM provider".into());
        };
        let NestedTurn { task, call_id, .. } = turn;
        // The outer conversation's channel, on this agent.
        let ctx = CallContext {
            agent: self.settings().agent.clone(),
            user_id: outer.ctx.user_id.clone(),
            route: RouteAttributes::from_host(&outer.ctx.route.snapshot()),
            user_message: Some(task.clone()),
            conversation_by: outer.ctx.conversation_by,
            ..CallContext::standalone(&outer.ctx.channel_id)
        };
        let (events, counterpart) = (Quiet(outer.events), Person(outer.counterpart));
        let (mut messages, pending, given) = match outer.durable.and_then(|d| d.take_nested(&call_id)) {
            Some(nested) => resumed(nested)?,
            None => (vec![Message::user(task.clone())], None, Given::default()),
        };
        let request = TurnRequest {
            channel_id: outer.ctx.channel_id.clone(),
            thread: None,
            user_id: outer.ctx.user_id.clone(),
            message: task,
            route: Vec::new(),
        };
        let durable = outer.durable.map(|parent| Durable::nested(parent, &call_id, request, given));
        let round = Round {
            tools,
            gate: self.gate(),
            deadline: outer.deadline.clone(),
            ctx: &ctx,
            events: &events,
            counterpart: &counterpart,
            tool_budget: budget,
            nesting: Some(Nesting { runner: self, chain }),
            spent: outer.spent,
            durable: durable.as_ref(),
            given: None,
            suspended: Default::default(),
        };
        match self.converse(&provider, &system, &mut messages, &round, None, pending).await {
            Ok(result) => Ok(result.text),
            Err(e) => Err(format!("the nested turn failed: {e}")),
        }
    }
}

/// Where a nested turn written down goes on from: its conversation, the calls it waited on,
/// and what its round is given (the decision, the results kept).
fn resumed(nested: Box<Nested>) -> Result<Beginning, String> {
    let Nested { checkpoint, outcome, .. } = *nested;
    let calls = super::turn::waited_on(&checkpoint.messages);
    if calls.is_empty() {
        return Err("the nested turn written down has no calls waiting".into());
    }
    let ids: Vec<String> = calls.iter().map(|(id, ..)| id.clone()).collect();
    let given = checkpoint.given(outcome, &ids);
    Ok((checkpoint.messages, Some(calls), given))
}

/// The outer stream, without the nested turn's text (its answer is the call's result).
struct Quiet<'a>(&'a dyn EventSink);

impl EventSink for Quiet<'_> {
    fn adapter(&self) -> Option<&'static str> {
        self.0.adapter()
    }

    fn emit(&self, event: EngineEvent) {
        if !matches!(event, EngineEvent::RoundStarted | EngineEvent::TextDelta(_)) {
            self.0.emit(event);
        }
    }
}

/// The outer turn's person, without the outer adapter's own tools.
struct Person<'a>(&'a dyn Counterpart);

#[async_trait::async_trait]
impl Counterpart for Person<'_> {
    /// The outer turn's desk: an entry of a nested turn belongs to the outermost turn's
    /// agent and surface.
    fn desk(&self) -> Option<super::desk::Desk> {
        self.0.desk()
    }

    async fn present(
        &self,
        entry: &crate::broker::Entry,
        resumable: bool,
    ) -> Result<(), super::counterpart::PresentError> {
        self.0.present(entry, resumable).await
    }

    async fn ended(&self, entry: &crate::broker::Entry, outcome: &crate::broker::Outcome) {
        self.0.ended(entry, outcome).await;
    }

    fn unattended(&self) -> ApprovalOutcome {
        self.0.unattended()
    }

    async fn ask(&self, question: Question, timeout: Duration) -> Answer {
        self.0.ask(question, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_and_deep_chains_are_refused() {
        let chain = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(admit(&[], "a", "b"), Ok(chain(&["a"])));
        assert_eq!(admit(&chain(&["a"]), "b", "c"), Ok(chain(&["a", "b"])));
        assert_eq!(admit(&[], "a", "a"), Err("a delegation loop is refused: a -> a".into()));
        assert_eq!(admit(&chain(&["a"]), "b", "a"), Err("a delegation loop is refused: a -> b -> a".into()));
        let deep = admit(&chain(&["a", "b"]), "c", "d").unwrap_err();
        assert_eq!(deep, "delegations go at most 3 agents deep: a -> b -> c -> d is refused");
    }
}

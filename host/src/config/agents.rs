//! Multi-agent defaults: an agent's `adapter`, `skills`, `llm` and `ui` blocks override the
//! top-level blocks key by key (spec: "the top-level adapter, skills, and llm blocks act as
//! defaults inherited by each agent"), so `llm: {model: X}` keeps the top-level provider and
//! its keys. Merged on the parsed document, then typed again.

use super::sections::Config;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Replaces each agent block the document sets with its merge over the top-level block.
pub(super) fn apply_defaults(document: &Value, config: &mut Config) -> Result<(), String> {
    let Some(agents) = document.get("agents").and_then(Value::as_object) else { return Ok(()) };
    for (name, raw) in agents {
        let Some(agent) = config.agents.get_mut(name) else { continue };
        let block = |key: &str| merged(document.get(key), raw.get(key));
        agent.llm = typed(name, "llm", block("llm"))?.or(agent.llm.take());
        agent.skills = typed(name, "skills", block("skills"))?.or(agent.skills.take());
        // `type` and `types` are one setting written two ways: the agent's replaces the
        // top-level pair whole, so `types: [api]` under a top-level `type: cli` serves the API.
        let adapter = match raw.get("adapter").and_then(Value::as_object) {
            Some(own) if own.contains_key("type") || own.contains_key("types") => {
                let mut top = document.get("adapter").cloned();
                if let Some(Value::Object(top)) = &mut top {
                    top.remove("type");
                    top.remove("types");
                }
                merged(top.as_ref(), raw.get("adapter"))
            }
            _ => block("adapter"),
        };
        agent.adapter = typed(name, "adapter", adapter)?.or(agent.adapter.take());
        agent.ui = typed(name, "ui", block("ui"))?.or(agent.ui.take());
    }
    Ok(())
}

/// The agent's block over the top-level one; `None` when the agent sets none.
fn merged(top: Option<&Value>, agent: Option<&Value>) -> Option<Value> {
    let agent = agent.filter(|v| !v.is_null())?;
    let mut value = top.filter(|v| v.is_object()).cloned().unwrap_or_else(|| Value::Object(Default::default()));
    merge(&mut value, agent);
    Some(value)
}

/// Objects merge key by key, recursively; anything else replaces.
fn merge(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, over) => *base = over.clone(),
    }
}

fn typed<T: DeserializeOwned>(agent: &str, key: &str, value: Option<Value>) -> Result<Option<T>, String> {
    value
        .map(|v| {
            serde_json::from_value(v)
                .map_err(|e| format!("agents.{agent}.{key} (with the top-level `{key}` as defaults): {e}"))
        })
        .transpose()
}

#[cfg(test)]
mod tests {
    use crate::config::{AdapterKind, Provider, parse};

    #[test]
    fn an_agent_block_overrides_the_top_level_key_by_key() {
        let yaml = "llm:\n  provider: openai\n  model: gpt-5\n  max_tokens: 100\n  openai:\n    api_key: k\n\
                    agents:\n  a:\n    llm:\n      model: gpt-5-mini\n  b:\n    system_prompt: hi\n";
        let (config, _) = parse(yaml, |_| None).unwrap();
        let a = config.agents["a"].llm.as_ref().unwrap();
        assert_eq!((a.provider, a.model.as_str(), a.max_tokens), (Provider::Openai, "gpt-5-mini", 100));
        assert_eq!(a.openai.as_ref().unwrap().api_key.as_deref(), Some("k"), "the provider's keys are kept");
        assert!(config.agents["b"].llm.is_none(), "no block: the top-level one applies");
    }

    #[test]
    fn an_agents_adapter_kinds_replace_the_top_level_ones_whole() {
        let yaml = "adapter:\n  type: cli\nagents:\n  a:\n    adapter: {types: [api]}\n  b:\n    system_prompt: hi\n\
                    \x20 c:\n    adapter: {type: api}\n";
        let (config, _) = parse(yaml, |_| None).unwrap();
        let kinds = |name: &str| config.agents[name].adapter.as_ref().map(|a| a.kinds());
        assert_eq!(kinds("a"), Some(vec![AdapterKind::Api]), "types replaces the top-level type");
        assert_eq!(kinds("b"), None, "no block: the top-level one applies");
        assert_eq!(kinds("c"), Some(vec![AdapterKind::Api]));
        let err = parse("adapter:\n  type: cli\n  types: [api]\n", |_| None).unwrap_err();
        assert!(err.contains("adapter: `type` and `types` are both set"), "{err}");
        let err = parse("agents:\n  a:\n    adapter: {type: api, types: [cli]}\n", |_| None).unwrap_err();
        assert!(err.contains("agents.a.adapter: `type` and `types` are both set"), "{err}");
    }

    #[test]
    fn a_merged_block_that_does_not_fit_is_an_error_naming_the_agent() {
        let yaml = "agents:\n  a:\n    llm:\n      provider: nope\n";
        let err = parse(yaml, |_| None).unwrap_err();
        assert!(err.contains("agents.a.llm") || err.contains("nope"), "{err}");
    }
}

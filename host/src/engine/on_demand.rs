//! On-demand skills in a turn (`skills.loading`): which are loaded in the conversation (the
//! set saved beside its history, and the loads the history holds), the turn's `load_skill`
//! in front of the agent's tools, and the set saved again at the end of the turn.
//!
//! The saved set is what keeps a skill loaded for the rest of the conversation when the
//! history's oldest exchanges (its load among them) are trimmed: such a skill's body goes
//! into the system prompt instead ([`TurnSkills::carried`]). The loads in the history count
//! too, so a crash between the two writes loses nothing.

use super::history::History;
use crate::llm::Message;
use crate::store::{StateError, StateWrite};
use crate::tools::{LoadSkill, OnDemand, Tools};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The on-demand skills of one turn.
pub(super) struct TurnSkills {
    /// The turn's on-demand skills: the agent's, and those its MCP servers serve now.
    pub catalog: Arc<OnDemand>,
    /// The agent's tools, behind the turn's `load_skill` when some skill loads on demand.
    pub tools: Tools,
    /// Loaded skills whose load the history no longer holds: the system prompt carries them.
    pub carried: BTreeSet<String>,
    loader: Option<Arc<LoadSkill>>,
    saved: BTreeSet<String>,
}

impl TurnSkills {
    /// The turn's view of `conversation`, whose messages (as sent) are `messages`.
    pub async fn begin(
        catalog: &Arc<OnDemand>,
        tools: &Tools,
        history: &History,
        conversation: &str,
        messages: &[Message],
    ) -> Result<Self, StateError> {
        let mut catalog = OnDemand::for_turn(catalog).await;
        if catalog.is_empty() {
            return Ok(Self::fresh_over(catalog, tools));
        }
        let saved = history.loaded_skills(conversation).await?;
        let in_messages = catalog.loaded_in(messages);
        let carried = saved.iter().filter(|s| catalog.contains(s) && !in_messages.contains(*s)).cloned().collect();
        OnDemand::fetch_carried(&mut catalog, &carried).await;
        let loader = Arc::new(LoadSkill::new(catalog.clone(), saved.union(&in_messages).cloned().collect()));
        Ok(TurnSkills { catalog, tools: tools.with_first(loader.clone()), carried, loader: Some(loader), saved })
    }

    /// A conversation with nothing loaded and no history (a nested turn's).
    pub async fn fresh(catalog: &Arc<OnDemand>, tools: &Tools) -> Self {
        Self::fresh_over(OnDemand::for_turn(catalog).await, tools)
    }

    fn fresh_over(catalog: Arc<OnDemand>, tools: &Tools) -> Self {
        let none = BTreeSet::new();
        if catalog.is_empty() {
            return TurnSkills { catalog, tools: tools.clone(), carried: none.clone(), loader: None, saved: none };
        }
        let loader = Arc::new(LoadSkill::new(catalog.clone(), BTreeSet::new()));
        let tools = tools.with_first(loader.clone());
        TurnSkills { catalog, tools, carried: none.clone(), loader: Some(loader), saved: none }
    }

    /// The write saving the conversation's loaded skills, when the turn changed them.
    pub fn saving(&self, conversation: &str) -> Result<Option<StateWrite>, StateError> {
        let Some(loader) = &self.loader else { return Ok(None) };
        let loaded = loader.loaded();
        if loaded == self.saved {
            return Ok(None);
        }
        History::saving_loaded_skills(conversation, &loaded).map(Some)
    }
}

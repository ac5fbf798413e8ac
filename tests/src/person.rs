//! A scripted person at the person broker, for tests that drive the engine directly: the
//! gate opens every approval at this counterpart's desk (surface `test`), and the person
//! decides it there as a surface's person would, after a pause if asked to, or never.

use serde_json::Value;
use skillhost::broker::{Decision, Entry, Kind, Scope};
use skillhost::engine::desk::Desk;
use skillhost::engine::{Counterpart, Engine, PresentError};
use std::sync::Mutex;
use std::time::Duration;

/// What the person does with each approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Does {
    /// Approves (typing the challenge of a `confirm` call).
    Approve,
    /// Denies, with a reason or none.
    Deny(Option<String>),
    /// Never decides: the approval waits until it expires.
    Nothing,
    /// Cannot be shown the approval (the surface failed): the call is cancelled.
    Fail,
}

/// A person deciding every approval of one engine's calls the same way, keeping what they
/// were shown (each approval's presentation: `tool_name`, `tool_input`, `level`, ...).
pub struct Person {
    desk: Desk,
    does: Does,
    /// What they do first, one approval each, before `does`.
    script: Mutex<std::collections::VecDeque<Does>>,
    pause: Duration,
    shown: Mutex<Vec<Value>>,
}

impl Person {
    /// A person at `engine`'s broker who `does` the same with every approval.
    pub fn new(engine: &Engine, does: Does) -> Self {
        let desk = Desk::new(engine.broker(), Scope::new(engine.agent(), "test", "test", "test"));
        Person { desk, does, script: Mutex::default(), pause: Duration::ZERO, shown: Mutex::default() }
    }

    /// A person who does what `script` says with the first approvals, one each, and then
    /// approves.
    pub fn scripted(engine: &Engine, script: Vec<Does>) -> Self {
        Person { script: Mutex::new(script.into()), ..Person::new(engine, Does::Approve) }
    }

    /// Whether the next approval they are shown will be approved.
    pub fn next_approves(&self) -> bool {
        self.script.lock().unwrap().front().unwrap_or(&self.does) == &Does::Approve
    }

    /// The same person, reading each approval for `pause` before deciding.
    pub fn after(self, pause: Duration) -> Self {
        Person { pause, ..self }
    }

    /// The presentations of the approvals they were shown, in order.
    pub fn shown(&self) -> Vec<Value> {
        self.shown.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Counterpart for Person {
    fn desk(&self) -> Option<Desk> {
        Some(self.desk.clone())
    }

    async fn present(&self, entry: &Entry, _: bool) -> Result<(), PresentError> {
        if entry.kind != Kind::Approval {
            return Err(PresentError::new(std::io::Error::other("this test person answers no questions")));
        }
        let shown = entry.presentation.as_deref().and_then(|p| serde_json::from_str(p).ok()).unwrap_or_default();
        self.shown.lock().unwrap().push(shown);
        tokio::time::sleep(self.pause).await;
        let does = self.script.lock().unwrap().pop_front().unwrap_or_else(|| self.does.clone());
        let decision = match does {
            Does::Approve => Decision::Approve(entry.challenge.clone()),
            Does::Deny(reason) => Decision::Deny(reason),
            Does::Nothing => return Ok(()),
            Does::Fail => return Err(PresentError::new(std::io::Error::other("the test's surface failed"))),
        };
        self.desk.carry(&entry.id, "tester", decision).await
    }
}

//! A skill's `ask` round ([`crate::sandbox::Inquirer`]) as a call's scope answers it where no
//! MCP client takes it as it is: a form is put to the scope's person field by field (the
//! questions every interactive adapter already asks), sampling goes to the turn's model, and
//! roots, which only an MCP client has, are unavailable.

use crate::person::{Answer, FormAction, Person, Question, Reply};
use parking_lot::Mutex;
use rmcp::model::ElicitationAction;
use serde_json::Value;

/// Why roots cannot be answered outside MCP.
pub const NO_ROOTS: &str = "roots are an MCP client's; nobody here has any";
/// Why sampling cannot be answered outside a turn and MCP.
pub const NO_SAMPLING: &str = "no model can be sampled here: sampling needs an MCP client that offers it, or a turn";

/// Asks `skill`'s form (`message`, `schema`) of `person`, field by field: the form's answer,
/// or `Unavailable` when nobody could be asked.
pub async fn form(person: &dyn Person, skill: &str, message: &str, schema: &Value) -> Reply {
    let noting = Noting { person, nobody: Mutex::new(None) };
    let result = crate::mcp::elicit::form(&format!("Skill `{skill}` asks: {message}"), schema, &noting).await;
    if let Some(why) = noting.nobody.into_inner() {
        return Reply::Unavailable { why };
    }
    let action = match result.action {
        ElicitationAction::Accept => FormAction::Accept,
        ElicitationAction::Decline => FormAction::Decline,
        _ => FormAction::Cancel,
    };
    Reply::Form { action, content: result.content.filter(|_| action == FormAction::Accept) }
}

/// A person whose "nobody can be asked" is noted.
struct Noting<'a> {
    person: &'a dyn Person,
    nobody: Mutex<Option<String>>,
}

#[async_trait::async_trait]
impl Person for Noting<'_> {
    async fn ask(&self, question: Question) -> Answer {
        let answer = self.person.ask(question).await;
        if let Answer::Unavailable(why) = &answer {
            *self.nobody.lock() = Some(why.clone());
        }
        answer
    }
}

//! What a turn answers: one message, where it came from, and who sent it.

/// One message to answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TurnRequest {
    /// The channel it came from (the tools see it as `call-context.channel-id`).
    pub channel_id: String,
    /// The thread inside the channel, on platforms that have them (a Slack thread): the
    /// history and the in-flight marker follow the thread, not the whole channel.
    pub thread: Option<String>,
    /// Who sent it, when known.
    pub user_id: Option<String>,
    /// The text.
    pub message: String,
    /// Route attributes the host attaches to the turn (an API run request's `route`): every
    /// tool call and hook of the turn sees them in `call-context.route`, beside those its
    /// tools set with `route.set-attribute`.
    pub route: Vec<(String, String)>,
}

impl TurnRequest {
    /// Where the conversation lives: the channel, or the channel's thread.
    pub fn place(&self) -> String {
        match &self.thread {
            Some(thread) => format!("{}/{thread}", self.channel_id),
            None => self.channel_id.clone(),
        }
    }
}

//! `notify`: messages a skill sends on its own, to the destinations its grant names, through
//! the agent's chat adapters.

use crate::config::Destination;
use crate::sandbox::bindings::skillhost::skill::notify::{Error, Host};
use crate::sandbox::capabilities::{Notice, NotifyError};
use crate::sandbox::host_state::HostState;

/// At most this many messages per call.
pub const MAX_NOTICES_PER_CALL: u32 = 20;
/// The longest text, in bytes.
pub const MAX_NOTICE_BYTES: usize = 16 * 1024;

impl Host for HostState {
    async fn send(&mut self, destination: String, text: String, wake: bool) -> Result<(), Error> {
        let outcome = self.deliver(&destination, &text, wake).await;
        let skill = &self.caps.skill;
        match &outcome {
            Ok(()) => tracing::info!(skill, destination, wake, "skill message sent"),
            Err(e) => tracing::warn!(skill, destination, "skill message not sent: {}", describe(e)),
        }
        outcome
    }
}

impl HostState {
    async fn deliver(&mut self, destination: &str, text: &str, wake: bool) -> Result<(), Error> {
        let skill = self.caps.skill.clone();
        let grant = &self.caps.notify;
        if !grant.asked {
            return Err(Error::Denied(format!(
                "skill `{skill}` does not ask for notify: add `notify = true` to [capabilities] in its skill.toml"
            )));
        }
        let destination = resolve(destination, &grant.granted, &skill)?;
        if text.trim().is_empty() {
            return Err(Error::Invalid("the text is empty".into()));
        }
        if text.len() > MAX_NOTICE_BYTES {
            return Err(Error::Invalid(format!("the text is {} bytes; at most {MAX_NOTICE_BYTES}", text.len())));
        }
        if self.notices >= MAX_NOTICES_PER_CALL {
            return Err(Error::Denied(format!("at most {MAX_NOTICES_PER_CALL} messages per call")));
        }
        self.notices += 1;
        let Some(notifier) = grant.notifier.clone() else {
            return Err(Error::Unavailable("no chat adapter runs in this process".into()));
        };
        let remaining = self.deadline.remaining();
        let notice = Notice { skill: &skill, destination: &destination, text, wake };
        match tokio::time::timeout(remaining, notifier.send(notice)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(NotifyError::Unavailable(why))) => Err(Error::Unavailable(why)),
            Ok(Err(NotifyError::Failed(why))) => Err(Error::Failed(why)),
            Err(_) => Err(Error::Failed("the call's deadline passed before the message was sent".into())),
        }
    }
}

/// An error as the log shows it (`denied: ...`), as the SDKs render it.
fn describe(error: &Error) -> String {
    match error {
        Error::Denied(m) => format!("denied: {m}"),
        Error::Invalid(m) => format!("invalid: {m}"),
        Error::Unavailable(m) => format!("unavailable: {m}"),
        Error::Failed(m) => format!("failed: {m}"),
    }
}

/// The granted destination `written` names: `slack:C0ALERTS` as written, or a bare id
/// (`C0ALERTS`, as a mithai skill's `adapter.send(channel, text)` writes it) when exactly one
/// granted destination has it.
fn resolve(written: &str, granted: &[Destination], skill: &str) -> Result<Destination, Error> {
    let not_granted =
        |what: &str| Error::Denied(format!("{what} is not granted to skill `{skill}` (skills.grants.{skill}.notify)"));
    if written.contains(':') {
        let destination = Destination::parse(written).map_err(Error::Invalid)?;
        return match granted.contains(&destination) {
            true => Ok(destination),
            false => Err(not_granted(written)),
        };
    }
    let mut matching = granted.iter().filter(|d| d.id == written);
    match (matching.next(), matching.next()) {
        (Some(only), None) => Ok(only.clone()),
        (Some(_), Some(_)) => Err(Error::Invalid(format!(
            "`{written}` names several granted destinations: write slack:{written} or telegram:{written}"
        ))),
        (None, _) => Err(not_granted(written)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_resolve_to_grants_only() {
        let granted = vec![Destination::parse("slack:C0ALERTS").unwrap(), Destination::parse("telegram:4242").unwrap()];
        assert_eq!(resolve("slack:C0ALERTS", &granted, "a").unwrap(), granted[0]);
        assert_eq!(resolve("4242", &granted, "a").unwrap(), granted[1]);
        let Err(Error::Denied(why)) = resolve("slack:C0OTHER", &granted, "a") else { panic!() };
        assert_eq!(why, "slack:C0OTHER is not granted to skill `a` (skills.grants.a.notify)");
        assert!(matches!(resolve("C0OTHER", &granted, "a"), Err(Error::Denied(_))));
        assert!(matches!(resolve("mail:x", &granted, "a"), Err(Error::Invalid(_))));
        assert!(matches!(resolve("slack:C0ALERTS", &[], "a"), Err(Error::Denied(_))));
    }
}

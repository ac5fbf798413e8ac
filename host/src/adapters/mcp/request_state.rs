//! The `requestState` of a gated call at 2026-07-28: an integrity-protected reference to the
//! call's approval at the person broker, so that the client's retry (carrying the person's
//! answer) is accepted by any replica.
//!
//! `v1.<key id>.<claims>.<mac>`: the claims (base64url JSON: the broker entry, the tool, a
//! SHA-256 of the arguments, the expiry in Unix seconds) and an HMAC-SHA256 over everything
//! before the MAC, with a key kept in the shared state store. A new key every 24 hours (its id
//! is the day number); a retired key keeps verifying while states it signed can still be
//! live (`human.timeout_seconds` after its day ended), then it is deleted.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{KeyInit as _, Mac as _};
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::store::StateStore;

/// Where the keys are kept in the state store.
const NAMESPACE: &str = "skillhost.mcp.request_state";
/// How long one key signs.
const DAY: u64 = 86_400;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// What a `requestState` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The broker entry (the approval).
    #[serde(rename = "e")]
    pub entry: String,
    /// The tool called.
    #[serde(rename = "t")]
    pub tool: String,
    /// SHA-256 (hex) of the call's arguments ([`arguments_hash`]).
    #[serde(rename = "a")]
    pub arguments: String,
    /// When it stops counting, in Unix seconds.
    #[serde(rename = "x")]
    pub expires: u64,
    /// A round of the skill's own questions ([`super::inquire`]) rather than an approval.
    #[serde(rename = "q", default, skip_serializing_if = "std::ops::Not::not")]
    pub inquiry: bool,
    /// The approval (a broker entry) an earlier round of the call was decided with; its use
    /// is held by each run of the call and used up when the call completes.
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
}

/// Why a `requestState` was not accepted: each a JSON-RPC -32602 whose message says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not one this server made, or altered.
    #[error("invalid requestState: it was altered or was not issued by this server")]
    Tampered,
    /// Past its expiry.
    #[error("expired requestState: the approval was asked more than human.timeout_seconds ago; call the tool again")]
    Expired,
    /// Issued for another tool or other arguments.
    #[error("invalid requestState: it was issued for another call (other tool or arguments)")]
    OtherCall,
    /// Its answer already counted.
    #[error("invalid requestState: its answer was already counted (a replay), or the approval no longer waits")]
    Replayed,
    /// A round of the skill's own questions already answered otherwise.
    #[error(
        "invalid requestState: that round was already answered differently; retry with the latest round's requestState"
    )]
    Answered,
    /// The keys cannot be read or written.
    #[error("the requestState cannot be checked now: {0}")]
    Unavailable(String),
}

pub use crate::broker::arguments_hash;

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The signing keys in the shared store.
pub struct Keys {
    state: StateStore,
    /// How long after its day a key keeps verifying.
    grace: Duration,
}

impl Keys {
    /// The keys in `state`; retired keys verify for `grace` (`human.timeout_seconds`).
    pub fn new(state: StateStore, grace: Duration) -> Self {
        Keys { state, grace }
    }

    /// Key `day`, made (by whichever replica is first) when `create` and missing.
    async fn key(&self, day: u64, create: bool) -> Result<Option<Vec<u8>>, Refused> {
        let unavailable = |e: crate::store::StateError| Refused::Unavailable(e.to_string());
        let id = day.to_string();
        if let Some(key) = self.state.get(NAMESPACE, &id).await.map_err(unavailable)? {
            return Ok(hex::decode(key).ok());
        }
        if !create {
            return Ok(None);
        }
        let mut fresh = [0u8; 32];
        getrandom::fill(&mut fresh).map_err(|e| Refused::Unavailable(format!("the OS random source failed: {e}")))?;
        if self.state.create(NAMESPACE, &id, &hex::encode(fresh)).await.map_err(unavailable)? {
            self.retire(day).await;
            return Ok(Some(fresh.to_vec()));
        }
        // Another replica made it first.
        let key = self.state.get(NAMESPACE, &id).await.map_err(unavailable)?;
        Ok(key.and_then(|k| hex::decode(k).ok()))
    }

    /// Deletes keys of days before `today` whose grace has passed.
    async fn retire(&self, today: u64) {
        let Ok(ids) = self.state.keys(NAMESPACE).await else { return };
        let grace = self.grace.as_secs();
        for id in ids {
            if let Ok(day) = id.parse::<u64>()
                && day < today
                && valid_until(day, grace) < now()
                && let Err(e) = self.state.delete(NAMESPACE, &id).await
            {
                tracing::debug!("cannot delete a retired requestState key: {e}");
            }
        }
    }

    /// The `requestState` for `claims`, signed with today's key.
    pub async fn sign(&self, claims: &Claims) -> Result<String, Refused> {
        let day = now() / DAY;
        let key = self.key(day, true).await?.ok_or_else(|| Refused::Unavailable("no signing key".into()))?;
        let payload = B64.encode(serde_json::to_vec(claims).map_err(|e| Refused::Unavailable(e.to_string()))?);
        let signed = format!("v1.{day}.{payload}");
        Ok(format!("{signed}.{}", B64.encode(mac(&key, &signed))))
    }

    /// The claims of `state` once its MAC verifies with a key still valid, and it has not
    /// expired.
    pub async fn verify(&self, state: &str) -> Result<Claims, Refused> {
        let mut parts = state.splitn(4, '.');
        let (Some("v1"), Some(day), Some(payload), Some(given)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refused::Tampered);
        };
        let day: u64 = day.parse().map_err(|_| Refused::Tampered)?;
        let valid = valid_until(day, self.grace.as_secs()) >= now();
        let key = match valid {
            true => self.key(day, false).await?.ok_or(Refused::Tampered)?,
            false => return Err(Refused::Expired),
        };
        let given = B64.decode(given).map_err(|_| Refused::Tampered)?;
        let mut check = HmacSha256::new_from_slice(&key).map_err(|_| Refused::Tampered)?;
        check.update(format!("v1.{day}.{payload}").as_bytes());
        check.verify_slice(&given).map_err(|_| Refused::Tampered)?;
        let claims: Claims =
            B64.decode(payload).ok().and_then(|p| serde_json::from_slice(&p).ok()).ok_or(Refused::Tampered)?;
        if claims.expires < now() {
            return Err(Refused::Expired);
        }
        Ok(claims)
    }
}

/// What `state` claims, unverified: only to choose which path verifies it.
pub fn peek(state: &str) -> Option<Claims> {
    let payload = state.split('.').nth(2)?;
    B64.decode(payload).ok().and_then(|p| serde_json::from_slice(&p).ok())
}

/// Until when (Unix seconds) key `day` verifies: its day, then `grace` seconds; saturating,
/// since `day` comes from the caller.
fn valid_until(day: u64, grace: u64) -> u64 {
    day.saturating_add(1).saturating_mul(DAY).saturating_add(grace)
}

fn mac(key: &[u8], signed: &str) -> Vec<u8> {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(signed.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(expires: u64) -> Claims {
        let arguments = arguments_hash(&json!({"a": 1}));
        Claims { entry: "e1".into(), tool: "probe__echo".into(), arguments, expires, inquiry: false, approval: None }
    }

    #[tokio::test]
    async fn a_state_verifies_on_every_replica_and_only_unaltered() {
        let dir = tempfile::tempdir().unwrap();
        let (one, two) = (StateStore::new(dir.path()), StateStore::new(dir.path()));
        let (here, there) = (Keys::new(one, Duration::from_secs(60)), Keys::new(two, Duration::from_secs(60)));
        let signed = claims(now() + 60);
        let state = here.sign(&signed).await.unwrap();
        assert_eq!(there.verify(&state).await.unwrap(), signed);
        let mut flipped = state.clone().into_bytes();
        let at = state.find('.').unwrap() + 3;
        flipped[at] = if flipped[at] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(flipped).unwrap();
        assert_eq!(there.verify(&flipped).await.unwrap_err(), Refused::Tampered);
        assert_eq!(there.verify("v1.1.e30.AAAA").await.unwrap_err(), Refused::Expired, "a key long retired");
        assert_eq!(there.verify("nonsense").await.unwrap_err(), Refused::Tampered);
        let far = format!("v1.{}.e30.AAAA", u64::MAX);
        assert_eq!(there.verify(&far).await.unwrap_err(), Refused::Tampered, "a day past the last: no key, no panic");
        let late = here.sign(&claims(now() - 1)).await.unwrap();
        assert_eq!(there.verify(&late).await.unwrap_err(), Refused::Expired);
    }
}

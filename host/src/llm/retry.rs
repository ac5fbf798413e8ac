//! Retries with exponential backoff around any [`Provider`].

use super::{Delta, LlmError, Provider, Request, Response};
use std::time::Duration;

/// When and how long to wait before sending a failed request again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// The first backoff; each further one doubles it.
    pub base_delay: Duration,
    /// The longest backoff.
    pub max_delay: Duration,
    /// The longest wait honoured from a `retry-after` header: a server asking for an hour
    /// must not hold a conversation that long.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0-based) after `error`: the server's
    /// `retry-after` when it gave one (capped), else `base_delay * 2^retry` (capped).
    pub fn delay(&self, retry: u32, error: &LlmError) -> Duration {
        if let Some(asked) = error.retry_after() {
            return asked.min(self.max_retry_after);
        }
        let factor = 2u32.saturating_pow(retry);
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// A provider that retries what [`LlmError::is_retryable`] allows, with [`RetryPolicy`].
///
/// A failure after any delta reached the sink is never retried: the person has already seen
/// that text (and the engine may have forwarded it to a chat), and a new attempt would stream
/// a different answer after it, so the output would be a splice of two answers. Surfacing the
/// error is the only honest outcome then.
pub struct Retrying<P> {
    inner: P,
    policy: RetryPolicy,
}

impl<P: Provider> Retrying<P> {
    /// Wraps `inner`.
    pub fn new(inner: P, policy: RetryPolicy) -> Self {
        Retrying { inner, policy }
    }

    /// The wrapped provider.
    pub fn inner(&self) -> &P {
        &self.inner
    }
}

#[async_trait::async_trait]
impl<P: Provider> Provider for Retrying<P> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn complete(&self, req: &Request, sink: &mut (dyn FnMut(Delta) + Send)) -> Result<Response, LlmError> {
        let mut retry = 0;
        loop {
            let mut delivered = false;
            let result = {
                let mut tracked = |delta: Delta| {
                    delivered = true;
                    sink(delta)
                };
                self.inner.complete(req, &mut tracked).await
            };
            let error = match result {
                Ok(response) => return Ok(response),
                Err(error) => error,
            };
            if delivered || !error.is_retryable() || retry >= self.policy.max_retries {
                return Err(error);
            }
            let delay = self.policy.delay(retry, &error);
            tracing::warn!("{error}; retrying in {} ms ({}/{})", delay.as_millis(), retry + 1, self.policy.max_retries);
            tokio::time::sleep(delay).await;
            retry += 1;
        }
    }
}

//! The one retry policy: exponential backoff with full jitter, capped, honouring a
//! server's `Retry-After`. Whether an error is retried at all is
//! [`ProviderError::is_retryable`]; this module only decides how long to wait.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{Completion, CompletionRequest, Provider, ProviderError};

/// How often and how patiently a failed call is retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = no retries).
    pub max_retries: u32,
    /// Backoff ceiling of the first retry; doubles each retry.
    pub base: Duration,
    /// Upper bound on any jittered backoff.
    pub cap: Duration,
    /// A `Retry-After` longer than this is not waited for: the error is returned.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0-based) after `err`, or `None` when the
    /// call must not be retried. `unit` is a uniform sample in `[0, 1)` (the jitter).
    pub fn delay(&self, retry: u32, err: &ProviderError, unit: f64) -> Option<Duration> {
        if retry >= self.max_retries || !err.is_retryable() {
            return None;
        }
        // 429, 503 and 529 may say when to come back; waiting less would be refused.
        if let Some(after) = err.retry_after() {
            return (after <= self.max_retry_after).then_some(after);
        }
        Some(crate::backoff::Backoff::new(self.base, self.cap).jittered(retry, unit))
    }
}

/// A provider whose retryable failures are retried under a [`RetryPolicy`].
pub struct RetryProvider {
    inner: Arc<dyn Provider>,
    policy: RetryPolicy,
}

impl RetryProvider {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Provider>, policy: RetryPolicy) -> Self {
        Self { inner, policy }
    }
}

#[async_trait]
impl Provider for RetryProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn acts(&self) -> bool {
        self.inner.acts()
    }
    fn limits(&self) -> super::ModelLimits {
        self.inner.limits()
    }
    async fn limits_for(&self, request_tokens: u64) -> super::ModelLimits {
        self.inner.limits_for(request_tokens).await
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        let mut retry = 0;
        loop {
            match self.inner.complete(request).await {
                Ok(c) => return Ok(c),
                Err(err) => match self.policy.delay(retry, &err, fastrand::f64()) {
                    None => return Err(err),
                    Some(wait) => {
                        tracing::warn!(
                            provider = self.inner.name(),
                            model = self.inner.model(),
                            retry = retry + 1,
                            wait_ms = wait.as_millis() as u64,
                            error = %err,
                            "model call failed; retrying"
                        );
                        tokio::time::sleep(wait).await;
                        retry += 1;
                    }
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn server() -> ProviderError {
        ProviderError::Server {
            status: 503,
            message: "busy".into(),
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_full_jitter() {
        let p = RetryPolicy {
            max_retries: 10,
            ..Default::default()
        };
        assert_eq!(p.delay(0, &server(), 0.999_999).unwrap().as_millis(), 499);
        assert_eq!(p.delay(3, &server(), 0.5), Some(Duration::from_secs(2)));
        assert_eq!(p.delay(9, &server(), 0.5), Some(Duration::from_secs(15)));
        assert_eq!(p.delay(3, &server(), 0.0), Some(Duration::ZERO));
        assert_eq!(p.delay(40, &server(), 0.5), None);
    }

    #[test]
    fn retry_after_is_honoured_and_bounded() {
        let p = RetryPolicy::default();
        let e = ProviderError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
            message: String::new(),
        };
        assert_eq!(p.delay(0, &e, 0.1), Some(Duration::from_secs(7)));
        let e = ProviderError::Overloaded {
            status: 529,
            retry_after: Some(Duration::from_secs(9)),
            message: String::new(),
        };
        assert_eq!(p.delay(0, &e, 0.1), Some(Duration::from_secs(9)));
        let e = ProviderError::RateLimited {
            retry_after: Some(Duration::from_secs(3600)),
            message: String::new(),
        };
        assert_eq!(p.delay(0, &e, 0.1), None);
    }

    #[test]
    fn non_retryable_errors_and_exhaustion_stop() {
        let p = RetryPolicy {
            max_retries: 2,
            ..Default::default()
        };
        let rejected = ProviderError::Rejected {
            status: 401,
            message: String::new(),
        };
        assert_eq!(p.delay(0, &rejected, 0.5), None);
        assert!(p.delay(1, &server(), 0.5).is_some());
        assert_eq!(p.delay(2, &server(), 0.5), None);
    }

    /// Fails with queued errors, then answers.
    struct Flaky {
        errors: Mutex<Vec<ProviderError>>,
        calls: Mutex<Vec<tokio::time::Instant>>,
    }

    #[async_trait]
    impl Provider for Flaky {
        fn name(&self) -> &str {
            "flaky"
        }
        fn model(&self) -> &str {
            "m"
        }
        async fn complete(&self, _: &CompletionRequest) -> Result<Completion, ProviderError> {
            self.calls.lock().unwrap().push(tokio::time::Instant::now());
            match self.errors.lock().unwrap().pop() {
                Some(e) => Err(e),
                None => Ok(Completion {
                    thoughts: Vec::new(),
                    reasoning: String::new(),
                    text: "ok".into(),
                    tool_calls: vec![],
                    usage: Default::default(),
                    stop: super::super::StopReason::EndTurn,
                }),
            }
        }
    }

    fn request() -> CompletionRequest {
        CompletionRequest {
            progress: None,
            agent: Default::default(),
            turn: 1,
            messages: vec![],
            tools: Vec::new().into(),
            max_tokens: None,
            workspace: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_on_paused_time_and_waits_retry_after() {
        let flaky = Arc::new(Flaky {
            errors: Mutex::new(vec![
                server(),
                ProviderError::RateLimited {
                    retry_after: Some(Duration::from_secs(5)),
                    message: String::new(),
                },
            ]),
            calls: Mutex::default(),
        });
        let p = RetryProvider::new(flaky.clone(), RetryPolicy::default());
        let c = p.complete(&request()).await.unwrap();
        assert_eq!(c.text, "ok");
        let calls = flaky.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 3);
        assert_eq!(calls[1] - calls[0], Duration::from_secs(5));
        // Second retry: jitter within [0, 1 s].
        assert!(calls[2] - calls[1] <= Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_max_retries() {
        let flaky = Arc::new(Flaky {
            errors: Mutex::new((0..10).map(|_| server()).collect()),
            calls: Mutex::default(),
        });
        let p = RetryProvider::new(
            flaky.clone(),
            RetryPolicy {
                max_retries: 2,
                ..Default::default()
            },
        );
        let err = p.complete(&request()).await.unwrap_err();
        assert!(matches!(err, ProviderError::Server { status: 503, .. }));
        assert_eq!(flaky.calls.lock().unwrap().len(), 3);
    }
}

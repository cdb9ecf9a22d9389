//! `max_concurrent`: at most N calls of one provider in flight at once. A local server
//! with fewer slots than crewbox runs agents queues the rest without sending a response
//! head, so their first-byte timeouts fire and their retries go to the back of its
//! queue; waiting here instead keeps every request sent one the server can start.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::Semaphore;

use super::{Completion, CompletionRequest, ModelLimits, Provider, ProviderError};

/// A provider whose calls wait for one of `max` permits (one per attempt: a retry's
/// backoff holds none).
pub struct ConcurrencyLimit {
    inner: Arc<dyn Provider>,
    permits: Semaphore,
}

impl ConcurrencyLimit {
    /// Wraps `inner` with `max` permits (at least one).
    pub fn new(inner: Arc<dyn Provider>, max: usize) -> Self {
        Self {
            inner,
            permits: Semaphore::new(max.max(1)),
        }
    }
}

#[async_trait]
impl Provider for ConcurrencyLimit {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn acts(&self) -> bool {
        self.inner.acts()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn limits(&self) -> ModelLimits {
        self.inner.limits()
    }
    async fn limits_for(&self, request_tokens: u64) -> super::ModelLimits {
        self.inner.limits_for(request_tokens).await
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        // The semaphore is never closed, so acquiring only fails if it were.
        let _permit = self.permits.acquire().await.map_err(|_| {
            ProviderError::Config(format!(
                "provider `{}`: its max_concurrent limiter is closed",
                self.inner.name()
            ))
        })?;
        self.inner.complete(request).await
    }
}

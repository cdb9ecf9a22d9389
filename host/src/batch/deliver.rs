//! Delivering a group's results with retries: 500 ms, 1 s, 2 s, then an error record
//! that the caller stores as an event. Nothing is silently dropped.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use super::{Delivery, DeliveryKind, GroupId};

/// Where deliveries go (the parent agent's inbox, the engine's join point).
pub trait Deliver<R> {
    /// Why a delivery attempt failed.
    type Error: fmt::Display;

    /// One delivery attempt; an `Err` is retried per the [`RetryPolicy`].
    fn deliver(
        &mut self,
        delivery: &Delivery<R>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Waits between delivery attempts; one attempt more than there are waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Pause before each retry.
    pub backoff: Vec<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            backoff: crate::backoff::Backoff::new(
                Duration::from_millis(500),
                Duration::from_secs(2),
            )
            .waits(3),
        }
    }
}

/// The error record of a delivery that failed every attempt. It carries the delivery
/// itself, so the results survive in the event the caller stores.
#[derive(Debug, thiserror::Error)]
#[error("delivery {kind:?} of group {group} failed after {attempts} attempts: {last_error}")]
pub struct DeliveryFailed<R> {
    /// The group.
    pub group: GroupId,
    /// Which delivery failed.
    pub kind: DeliveryKind,
    /// Attempts made.
    pub attempts: u32,
    /// Every attempt's error, in order.
    pub errors: Vec<String>,
    /// The last attempt's error.
    pub last_error: String,
    /// The undelivered results.
    pub delivery: Delivery<R>,
}

/// Delivers with retries; returns the number of attempts it took, or the error record
/// after the last backoff step.
pub async fn deliver_with_retry<R, D: Deliver<R>>(
    target: &mut D,
    delivery: Delivery<R>,
    policy: &RetryPolicy,
) -> Result<u32, DeliveryFailed<R>> {
    let mut errors = Vec::new();
    let mut waits = policy.backoff.iter();
    loop {
        match target.deliver(&delivery).await {
            Ok(()) => return Ok(errors.len() as u32 + 1),
            Err(e) => {
                errors.push(e.to_string());
                tracing::warn!(group = %delivery.group, attempt = errors.len(), error = %e, "group delivery failed");
            }
        }
        match waits.next() {
            Some(wait) => tokio::time::sleep(*wait).await,
            None => {
                let last_error = errors.last().cloned().unwrap_or_default();
                return Err(DeliveryFailed {
                    group: delivery.group.clone(),
                    kind: delivery.kind,
                    attempts: errors.len() as u32,
                    errors,
                    last_error,
                    delivery,
                });
            }
        }
    }
}

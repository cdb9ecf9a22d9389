//! `crewbox:plugin/model`: budgeted completions through a host-provided backend.
//!
//! The budget is per call: each call that is given a model starts with the whole grant.
//! Running out is an expected answer (`budget-exhausted`), never a fault.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::plugin::bindings::model::{Completion, CompletionRequest, Host, ModelError};
use crate::plugin::grants::ModelBudget;

/// A completion from the host's model backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelReply {
    /// The reply text.
    pub text: String,
    /// Input tokens used.
    pub input_tokens: u32,
    /// Output tokens used.
    pub output_tokens: u32,
}

/// The model backend a plugin's `model` import calls (the provider layer implements it).
#[async_trait]
pub trait ModelAccess: Send + Sync {
    /// One completion; an `Err` is reported to the guest as `model-error::failed`.
    async fn complete(
        &self,
        system: Option<String>,
        prompt: String,
        max_tokens: Option<u32>,
    ) -> Result<ModelReply, String>;
}

/// Per-call model state: the backend and what is left of the budget.
#[derive(Default)]
pub(crate) struct ModelState {
    pub(crate) access: Option<Arc<dyn ModelAccess>>,
    pub(crate) tokens_left: u64,
    pub(crate) time_left: Duration,
}

impl ModelState {
    pub(crate) fn new(access: Option<Arc<dyn ModelAccess>>, budget: Option<ModelBudget>) -> Self {
        let budget = budget.unwrap_or(ModelBudget {
            tokens: 0,
            time: Duration::ZERO,
        });
        Self {
            access,
            tokens_left: budget.tokens,
            time_left: budget.time,
        }
    }
}

impl Host for ModelState {
    async fn complete(&mut self, request: CompletionRequest) -> Result<Completion, ModelError> {
        let Some(access) = self.access.clone() else {
            return Err(ModelError::Unavailable(
                "no model is configured for this call".into(),
            ));
        };
        if self.tokens_left == 0 {
            return Err(ModelError::BudgetExhausted("token budget used up".into()));
        }
        if self.time_left.is_zero() {
            return Err(ModelError::BudgetExhausted("time budget used up".into()));
        }
        // The prompt is charged before it is sent: one that cannot fit is never sent.
        let input = [request.system.as_deref(), Some(request.prompt.as_str())]
            .into_iter()
            .flatten()
            .map(|t| (t.len() as u64).div_ceil(4))
            .sum::<u64>();
        if input >= self.tokens_left {
            return Err(ModelError::BudgetExhausted(format!(
                "the prompt (~{input} tokens) does not fit the {} tokens left",
                self.tokens_left
            )));
        }
        let cap = u32::try_from(self.tokens_left - input).unwrap_or(u32::MAX);
        let max_tokens = Some(request.max_tokens.map_or(cap, |m| m.min(cap)));
        let started = tokio::time::Instant::now();
        let reply = tokio::time::timeout(
            self.time_left,
            access.complete(request.system, request.prompt, max_tokens),
        )
        .await;
        self.time_left = self.time_left.saturating_sub(started.elapsed());
        let reply = match reply {
            Err(_) => {
                self.time_left = Duration::ZERO;
                return Err(ModelError::BudgetExhausted(
                    "time budget used up during the call".into(),
                ));
            }
            Ok(Err(e)) => return Err(ModelError::Failed(e)),
            Ok(Ok(r)) => r,
        };
        let used = u64::from(reply.input_tokens) + u64::from(reply.output_tokens);
        self.tokens_left = self.tokens_left.saturating_sub(used);
        Ok(Completion {
            text: reply.text,
            input_tokens: reply.input_tokens,
            output_tokens: reply.output_tokens,
        })
    }
}

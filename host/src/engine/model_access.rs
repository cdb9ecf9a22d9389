//! The `model` import for validators: a completion through the run's provider, so a
//! plugin's model use goes through the same breaker, retries and accounting.

use std::sync::Arc;

use async_trait::async_trait;

use crate::plugin::{ModelAccess, ModelReply};
use crate::provider::{AgentLabel, CompletionRequest, Message, Provider};

/// Serves plugin completions from a provider, labelled as the plugin's caller.
pub struct ProviderModel {
    provider: Arc<dyn Provider>,
    label: AgentLabel,
}

impl ProviderModel {
    /// Completions from `provider`, attributed to `label` (scripts can match on it).
    pub fn new(provider: Arc<dyn Provider>, label: AgentLabel) -> Self {
        Self { provider, label }
    }
}

#[async_trait]
impl ModelAccess for ProviderModel {
    async fn complete(
        &self,
        system: Option<String>,
        prompt: String,
        max_tokens: Option<u32>,
    ) -> Result<ModelReply, String> {
        let mut messages = Vec::with_capacity(2);
        if let Some(system) = system {
            messages.push(Message::system(system));
        }
        messages.push(Message::user(prompt));
        let request = CompletionRequest {
            progress: None,
            agent: self.label.clone(),
            turn: 1,
            messages,
            tools: Vec::new().into(),
            max_tokens,
            workspace: None,
        };
        let reply = self
            .provider
            .complete(&request)
            .await
            .map_err(|e| e.to_string())?;
        Ok(ModelReply {
            text: reply.text,
            input_tokens: u32::try_from(reply.usage.input).unwrap_or(u32::MAX),
            output_tokens: u32::try_from(reply.usage.output).unwrap_or(u32::MAX),
        })
    }
}

//! Budgeted model completions through the host (validators only, when granted).
//!
//! A validator that calls [`complete`] imports `crewbox:plugin/model`; the host loads
//! it only if the user's config grants the model to that validator.

use crate::__bindings::validator::crewbox::plugin::model as raw;

pub use raw::{Completion, CompletionRequest, ModelError};

/// Asks the model; the tokens are charged to the plugin's budget.
pub fn complete(request: &CompletionRequest) -> Result<Completion, ModelError> {
    raw::complete(request)
}

/// Asks the model with just a prompt and no system prompt or token cap.
pub fn ask(prompt: &str) -> Result<String, ModelError> {
    let request = CompletionRequest {
        system: None,
        prompt: prompt.to_string(),
        max_tokens: None,
    };
    complete(&request).map(|c| c.text)
}

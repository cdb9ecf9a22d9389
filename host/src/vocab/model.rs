//! What a model call reports that every floor records: its token usage and why the
//! model stopped.

use serde::{Deserialize, Serialize};

/// Token usage of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens sent.
    pub input: u64,
    /// Tokens received.
    pub output: u64,
}

impl Usage {
    /// Rough token estimate for text when a provider reports none (~4 bytes a token).
    pub fn estimate(text: &str) -> u64 {
        (text.len() as u64).div_ceil(4)
    }
}

/// Why the model stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    /// A natural end of the reply.
    EndTurn,
    /// The model asked for tool calls.
    ToolUse,
    /// The output token limit was reached: the reply (text or tool arguments) is cut.
    MaxTokens,
    /// The server's content filter or the model's refusal ended the reply.
    Refused,
}

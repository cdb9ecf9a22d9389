//! Model providers behind one trait: the agent loop never knows which one it talks to.
//!
//! `scripted` (deterministic replies from a TOML script), `openai` (any Chat
//! Completions server), `anthropic` (Messages API) and `command` (an external agent
//! CLI). Every call goes through a per-provider+model circuit breaker.

pub mod anthropic;
pub mod breaker;
pub mod command;
pub mod config;
pub mod http;
pub mod openai;
pub mod retry;
pub mod scripted;
pub mod sse;

pub use breaker::{BreakerConfig, BreakerState, BreakerStatus, Breakers};
pub use config::{BuildContext, Prices, ProviderConfig, build};
pub use retry::{RetryPolicy, RetryProvider};
pub use scripted::{ScriptError, ScriptedProvider};

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from the host.
    System,
    /// The task, steering messages and tool results' framing.
    User,
    /// The model.
    Assistant,
    /// The result of one tool call.
    Tool,
}

/// One tool call requested by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (generated when the provider has none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON (an object, unless the model sent garbage).
    pub args: serde_json::Value,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
    /// Tool calls made by an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: the id of the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::plain(Role::System, content)
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::plain(Role::User, content)
    }
    /// An assistant message, possibly with tool calls.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            ..Self::plain(Role::Assistant, content)
        }
    }
    /// The result of a tool call.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::plain(Role::Tool, content)
        }
    }
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub parameters: serde_json::Value,
}

/// Who is asking, so scripts and logs can tell agents apart.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentLabel {
    /// The agent's id.
    pub id: String,
    /// The agent's name (e.g. `executor` or a team member's name).
    pub name: String,
    /// The agent's role.
    pub role: String,
}

/// One model call.
#[derive(Clone, Debug)]
pub struct CompletionRequest {
    /// The calling agent.
    pub agent: AgentLabel,
    /// 1-based turn of that agent.
    pub turn: u32,
    /// The conversation so far (system message first).
    pub messages: Vec<Message>,
    /// The tools the agent may call (already filtered by its permissions).
    pub tools: Vec<ToolSpec>,
    /// Upper bound on output tokens for this call, if any.
    pub max_tokens: Option<u32>,
    /// The agent's workspace root (used by the `command` provider).
    pub workspace: Option<PathBuf>,
}

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
    /// The output token limit was reached.
    MaxTokens,
}

/// A model's reply.
#[derive(Clone, Debug, PartialEq)]
pub struct Completion {
    /// The reply text (may be empty when there are tool calls).
    pub text: String,
    /// Tool calls the model asked for.
    pub tool_calls: Vec<ToolCall>,
    /// Token usage (estimated when the provider reports none).
    pub usage: Usage,
    /// Why the model stopped.
    pub stop: StopReason,
}

/// Why a model call failed. `is_retryable` is the one place the retry decision lives.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// No answer in time, or the stream stalled. Retried.
    #[error("model call timed out: {0}")]
    Timeout(String),
    /// 429: the server asks us to slow down. Retried after `retry_after` if given.
    #[error("rate limited by the model server{}", retry_after.map(|d| format!(" (retry after {} ms)", d.as_millis())).unwrap_or_default())]
    RateLimited {
        /// The server's `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// 5xx. Retried.
    #[error("model server error {status}: {message}")]
    Server {
        /// HTTP status (or 500 for injected faults).
        status: u16,
        /// What the server said (truncated, never contains our credentials).
        message: String,
    },
    /// The connection failed or dropped. Retried.
    #[error("connection to the model server failed: {0}")]
    Connection(String),
    /// The server answered something we cannot read (malformed JSON, bad SSE). Not retried.
    #[error("malformed model response: {0}")]
    BadResponse(String),
    /// 4xx other than 429 (bad key, bad model, bad request). Not retried.
    #[error("model request rejected ({status}): {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// What the server said.
        message: String,
    },
    /// The circuit breaker for this provider+model is open. Not retried.
    #[error("circuit breaker for {key} is open after repeated failures; retry in {} s", retry_in.as_secs().max(1))]
    CircuitOpen {
        /// `provider/model`.
        key: String,
        /// Time until a trial call is allowed.
        retry_in: Duration,
    },
    /// The scripted provider has no entry for this call. Not retried.
    #[error("script has no reply for agent `{agent}` (role `{role}`) at turn {turn}")]
    NoScriptedReply {
        /// The agent's name.
        agent: String,
        /// The agent's role.
        role: String,
        /// The 1-based turn.
        turn: u32,
    },
    /// The provider is misconfigured (missing key variable, bad command). Not retried.
    #[error("{0}")]
    Config(String),
}

impl ProviderError {
    /// Whether the call may succeed if simply tried again.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Timeout(_) | Self::RateLimited { .. } | Self::Server { .. } | Self::Connection(_)
        )
    }
}

/// A model behind some wire protocol.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The provider's configured name (e.g. `scripted`, `local-ollama`).
    fn name(&self) -> &str;
    /// The model this provider talks to (`script` for scripted).
    fn model(&self) -> &str;
    /// One completion. Implementations stream where the protocol allows and treat a
    /// stalled stream as `ProviderError::Timeout`.
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError>;
}

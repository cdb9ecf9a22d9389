//! Model providers behind one trait: the agent loop never knows which one it talks to.
//!
//! `scripted` (deterministic replies from a TOML script), `openai` (any Chat
//! Completions server), `anthropic` (Messages API) and `command` (an external agent
//! CLI) and `replay` (answers from a recorded run). Every call but a replayed one goes
//! through a per-provider+model circuit breaker.

pub mod anthropic;
pub mod breaker;
pub mod command;
pub mod config;
pub mod conversation;
pub mod http;
pub mod limit;
pub mod openai;
pub mod props;
pub mod replay;
pub mod retry;
pub mod scripted;
pub mod sse;

pub use breaker::{BreakerConfig, BreakerState, BreakerStatus, Breakers};
pub use config::{BuildContext, Prices, ProviderConfig, build};
pub use replay::ReplayProvider;
pub use retry::{RetryPolicy, RetryProvider};
pub use scripted::{ScriptError, ScriptedProvider};

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
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
    /// The arguments as JSON (`null` when the model's text was not JSON).
    pub args: serde_json::Value,
    /// The model's own argument text when it was not valid JSON: the loop reports it
    /// back, and it is re-sent verbatim in the history (never re-encoded as a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_args: Option<String>,
}

impl ToolCall {
    /// A call with well-formed arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, args: serde_json::Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            args,
            invalid_args: None,
        }
    }

    /// A call from the argument text a server sent: JSON if it parses (an empty text is
    /// `{}`), else kept as the model wrote it in [`ToolCall::invalid_args`].
    pub fn from_wire(id: impl Into<String>, name: impl Into<String>, raw: &str) -> Self {
        let mut call = Self::new(id, name, serde_json::Value::Object(Default::default()));
        if raw.trim().is_empty() {
            return call;
        }
        match serde_json::from_str(raw) {
            Ok(args) => call.args = args,
            Err(_) => {
                call.args = serde_json::Value::Null;
                call.invalid_args = Some(raw.to_owned());
            }
        }
        call
    }

    /// The arguments as the model's text: the JSON, or what it sent when that was not
    /// JSON.
    pub fn args_text(&self) -> String {
        match &self.invalid_args {
            Some(raw) => raw.clone(),
            None => self.args.to_string(),
        }
    }
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
    /// For `Role::Tool`: the call failed (sent as `is_error` where the API has it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// For `Role::Assistant`: the reply's signed thinking blocks, sent back unchanged
    /// to the API that made them (see [`Thought`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thoughts: Vec<Thought>,
}

/// A thinking block of a reply as the API sent it, signature and all. Anthropic's
/// extended thinking requires the thinking blocks of the assistant turn that made tool
/// calls to come back, unchanged, with the tool results (a request without them, or
/// with one edited, is refused); crewbox keeps them in the history for that. Their
/// text is also the reply's [`Completion::reasoning`], which is what is shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Thought {
    /// Reasoning in the clear, with the signature that proves it unedited.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The API's signature of it (opaque).
        signature: String,
    },
    /// Reasoning the API encrypted: only its opaque `data` travels.
    RedactedThinking {
        /// The encrypted reasoning (opaque).
        data: String,
    },
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
    /// The assistant message that records `reply` in the history: its text, its calls
    /// and its signed thinking blocks.
    pub fn from_reply(reply: &Completion) -> Self {
        Self {
            thoughts: reply.thoughts.clone(),
            ..Self::assistant(reply.text.clone(), reply.tool_calls.clone())
        }
    }
    /// The result of a tool call.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::plain(Role::Tool, content)
        }
    }
    /// The result of a tool call that failed.
    pub fn tool_error(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            is_error: true,
            ..Self::tool(call_id, content)
        }
    }
    fn plain(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            is_error: false,
            thoughts: Vec::new(),
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
    /// The tools the agent may call (already filtered by its permissions): shared, as
    /// every turn offers the same list.
    pub tools: Arc<[ToolSpec]>,
    /// Upper bound on output tokens for this call, if any.
    pub max_tokens: Option<u32>,
    /// The agent's workspace root (used by the `command` provider).
    pub workspace: Option<PathBuf>,
    /// Where a streaming provider records what has arrived so far, so a caller whose
    /// own time limit cuts the call still knows (and charges) the tokens generated.
    pub progress: Option<Arc<Progress>>,
}

/// What a reply in progress has brought so far (see [`CompletionRequest::progress`]).
#[derive(Debug, Default)]
pub struct Progress {
    inner: Mutex<ProgressState>,
}

#[derive(Debug, Default)]
struct ProgressState {
    bytes: u64,
    usage: Option<Usage>,
}

impl Progress {
    /// Counts generated text (reply, reasoning or tool arguments).
    pub fn generated(&self, text: &str) {
        if let Ok(mut s) = self.inner.lock() {
            s.bytes += text.len() as u64;
        }
    }
    /// Records the usage the server reported (a final chunk).
    pub fn reported(&self, usage: Usage) {
        if let Ok(mut s) = self.inner.lock() {
            s.usage = Some(usage);
        }
    }
    /// Tokens generated so far: the server's count when it sent one, else estimated
    /// from the bytes (~4 a token); `None` when nothing arrived.
    pub fn output_tokens(&self) -> Option<u64> {
        let s = self.inner.lock().ok()?;
        match s.usage {
            Some(u) => Some(u.output),
            None if s.bytes > 0 => Some(s.bytes.div_ceil(4)),
            None => None,
        }
    }
}

/// What a provider's own config says about its model's limits (wrappers pass them
/// through).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelLimits {
    /// The output cap of one agent turn, overriding `quotas.max_output_tokens`.
    pub max_output_tokens: Option<u32>,
    /// The model's context window in tokens (compaction keeps a request inside it).
    pub context_tokens: Option<u64>,
}

pub use crate::vocab::{StopReason, Usage};

/// A model's reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Completion {
    /// The reply text (may be empty when there are tool calls).
    pub text: String,
    /// Tool calls the model asked for.
    pub tool_calls: Vec<ToolCall>,
    /// Token usage (estimated when the provider reports none).
    pub usage: Usage,
    /// Why the model stopped.
    pub stop: StopReason,
    /// The model's reasoning (`reasoning_content` / `reasoning` of OpenAI-compatible
    /// servers, Anthropic's thinking): shown in events, never the result. OpenAI-
    /// compatible servers do not want it back in the history; Anthropic's signed
    /// blocks travel in [`Completion::thoughts`].
    pub reasoning: String,
    /// Signed thinking blocks to send back with the next request (Anthropic).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thoughts: Vec<Thought>,
}

/// Why a model call failed. `is_retryable` is the one place the retry decision lives.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// No answer in time, or the stream stalled. Retried.
    #[error("model call timed out: {0}")]
    Timeout(String),
    /// 429 (or a rate-limit error in a stream or body): the server asks us to slow
    /// down. Retried after `retry_after` if given.
    #[error("rate limited by the model server{}{}", retry_after_text(*retry_after), colon(message))]
    RateLimited {
        /// The server's `Retry-After`, if any.
        retry_after: Option<Duration>,
        /// What the server said (truncated, redacted; may be empty).
        message: String,
    },
    /// 503 / 529 (or an `overloaded` error): the server is busy. Retried after
    /// `retry_after` if given.
    #[error("model server overloaded ({status}){}{}", retry_after_text(*retry_after), colon(message))]
    Overloaded {
        /// HTTP status (529 for Anthropic's `overloaded_error`).
        status: u16,
        /// The server's `Retry-After`, if any.
        retry_after: Option<Duration>,
        /// What the server said (truncated, redacted).
        message: String,
    },
    /// 5xx. Retried.
    #[error("model server error {status}: {message}")]
    Server {
        /// HTTP status (or 500 for injected faults).
        status: u16,
        /// What the server said (truncated, never contains our credentials).
        message: String,
    },
    /// A `command` provider's CLI exited unsuccessfully. Retried only when it says
    /// so ([`CommandExit::transient`]): most CLI failures (a bad flag, no login, a
    /// spent quota) fail the same way again.
    #[error("command `{}` exited with {}{}", .0.program, .0.exit, colon(&.0.stderr))]
    CommandFailed(Box<CommandExit>),
    /// The connection failed or dropped. Retried.
    #[error("connection to the model server failed: {0}")]
    Connection(String),
    /// The server answered something we cannot read (malformed JSON, bad SSE). Not retried.
    #[error("malformed model response: {0}")]
    BadResponse(String),
    /// 4xx other than 429 (bad key, bad model, bad request), or a 5xx whose message is
    /// about the request (llama.cpp's 500 "Failed to parse tool call arguments"). Not
    /// retried.
    #[error("model request rejected ({status}): {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// What the server said.
        message: String,
    },
    /// The reply is larger than the provider's `max_reply_bytes`. Not retried.
    #[error("the model's reply exceeded {limit} bytes (max_reply_bytes) and was not read further")]
    ReplyTooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// The circuit breaker for this provider+model is open. Not retried.
    #[error("circuit breaker for {key} {} after repeated failures (last: {cause}); retry in {} s",
        if *opened_now { "opened" } else { "is open" }, retry_in.as_secs().max(1))]
    CircuitOpen {
        /// `provider/model`.
        key: String,
        /// Time until a trial call is allowed.
        retry_in: Duration,
        /// The failure that opened it (the last one counted).
        cause: String,
        /// This call's failure is the one that opened it (so callers report the opening
        /// once).
        opened_now: bool,
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
    /// The server rendered none of the tools the request offered (a chat template
    /// without tool support): the agent could never act. Not retried.
    #[error("{0}")]
    ToolsIgnored(String),
    /// The provider is misconfigured (missing key variable, bad command). Not retried.
    /// The text names the provider (`provider `x`: …`); wrappers do not repeat it.
    #[error("{0}")]
    Config(String),
    /// A replayed request differs from the recorded one (or was never recorded). Not
    /// retried.
    #[error("replay diverged: {0}")]
    Diverged(Box<replay::Divergence>),
}

impl ProviderError {
    /// Whether the call may succeed if simply tried again.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Timeout(_)
            | Self::RateLimited { .. }
            | Self::Overloaded { .. }
            | Self::Server { .. }
            | Self::Connection(_) => true,
            Self::CommandFailed(exit) => exit.transient,
            Self::BadResponse(_)
            | Self::Rejected { .. }
            | Self::ReplyTooLarge { .. }
            | Self::CircuitOpen { .. }
            | Self::NoScriptedReply { .. }
            | Self::ToolsIgnored(_)
            | Self::Config(_)
            | Self::Diverged(_) => false,
        }
    }

    /// How long the server asked us to wait before trying again, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after, .. } | Self::Overloaded { retry_after, .. } => {
                *retry_after
            }
            Self::Timeout(_)
            | Self::Server { .. }
            | Self::CommandFailed(_)
            | Self::Connection(_)
            | Self::BadResponse(_)
            | Self::Rejected { .. }
            | Self::ReplyTooLarge { .. }
            | Self::CircuitOpen { .. }
            | Self::NoScriptedReply { .. }
            | Self::ToolsIgnored(_)
            | Self::Config(_)
            | Self::Diverged(_) => None,
        }
    }
}

/// How a `command` provider's CLI ended when it did not succeed.
#[derive(Debug)]
pub struct CommandExit {
    /// The program (argv[0]).
    pub program: String,
    /// `1`, or `signal 9`.
    pub exit: String,
    /// The tail of what it wrote on stderr (redacted).
    pub stderr: String,
    /// Whether trying again may help: the CLI was killed by a signal (by the kernel's
    /// OOM killer, by someone else) or its stderr names a transient condition (rate
    /// limit, overload, timeout, a dropped connection).
    pub transient: bool,
}

impl CommandExit {
    /// Classifies an unsuccessful exit: `signal` is the signal that killed the CLI.
    pub fn new(program: &str, code: Option<i32>, signal: Option<i32>, stderr: String) -> Self {
        let exit = match (code, signal) {
            (Some(c), _) => c.to_string(),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => "an unknown status".to_owned(),
        };
        let transient = signal.is_some() || says_transient(&stderr);
        Self {
            program: program.to_owned(),
            exit,
            stderr,
            transient,
        }
    }
}

/// Whether a CLI's error text names a condition that passes with time.
fn says_transient(stderr: &str) -> bool {
    const MARKS: [&str; 14] = [
        "rate limit",
        "rate-limit",
        "ratelimit",
        "too many requests",
        "429",
        "overloaded",
        "503",
        "529",
        "timed out",
        "timeout",
        "connection reset",
        "connection refused",
        "temporarily unavailable",
        "try again",
    ];
    let lower = stderr.to_ascii_lowercase();
    MARKS.iter().any(|m| lower.contains(m))
}

fn retry_after_text(after: Option<Duration>) -> String {
    after
        .map(|d| format!(" (retry after {} ms)", d.as_millis()))
        .unwrap_or_default()
}

fn colon(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
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
    /// Whether answering may act on the agent's workspace (run a program there, as the
    /// `command` provider's agent CLI does). Such a provider is asked only once the
    /// agent's start is stored; a model behind an API, which only answers, is asked
    /// while those writes are in flight. True unless a provider says otherwise.
    fn acts(&self) -> bool {
        true
    }
    /// How far a replay got, for a provider answering from a recording; `None` for
    /// every provider that asks a model.
    fn replay(&self) -> Option<replay::ReplayStatus> {
        None
    }
    /// The limits its config sets (none by default).
    fn limits(&self) -> ModelLimits {
        ModelLimits::default()
    }
    /// The limits a request of about `request_tokens` tokens must respect: its
    /// config's, completed by what the server publishes when that matters (llama.cpp's
    /// `n_ctx` from `/props`, asked once). The config wins.
    async fn limits_for(&self, request_tokens: u64) -> ModelLimits {
        let _ = request_tokens;
        self.limits()
    }
}

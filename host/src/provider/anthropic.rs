//! The Anthropic Messages API with tool use, streamed or not.
//!
//! One attempt per `complete`; retries and the breaker wrap this provider (see
//! `config::build`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::conversation::{is_blank, well_formed};
use super::http::{self, Body, HttpTimeouts, SseReader};
use super::openai::estimate_usage;
use super::{
    Completion, CompletionRequest, Message, Provider, ProviderError, Role, StopReason, Thought,
    ToolCall, Usage,
};

/// The API version header we speak.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How to reach the Messages API.
#[derive(Clone, Debug)]
pub struct AnthropicOptions {
    /// e.g. `https://api.anthropic.com` (`/v1/messages` is appended).
    pub base_url: String,
    /// The model name sent in each request.
    pub model: String,
    /// Sent as `x-api-key` when set.
    pub api_key: Option<String>,
    /// `max_tokens` when the request sets none (the API requires one).
    pub max_tokens: u32,
    /// Stream the reply (SSE) rather than wait for one JSON body.
    pub stream: bool,
    /// Connect, overall and stall limits.
    pub timeouts: HttpTimeouts,
    /// The most bytes of one reply read before the call fails.
    pub max_reply_bytes: u64,
    /// Sampling temperature sent with every request, if set.
    pub temperature: Option<f64>,
    /// `stop_sequences` sent with every request (none when empty).
    pub stop: Vec<String>,
    /// The output cap of an agent turn and the context window, as configured.
    pub limits: super::ModelLimits,
    /// Extended thinking: the tokens the model may think before it answers, on top of
    /// the answer's `max_tokens` (`None`: thinking off).
    pub thinking_budget: Option<u32>,
}

/// A Messages API client.
pub struct AnthropicProvider {
    name: String,
    options: AnthropicOptions,
    url: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("name", &self.name)
            .field("url", &self.url)
            .finish()
    }
}

impl AnthropicProvider {
    /// A provider named `name` (its config key).
    pub fn new(
        name: impl Into<String>,
        options: AnthropicOptions,
        clients: &http::HttpClients,
    ) -> Result<Self, ProviderError> {
        let name = name.into();
        let client = clients.client(&name, &options.timeouts)?;
        let url = format!("{}/v1/messages", options.base_url.trim_end_matches('/'));
        Ok(Self {
            name,
            options,
            url,
            client,
        })
    }

    /// The JSON body for `request`.
    pub fn body(&self, request: &CompletionRequest) -> Value {
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect();
        let answer = request.max_tokens.unwrap_or(self.options.max_tokens);
        let mut body = json!({
            "model": self.options.model,
            "max_tokens": answer,
            "messages": wire_messages(&request.messages),
        });
        if let Some(budget) = self.options.thinking_budget {
            // Thinking counts against `max_tokens`, which must exceed the budget: the
            // answer keeps its own cap on top of it.
            body["max_tokens"] = json!(answer.saturating_add(budget));
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
        }
        if let Some(t) = self.options.temperature {
            body["temperature"] = json!(t);
        }
        if !self.options.stop.is_empty() {
            body["stop_sequences"] = json!(self.options.stop);
        }
        if self.options.stream {
            body["stream"] = json!(true);
        }
        body
    }

    async fn attempt(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        let mut builder = self
            .client
            .post(&self.url)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(&self.body(request));
        if let Some(key) = &self.options.api_key {
            builder = builder.header("x-api-key", key);
        }
        let stall = self.options.timeouts.stall;
        let cap = self.options.max_reply_bytes;
        let head = self
            .options
            .stream
            .then_some(self.options.timeouts.first_byte);
        let response = http::send(builder, head, stall).await?;
        let body = if self.options.stream {
            http::stream_body(response, stall, cap).await?
        } else {
            Body::Json(http::read_body(response, stall, cap).await?)
        };
        let mut completion = match body {
            Body::Stream(reader) => read_stream(reader, request.progress.as_deref()).await?,
            Body::Json(bytes) => from_response(http::parse_json(&bytes, "message")?)?,
        };
        if completion.usage == Usage::default() {
            completion.usage = estimate_usage(request, &completion);
        }
        Ok(completion)
    }
}

/// The conversation as the Messages API takes it: alternating user/assistant turns of
/// content blocks, starting with a user turn. Tool results travel as `tool_result`
/// blocks at the head of the user turn after the calls ([`well_formed`] put them
/// there), any text of that turn after them; empty and whitespace-only text is never
/// sent (the API rejects it), and a turn left with no blocks is dropped.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in well_formed(messages) {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User if is_blank(&m.content) => continue,
            Role::User => ("user", vec![json!({"type": "text", "text": m.content})]),
            Role::Tool => {
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
                });
                if !m.content.is_empty() {
                    block["content"] = json!(m.content);
                }
                if m.is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
            Role::Assistant => {
                // Signed thinking first, unchanged: the API checks it came from it.
                let mut blocks: Vec<Value> = m.thoughts.iter().filter_map(wire_thought).collect();
                if !is_blank(&m.content) {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for c in &m.tool_calls {
                    let input = if c.args.is_object() {
                        c.args.clone()
                    } else {
                        json!({})
                    };
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                if blocks.is_empty() {
                    continue;
                }
                ("assistant", blocks)
            }
        };
        match out.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    if out.first().is_none_or(|(role, _)| *role != "user") {
        out.insert(
            0,
            (
                "user",
                vec![json!({"type": "text", "text": "(no message)"})],
            ),
        );
    }
    out.into_iter()
        .map(|(role, mut content)| {
            // tool_result blocks first: the API reads any block before them as the
            // user speaking before the results arrived.
            content.sort_by_key(|b| b["type"] != "tool_result");
            json!({"role": role, "content": content})
        })
        .collect()
}

/// A kept thinking block as the API sent it; one without a signature (a compatible
/// server that signs nothing) is not sent back, since the API could not verify it.
fn wire_thought(t: &Thought) -> Option<Value> {
    match t {
        Thought::Thinking { signature, .. } if signature.is_empty() => None,
        Thought::RedactedThinking { data } if data.is_empty() => None,
        t => serde_json::to_value(t).ok(),
    }
}

fn stop_reason(s: Option<&str>, has_calls: bool) -> StopReason {
    match s {
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("refusal") => StopReason::Refused,
        _ if has_calls => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    }
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default, deserialize_with = "http::null_default")]
    input_tokens: u64,
    #[serde(default, deserialize_with = "http::null_default")]
    output_tokens: u64,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Extended thinking: reasoning, never the answer.
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    /// Thinking the API encrypted: reasoning whose text is not shown.
    RedactedThinking {
        #[serde(default)]
        data: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// A non-streamed reply: a message, or (with a 200) an error object.
fn from_response(v: Value) -> Result<Completion, ProviderError> {
    if v.get("type").and_then(Value::as_str) == Some("error") || v.get("error").is_some() {
        return Err(http::api_error(v.get("error").unwrap_or(&v)));
    }
    let m: WireMessage = serde_json::from_value(v)
        .map_err(|e| ProviderError::BadResponse(format!("message: {e}")))?;
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut thoughts = Vec::new();
    let mut tool_calls = Vec::new();
    for block in m.content {
        match block {
            WireBlock::Text { text: t } => text.push_str(&t),
            WireBlock::Thinking {
                thinking,
                signature,
            } => {
                reasoning.push_str(&thinking);
                thoughts.push(Thought::Thinking {
                    thinking,
                    signature,
                });
            }
            WireBlock::RedactedThinking { data } => {
                reasoning.push_str(REDACTED);
                thoughts.push(Thought::RedactedThinking { data });
            }
            WireBlock::ToolUse { id, name, input } => {
                tool_calls.push(match input {
                    Value::Null => ToolCall::new(id, name, json!({})),
                    Value::Object(_) => ToolCall::new(id, name, input),
                    other => ToolCall::from_wire(id, name, &other.to_string()),
                });
            }
            WireBlock::Other => {}
        }
    }
    let usage = m
        .usage
        .map(|u| Usage {
            input: u.input_tokens,
            output: u.output_tokens,
        })
        .unwrap_or_default();
    Ok(Completion {
        reasoning,
        thoughts,
        stop: stop_reason(m.stop_reason.as_deref(), !tool_calls.is_empty()),
        text,
        tool_calls,
        usage,
    })
}

/// The string field `key` of a stream object (empty when absent or not a string).
fn text_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// What a `redacted_thinking` block reads as: the model reasoned, its text is hidden.
const REDACTED: &str = "[redacted thinking]";

enum PartialBlock {
    Text,
    /// A thinking block: its text and signature arrive in deltas.
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted {
        data: String,
    },
    Tool {
        id: String,
        name: String,
        json: String,
        input: Value,
    },
}

async fn read_stream<S, B>(
    mut reader: SseReader<S>,
    progress: Option<&super::Progress>,
) -> Result<Completion, ProviderError>
where
    S: futures::Stream<Item = Result<B, reqwest::Error>> + Unpin,
    B: AsRef<[u8]>,
{
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut blocks: BTreeMap<u64, PartialBlock> = BTreeMap::new();
    let mut usage = Usage::default();
    let mut stop: Option<String> = None;
    let mut finished = false;
    while let Some(event) = reader.next().await? {
        let v: Value = http::parse_json(event.data.as_bytes(), "stream event")?;
        let kind = event
            .event
            .as_deref()
            .or_else(|| v.get("type").and_then(Value::as_str))
            .unwrap_or("");
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage") {
                    let u: WireUsage = serde_json::from_value(u.clone()).unwrap_or_default();
                    usage = Usage {
                        input: u.input_tokens,
                        output: u.output_tokens,
                    };
                }
            }
            "content_block_start" => {
                let block = v.get("content_block").cloned().unwrap_or(Value::Null);
                let partial = match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => PartialBlock::Tool {
                        id: text_of(&block, "id"),
                        name: text_of(&block, "name"),
                        json: String::new(),
                        input: block.get("input").cloned().unwrap_or(Value::Null),
                    },
                    Some("thinking") => {
                        let thinking = text_of(&block, "thinking");
                        reasoning.push_str(&thinking);
                        PartialBlock::Thinking {
                            thinking,
                            signature: text_of(&block, "signature"),
                        }
                    }
                    Some("redacted_thinking") => {
                        reasoning.push_str(REDACTED);
                        PartialBlock::Redacted {
                            data: text_of(&block, "data"),
                        }
                    }
                    _ => {
                        if let Some(t) = block.get("text").and_then(Value::as_str) {
                            text.push_str(t);
                        }
                        PartialBlock::Text
                    }
                };
                blocks.insert(index, partial);
            }
            "content_block_delta" => {
                let delta = v.get("delta").cloned().unwrap_or(Value::Null);
                if let Some(p) = progress {
                    for key in ["text", "partial_json", "thinking"] {
                        p.generated(delta.get(key).and_then(Value::as_str).unwrap_or_default());
                    }
                }
                match (
                    delta.get("type").and_then(Value::as_str),
                    blocks.get_mut(&index),
                ) {
                    (Some("thinking_delta"), block) => {
                        let t = delta
                            .get("thinking")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        reasoning.push_str(t);
                        if let Some(PartialBlock::Thinking { thinking, .. }) = block {
                            thinking.push_str(t);
                        }
                    }
                    (Some("signature_delta"), Some(PartialBlock::Thinking { signature, .. })) => {
                        signature.push_str(
                            delta
                                .get("signature")
                                .and_then(Value::as_str)
                                .unwrap_or_default(),
                        );
                    }
                    (Some("text_delta"), _) => text.push_str(
                        delta
                            .get("text")
                            .and_then(Value::as_str)
                            .unwrap_or_default(),
                    ),
                    (Some("input_json_delta"), Some(PartialBlock::Tool { json, .. })) => json
                        .push_str(
                            delta
                                .get("partial_json")
                                .and_then(Value::as_str)
                                .unwrap_or_default(),
                        ),
                    (Some("input_json_delta"), _) => {
                        return Err(ProviderError::BadResponse(format!(
                            "input_json_delta for block {index}, which is not a tool_use block"
                        )));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(s) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    stop = Some(s.to_owned());
                }
                if let Some(out) = v.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    usage.output = out;
                    if let Some(p) = progress {
                        p.reported(usage);
                    }
                }
                if let Some(inp) = v.pointer("/usage/input_tokens").and_then(Value::as_u64) {
                    usage.input = inp;
                }
            }
            "message_stop" => {
                finished = true;
                break;
            }
            "error" => return Err(http::api_error(v.get("error").unwrap_or(&v))),
            _ => {} // ping, content_block_stop and future event kinds
        }
    }
    if !finished {
        return Err(ProviderError::Connection(
            "the stream ended before message_stop".into(),
        ));
    }
    let mut thoughts = Vec::new();
    let tool_calls: Vec<ToolCall> = blocks
        .into_values()
        .filter_map(|b| match b {
            PartialBlock::Text => None,
            PartialBlock::Thinking {
                thinking,
                signature,
            } => {
                thoughts.push(Thought::Thinking {
                    thinking,
                    signature,
                });
                None
            }
            PartialBlock::Redacted { data } => {
                thoughts.push(Thought::RedactedThinking { data });
                None
            }
            PartialBlock::Tool {
                id,
                name,
                json,
                input,
            } => Some(if json.trim().is_empty() {
                let args = if input.is_object() { input } else { json!({}) };
                ToolCall::new(id, name, args)
            } else {
                ToolCall::from_wire(id, name, &json)
            }),
        })
        .collect();
    Ok(Completion {
        reasoning,
        thoughts,
        stop: stop_reason(stop.as_deref(), !tool_calls.is_empty()),
        text,
        tool_calls,
        usage,
    })
}

#[async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.name
    }
    fn acts(&self) -> bool {
        false
    }
    fn model(&self) -> &str {
        &self.options.model
    }
    fn limits(&self) -> super::ModelLimits {
        self.options.limits
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        super::http::within(self.options.timeouts.overall, self.attempt(request)).await
    }
}

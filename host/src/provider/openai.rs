//! Any OpenAI-compatible Chat Completions server (OpenAI, Ollama, vLLM, llama.cpp …).
//!
//! One attempt per `complete`; retries and the breaker wrap this provider (see
//! `config::build`). Streaming assembles `delta.tool_calls` fragments by their index.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{self, HttpTimeouts, Redactor, SseReader};
use super::{
    Completion, CompletionRequest, Message, Provider, ProviderError, Role, StopReason, ToolCall,
    Usage,
};

/// How to reach an OpenAI-compatible server.
#[derive(Clone, Debug)]
pub struct OpenAiOptions {
    /// e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// The model name sent in each request.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Stream the reply (SSE) rather than wait for one JSON body.
    pub stream: bool,
    /// Connect, overall and stall limits.
    pub timeouts: HttpTimeouts,
}

/// A Chat Completions client.
pub struct OpenAiProvider {
    name: String,
    options: OpenAiOptions,
    url: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("OpenAiProvider")
            .field("name", &self.name)
            .field("url", &self.url)
            .finish()
    }
}

impl OpenAiProvider {
    /// A provider named `name` (its config key).
    pub fn new(name: impl Into<String>, options: OpenAiOptions) -> Result<Self, ProviderError> {
        let client = http::client(&options.timeouts)?;
        let url = format!(
            "{}/chat/completions",
            options.base_url.trim_end_matches('/')
        );
        Ok(Self {
            name: name.into(),
            options,
            url,
            client,
        })
    }

    /// The JSON body for `request`.
    pub fn body(&self, request: &CompletionRequest) -> Value {
        let mut body = json!({
            "model": self.options.model,
            "messages": request.messages.iter().map(wire_message).collect::<Vec<_>>(),
            "stream": self.options.stream,
        });
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect();
        }
        if let Some(max) = request.max_tokens {
            body["max_tokens"] = json!(max);
        }
        if self.options.stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    async fn attempt(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        let redact = Redactor(self.options.api_key.as_deref());
        let mut builder = self.client.post(&self.url).json(&self.body(request));
        if let Some(key) = &self.options.api_key {
            builder = builder.bearer_auth(key);
        }
        let stall = self.options.timeouts.stall;
        let head_stall = self.options.stream.then_some(stall);
        let response = http::send(builder, head_stall, stall, &redact).await?;
        let mut completion = if self.options.stream {
            let reader =
                SseReader::new(response.bytes_stream(), stall, self.options.api_key.clone());
            read_stream(reader).await?
        } else {
            let bytes = http::read_body(response, stall, &redact).await?;
            from_response(http::parse_json(&bytes, "chat completion")?)?
        };
        if completion.usage == Usage::default() {
            completion.usage = estimate_usage(request, &completion);
        }
        Ok(completion)
    }
}

/// Usage estimated from the texts when the server reported none.
pub(crate) fn estimate_usage(request: &CompletionRequest, c: &Completion) -> Usage {
    Usage {
        input: request
            .messages
            .iter()
            .map(|m| Usage::estimate(&m.content))
            .sum(),
        output: Usage::estimate(&c.text)
            + c.tool_calls
                .iter()
                .map(|t| Usage::estimate(&t.args.to_string()))
                .sum::<u64>(),
    }
}

/// One message in the Chat Completions wire shape.
fn wire_message(m: &Message) -> Value {
    match m.role {
        Role::System => json!({"role": "system", "content": m.content}),
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
            "content": m.content,
        }),
        Role::Assistant if m.tool_calls.is_empty() => {
            json!({"role": "assistant", "content": m.content})
        }
        Role::Assistant => json!({
            "role": "assistant",
            "content": if m.content.is_empty() { Value::Null } else { json!(m.content) },
            "tool_calls": m.tool_calls.iter().map(|c| json!({
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.args.to_string()},
            })).collect::<Vec<_>>(),
        }),
    }
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireChoice {
    #[serde(default, alias = "delta")]
    message: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

fn stop_reason(finish: Option<&str>, has_calls: bool) -> StopReason {
    match finish {
        Some("length") => StopReason::MaxTokens,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        _ if has_calls => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    }
}

fn stream_error(error: &Value) -> ProviderError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| error.to_string());
    ProviderError::Server {
        status: 500,
        message: http::truncate(&message, 600),
    }
}

fn from_response(r: WireResponse) -> Result<Completion, ProviderError> {
    if let Some(e) = &r.error {
        return Err(stream_error(e));
    }
    let choice = r
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ProviderError::BadResponse("no choices in the reply".into()))?;
    let message = choice
        .message
        .ok_or_else(|| ProviderError::BadResponse("the choice has no message".into()))?;
    let tool_calls: Vec<ToolCall> = message
        .tool_calls
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let f = c.function.unwrap_or(WireFunction {
                name: None,
                arguments: None,
            });
            ToolCall {
                id: c.id.unwrap_or_else(|| format!("call_{i}")),
                name: f.name.unwrap_or_default(),
                args: http::parse_arguments(f.arguments.as_deref().unwrap_or("")),
            }
        })
        .collect();
    let usage = r
        .usage
        .map(|u| Usage {
            input: u.prompt_tokens,
            output: u.completion_tokens,
        })
        .unwrap_or_default();
    Ok(Completion {
        text: message.content.unwrap_or_default(),
        stop: stop_reason(choice.finish_reason.as_deref(), !tool_calls.is_empty()),
        tool_calls,
        usage,
    })
}

#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

async fn read_stream<S, B>(mut reader: SseReader<S>) -> Result<Completion, ProviderError>
where
    S: futures::Stream<Item = Result<B, reqwest::Error>> + Unpin,
    B: AsRef<[u8]>,
{
    let mut text = String::new();
    let mut calls: BTreeMap<usize, PartialCall> = BTreeMap::new();
    let mut finish: Option<String> = None;
    let mut usage = Usage::default();
    let mut done = false;
    while let Some(event) = reader.next().await? {
        if event.data.trim() == "[DONE]" {
            done = true;
            break;
        }
        let chunk: WireResponse = http::parse_json(event.data.as_bytes(), "stream chunk")?;
        if let Some(e) = &chunk.error {
            return Err(stream_error(e));
        }
        if let Some(u) = chunk.usage {
            usage = Usage {
                input: u.prompt_tokens,
                output: u.completion_tokens,
            };
        }
        for choice in chunk.choices {
            if let Some(f) = choice.finish_reason {
                finish = Some(f);
            }
            let Some(delta) = choice.message else {
                continue;
            };
            if let Some(c) = delta.content {
                text.push_str(&c);
            }
            for (pos, tc) in delta.tool_calls.into_iter().enumerate() {
                let slot = calls.entry(tc.index.unwrap_or(pos)).or_default();
                if let Some(id) = tc.id {
                    slot.id = Some(id);
                }
                if let Some(f) = tc.function {
                    if let Some(n) = f.name {
                        slot.name.push_str(&n);
                    }
                    if let Some(a) = f.arguments {
                        slot.arguments.push_str(&a);
                    }
                }
            }
        }
    }
    if !done && finish.is_none() {
        return Err(ProviderError::Connection(
            "the stream ended before the reply was complete".into(),
        ));
    }
    let tool_calls: Vec<ToolCall> = calls
        .into_iter()
        .map(|(i, c)| ToolCall {
            id: c.id.unwrap_or_else(|| format!("call_{i}")),
            name: c.name,
            args: http::parse_arguments(&c.arguments),
        })
        .collect();
    Ok(Completion {
        text,
        stop: stop_reason(finish.as_deref(), !tool_calls.is_empty()),
        tool_calls,
        usage,
    })
}

#[async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.name
    }
    fn model(&self) -> &str {
        &self.options.model
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        super::http::within(self.options.timeouts.overall, self.attempt(request)).await
    }
}

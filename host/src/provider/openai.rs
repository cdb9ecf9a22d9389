//! Any OpenAI-compatible Chat Completions server (OpenAI, Ollama, vLLM, llama.cpp,
//! SGLang, Gemini's compatible endpoint …).
//!
//! One attempt per `complete`; retries and the breaker wrap this provider (see
//! `config::build`). Servers differ in what they leave out: optional fields may be
//! absent or `null` (`tool_calls`, `choices` of a usage chunk, `content`), and streamed
//! tool-call fragments are assembled by call id when the server sends one and by
//! `index` otherwise (see `CallAssembler`).

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::conversation::{is_blank, well_formed};
use super::http::{self, Body, HttpTimeouts, SseReader, null_default};
use super::props::{self, ServerProps};
use super::{
    Completion, CompletionRequest, Message, ModelLimits, Progress, Provider, ProviderError, Role,
    StopReason, ToolCall, Usage,
};
use std::sync::atomic::{AtomicBool, Ordering};

/// Which request field carries the output token limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenLimitField {
    /// `max_completion_tokens`: OpenAI's field (`max_tokens` is deprecated there and
    /// refused by o-series models).
    #[default]
    MaxCompletionTokens,
    /// `max_tokens`: for servers that only know the older field.
    MaxTokens,
}

impl TokenLimitField {
    /// The request field's name.
    pub fn key(self) -> &'static str {
        match self {
            Self::MaxCompletionTokens => "max_completion_tokens",
            Self::MaxTokens => "max_tokens",
        }
    }
}

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
    /// The field the output token limit goes in.
    pub token_limit_field: TokenLimitField,
    /// The most bytes of one reply read before the call fails.
    pub max_reply_bytes: u64,
    /// Sampling temperature sent with every request, if set.
    pub temperature: Option<f64>,
    /// Stop sequences sent with every request (none when empty).
    pub stop: Vec<String>,
    /// The output cap of an agent turn and the context window, as configured.
    pub limits: ModelLimits,
}

/// A Chat Completions client.
pub struct OpenAiProvider {
    name: String,
    options: OpenAiOptions,
    url: String,
    client: reqwest::Client,
    /// A reply carried llama.cpp's `timings`: the server is llama.cpp.
    llama: AtomicBool,
    /// Its `/props`, asked at most once (`None` inside: it has none or did not answer).
    props: tokio::sync::OnceCell<Option<ServerProps>>,
    /// A server other than llama.cpp counted too few prompt tokens for the tools
    /// offered, and the user was warned (once per provider).
    warned_tools: AtomicBool,
}

/// Below this many tokens a request fits any server's context, so `/props` is not
/// asked for `n_ctx` (llama-server's contexts are 2,048 tokens and up in practice).
const PROPS_FLOOR_TOKENS: u64 = 1024;

/// The longest `/props` is waited for when asked for the context window.
const PROPS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

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
    pub fn new(
        name: impl Into<String>,
        options: OpenAiOptions,
        clients: &http::HttpClients,
    ) -> Result<Self, ProviderError> {
        let name = name.into();
        let client = clients.client(&name, &options.timeouts)?;
        let url = format!(
            "{}/chat/completions",
            options.base_url.trim_end_matches('/')
        );
        Ok(Self {
            name,
            options,
            url,
            client,
            llama: AtomicBool::new(false),
            warned_tools: AtomicBool::new(false),
            props: tokio::sync::OnceCell::new(),
        })
    }

    /// The JSON body for `request`.
    pub fn body(&self, request: &CompletionRequest) -> Value {
        let messages: Vec<Value> = well_formed(&request.messages)
            .iter()
            .filter_map(wire_message)
            .collect();
        let mut body = json!({
            "model": self.options.model,
            "messages": messages,
            "stream": self.options.stream,
        });
        if !request.tools.is_empty() {
            body["tools"] = wire_tools(request);
        }
        if let Some(max) = request.max_tokens {
            body[self.options.token_limit_field.key()] = json!(max);
        }
        if let Some(t) = self.options.temperature {
            body["temperature"] = json!(t);
        }
        if !self.options.stop.is_empty() {
            body["stop"] = json!(self.options.stop);
        }
        if self.options.stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    async fn attempt(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        let mut builder = self.client.post(&self.url).json(&self.body(request));
        if let Some(key) = &self.options.api_key {
            builder = builder.bearer_auth(key);
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
        let (mut completion, llama) = match body {
            Body::Stream(reader) => read_stream(reader, request.progress.as_deref()).await?,
            Body::Json(bytes) => {
                let wire: WireResponse = http::parse_json(&bytes, "chat completion")?;
                let llama = wire.timings.is_some();
                (from_response(wire)?, llama)
            }
        };
        if llama {
            self.llama.store(true, Ordering::Relaxed);
        }
        if completion.usage == Usage::default() {
            completion.usage = estimate_usage(request, &completion);
        } else if llama {
            self.tools_rendered(request, &completion).await?;
        } else if !self.warned_tools.load(Ordering::Relaxed)
            && dropped_tools(request, &completion).is_some()
            && !self.warned_tools.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                provider = %self.name,
                prompt_tokens = completion.usage.input,
                tools = request.tools.len(),
                "the server counted fewer prompt tokens than the offered tool schemas alone \
                 take, and the model called no tool: it may not render tools (a chat \
                 template without tool support); if the agents never act, check the \
                 server's template"
            );
        }
        Ok(completion)
    }

    /// Fails when a llama.cpp server (its replies carry `timings`) counted fewer prompt
    /// tokens than a quarter of what the offered tool schemas alone take (~4 bytes a
    /// token) and the model called none: its chat template dropped them (without a
    /// tool template it renders a 1,600 token request as 140). Its `/props` names the
    /// cause; when `/props` says the template does render tools, the count stands.
    /// Other servers refuse tools they cannot render (Ollama, vLLM and SGLang answer
    /// 400), and mock servers report made-up counts, so only llama.cpp fails; the
    /// others get a warning (see [`dropped_tools`]).
    async fn tools_rendered(
        &self,
        request: &CompletionRequest,
        c: &Completion,
    ) -> Result<(), ProviderError> {
        let Some(schema) = dropped_tools(request, c) else {
            return Ok(());
        };
        let found = self.props(self.options.timeouts.stall).await.cloned();
        if found.as_ref().and_then(|p| p.supports_tools) == Some(true) {
            return Ok(());
        }
        Err(ProviderError::ToolsIgnored(tools_ignored(
            &self.name,
            &self.options.base_url,
            request.tools.len(),
            (c.usage.input, schema),
            found.as_ref(),
        )))
    }
}

impl OpenAiProvider {
    /// The server's `/props`, asked once per provider (bounded by `timeout`) and kept.
    async fn props(&self, timeout: std::time::Duration) -> Option<&ServerProps> {
        self.props
            .get_or_init(|| async {
                props::probe(
                    &self.client,
                    &self.options.base_url,
                    self.options.api_key.as_deref(),
                    timeout,
                )
                .await
                .unwrap_or_else(|e| {
                    tracing::debug!(provider = %self.name, error = %e, "no /props");
                    None
                })
            })
            .await
            .as_ref()
    }
}

/// The tool schemas' size in tokens when a reply's prompt count says the server
/// rendered none of them: tools were offered, none was called, and the server counted
/// fewer prompt tokens than a quarter of what the schemas alone take (~4 bytes a
/// token). Only a sign: a llama.cpp server is then asked its `/props` and fails the
/// call; any other server is warned about once (mock servers report made-up counts,
/// and Ollama, vLLM and SGLang refuse tools they cannot render with a 400).
fn dropped_tools(request: &CompletionRequest, c: &Completion) -> Option<u64> {
    if request.tools.is_empty() || !c.tool_calls.is_empty() {
        return None;
    }
    let schema = Usage::estimate(&wire_tools(request).to_string());
    (c.usage.input.saturating_mul(4) < schema).then_some(schema)
}

/// The error for a server that rendered none of the tools: what it counted, and what
/// its `/props` says when it has one.
fn tools_ignored(
    name: &str,
    base_url: &str,
    tools: usize,
    (prompt, schema): (u64, u64),
    found: Option<&ServerProps>,
) -> String {
    let counted = format!(
        "it counted {prompt} prompt tokens for a request whose {tools} tool schemas alone are \
         about {schema} tokens"
    );
    let cause = match found {
        Some(p) if p.supports_tools == Some(false) => format!(
            "its chat template has no tool support (llama.cpp `/props`: \
             chat_template_caps.supports_tools = false{})",
            p.model
                .as_deref()
                .map(|m| format!(", model `{}`", http::shown(m, 200)))
                .unwrap_or_default()
        ),
        _ => "its chat template has no tool support, it seems".to_owned(),
    };
    format!(
        "provider `{name}` ({base_url}): the server rendered none of the tools offered: \
         {counted}; {cause}. The agent could never act. Start llama.cpp's llama-server with \
         `--jinja` and a chat template that renders tools (`--chat-template-file`), or serve \
         a model whose template has them; `crewbox health --provider {name}` probes the server"
    )
}

/// The `tools` of a request in the Chat Completions shape.
fn wire_tools(request: &CompletionRequest) -> Value {
    request
        .tools
        .iter()
        .map(|t| {
            json!({"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": t.parameters,
            }})
        })
        .collect()
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
                .map(|t| Usage::estimate(&t.args_text()))
                .sum::<u64>(),
    }
}

/// One message in the Chat Completions wire shape; an assistant message that says
/// nothing and calls nothing is left out.
fn wire_message(m: &Message) -> Option<Value> {
    Some(match m.role {
        Role::System => json!({"role": "system", "content": m.content}),
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
            "content": m.content,
        }),
        Role::Assistant if m.tool_calls.is_empty() => {
            if is_blank(&m.content) {
                return None;
            }
            json!({"role": "assistant", "content": m.content})
        }
        Role::Assistant => json!({
            "role": "assistant",
            "content": if is_blank(&m.content) { Value::Null } else { json!(m.content) },
            "tool_calls": m.tool_calls.iter().map(|c| json!({
                "id": c.id,
                "type": "function",
                // Never arguments that are not JSON: llama.cpp fails every later request
                // with 500 "Failed to parse tool call arguments as JSON" (Ollama 400).
                // The call's result says it was not run and why.
                "function": {"name": c.name, "arguments": wire_arguments(c)},
            })).collect::<Vec<_>>(),
        }),
    })
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default, deserialize_with = "null_default")]
    prompt_tokens: u64,
    #[serde(default, deserialize_with = "null_default")]
    completion_tokens: u64,
}

#[derive(Deserialize, Default)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    /// A string of JSON (some servers send the object itself).
    #[serde(default)]
    arguments: Option<Value>,
}

impl WireFunction {
    fn arguments(&self) -> String {
        match &self.arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    }
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
    /// A string, `null`, or (some servers) a list of text parts.
    #[serde(default)]
    content: Option<Value>,
    #[serde(default, deserialize_with = "null_default")]
    tool_calls: Vec<WireToolCall>,
    /// A thinking model's reasoning (llama.cpp, vLLM, SGLang, DeepSeek).
    #[serde(default)]
    reasoning_content: Option<Value>,
    /// The same under Ollama's and newer vLLM's name.
    #[serde(default)]
    reasoning: Option<Value>,
}

impl WireMessage {
    fn text(&self) -> String {
        match &self.content {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            _ => String::new(),
        }
    }

    fn reasoning(&self) -> String {
        [&self.reasoning_content, &self.reasoning]
            .into_iter()
            .filter_map(|r| r.as_ref().and_then(Value::as_str))
            .collect()
    }
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
    #[serde(default, deserialize_with = "null_default")]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
    /// llama.cpp's generation timings (only llama.cpp sends them).
    #[serde(default)]
    timings: Option<Value>,
}

impl WireResponse {
    fn usage(&self) -> Option<Usage> {
        self.usage.as_ref().map(|u| Usage {
            input: u.prompt_tokens,
            output: u.completion_tokens,
        })
    }
}

fn stop_reason(finish: Option<&str>, has_calls: bool) -> StopReason {
    match finish {
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refused,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        _ if has_calls => StopReason::ToolUse,
        _ => StopReason::EndTurn,
    }
}

fn from_response(r: WireResponse) -> Result<Completion, ProviderError> {
    if let Some(e) = &r.error {
        return Err(http::api_error(e));
    }
    let usage = r.usage().unwrap_or_default();
    let choice = r
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| ProviderError::BadResponse("no choices in the reply".into()))?;
    let message = choice
        .message
        .ok_or_else(|| ProviderError::BadResponse("the choice has no message".into()))?;
    let mut tool_calls: Vec<ToolCall> = message
        .tool_calls
        .iter()
        .map(|c| {
            let f = c.function.as_ref();
            ToolCall::from_wire(
                c.id.clone().unwrap_or_default(),
                f.and_then(|f| f.name.clone()).unwrap_or_default(),
                &f.map(WireFunction::arguments).unwrap_or_default(),
            )
        })
        .collect();
    http::unique_ids(&mut tool_calls);
    Ok(Completion {
        thoughts: Vec::new(),
        reasoning: message.reasoning(),
        text: message.text(),
        stop: stop_reason(choice.finish_reason.as_deref(), !tool_calls.is_empty()),
        tool_calls,
        usage,
    })
}

#[derive(Debug, Default)]
struct PartialCall {
    index: Option<usize>,
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Puts streamed tool-call fragments together. A fragment with an id belongs to the
/// call with that id (a new id is a new call, whatever its `index`: some servers send
/// `index: 0` for every call); one without an id belongs to the latest call with its
/// `index`, or, with no index either, to the latest call — unless it names a tool, which
/// only a call's first fragment does.
#[derive(Debug, Default)]
struct CallAssembler {
    calls: Vec<PartialCall>,
}

impl CallAssembler {
    fn add(&mut self, tc: WireToolCall) {
        let id = tc.id.filter(|id| !id.trim().is_empty());
        let f = tc.function.unwrap_or_default();
        let name = f.name.clone().filter(|n| !n.is_empty());
        let slot = match &id {
            Some(id) => self
                .calls
                .iter()
                .rposition(|c| c.id.as_deref() == Some(id.as_str())),
            None => match tc.index {
                Some(index) => self.calls.iter().rposition(|c| c.index == Some(index)),
                None if name.is_none() => self.calls.len().checked_sub(1),
                None => None,
            },
        };
        let slot = match slot {
            Some(i) => i,
            None => {
                self.calls.push(PartialCall {
                    index: tc.index,
                    id: id.clone(),
                    ..Default::default()
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[slot];
        if call.id.is_none() {
            call.id = id;
        }
        if let Some(n) = name {
            // Some servers repeat the whole name in every fragment; OpenAI sends it once.
            if call.name != n {
                call.name.push_str(&n);
            }
        }
        call.arguments.push_str(&f.arguments());
    }

    fn finish(self) -> Vec<ToolCall> {
        let mut calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|c| ToolCall::from_wire(c.id.unwrap_or_default(), c.name, &c.arguments))
            .collect();
        http::unique_ids(&mut calls);
        calls
    }
}

/// The reply of a stream, and whether it came from llama.cpp (a chunk had `timings`).
async fn read_stream<S, B>(
    mut reader: SseReader<S>,
    progress: Option<&Progress>,
) -> Result<(Completion, bool), ProviderError>
where
    S: futures::Stream<Item = Result<B, reqwest::Error>> + Unpin,
    B: AsRef<[u8]>,
{
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = CallAssembler::default();
    let mut finish: Option<String> = None;
    let mut usage = Usage::default();
    let mut done = false;
    let mut llama = false;
    while let Some(event) = reader.next().await? {
        if event.data.trim() == "[DONE]" {
            done = true;
            break;
        }
        if event.data.trim().is_empty() {
            continue;
        }
        let chunk: WireResponse = http::parse_json(event.data.as_bytes(), "stream chunk")?;
        if let Some(e) = &chunk.error {
            return Err(http::api_error(e));
        }
        llama |= chunk.timings.is_some();
        if let Some(u) = chunk.usage() {
            usage = u;
            if let Some(p) = progress {
                p.reported(u);
            }
        }
        for choice in chunk.choices {
            if let Some(f) = choice.finish_reason {
                finish = Some(f);
            }
            let Some(delta) = choice.message else {
                continue;
            };
            let (said, thought) = (delta.text(), delta.reasoning());
            if let Some(p) = progress {
                p.generated(&said);
                p.generated(&thought);
                for tc in &delta.tool_calls {
                    if let Some(f) = &tc.function {
                        p.generated(&f.arguments());
                    }
                }
            }
            text.push_str(&said);
            reasoning.push_str(&thought);
            for tc in delta.tool_calls {
                calls.add(tc);
            }
        }
    }
    if !done && finish.is_none() {
        return Err(ProviderError::Connection(
            "the stream ended before the reply was complete".into(),
        ));
    }
    let tool_calls = calls.finish();
    let completion = Completion {
        thoughts: Vec::new(),
        reasoning,
        text,
        stop: stop_reason(finish.as_deref(), !tool_calls.is_empty()),
        tool_calls,
        usage,
    };
    Ok((completion, llama))
}

#[async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.name
    }
    fn acts(&self) -> bool {
        false
    }
    fn model(&self) -> &str {
        &self.options.model
    }
    fn limits(&self) -> ModelLimits {
        self.options.limits
    }
    /// A llama.cpp server's `n_ctx` (from `/props`) is its context window unless the
    /// config names one; it is asked for once a request is big enough to matter.
    async fn limits_for(&self, request_tokens: u64) -> ModelLimits {
        let mut limits = self.options.limits;
        if limits.context_tokens.is_some() || !self.llama.load(Ordering::Relaxed) {
            return limits;
        }
        let known = match self.props.get() {
            Some(found) => found.as_ref(),
            None if request_tokens >= PROPS_FLOOR_TOKENS => {
                self.props(PROPS_TIMEOUT.min(self.options.timeouts.stall))
                    .await
            }
            None => None,
        };
        limits.context_tokens = known.and_then(|p| p.n_ctx).filter(|n| *n > 0);
        limits
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        super::http::within(self.options.timeouts.overall, self.attempt(request)).await
    }
}

/// A call's `arguments` as sent back: its JSON, or `{}` when what the model sent was not
/// JSON (a cut call).
fn wire_arguments(c: &crate::provider::ToolCall) -> String {
    match &c.invalid_args {
        Some(_) => "{}".to_owned(),
        None => c.args.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fragment(
        index: Option<usize>,
        id: Option<&str>,
        name: Option<&str>,
        args: &str,
    ) -> WireToolCall {
        WireToolCall {
            index,
            id: id.map(str::to_owned),
            function: Some(WireFunction {
                name: name.map(str::to_owned),
                arguments: Some(json!(args)),
            }),
        }
    }

    fn names(calls: &[ToolCall]) -> Vec<(&str, &str, Value)> {
        calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.args.clone()))
            .collect()
    }

    #[test]
    fn distinct_ids_at_the_same_index_are_distinct_calls() {
        let mut a = CallAssembler::default();
        a.add(fragment(
            Some(0),
            Some("c1"),
            Some("list_dir"),
            "{\"path\":",
        ));
        a.add(fragment(Some(0), None, None, "\".\"}"));
        a.add(fragment(
            Some(0),
            Some("c2"),
            Some("read_file"),
            "{\"path\":\"a\"}",
        ));
        assert_eq!(
            names(&a.finish()),
            [
                ("c1", "list_dir", json!({"path": "."})),
                ("c2", "read_file", json!({"path": "a"}))
            ]
        );
    }

    #[test]
    fn calls_without_index_are_keyed_by_id_or_by_their_name() {
        let mut a = CallAssembler::default();
        a.add(fragment(None, Some("g1"), Some("list_dir"), "{}"));
        a.add(fragment(
            None,
            Some("g2"),
            Some("read_file"),
            "{\"path\":\"x\"}",
        ));
        a.add(fragment(None, None, Some("grep"), "{\"pattern\":"));
        a.add(fragment(None, None, None, "\"y\"}"));
        let calls = a.finish();
        assert_eq!(
            names(&calls),
            [
                ("g1", "list_dir", json!({})),
                ("g2", "read_file", json!({"path": "x"})),
                ("call_2", "grep", json!({"pattern": "y"}))
            ]
        );
    }

    #[test]
    fn reasoning_is_read_under_both_names_and_never_as_text() {
        for key in ["reasoning_content", "reasoning"] {
            let r: WireResponse =
                serde_json::from_value(json!({"choices": [{"finish_reason": "stop",
                "message": {"role": "assistant", "content": "", key: "hmm"}}]}))
                .unwrap();
            let c = from_response(r).unwrap();
            assert_eq!(
                (c.text.as_str(), c.reasoning.as_str()),
                ("", "hmm"),
                "{key}"
            );
        }
    }

    #[test]
    fn a_repeated_name_is_not_doubled() {
        let mut a = CallAssembler::default();
        a.add(fragment(Some(0), Some("c"), Some("read_file"), "{\"pa"));
        a.add(fragment(
            Some(0),
            Some("c"),
            Some("read_file"),
            "th\":\"a\"}",
        ));
        assert_eq!(
            names(&a.finish()),
            [("c", "read_file", json!({"path": "a"}))]
        );
    }
}

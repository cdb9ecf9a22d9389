//! What the HTTP providers share: the client, status → error mapping, `Retry-After`,
//! stall- and size-guarded reading, and error text that never carries a secret.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::{Stream, StreamExt};
use reqwest::StatusCode;

use super::ProviderError;
use super::sse::{SseEvent, SseParser};

/// Longest server message kept in an error.
const MAX_ERROR_BODY: usize = 600;

/// Timeouts of one HTTP provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpTimeouts {
    /// Establishing the TCP/TLS connection.
    pub connect: Duration,
    /// The whole call, first byte to last.
    pub overall: Duration,
    /// Longest silence between two stream chunks (`stall_timeout_s`).
    pub stall: Duration,
    /// Longest wait for the response head of a streamed call (`first_byte_timeout_s`):
    /// a server with every slot busy sends none until one frees.
    pub first_byte: Duration,
}

impl Default for HttpTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            overall: Duration::from_secs(600),
            stall: Duration::from_secs(60),
            first_byte: Duration::from_secs(60),
        }
    }
}

/// Builds an HTTP client for provider `name`.
fn build_client(name: &str, timeouts: &HttpTimeouts) -> Result<reqwest::Client, ProviderError> {
    crate::tls::client_builder()
        .connect_timeout(timeouts.connect)
        .user_agent(concat!("crewbox/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            ProviderError::Config(format!(
                "provider `{name}`: cannot build the HTTP client: {e}"
            ))
        })
}

/// The HTTP clients of the providers an engine builds, one per connect timeout (the
/// only setting of a client; the other timeouts are per request): a provider built
/// for each run or each remote task reuses the connections (and TLS sessions) of the
/// ones before it instead of opening its own. Owned by the engine's services, so a
/// client never outlives the async runtime its connections run on.
#[derive(Clone, Debug, Default)]
pub struct HttpClients {
    clients: Arc<Mutex<Vec<(Duration, reqwest::Client)>>>,
}

/// Distinct connect timeouts kept (configurations have a few; the oldest goes first).
const MAX_CLIENTS: usize = 16;

impl HttpClients {
    /// The client for provider `name` with `timeouts`, built on first use.
    pub fn client(
        &self,
        name: &str,
        timeouts: &HttpTimeouts,
    ) -> Result<reqwest::Client, ProviderError> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, c)) = clients.iter().find(|(t, _)| *t == timeouts.connect) {
            return Ok(c.clone());
        }
        let client = build_client(name, timeouts)?;
        if clients.len() >= MAX_CLIENTS {
            clients.remove(0);
        }
        clients.push((timeouts.connect, client.clone()));
        Ok(client)
    }
}

/// Longest error body read from a failed response (the rest is not needed to say why).
const MAX_ERROR_READ: usize = 64 * 1024;

/// The default of `max_reply_bytes`: the most of one reply read before giving up.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 8 * 1024 * 1024;

/// Server text fit for an error: secrets masked, then cut to `max` bytes.
pub(crate) fn shown(text: &str, max: usize) -> String {
    truncate(&crate::redact::clean(text), max)
}

/// Maps a transport error (no HTTP status) to a provider error.
pub(crate) fn transport_error(e: &reqwest::Error) -> ProviderError {
    // The URL is not secret, but keep messages short: the source chain says what failed.
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    let msg = crate::redact::clean_owned(msg);
    if e.is_timeout() {
        ProviderError::Timeout(msg)
    } else {
        ProviderError::Connection(msg)
    }
}

/// Sends a request and turns a non-success status into the matching error. With
/// `head_stall`, the response head must arrive within it (streaming servers send it at
/// once; a non-streamed answer legitimately takes as long as the generation).
pub(crate) async fn send(
    request: reqwest::RequestBuilder,
    head_stall: Option<Duration>,
    stall: Duration,
) -> Result<reqwest::Response, ProviderError> {
    let sent = match head_stall {
        Some(limit) => tokio::time::timeout(limit, request.send())
            .await
            .map_err(|_| {
                ProviderError::Timeout(format!(
                    "no response head within {} s (first_byte_timeout_s)",
                    limit.as_secs_f32()
                ))
            })?,
        None => request.send().await,
    };
    let response = sent.map_err(|e| transport_error(&e))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()));
    // An error body is read only so far: a hostile server cannot make us buffer it all.
    let body = match read_capped(response, stall, MAX_ERROR_READ as u64).await {
        Ok((bytes, _)) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    };
    Err(status_error(status, retry_after, &body))
}

/// The error for an HTTP status that is not a success.
pub(crate) fn status_error(
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &str,
) -> ProviderError {
    let message = error_message(body);
    match status.as_u16() {
        429 => ProviderError::RateLimited {
            retry_after,
            message,
        },
        s @ (503 | 529) => ProviderError::Overloaded {
            status: s,
            retry_after,
            message,
        },
        408 => ProviderError::Timeout(format!("server answered 408: {message}")),
        // A server that failed on what the request says (llama.cpp answers 500 "Failed to
        // parse tool call arguments as JSON") fails the same way every time: rejected,
        // never retried.
        s if status.is_server_error() && about_the_request(&message) => {
            ProviderError::Rejected { status: s, message }
        }
        s if status.is_server_error() => ProviderError::Server { status: s, message },
        s => ProviderError::Rejected { status: s, message },
    }
}

/// Whether a server error's message is about the request's content (a parse or
/// validation failure), not the server's state.
fn about_the_request(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "failed to parse",
        "parse error",
        "invalid request",
        "invalid json",
        "invalid argument",
        "is not valid json",
        "exceeds the available context",
        "exceed_context_size",
        "context size",
        "unsupported param",
        "jinja",
        "template",
    ]
    .iter()
    .any(|w| m.contains(w))
}

/// The useful part of an error body: `error.message` when it is JSON, else the text;
/// redacted and truncated.
pub(crate) fn error_message(body: &str) -> String {
    let text = |v: Option<&serde_json::Value>| v.and_then(|m| m.as_str()).map(str::to_owned);
    // `{"error": {"message"}}` (OpenAI, Anthropic), `{"error": "…"}` (llama.cpp, Ollama),
    // `{"object": "error", "message"}` (vLLM), `{"detail"}` (FastAPI servers).
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| match v.get("error") {
            Some(e) => text(e.get("message")).or_else(|| text(Some(e))),
            None => text(v.get("message")).or_else(|| text(v.get("detail"))),
        });
    shown(from_json.as_deref().unwrap_or(body.trim()), MAX_ERROR_BODY)
}

/// The error an API error object stands for, wherever it arrived: a 200 body, a stream
/// event (`data: {"error": …}`, Anthropic `event: error`). Reads the OpenAI (`type`,
/// `code`, `status`) and Anthropic (`type`) vocabularies, so a rate limit is a rate
/// limit and an overload an overload, not "error 500".
pub(crate) fn api_error(error: &serde_json::Value) -> ProviderError {
    let field = |k: &str| match error.get(k) {
        Some(serde_json::Value::String(s)) => s.to_ascii_lowercase(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let (kind, code, status) = (field("type"), field("code"), field("status"));
    let raw = error
        .get("message")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
        .or_else(|| error.as_str().map(str::to_owned))
        .unwrap_or_else(|| error.to_string());
    let message = shown(&raw, MAX_ERROR_BODY);
    let any = |words: &[&str]| {
        [&kind, &code, &status]
            .iter()
            .any(|f| words.iter().any(|w| f.contains(w)))
    };
    let rejected = |status| ProviderError::Rejected {
        status,
        message: message.clone(),
    };
    if any(&["insufficient_quota", "billing"]) {
        // Out of credit: waiting will not help, so not a rate limit.
        rejected(429)
    } else if any(&[
        "rate_limit",
        "429",
        "resource_exhausted",
        "too_many_requests",
    ]) {
        ProviderError::RateLimited {
            retry_after: None,
            message,
        }
    } else if any(&["overloaded", "529", "503", "unavailable"]) {
        let status = if any(&["529", "overloaded"]) {
            529
        } else {
            503
        };
        ProviderError::Overloaded {
            status,
            retry_after: None,
            message,
        }
    } else if any(&[
        "authentication",
        "invalid_api_key",
        "401",
        "unauthenticated",
    ]) {
        rejected(401)
    } else if any(&["permission", "403"]) {
        rejected(403)
    } else if any(&["not_found", "404", "model_not_found"]) {
        rejected(404)
    } else if any(&[
        "invalid_request",
        "context_length",
        "400",
        "invalid_argument",
    ]) {
        rejected(400)
    } else if any(&["timeout"]) {
        ProviderError::Timeout(format!("the server reported a timeout: {message}"))
    } else {
        ProviderError::Server {
            status: 500,
            message: if kind.is_empty() {
                format!("the server sent an error: {message}")
            } else {
                format!("the server sent an error ({kind}): {message}")
            },
        }
    }
}

/// At most `max` bytes of `s`, cut on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    crate::text::cut_marked(s, max, "…").into_owned()
}

/// Parses `Retry-After`: delay-seconds or an HTTP date (a date in the past is zero).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// How a successful response carries its reply.
#[derive(Debug)]
pub(crate) enum Body {
    /// Server-Sent Events (what a stream request expects).
    Stream(SseReader<futures::stream::BoxStream<'static, Result<bytes::Bytes, reqwest::Error>>>),
    /// One JSON document, read whole (a server that ignores `stream: true`, or reports
    /// an error with a 200).
    Json(Vec<u8>),
}

/// Reads the reply of a stream request. A 200 that is not an event stream is read as
/// JSON if it is JSON (a completion from a server that ignores `stream`, or an error
/// object); anything else is an error naming what came instead.
pub(crate) async fn stream_body(
    response: reqwest::Response,
    stall: Duration,
    cap: u64,
) -> Result<Body, ProviderError> {
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if content_type.contains("event-stream") {
        return Ok(Body::Stream(SseReader::new(
            response.bytes_stream().boxed(),
            stall,
            cap,
        )));
    }
    let (bytes, _) = read_capped(response, stall, cap)
        .await
        .and_then(|(b, over)| {
            if over {
                Err(ProviderError::ReplyTooLarge { limit: cap })
            } else {
                Ok((b, over))
            }
        })?;
    let text = String::from_utf8_lossy(&bytes);
    let start = text.trim_start();
    if start.starts_with('{') || content_type.contains("json") {
        return Ok(Body::Json(bytes));
    }
    if ["data:", "event:", ":", "id:", "retry:"]
        .iter()
        .any(|p| start.starts_with(p))
    {
        // An event stream without its content type: parse what was read.
        let chunk: Result<bytes::Bytes, reqwest::Error> = Ok(bytes::Bytes::from(bytes));
        return Ok(Body::Stream(SseReader::new(
            futures::stream::iter([chunk]).boxed(),
            stall,
            cap,
        )));
    }
    let kind = if content_type.is_empty() {
        "no content type".to_owned()
    } else {
        format!("content type `{content_type}`")
    };
    Err(ProviderError::BadResponse(format!(
        "asked for an event stream, the server answered 200 with {kind}: {}",
        shown(start, 200)
    )))
}

/// Reads an SSE body, failing with `Timeout` when no chunk arrives for `stall` and with
/// `ReplyTooLarge` past `cap` bytes (which also bounds any single line).
pub(crate) struct SseReader<S> {
    body: S,
    parser: SseParser,
    pending: std::collections::VecDeque<SseEvent>,
    stall: Duration,
    cap: u64,
    read: u64,
}

impl<S> std::fmt::Debug for SseReader<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseReader")
            .field("read", &self.read)
            .finish()
    }
}

impl<S, B> SseReader<S>
where
    S: Stream<Item = Result<B, reqwest::Error>> + Unpin,
    B: AsRef<[u8]>,
{
    /// Wraps a body stream.
    pub(crate) fn new(body: S, stall: Duration, cap: u64) -> Self {
        Self {
            body,
            parser: SseParser::default(),
            pending: Default::default(),
            stall,
            cap,
            read: 0,
        }
    }

    /// The next event, `None` at the end of the body.
    pub(crate) async fn next(&mut self) -> Result<Option<SseEvent>, ProviderError> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(Some(e));
            }
            let chunk = tokio::time::timeout(self.stall, self.body.next())
                .await
                .map_err(|_| {
                    ProviderError::Timeout(format!(
                        "the stream stalled: no data for {} s (stall_timeout_s)",
                        self.stall.as_secs_f32()
                    ))
                })?;
            match chunk {
                None => return Ok(None),
                Some(Err(e)) => return Err(transport_error(&e)),
                Some(Ok(bytes)) => {
                    let bytes = bytes.as_ref();
                    self.read += bytes.len() as u64;
                    if self.read > self.cap {
                        return Err(ProviderError::ReplyTooLarge { limit: self.cap });
                    }
                    let mut out = Vec::new();
                    self.parser.feed(bytes, &mut out);
                    self.pending.extend(out);
                }
            }
        }
    }
}

/// Reads at most `cap` bytes of a body with the stall limit applied per chunk; the flag
/// says whether more was there (the rest is not read).
async fn read_capped(
    response: reqwest::Response,
    stall: Duration,
    cap: u64,
) -> Result<(Vec<u8>, bool), ProviderError> {
    if response.content_length().is_some_and(|n| n > cap) {
        return Ok((Vec::new(), true));
    }
    let mut body = response.bytes_stream();
    let mut buf = Vec::new();
    loop {
        match tokio::time::timeout(stall, body.next()).await {
            Err(_) => {
                return Err(ProviderError::Timeout(format!(
                    "the response stalled: no data for {} s (stall_timeout_s)",
                    stall.as_secs_f32()
                )));
            }
            Ok(None) => return Ok((buf, false)),
            Ok(Some(Err(e))) => return Err(transport_error(&e)),
            Ok(Some(Ok(b))) => {
                let room = (cap as usize).saturating_sub(buf.len());
                buf.extend_from_slice(&b[..b.len().min(room)]);
                if b.len() > room {
                    return Ok((buf, true));
                }
            }
        }
    }
}

/// Reads a whole (non-streamed) reply, at most `cap` bytes.
pub(crate) async fn read_body(
    response: reqwest::Response,
    stall: Duration,
    cap: u64,
) -> Result<Vec<u8>, ProviderError> {
    match read_capped(response, stall, cap).await? {
        (_, true) => Err(ProviderError::ReplyTooLarge { limit: cap }),
        (bytes, false) => Ok(bytes),
    }
}

/// Parses JSON from the server, mapping failure to `BadResponse` with a redacted excerpt.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
) -> Result<T, ProviderError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let excerpt = shown(&String::from_utf8_lossy(bytes), 200);
        ProviderError::BadResponse(format!("{what}: {e} (got: {excerpt})"))
    })
}

/// A deserializer for optional fields where servers send `null` for "none": `null` and
/// absence both give the default (`"tool_calls": null`, `"choices": null`).
pub(crate) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    use serde::Deserialize as _;
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Call ids as the wire needs them: present and unique (servers omit them, or repeat
/// one for every call).
pub(crate) fn unique_ids(calls: &mut [super::ToolCall]) {
    let mut seen = std::collections::HashSet::new();
    for (i, c) in calls.iter_mut().enumerate() {
        if c.id.trim().is_empty() || !seen.insert(c.id.clone()) {
            let mut n = i;
            c.id = loop {
                let id = format!("call_{n}");
                if seen.insert(id.clone()) {
                    break id;
                }
                n += 1;
            };
        }
    }
}

/// Runs one attempt under the overall time limit of a model call.
pub async fn within(
    overall: Duration,
    attempt: impl std::future::Future<Output = Result<super::Completion, ProviderError>>,
) -> Result<super::Completion, ProviderError> {
    tokio::time::timeout(overall, attempt).await.map_err(|_| {
        ProviderError::Timeout(format!(
            "no complete reply within {} s (timeout_s)",
            overall.as_secs_f32()
        ))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A keep-alive HTTP/1.1 server answering every request with an empty 200: the
    /// number of connections it accepted.
    async fn keep_alive_server() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut tmp = [0u8; 1024];
                    while let Ok(n) = sock.read(&mut tmp).await {
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&tmp[..n]);
                        // Requests without bodies: one answer per head.
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            buf.drain(..end + 4);
                            let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                            if sock.write_all(reply).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    #[tokio::test]
    async fn providers_of_one_engine_share_their_connections() {
        let (url, accepted) = keep_alive_server().await;
        let clients = HttpClients::default();
        let t = HttpTimeouts::default();
        // Two providers (two runs, two remote tasks) with the same connect timeout.
        for name in ["first", "second"] {
            let c = clients.client(name, &t).unwrap();
            assert!(c.get(&url).send().await.unwrap().status().is_success());
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Another connect timeout is another client.
        let other = HttpTimeouts {
            connect: Duration::from_secs(3),
            ..t
        };
        let c = clients.client("third", &other).unwrap();
        assert!(c.get(&url).send().await.unwrap().status().is_success());
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn retry_after_seconds_and_http_dates() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("1.5", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);
    }

    #[test]
    fn status_mapping() {
        assert!(matches!(
            status_error(StatusCode::TOO_MANY_REQUESTS, None, ""),
            ProviderError::RateLimited { .. }
        ));
        assert!(matches!(
            status_error(StatusCode::from_u16(529).unwrap(), None, ""),
            ProviderError::Overloaded { status: 529, .. }
        ));
        assert!(matches!(
            status_error(StatusCode::BAD_GATEWAY, None, ""),
            ProviderError::Server { status: 502, .. }
        ));
        let e = status_error(
            StatusCode::UNAUTHORIZED,
            None,
            r#"{"error":{"message":"bad key"}}"#,
        );
        assert!(
            matches!(&e, ProviderError::Rejected { status: 401, message } if message == "bad key"),
            "{e}"
        );
    }

    #[test]
    fn redaction_and_truncation() {
        crate::redact::register("sk-http-unit-secret");
        assert_eq!(
            error_message(r#"{"error":{"message":"key sk-http-unit-secret bad"}}"#),
            "key [redacted] bad"
        );
        assert_eq!(truncate("héllo", 2), "h…");
    }

    #[test]
    fn api_errors_name_their_kind() {
        use serde_json::json;
        let e = api_error(
            &json!({"message": "slow", "type": "requests", "code": "rate_limit_exceeded"}),
        );
        assert!(
            matches!(&e, ProviderError::RateLimited { message, .. } if message == "slow"),
            "{e}"
        );
        let e = api_error(&json!({"type": "overloaded_error", "message": "Overloaded"}));
        assert!(
            matches!(e, ProviderError::Overloaded { status: 529, .. }),
            "{e}"
        );
        let e = api_error(&json!({"type": "invalid_request_error", "message": "bad"}));
        assert!(
            matches!(e, ProviderError::Rejected { status: 400, .. }),
            "{e}"
        );
        let e = api_error(&json!({"message": "kaput"}));
        assert!(e.to_string().contains("kaput"), "{e}");
        let e = status_error(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(Duration::from_secs(2)),
            "busy",
        );
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn ids_are_made_present_and_unique() {
        use super::super::ToolCall;
        let mut calls = vec![
            ToolCall::new("", "a", serde_json::json!({})),
            ToolCall::new("x", "b", serde_json::json!({})),
            ToolCall::new("x", "c", serde_json::json!({})),
        ];
        unique_ids(&mut calls);
        let ids: Vec<_> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["call_0", "x", "call_2"]);
    }
}

//! What the HTTP providers share: the client, status → error mapping, `Retry-After`,
//! stall-guarded stream reading and key redaction.

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
    /// Longest silence between two stream chunks (or before the response head).
    pub stall: Duration,
}

impl Default for HttpTimeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            overall: Duration::from_secs(600),
            stall: Duration::from_secs(60),
        }
    }
}

/// Builds the HTTP client of one provider.
pub(crate) fn client(timeouts: &HttpTimeouts) -> Result<reqwest::Client, ProviderError> {
    reqwest::Client::builder()
        .connect_timeout(timeouts.connect)
        .user_agent(concat!("crewbox/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| ProviderError::Config(format!("cannot build the HTTP client: {e}")))
}

/// Removes the API key from text that may echo it (server messages, transport errors).
pub(crate) struct Redactor<'a>(pub Option<&'a str>);

impl Redactor<'_> {
    /// `text` with every occurrence of the key replaced.
    pub(crate) fn clean(&self, text: &str) -> String {
        match self.0 {
            Some(key) if key.len() >= 4 => text.replace(key, "[redacted]"),
            _ => text.to_owned(),
        }
    }
}

/// Maps a transport error (no HTTP status) to a provider error.
pub(crate) fn transport_error(e: &reqwest::Error, redact: &Redactor<'_>) -> ProviderError {
    // The URL is not secret, but keep messages short: the source chain says what failed.
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    let msg = redact.clean(&msg);
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
    redact: &Redactor<'_>,
) -> Result<reqwest::Response, ProviderError> {
    let sent = match head_stall {
        Some(limit) => tokio::time::timeout(limit, request.send())
            .await
            .map_err(|_| {
                ProviderError::Timeout(format!("no response within {} s", limit.as_secs_f32()))
            })?,
        None => request.send().await,
    };
    let response = sent.map_err(|e| transport_error(&e, redact))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()));
    let body = tokio::time::timeout(stall, response.text())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    Err(status_error(status, retry_after, &redact.clean(&body)))
}

/// The error for an HTTP status that is not a success.
pub(crate) fn status_error(
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &str,
) -> ProviderError {
    let message = error_message(body);
    match status.as_u16() {
        429 => ProviderError::RateLimited { retry_after },
        408 => ProviderError::Timeout(format!("server answered 408: {message}")),
        s if status.is_server_error() => ProviderError::Server { status: s, message },
        s => ProviderError::Rejected { status: s, message },
    }
}

/// The useful part of an error body: `error.message` when it is JSON, else the text,
/// truncated.
pub(crate) fn error_message(body: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            let e = v.get("error")?;
            e.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
                .or_else(|| e.as_str().map(str::to_owned))
        });
    truncate(from_json.as_deref().unwrap_or(body.trim()), MAX_ERROR_BODY)
}

/// At most `max` bytes of `s`, cut on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
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

/// Reads an SSE body, failing with `Timeout` when no chunk arrives for `stall`.
pub(crate) struct SseReader<S> {
    body: S,
    parser: SseParser,
    pending: std::collections::VecDeque<SseEvent>,
    stall: Duration,
    redact_key: Option<String>,
}

impl<S, B> SseReader<S>
where
    S: Stream<Item = Result<B, reqwest::Error>> + Unpin,
    B: AsRef<[u8]>,
{
    /// Wraps a body stream.
    pub(crate) fn new(body: S, stall: Duration, redact_key: Option<String>) -> Self {
        Self {
            body,
            parser: SseParser::default(),
            pending: Default::default(),
            stall,
            redact_key,
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
                        "the stream stalled: no data for {} s",
                        self.stall.as_secs_f32()
                    ))
                })?;
            match chunk {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(transport_error(&e, &Redactor(self.redact_key.as_deref())));
                }
                Some(Ok(bytes)) => {
                    let mut out = Vec::new();
                    self.parser.feed(bytes.as_ref(), &mut out);
                    self.pending.extend(out);
                }
            }
        }
    }
}

/// Reads a whole (non-streamed) body with the stall limit applied per chunk.
pub(crate) async fn read_body(
    response: reqwest::Response,
    stall: Duration,
    redact: &Redactor<'_>,
) -> Result<Vec<u8>, ProviderError> {
    let mut body = response.bytes_stream();
    let mut buf = Vec::new();
    loop {
        match tokio::time::timeout(stall, body.next()).await {
            Err(_) => {
                return Err(ProviderError::Timeout(format!(
                    "the response stalled: no data for {} s",
                    stall.as_secs_f32()
                )));
            }
            Ok(None) => return Ok(buf),
            Ok(Some(Err(e))) => return Err(transport_error(&e, redact)),
            Ok(Some(Ok(b))) => buf.extend_from_slice(&b),
        }
    }
}

/// Parses JSON from the server, mapping failure to `BadResponse`.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    what: &str,
) -> Result<T, ProviderError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let shown = truncate(&String::from_utf8_lossy(bytes), 200);
        ProviderError::BadResponse(format!("{what}: {e} (got: {shown})"))
    })
}

/// Parses a tool call's JSON arguments; garbage is kept as a string for the loop to
/// report back to the model.
pub(crate) fn parse_arguments(raw: &str) -> serde_json::Value {
    if raw.trim().is_empty() {
        return serde_json::Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| serde_json::Value::String(raw.to_owned()))
}

/// Runs one attempt under the overall time limit of a model call.
pub async fn within(
    overall: Duration,
    attempt: impl std::future::Future<Output = Result<super::Completion, ProviderError>>,
) -> Result<super::Completion, ProviderError> {
    tokio::time::timeout(overall, attempt).await.map_err(|_| {
        ProviderError::Timeout(format!(
            "no complete reply within {} s",
            overall.as_secs_f32()
        ))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            Redactor(Some("sk-secret")).clean("key sk-secret bad"),
            "key [redacted] bad"
        );
        assert_eq!(truncate("héllo", 2), "h…");
    }
}

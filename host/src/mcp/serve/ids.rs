//! A client's request ids in flight, kept in front of the SDK, on both transports.
//!
//! JSON-RPC ids are unique among a client's requests in flight. The SDK keeps one
//! cancellation token per id: a request reusing the id of one still in flight
//! replaced the first one's token, and when the second was answered the first lost
//! its entry, so its answer was dropped ("cancelled") and its `notifications/cancelled`
//! found nothing to cancel — a waiting `run` never returned. Here such a request is
//! answered at once with an error under its id and never reaches the SDK; the first
//! goes on and is answered as if the second had never come. At most
//! [`MAX_IN_FLIGHT`] requests of a session are in flight; past that a request is
//! refused the same way (the SDK runs each in a task of its own).
//!
//! Over stdio the guard sits between the bounded line reader ([`super::lines`]) and
//! the SDK, and between the SDK and stdout: an id is in flight from its request until
//! its answer is written, or until the client cancels it. Each message's head is read
//! for this (its `id` and `method`, the rest skipped unparsed). A request that is not
//! a JSON-RPC message a client sends is answered here too, under its id: the SDK
//! answered without one (a message with `"jsonrpc": "1.0"`, or none), so whoever
//! waited on that id waited on. Over HTTP the session manager keeps the ids
//! ([`super::http`]): an id is in flight while its request's response stream lasts.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{ErrorCode, ErrorData, RequestId};
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// The most requests of one session in flight at once.
pub const MAX_IN_FLIGHT: usize = 1024;

/// A session's request ids in flight (each id as its JSON text: `7` and `"7"` are two
/// ids), with the generation each was admitted in.
#[derive(Debug, Default)]
pub struct InFlight {
    ids: Mutex<HashMap<String, u64>>,
    next: AtomicU64,
}

/// Whether a request may go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Yes: it is in flight now, in this generation.
    Yes(u64),
    /// A request with its id is in flight already.
    Duplicate,
    /// [`MAX_IN_FLIGHT`] are in flight.
    Full,
}

impl InFlight {
    /// Admits request `id` (its JSON text), or says why not.
    pub fn admit(&self, id: &str) -> Admit {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if ids.contains_key(id) {
            return Admit::Duplicate;
        }
        if ids.len() >= MAX_IN_FLIGHT {
            return Admit::Full;
        }
        let generation = self.next.fetch_add(1, Ordering::Relaxed);
        ids.insert(id.to_owned(), generation);
        Admit::Yes(generation)
    }

    /// Request `id` is no longer in flight (answered, or cancelled by its client);
    /// with `generation`, only when that is still the one in flight under the id.
    pub fn end(&self, id: &str, generation: Option<u64>) {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if generation.is_none_or(|g| ids.get(id) == Some(&g)) {
            ids.remove(id);
        }
    }
}

/// The key of `id` in an [`InFlight`].
pub fn key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

/// The error a request refused by [`InFlight::admit`] is answered with.
pub fn refusal(admit: Admit, id: &str) -> ErrorData {
    let shown = crate::text::escape(&crate::text::cut_marked(id, 64, "…")).into_owned();
    let message = match admit {
        Admit::Full => format!(
            "request refused: {MAX_IN_FLIGHT} requests of this session are in flight, the most \
             this server takes at once; wait for answers"
        ),
        Admit::Duplicate | Admit::Yes(_) => format!(
            "request refused: a request with id {shown} is still in flight in this session \
             (a client's ids must be unique among its requests in flight); that one goes on \
             and is answered under the id"
        ),
    };
    ErrorData::new(ErrorCode::INVALID_REQUEST, message, None)
}

/// What the guard reads of a message: its id and method, the rest skipped.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<CancelParams>,
}

/// The params of a `notifications/cancelled` (any other method's are skipped: an
/// unknown member, or a shape this does not match, reads as nothing).
#[derive(Deserialize, Default)]
struct CancelParams {
    #[serde(default, rename = "requestId")]
    request_id: Option<serde_json::Value>,
    #[serde(flatten)]
    _rest: HashMap<String, IgnoredAny>,
}

impl Head {
    fn read(line: &[u8]) -> Option<Self> {
        // `params` of another shape than an object must not make the head unreadable.
        #[derive(Deserialize)]
        struct Loose {
            #[serde(default)]
            id: Option<serde_json::Value>,
            #[serde(default)]
            method: Option<String>,
        }
        match serde_json::from_slice::<Head>(line) {
            Ok(h) => Some(h),
            Err(_) => serde_json::from_slice::<Loose>(line).ok().map(|l| Head {
                id: l.id,
                method: l.method,
                params: None,
            }),
        }
    }

    /// The id of a request or response: a string or an integer, as its key (an
    /// integer written with a zero fraction, `5.0`, is the integer: the SDK reads it
    /// so and answers under `5`).
    fn id(&self) -> Option<String> {
        self.id.as_ref().and_then(id_key)
    }

    /// Whether the message has an `id` member that is no string or integer (`1.5`,
    /// `true`, an object, `null`, an integer past 64 bits).
    fn bad_id(&self) -> bool {
        self.id.as_ref().is_some_and(|id| id_key(id).is_none())
    }
}

/// The key of a JSON-RPC id: its JSON text for a string or an integer, an integral
/// number written with a fraction (`5.0`) as that integer; `None` for anything else.
fn id_key(id: &serde_json::Value) -> Option<String> {
    match id {
        serde_json::Value::String(_) => Some(id.to_string()),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(id.to_string()),
        serde_json::Value::Number(n) => n
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            // Exact: |f| below 2^53.
            .map(|f| format!("{}", f as i64)),
        _ => None,
    }
}

/// The answer line to a request with id `id` (its JSON text) refused with `error`.
fn answer(id: &str, error: &ErrorData) -> Vec<u8> {
    let id: serde_json::Value = serde_json::from_str(id).unwrap_or(serde_json::Value::Null);
    let mut line = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string();
    line.push('\n');
    line.into_bytes()
}

/// Why `line` (a request with an id) is not a JSON-RPC message a client sends, or
/// `None` when it is one: params of a shape no MCP method takes (`-32602`), anything
/// else (`-32600`).
fn not_a_message(line: &[u8]) -> Option<ErrorData> {
    let e = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(line).err()?;
    if let Some(why) = serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .as_ref()
        .and_then(super::params_error)
    {
        return Some(ErrorData::new(ErrorCode::INVALID_PARAMS, why, None));
    }
    Some(ErrorData::new(
        ErrorCode::INVALID_REQUEST,
        format!(
            "request refused: it is not a JSON-RPC message an MCP client sends ({})",
            super::detail(&e.to_string())
        ),
        None,
    ))
}

/// The guard of one stdio session (see [`stdio`]).
pub struct Guarded {
    /// What the SDK reads.
    pub input: tokio::io::DuplexStream,
    /// Where the SDK writes.
    pub output: tokio::io::DuplexStream,
    /// Copies the SDK's lines out: awaited once the SDK is done, so its last answer
    /// is written before the process ends.
    pub written: tokio::task::JoinHandle<()>,
    /// Reads the client's lines (ends with its input).
    pub reading: tokio::task::JoinHandle<()>,
}

/// Puts the guard between `input` (the client's lines, bounded) and the SDK, and
/// between the SDK and `output`.
pub fn stdio<R, W>(input: R, output: W) -> Guarded
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let inflight = std::sync::Arc::new(InFlight::default());
    let (to_sdk, sdk_reads) = tokio::io::duplex(64 * 1024);
    let (sdk_writes, from_sdk) = tokio::io::duplex(64 * 1024);
    let (refused_tx, refused_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let reading = tokio::spawn(inbound(input, to_sdk, inflight.clone(), refused_tx));
    let written = tokio::spawn(outbound(from_sdk, output, inflight, refused_rx));
    Guarded {
        input: sdk_reads,
        output: sdk_writes,
        written,
        reading,
    }
}

/// The client's lines to the SDK, requests admitted or answered here.
async fn inbound<R, W>(
    input: R,
    mut to_sdk: W,
    inflight: std::sync::Arc<InFlight>,
    refused: mpsc::UnboundedSender<Vec<u8>>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    // A session is initialised once: a second `initialize` was answered as a fresh
    // handshake in the middle of the session.
    let mut initialized = false;
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        // A batch, or a request whose id is no string or integer, is answered here
        // with `"id": null` (the SDK answered without an id member, which JSON-RPC
        // does not allow).
        let head = Head::read(&line);
        let unanswerable = if line.trim_ascii_start().first() == Some(&b'[') {
            Some(
                "request refused: JSON-RPC batches (a JSON array) are not accepted; send \
                 each request on its own line",
            )
        } else if head
            .as_ref()
            .is_some_and(|h| h.method.is_some() && h.bad_id())
        {
            Some("request refused: its id is neither a string nor an integer")
        } else {
            None
        };
        if let Some(why) = unanswerable {
            let error = ErrorData::new(ErrorCode::INVALID_REQUEST, why, None);
            if refused.send(answer("null", &error)).is_err() {
                break;
            }
            continue;
        }
        let mut cancelled = None;
        if let Some(head) = &head
            && let Some(method) = &head.method
        {
            if let Some(id) = head.id() {
                let refusal = match not_a_message(&line) {
                    Some(error) => Some(error),
                    // Only `initialize` and `ping` come before the handshake (the SDK
                    // served a request that carried its own protocol fields in `_meta`
                    // without one, and refused others naming those fields).
                    None if !initialized && method != "initialize" && method != "ping" => {
                        Some(ErrorData::new(
                            ErrorCode::INVALID_REQUEST,
                            "request refused: send `initialize` first (only `ping` may come \
                             before it)",
                            None,
                        ))
                    }
                    None if method == "initialize" && initialized => Some(ErrorData::new(
                        ErrorCode::INVALID_REQUEST,
                        "request refused: this session is initialized already (one \
                         `initialize` per session; start another session for another)",
                        None,
                    )),
                    None => match inflight.admit(&id) {
                        Admit::Yes(_) => None,
                        refused => Some(self::refusal(refused, &id)),
                    },
                };
                initialized |= refusal.is_none() && method == "initialize";
                if let Some(error) = refusal {
                    if refused.send(answer(&id, &error)).is_err() {
                        break;
                    }
                    continue;
                }
            } else if method == "notifications/cancelled" {
                cancelled = head
                    .params
                    .as_ref()
                    .and_then(|p| p.request_id.as_ref())
                    .and_then(id_key);
            }
        }
        if to_sdk.write_all(&line).await.is_err() || to_sdk.flush().await.is_err() {
            break;
        }
        // Passed on first: the SDK cancels the call before its id may be used again.
        if let Some(id) = cancelled {
            inflight.end(&id, None);
        }
    }
    let _ = to_sdk.shutdown().await;
}

/// The SDK's lines and the refusals to the client, whole lines one at a time; an
/// answer ends its request's flight.
async fn outbound<R, W>(
    from_sdk: R,
    mut output: W,
    inflight: std::sync::Arc<InFlight>,
    mut refused: mpsc::UnboundedReceiver<Vec<u8>>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut from_sdk = BufReader::new(from_sdk);
    // Kept across a refusal written meanwhile: reading a line is resumed, not lost.
    let mut line = Vec::new();
    let (mut sdk_open, mut refusals_open) = (true, true);
    // Serving ends with the SDK's side: refusals queued by then still go out.
    while sdk_open {
        let write = tokio::select! {
            read = from_sdk.read_until(b'\n', &mut line), if sdk_open => {
                if !matches!(read, Ok(n) if n > 0) {
                    sdk_open = false;
                }
                if line.is_empty() {
                    continue;
                }
                if let Some(head) = Head::read(&line)
                    && head.method.is_none()
                    && let Some(id) = head.id()
                {
                    inflight.end(&id, None);
                }
                std::mem::take(&mut line)
            }
            r = refused.recv(), if refusals_open => match r {
                Some(answer) => answer,
                None => {
                    refusals_open = false;
                    continue;
                }
            },
        };
        if output.write_all(&write).await.is_err() || output.flush().await.is_err() {
            return;
        }
    }
    while let Ok(answer) = refused.try_recv() {
        if output.write_all(&answer).await.is_err() {
            return;
        }
    }
    let _ = output.flush().await;
    let _ = output.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_in_flight_once_and_ends_only_for_its_own_generation() {
        let f = InFlight::default();
        let Admit::Yes(first) = f.admit("7") else {
            panic!("admitted")
        };
        assert_eq!(f.admit("7"), Admit::Duplicate);
        assert!(
            matches!(f.admit("\"7\""), Admit::Yes(_)),
            "a string id is another"
        );
        f.end("7", Some(first + 100));
        assert_eq!(f.admit("7"), Admit::Duplicate, "another generation's end");
        f.end("7", Some(first));
        assert!(matches!(f.admit("7"), Admit::Yes(_)));
        for i in 0..MAX_IN_FLIGHT {
            let _ = f.admit(&format!("\"n{i}\""));
        }
        assert_eq!(f.admit("8"), Admit::Full);
    }

    #[test]
    fn the_head_of_a_message_reads_whatever_its_params() {
        let h = Head::read(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","arguments":{"id":9}}}"#).unwrap();
        assert_eq!(h.id().as_deref(), Some("3"));
        let h = Head::read(br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"x"}}"#).unwrap();
        assert_eq!(
            h.params.and_then(|p| p.request_id),
            Some(serde_json::json!("a"))
        );
        let h = Head::read(br#"{"jsonrpc":"2.0","id":4,"method":"ping","params":[1]}"#).unwrap();
        assert_eq!(h.id().as_deref(), Some("4"));
        assert!(Head::read(b"[1,2]").is_none());
        assert!(not_a_message(br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#).is_some());
        assert!(not_a_message(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).is_none());
    }
}

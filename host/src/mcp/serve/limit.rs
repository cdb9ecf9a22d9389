//! Requests over [`MAX_REQUEST_BYTES`](super::MAX_REQUEST_BYTES) on stdio are
//! refused with an error the client can match to its request, instead of being
//! dropped silently (which leaves the client waiting) or buffered whole.
//!
//! Lines (the SDK's stdio framing: one message per line) pass through unchanged up to
//! the limit. A longer one is not kept: only its first and last few KiB are, to find
//! its `id`; it is replaced by a small request for [`TOO_LARGE`] with that id, which
//! the server answers with an error (`refusal`). A message without an id (a
//! notification) is dropped with a line on stderr.

use std::sync::LazyLock;

use rmcp::model::{CustomRequest, ErrorData};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The method an oversized request is replaced by.
pub const TOO_LARGE: &str = "crewbox/request_too_large";
/// How much of an oversized line's start and end is kept to find its id.
const KEEP: usize = 4096;

/// `input` with every line longer than `max` bytes replaced (see the module docs).
/// The copying task ends at end of input or when the returned reader is dropped.
pub fn bounded<R>(input: R, max: usize) -> tokio::io::DuplexStream
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let (mut tx, rx) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Err(e) = pump(input, &mut tx, max).await {
            tracing::debug!(error = %e, "stdin closed");
        }
        let _ = tx.shutdown().await;
    });
    rx
}

/// An oversized line being skipped: its length so far, its start and its end.
struct Skipped {
    total: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Skipped {
    fn add(&mut self, chunk: &[u8]) {
        self.total += chunk.len();
        if self.head.len() < KEEP {
            let take = (KEEP - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        self.tail.extend_from_slice(chunk);
        if self.tail.len() > KEEP {
            self.tail.drain(..self.tail.len() - KEEP);
        }
    }
}

async fn pump<R, W>(input: R, out: &mut W, max: usize) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut line: Vec<u8> = Vec::new();
    let mut skipped: Option<Skipped> = None;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            if skipped.is_none() && !line.is_empty() {
                out.write_all(&line).await?;
            }
            return out.flush().await;
        }
        let end = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..end.map_or(buf.len(), |i| i + 1)];
        match &mut skipped {
            Some(s) => s.add(chunk),
            // The newline does not count.
            None if line.len() + chunk.len() > max + usize::from(end.is_some()) => {
                let mut s = Skipped {
                    total: 0,
                    head: Vec::with_capacity(KEEP),
                    tail: Vec::with_capacity(KEEP),
                };
                s.add(&line);
                s.add(chunk);
                line = Vec::new();
                skipped = Some(s);
            }
            None => line.extend_from_slice(chunk),
        }
        let n = chunk.len();
        input.consume(n);
        if end.is_none() {
            continue;
        }
        match skipped.take() {
            None => {
                out.write_all(&line).await?;
                out.flush().await?;
                line.clear();
            }
            Some(s) => match replacement(&s) {
                Some(text) => {
                    out.write_all(text.as_bytes()).await?;
                    out.flush().await?;
                }
                None => {
                    let _ = std::io::Write::write_all(
                        &mut crate::text::stderr(),
                        format!(
                            "crewbox: a message of {} bytes without an id was dropped (the limit is {max})\n",
                            s.total
                        )
                        .as_bytes(),
                    );
                }
            },
        }
    }
}

/// `"id": 12` or `"id": "abc"` near the start or the end of a message.
static ID: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r#""id"\s*:\s*(-?[0-9]{1,19}|"(?:[^"\\]|\\.){0,200}")"#)
        .unwrap_or_else(|_| unreachable!("the pattern is valid"))
});

/// The request the oversized message `s` is replaced by, if it had an id.
fn replacement(s: &Skipped) -> Option<String> {
    let find = |bytes: &[u8]| -> Option<serde_json::Value> {
        let text = String::from_utf8_lossy(bytes);
        let found = ID.captures(&text)?.get(1)?.as_str().to_owned();
        serde_json::from_str(&found).ok()
    };
    let id = find(&s.head).or_else(|| find(&s.tail))?;
    let request = serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": TOO_LARGE, "params": {"bytes": s.total},
    });
    Some(format!("{request}\n"))
}

/// The error answering a replaced request; `None` for any other custom method.
pub fn refusal(request: &CustomRequest) -> Option<ErrorData> {
    if request.method != TOO_LARGE {
        return None;
    }
    let bytes = request
        .params
        .as_ref()
        .and_then(|p| p.get("bytes"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    Some(ErrorData::invalid_request(
        format!(
            "request refused: it is {bytes} bytes; the limit is {} bytes (1 MiB)",
            super::MAX_REQUEST_BYTES
        ),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn through(input: &[u8], max: usize) -> String {
        let mut out = Vec::new();
        pump(input, &mut out, max).await.unwrap();
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn short_lines_pass_unchanged_and_long_ones_become_a_refusable_request() {
        let ok = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
        assert_eq!(through(ok.as_bytes(), 100).await, ok);
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"p\":\"{}\"}}}}\n{ok}",
            "x".repeat(10_000)
        );
        let out = through(big.as_bytes(), 100).await;
        let mut lines = out.lines();
        let first: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(first["id"], 7);
        assert_eq!(first["method"], TOO_LARGE);
        assert_eq!(first["params"]["bytes"], big.find('\n').unwrap() + 1);
        assert_eq!(format!("{}\n", lines.next().unwrap()), ok);
    }

    #[tokio::test]
    async fn an_id_at_the_end_is_found_and_a_message_without_one_is_dropped() {
        let big = format!("{{\"params\":\"{}\",\"id\":\"abc\"}}\n", "y".repeat(9000));
        let out = through(big.as_bytes(), 100).await;
        assert!(out.contains("\"id\":\"abc\""), "{out}");
        let note = format!("{{\"method\":\"x\",\"params\":\"{}\"}}\n", "z".repeat(9000));
        assert_eq!(through(note.as_bytes(), 100).await, "");
    }
}

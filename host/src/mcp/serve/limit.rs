//! Requests over [`MAX_REQUEST_BYTES`](super::MAX_REQUEST_BYTES) on stdio are
//! refused with an error the client can match to its request, instead of being
//! dropped silently (which leaves the client waiting) or buffered whole.
//!
//! Lines (the SDK's stdio framing: one message per line) pass through unchanged up to
//! the limit. A longer one is not kept: it is scanned as it streams by (`IdScan`: the
//! JSON structure, strings and escapes, in constant memory) for the `id` member of its
//! top-level object — never an `"id"` inside `params` or a string — and replaced by a
//! small request for [`TOO_LARGE`] with that id, which the server answers with an error
//! (`refusal`). A message without one (a notification, or not a JSON object) is dropped
//! with a line on stderr.
//!
//! A line within the limit that does not read as JSON (bytes that are not UTF-8 in a
//! string, nesting past the parser's depth, a syntax error) would be dropped by the SDK
//! without an answer, leaving its client waiting: it is replaced the same way, by a
//! request for [`UNREADABLE`] under the id the scan finds, answered with a parse error
//! saying what is wrong.

use rmcp::model::{CustomRequest, ErrorData};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The method an oversized request is replaced by.
pub const TOO_LARGE: &str = "crewbox/request_too_large";
/// The method a request that does not read as JSON is replaced by.
pub const UNREADABLE: &str = "crewbox/request_unreadable";
/// The longest top-level `id` value kept (a longer one counts as none).
const MAX_ID_BYTES: usize = 512;
/// The longest key compared with `id` (escapes such as `\u0069d` included).
const MAX_KEY_BYTES: usize = 32;

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

/// An oversized line being skipped: its length so far and the scan for its id.
#[derive(Default)]
struct Skipped {
    total: usize,
    scan: IdScan,
}

impl Skipped {
    fn add(&mut self, chunk: &[u8]) {
        self.total += chunk.len();
        for &b in chunk {
            self.scan.push(b);
        }
    }
}

/// Where a scan is in the top-level object.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the top-level value.
    #[default]
    Start,
    /// Expecting a member's key (after `{` or `,`).
    Key,
    /// In a member's key.
    InKey,
    /// Expecting the `:` after a key.
    Colon,
    /// Expecting a member's value.
    Value,
    /// In a member's value.
    InValue,
    /// The top-level value ended, or was not an object.
    Done,
}

/// A streaming scan of one JSON message for the value of its top-level `id` member:
/// tracks nesting, strings and escapes byte by byte, keeping at most
/// [`MAX_KEY_BYTES`] of a key and [`MAX_ID_BYTES`] of the id.
#[derive(Debug, Default)]
struct IdScan {
    phase: Phase,
    /// Nesting inside the top-level object (1: its members).
    depth: usize,
    in_string: bool,
    escaped: bool,
    key: Vec<u8>,
    key_long: bool,
    /// The member being read is `id`.
    is_id: bool,
    value: Vec<u8>,
    value_long: bool,
    /// The raw value of the last complete top-level `id`.
    found: Option<Vec<u8>>,
}

impl IdScan {
    fn push(&mut self, b: u8) {
        if self.phase == Phase::Done {
            return;
        }
        if self.in_string {
            self.keep(b);
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.phase == Phase::InKey {
                    self.is_id = !self.key_long
                        && serde_json::from_slice::<String>(&self.key).is_ok_and(|k| k == "id");
                    self.phase = Phase::Colon;
                }
            }
            return;
        }
        if b.is_ascii_whitespace() {
            return;
        }
        match self.phase {
            Phase::Start => {
                self.phase = if b == b'{' { Phase::Key } else { Phase::Done };
                self.depth = 1;
            }
            Phase::Key => match b {
                b'"' => {
                    self.key.clear();
                    self.key_long = false;
                    self.in_string = true;
                    self.phase = Phase::InKey;
                    self.keep(b);
                }
                b'}' => self.phase = Phase::Done,
                _ => self.phase = Phase::Done,
            },
            Phase::InKey => {}
            Phase::Colon => {
                self.phase = if b == b':' { Phase::Value } else { Phase::Done };
            }
            Phase::Value => {
                self.value.clear();
                self.value_long = false;
                self.phase = Phase::InValue;
                self.value_byte(b);
            }
            Phase::InValue => self.value_byte(b),
            Phase::Done => {}
        }
    }

    /// A byte of a member's value, outside strings.
    fn value_byte(&mut self, b: u8) {
        match b {
            b',' | b'}' if self.depth == 1 => {
                if self.is_id {
                    self.found = (!self.value_long).then(|| std::mem::take(&mut self.value));
                }
                self.is_id = false;
                self.phase = if b == b',' { Phase::Key } else { Phase::Done };
                return;
            }
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => self.depth = self.depth.saturating_sub(1).max(1),
            b'"' => self.in_string = true,
            _ => {}
        }
        self.keep(b);
    }

    /// Keeps `b` as part of the key or the id being read (bounded).
    fn keep(&mut self, b: u8) {
        match self.phase {
            Phase::InKey => {
                if self.key.len() < MAX_KEY_BYTES {
                    self.key.push(b);
                } else {
                    self.key_long = true;
                }
            }
            Phase::InValue if self.is_id => {
                if self.value.len() < MAX_ID_BYTES {
                    self.value.push(b);
                } else {
                    self.value_long = true;
                }
            }
            _ => {}
        }
    }

    /// The id found: a number or a string, as JSON-RPC allows.
    fn id(&self) -> Option<serde_json::Value> {
        let value: serde_json::Value = serde_json::from_slice(self.found.as_ref()?).ok()?;
        match &value {
            serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(value),
            serde_json::Value::String(_) => Some(value),
            _ => None,
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
                let mut s = Skipped::default();
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
        // A refused line becomes a request the server answers under its id; one without
        // an id is dropped with a line on stderr.
        let (refused, dropped) = match skipped.take() {
            None => match unreadable(&line) {
                None => {
                    out.write_all(&line).await?;
                    (None, String::new())
                }
                Some(detail) => {
                    let mut scan = IdScan::default();
                    line.iter().for_each(|&b| scan.push(b));
                    let why = format!("does not read as JSON ({})", super::detail(&detail));
                    (
                        replacement(&scan, UNREADABLE, serde_json::json!({"error": detail})),
                        format!("of {} bytes that {why}", line.len()),
                    )
                }
            },
            Some(s) => (
                replacement(&s.scan, TOO_LARGE, serde_json::json!({"bytes": s.total})),
                format!("of {} bytes (the limit is {max})", s.total),
            ),
        };
        line.clear();
        match refused {
            Some(text) => out.write_all(text.as_bytes()).await?,
            None if !dropped.is_empty() => {
                let _ = std::io::Write::write_all(
                    &mut crate::text::stderr(),
                    format!("crewbox: a message {dropped}, without an id, was dropped\n")
                        .as_bytes(),
                );
            }
            None => {}
        }
        out.flush().await?;
    }
}

/// Why the complete line `line` does not read as JSON, or `None` when it does or is
/// blank (whitespace the SDK skips).
fn unreadable(line: &[u8]) -> Option<String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    // Read as a value (not skipped: skipping knows no depth limit, and the SDK's
    // parse stops at the same depth this one does).
    let e = serde_json::from_slice::<serde_json::Value>(line).err()?;
    Some(e.to_string())
}

/// The request for `method` with `params` that a refused message is replaced by,
/// under the top-level id its `scan` found; `None` without one.
fn replacement(scan: &IdScan, method: &str, params: serde_json::Value) -> Option<String> {
    let request = serde_json::json!({
        "jsonrpc": "2.0", "id": scan.id()?, "method": method, "params": params,
    });
    Some(format!("{request}\n"))
}

/// The error answering a replaced request; `None` for any other custom method.
pub fn refusal(request: &CustomRequest) -> Option<ErrorData> {
    if request.method == UNREADABLE {
        let detail = request
            .params
            .as_ref()
            .and_then(|p| p.get("error"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("");
        return Some(ErrorData::parse_error(super::not_json(detail), None));
    }
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

    fn id_of(line: &str) -> Option<serde_json::Value> {
        let mut scan = IdScan::default();
        line.bytes().for_each(|b| scan.push(b));
        scan.id()
    }

    #[test]
    fn only_the_top_level_id_counts() {
        // An `id` inside params, or inside a string, is not the request's.
        let nested =
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"id":99}},"id":7}"#;
        assert_eq!(id_of(nested), Some(serde_json::json!(7)));
        let in_string = r#"{"params":{"p":"\"id\": 5, \\\"id\": 6"},"id":"real"}"#;
        assert_eq!(id_of(in_string), Some(serde_json::json!("real")));
        let escaped_key = r#"{"\u0069d": 3, "method": "x"}"#;
        assert_eq!(id_of(escaped_key), Some(serde_json::json!(3)));
        // No top-level id: a notification, an id only nested, a batch, garbage.
        for none in [
            r#"{"method":"x","params":{"id":1}}"#,
            r#"[{"id":1}]"#,
            r#"{"id":{"a":1}}"#,
            r#"{"id":1.5}"#,
            r#"not json "id": 4"#,
            r#"{"idx":2,"x":"id"}"#,
        ] {
            assert_eq!(id_of(none), None, "{none}");
        }
        // An id longer than the bound counts as none.
        let long = format!(r#"{{"id":"{}"}}"#, "a".repeat(MAX_ID_BYTES + 1));
        assert_eq!(id_of(&long), None);
    }

    #[tokio::test]
    async fn a_line_that_does_not_read_as_json_becomes_a_refusable_request() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}{}}}"#,
            "[".repeat(500),
            "]".repeat(500)
        );
        let mut not_utf8 = br#"{"jsonrpc":"2.0","id":"u","method":"ping","params":{"x":""#.to_vec();
        not_utf8.extend_from_slice(b"\xff\xfe\"}}");
        for (line, id) in [
            (deep.into_bytes(), serde_json::json!(3)),
            (not_utf8, serde_json::json!("u")),
            (
                br#"{"id":9,"method":"ping",}"#.to_vec(),
                serde_json::json!(9),
            ),
        ] {
            let mut input = line.clone();
            input.push(b'\n');
            let out = through(&input, 1 << 20).await;
            let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
            assert_eq!(v["id"], id, "{out}");
            assert_eq!(v["method"], UNREADABLE, "{out}");
            assert!(v["params"]["error"].as_str().is_some_and(|e| !e.is_empty()));
            let request: CustomRequest = serde_json::from_value(serde_json::json!({
                "method": UNREADABLE, "params": v["params"],
            }))
            .unwrap();
            let refused = refusal(&request).unwrap();
            assert_eq!(refused.code, rmcp::model::ErrorCode::PARSE_ERROR);
        }
        // Without an id it is dropped (a line on stderr); blank lines and JSON pass.
        assert_eq!(through(b"{\"method\":\"x\",\n", 1 << 20).await, "");
        assert_eq!(through(b"\n  \n", 1 << 20).await, "\n  \n");
        let ok = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
        assert_eq!(through(ok.as_bytes(), 1 << 20).await, ok);
    }

    #[tokio::test]
    async fn a_hostile_oversized_line_is_answered_under_its_own_id() {
        // The old regex took the first `"id"` it saw: here the one inside params.
        let big = format!(
            r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"id":666,"p":"{}"}},"id":8}}"#,
            "x".repeat(20_000)
        );
        let out = through(format!("{big}\n").as_bytes(), 100).await;
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["id"], 8, "{out}");
        assert_eq!(v["method"], TOO_LARGE);
    }
}

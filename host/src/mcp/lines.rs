//! The stdio framing of MCP (one JSON-RPC message per line) read within bounds, in
//! both directions: `crewbox mcp serve` reading a client's requests and crewbox's
//! MCP client reading a server's messages.
//!
//! Lines pass through unchanged up to the limit. A longer one is not kept: it is
//! scanned as it streams by (`IdScan`: the JSON structure, strings and escapes, in
//! constant memory) for the `id` member of its top-level object — never an `"id"`
//! inside `params` or a string. A line within the limit that does not read as JSON
//! (bytes that are not UTF-8 in a string, nesting past the parser's depth, a syntax
//! error) is scanned the same way. The SDK would drop either without an answer (too
//! long: past its own line limit; unreadable: by design, as the other SDKs do), leaving
//! whoever waits on that id waiting until a timeout; here the message is replaced by
//! one under the id the scan found, so the wait ends at once with an error saying
//! what was wrong ([`Reader`]):
//!
//! - serving, a refused request becomes a request for [`TOO_LARGE`] or [`UNREADABLE`],
//!   which the server answers with an error ([`refusal`]);
//! - as a client, a server's refused answer becomes a JSON-RPC error answer under its
//!   id, marked as crewbox's ([`refused_by_crewbox`]), which fails the call waiting on
//!   it; an over-long one as soon as its id has been read past the limit (the rest is
//!   skipped as it comes), so the call does not wait for a line that may never end.
//!
//! A message without an id (a notification, a server's log line on stdout) is dropped:
//! serving, with a line on stderr; as a client, noted in [`Dropped`], which the error
//! of a server that never answers its start names.

use std::sync::{Arc, Mutex};

use rmcp::model::{CustomRequest, ErrorData};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The method an oversized request is replaced by.
pub const TOO_LARGE: &str = "crewbox/request_too_large";
/// The method a request that does not read as JSON is replaced by.
pub const UNREADABLE: &str = "crewbox/request_unreadable";
/// The `data` member that marks an error answer crewbox made of a server's refused
/// message (its value: [`TOO_LARGE_ANSWER`] or [`UNREADABLE_ANSWER`]).
const MARK: &str = "crewbox_refused";
/// [`MARK`] of an answer over the limit.
pub const TOO_LARGE_ANSWER: &str = "too_large";
/// [`MARK`] of an answer that does not read as JSON.
pub const UNREADABLE_ANSWER: &str = "unreadable";
/// The UTF-8 byte-order mark, dropped from the start of a line.
const BOM: &[u8] = b"\xEF\xBB\xBF";
/// The longest top-level `id` value kept (a longer one counts as none).
const MAX_ID_BYTES: usize = 512;
/// The longest key compared with `id` (escapes such as `\u0069d` included).
const MAX_KEY_BYTES: usize = 32;
/// The most of a parser's message passed on about a refused message.
const MAX_DETAIL_BYTES: usize = 300;
/// The most of a dropped line [`Dropped`] keeps.
const MAX_DROPPED_SHOWN: usize = 120;

/// The messages without an id a server wrote that crewbox could not read: how many,
/// and the last of them (cut, escaped).
#[derive(Clone, Debug, Default)]
pub struct Dropped(Arc<Mutex<(u64, String)>>);

impl Dropped {
    fn note(&self, what: String) {
        let mut d = self.0.lock().unwrap_or_else(|p| p.into_inner());
        d.0 += 1;
        d.1 = what;
    }

    /// `"; it wrote N line(s) that are not JSON-RPC messages crewbox can read, the
    /// last: …"`, or nothing when it wrote none.
    pub fn said(&self) -> String {
        let d = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match d.0 {
            0 => String::new(),
            n => format!(
                "; on stdout it wrote {n} line(s) that are no JSON-RPC message crewbox can read (stdout is for MCP messages only), the last {}",
                d.1
            ),
        }
    }
}

/// Who reads the lines: what a refused message becomes (see the module docs).
#[derive(Clone, Debug)]
pub enum Reader {
    /// `crewbox mcp serve` reading a client's requests.
    Server,
    /// crewbox's MCP client reading a server's messages.
    Client(Dropped),
}

/// Why a line was refused.
enum Refused {
    /// Over the limit: its length (`complete`: the whole line; else what was read of it
    /// when its id was found, and the rest is skipped unread).
    TooLarge {
        bytes: usize,
        max: usize,
        complete: bool,
    },
    /// It does not read as JSON: its length, the parser's message and how it starts
    /// (cut, escaped).
    Unreadable {
        bytes: usize,
        detail: String,
        start: String,
    },
}

impl Reader {
    /// The line a refused message is replaced by, under the id `scan` found; `None`
    /// without one (the message is dropped, and said to be).
    fn replace(&self, scan: &IdScan, refused: &Refused) -> Option<String> {
        let Some(id) = scan.id() else {
            let what = match refused {
                Refused::TooLarge { bytes, max, .. } => {
                    format!("of {bytes} bytes (the limit is {max})")
                }
                Refused::Unreadable { bytes, detail, .. } => format!(
                    "of {bytes} bytes that does not read as JSON ({})",
                    self::detail(detail)
                ),
            };
            match self {
                Self::Server => {
                    let _ = std::io::Write::write_all(
                        &mut crate::text::stderr(),
                        format!("crewbox: a message {what}, without an id, was dropped\n")
                            .as_bytes(),
                    );
                }
                Self::Client(dropped) => {
                    tracing::debug!("a server's message {what}, without an id, was dropped");
                    let start = match refused {
                        Refused::Unreadable { start, .. } => format!(": `{start}`"),
                        Refused::TooLarge { .. } => String::new(),
                    };
                    dropped.note(format!("{what}{start}"));
                }
            }
            return None;
        };
        let message = match (self, refused) {
            (Self::Server, Refused::TooLarge { bytes, .. }) => serde_json::json!({
                "jsonrpc": "2.0", "id": id, "method": TOO_LARGE,
                "params": {"bytes": bytes},
            }),
            (Self::Server, Refused::Unreadable { detail, .. }) => serde_json::json!({
                "jsonrpc": "2.0", "id": id, "method": UNREADABLE,
                "params": {"error": detail},
            }),
            (
                Self::Client(_),
                Refused::TooLarge {
                    bytes,
                    max,
                    complete,
                },
            ) => serde_json::json!({
                "jsonrpc": "2.0", "id": id, "error": {
                    "code": rmcp::model::ErrorCode::INVALID_REQUEST.0,
                    "message": format!(
                        "the server's answer is {}{bytes} bytes, over the {} MiB limit; it was dropped unread",
                        if *complete { "" } else { "more than " },
                        max >> 20
                    ),
                    "data": {MARK: TOO_LARGE_ANSWER},
                },
            }),
            (Self::Client(_), Refused::Unreadable { detail, bytes, .. }) => serde_json::json!({
                "jsonrpc": "2.0", "id": id, "error": {
                    "code": rmcp::model::ErrorCode::PARSE_ERROR.0,
                    "message": format!(
                        "the server's answer ({bytes} bytes) does not read as JSON ({})",
                        self::detail(detail)
                    ),
                    "data": {MARK: UNREADABLE_ANSWER},
                },
            }),
        };
        Some(format!("{message}\n"))
    }
}

/// Which refusal of crewbox's (`TOO_LARGE_ANSWER`, `UNREADABLE_ANSWER`) an error
/// answer a client received is, if any.
pub fn refused_by_crewbox(error: &ErrorData) -> Option<&str> {
    error.data.as_ref()?.get(MARK)?.as_str()
}

/// A parser's message about a refused message as an error passes it on: within
/// [`MAX_DETAIL_BYTES`], escaped (it may quote what was sent).
pub fn detail(message: &str) -> String {
    crate::text::escape(&crate::text::cut_marked(message, MAX_DETAIL_BYTES, "…")).into_owned()
}

/// `input` as `reader` reads it: every line longer than `max` bytes, or not JSON,
/// replaced (see the module docs). The copying task ends at end of input or when the
/// returned reader is dropped.
pub fn bounded<R>(input: R, max: usize, reader: Reader) -> tokio::io::DuplexStream
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let (mut tx, rx) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        if let Err(e) = pump(input, &mut tx, max, &reader).await {
            tracing::debug!(error = %e, "input closed");
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
    /// Its refusal was sent as soon as its id was known (a client's wait ends then,
    /// not when the server ends the line, which may be never).
    answered: bool,
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

async fn pump<R, W>(input: R, out: &mut W, max: usize, reader: &Reader) -> std::io::Result<()>
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
            // Past the limit, a server's answer is refused as soon as its id is read.
            if let (Some(s), Reader::Client(_)) = (&mut skipped, reader)
                && !s.answered
                && s.scan.found.is_some()
            {
                s.answered = true;
                let refused = Refused::TooLarge {
                    bytes: s.total,
                    max,
                    complete: false,
                };
                if let Some(text) = reader.replace(&s.scan, &refused) {
                    out.write_all(text.as_bytes()).await?;
                    out.flush().await?;
                }
            }
            continue;
        }
        // A byte-order mark some writers put before a line is no part of the message
        // (the line read as no JSON, without an id, and was dropped unanswered).
        if skipped.is_none() && line.starts_with(BOM) {
            line.drain(..BOM.len());
        }
        let replaced = match skipped.take() {
            None => match read(&line) {
                Ok(value) => {
                    let kept = match (reader, value) {
                        (Reader::Client(_), Some(mut v)) => keep_execution(&mut v).then_some(v),
                        _ => None,
                    };
                    match kept {
                        Some(v) => out.write_all(format!("{v}\n").as_bytes()).await?,
                        None => out.write_all(&line).await?,
                    }
                    None
                }
                Err(detail) => {
                    let mut scan = IdScan::default();
                    line.iter().for_each(|&b| scan.push(b));
                    let shown = &line[..line.len().min(MAX_DROPPED_SHOWN)];
                    let start = crate::text::from_bytes(shown.trim_ascii_end());
                    let refused = Refused::Unreadable {
                        bytes: line.len(),
                        detail,
                        start: format!(
                            "{}{}",
                            crate::text::escape(&start),
                            if line.len() > shown.len() { "…" } else { "" }
                        ),
                    };
                    reader.replace(&scan, &refused)
                }
            },
            Some(s) if s.answered => None,
            Some(s) => reader.replace(
                &s.scan,
                &Refused::TooLarge {
                    bytes: s.total,
                    max,
                    complete: true,
                },
            ),
        };
        line.clear();
        if let Some(text) = replaced {
            out.write_all(text.as_bytes()).await?;
        }
        out.flush().await?;
    }
}

/// The complete line `line` read as JSON (`None` when it is blank: whitespace the SDK
/// skips), or why it does not read as JSON.
fn read(line: &[u8]) -> Result<Option<serde_json::Value>, String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    // Read as a value (not skipped: skipping knows no depth limit, and the SDK's
    // parse stops at the same depth this one does).
    serde_json::from_slice(line)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Where a listed tool's `execution` is kept for crewbox through the SDK's types
/// (`_meta` of the tool): the SDK's `Tool` has no `execution` and drops it from a
/// listing it can type, and with it the mark of a tool that runs only as a task.
pub const EXECUTION_META: &str = "crewbox/execution";

/// Copies each listed tool's `execution` into its `_meta` ([`EXECUTION_META`]) when
/// `message` answers with a listing of tools; whether anything was copied. A `_meta`
/// that is not an object is left alone (the SDK cannot type such a tool, and crewbox
/// then reads the listing tool by tool, `execution` with it).
fn keep_execution(message: &mut serde_json::Value) -> bool {
    let Some(tools) = message
        .get_mut("result")
        .and_then(|r| r.get_mut("tools"))
        .and_then(serde_json::Value::as_array_mut)
    else {
        return false;
    };
    let mut kept = false;
    for tool in tools
        .iter_mut()
        .filter_map(serde_json::Value::as_object_mut)
    {
        let Some(execution) = tool.get("execution").cloned() else {
            continue;
        };
        let meta = tool
            .entry("_meta")
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(EXECUTION_META.to_owned(), execution);
            kept = true;
        }
    }
    kept
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
        return Some(ErrorData::parse_error(
            crate::mcp::serve::not_json(detail),
            None,
        ));
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
            crate::mcp::serve::MAX_REQUEST_BYTES
        ),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn through(input: &[u8], max: usize) -> String {
        let mut out = Vec::new();
        pump(input, &mut out, max, &Reader::Server).await.unwrap();
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

    async fn as_client(input: &[u8], max: usize) -> (String, Dropped) {
        let dropped = Dropped::default();
        let mut out = Vec::new();
        pump(input, &mut out, max, &Reader::Client(dropped.clone()))
            .await
            .unwrap();
        (String::from_utf8(out).unwrap(), dropped)
    }

    /// A server's answer that is too long or does not read becomes an error answer
    /// under its id, marked as crewbox's, which the SDK hands to the waiting call;
    /// a line without an id (a banner on stdout) is dropped and noted, with its start.
    #[tokio::test]
    async fn as_a_client_a_refused_answer_becomes_an_error_under_its_id() {
        let mut bad =
            br#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":""#.to_vec();
        bad.extend_from_slice(b"\xff\"}]}}\n");
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"result\":{{\"t\":\"{}\"}},\"id\":\"b\"}}\n",
            "x".repeat(5000)
        );
        let ok = "{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n";
        let mut input = bad;
        input.extend_from_slice(big.as_bytes());
        input.extend_from_slice(b"Server \x1b[1mstarted\x1b[0m on stdio\n");
        input.extend_from_slice(ok.as_bytes());
        let (out, dropped) = as_client(&input, 1000).await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        let parse =
            |l: &str| -> rmcp::model::ServerJsonRpcMessage { serde_json::from_str(l).unwrap() };
        let error_of = |l: &str| match parse(l) {
            rmcp::model::ServerJsonRpcMessage::Error(e) => e,
            other => panic!("not an error answer: {other:?}"),
        };
        let unreadable = error_of(lines[0]);
        assert_eq!(unreadable.id, Some(rmcp::model::NumberOrString::Number(4)));
        assert_eq!(
            refused_by_crewbox(&unreadable.error),
            Some(UNREADABLE_ANSWER)
        );
        assert!(unreadable.error.message.contains("does not read as JSON"));
        let large = error_of(lines[1]);
        assert_eq!(
            large.id,
            Some(rmcp::model::NumberOrString::String("b".into()))
        );
        assert_eq!(refused_by_crewbox(&large.error), Some(TOO_LARGE_ANSWER));
        assert_eq!(format!("{}\n", lines[2]), ok);
        let said = dropped.said();
        assert!(said.contains("1 line(s)"), "{said}");
        // The banner, escaped: no raw escape sequence reaches an error message.
        assert!(
            said.contains(r"`Server \x1b[1mstarted\x1b[0m on stdio`"),
            "{said}"
        );
        assert!(!said.contains('\x1b'), "{said}");
        // Nothing dropped, nothing said.
        assert_eq!(as_client(ok.as_bytes(), 1000).await.1.said(), "");
        // A server's own error answer is not crewbox's.
        let theirs = ErrorData::new(
            rmcp::model::ErrorCode::PARSE_ERROR,
            "bad",
            Some(serde_json::json!({"other": 1})),
        );
        assert_eq!(refused_by_crewbox(&theirs), None);
    }

    /// A listed tool's `execution`, which the SDK's `Tool` has no field for, reaches
    /// crewbox through the SDK's types in `_meta`; other messages pass unchanged.
    #[tokio::test]
    async fn a_listed_tools_execution_survives_the_sdks_types() {
        let listing = r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"t","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},{"name":"u","inputSchema":{"type":"object"},"_meta":{"k":1}}]}}"#;
        let (out, _) = as_client(format!("{listing}\n").as_bytes(), 100_000).await;
        let typed: rmcp::model::ServerJsonRpcMessage = serde_json::from_str(out.trim()).unwrap();
        let rmcp::model::ServerJsonRpcMessage::Response(r) = typed else {
            panic!("{out}")
        };
        let rmcp::model::ServerResult::ListToolsResult(list) = r.result else {
            panic!("not typed as a listing: {out}")
        };
        let meta = list.tools[0].meta.as_ref().expect("no _meta");
        assert_eq!(
            meta.get(EXECUTION_META),
            Some(&serde_json::json!({"taskSupport": "required"}))
        );
        assert!(
            list.tools[1]
                .meta
                .as_ref()
                .unwrap()
                .get(EXECUTION_META)
                .is_none()
        );
        let other = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[],"execution":1}}"#;
        let (out, _) = as_client(format!("{other}\n").as_bytes(), 100_000).await;
        assert_eq!(out, format!("{other}\n"));
        // Serving, a client's lines are never rewritten.
        let mut served = Vec::new();
        pump(
            format!("{listing}\n").as_bytes(),
            &mut served,
            100_000,
            &Reader::Server,
        )
        .await
        .unwrap();
        assert_eq!(String::from_utf8(served).unwrap(), format!("{listing}\n"));
    }

    /// An over-long answer whose line does not end (a server stuck writing, or one
    /// that never writes the newline) fails its call as soon as its id is read past
    /// the limit, not when (if ever) the line ends; the rest of it is skipped, and the
    /// next message passes. Shown failing without the early answer (timed out).
    #[tokio::test]
    async fn an_endless_oversized_answer_is_refused_once_its_id_is_read() {
        use tokio::io::AsyncReadExt as _;
        let (mut server, input) = tokio::io::duplex(1 << 16);
        let dropped = Dropped::default();
        let mut out = bounded(input, 1000, Reader::Client(dropped));
        server
            .write_all(
                br#"{"jsonrpc":"2.0","id":"big-1","result":{"content":[{"type":"text","text":""#,
            )
            .await
            .unwrap();
        server.write_all(&[b'x'; 5000]).await.unwrap();
        let mut got = vec![0u8; 4096];
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), out.read(&mut got))
            .await
            .expect("the refusal waited for the end of the line")
            .unwrap();
        let first: rmcp::model::ServerJsonRpcMessage = serde_json::from_slice(&got[..n]).unwrap();
        let rmcp::model::ServerJsonRpcMessage::Error(e) = first else {
            panic!("{}", String::from_utf8_lossy(&got[..n]))
        };
        assert_eq!(
            e.id,
            Some(rmcp::model::NumberOrString::String("big-1".into()))
        );
        assert_eq!(refused_by_crewbox(&e.error), Some(TOO_LARGE_ANSWER));
        assert!(e.error.message.contains("more than"), "{}", e.error.message);
        // The line's end is skipped without a second answer; the next message passes.
        server.write_all(&[b'x'; 3000]).await.unwrap();
        let next = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n";
        server.write_all(b"\"}]}}\n").await.unwrap();
        server.write_all(next.as_bytes()).await.unwrap();
        drop(server);
        let mut rest = String::new();
        out.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, next);
    }

    /// A line that starts with a byte-order mark reads as the message after it, both
    /// ways (it was dropped as a line without an id, its request never answered).
    #[tokio::test]
    async fn a_byte_order_mark_before_a_line_is_dropped() {
        let line = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";
        let mut input = BOM.to_vec();
        input.extend_from_slice(line.as_bytes());
        assert_eq!(through(&input, 1000).await, line);
        let (out, dropped) = as_client(&input, 1000).await;
        assert_eq!((out.as_str(), dropped.said()), (line, String::new()));
    }
}

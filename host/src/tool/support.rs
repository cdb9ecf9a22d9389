//! Helpers every tool shares: argument parsing, schemas, blocking work, text caps.

use std::io::{self, BufRead};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ToolError;

/// How many leading bytes are checked for NUL to call a file binary (as git does).
pub(crate) const BINARY_SNIFF: usize = 8 * 1024;

/// Parses a tool's arguments with its serde type (which denies unknown fields).
///
/// `null` counts as `{}` because some models send no arguments for argument-less calls;
/// anything else that is not an object is refused before serde sees it, so the message
/// names JSON types rather than our Rust types.
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    let args = match args {
        Value::Null => Value::Object(Default::default()),
        Value::Object(map) => Value::Object(map),
        other => {
            return Err(invalid(
                tool,
                format!("arguments must be a JSON object, got {}", json_type(&other)),
            ));
        }
    };
    serde_json::from_value(args).map_err(|e| invalid(tool, e.to_string()))
}

/// An `InvalidArgs` error for `tool`.
pub(crate) fn invalid(tool: &str, message: impl Into<String>) -> ToolError {
    ToolError::InvalidArgs {
        tool: tool.to_owned(),
        message: message.into(),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An object schema with `properties`, the `required` names and no other fields.
pub(crate) fn object_schema(properties: Value, required: &[&str]) -> Value {
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// Runs blocking filesystem work off the async runtime threads.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, ToolError>
where
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ToolError::Failed(format!("tool worker failed: {e}")))?
}

/// Whether the start of a file says it is binary (a NUL byte, as git and grep decide).
pub(crate) fn looks_binary(head: &[u8]) -> bool {
    head[..head.len().min(BINARY_SNIFF)].contains(&0)
}

/// The longest prefix of `s` that fits in `max` bytes without splitting a character.
pub(crate) fn truncate_at_char(s: &str, max: usize) -> &str {
    crate::text::within(s, max)
}

/// Reads one line (through `\n`) from `reader`, keeping at most `keep` of its bytes in
/// `buf`, so one enormous line cannot fill memory. Returns the bytes consumed (0 at EOF).
pub(crate) fn read_line_bounded<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    keep: usize,
) -> io::Result<usize> {
    let mut consumed = 0;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(consumed);
        }
        let (len, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        let room = keep.saturating_sub(buf.len());
        buf.extend_from_slice(&available[..len.min(room)]);
        reader.consume(len);
        consumed += len;
        if done {
            return Ok(consumed);
        }
    }
}

/// Formats a byte count for notes to the model.
pub(crate) fn human_bytes(n: usize) -> String {
    if n >= 1024 * 1024 && n.is_multiple_of(1024 * 1024) {
        format!("{} MiB", n / (1024 * 1024))
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Args {
        path: String,
        limit: Option<u64>,
    }

    fn message(err: ToolError) -> String {
        match err {
            ToolError::InvalidArgs { tool, message } => {
                assert_eq!(tool, "t");
                message
            }
            other => panic!("expected InvalidArgs, got {other:?}"),
        }
    }

    #[test]
    fn parse_reports_clear_messages() {
        assert!(parse::<Args>("t", json!({"path": "a"})).is_ok());
        assert_eq!(
            message(parse::<Args>("t", json!("a")).unwrap_err()),
            "arguments must be a JSON object, got a string"
        );
        assert!(
            message(parse::<Args>("t", json!({})).unwrap_err()).contains("missing field `path`")
        );
        assert!(
            message(parse::<Args>("t", Value::Null).unwrap_err()).contains("missing field `path`")
        );
        assert!(
            message(parse::<Args>("t", json!({"path": "a", "x": 1})).unwrap_err())
                .contains("unknown field `x`")
        );
        assert!(
            message(parse::<Args>("t", json!({"path": 3})).unwrap_err()).contains("invalid type")
        );
        assert!(
            message(parse::<Args>("t", json!({"path": "a", "limit": -1})).unwrap_err())
                .contains("-1")
        );
    }

    #[test]
    fn text_helpers() {
        assert!(looks_binary(b"ab\0c"));
        assert!(!looks_binary("héllo".as_bytes()));
        assert_eq!(truncate_at_char("héllo", 2), "h");
        assert_eq!(truncate_at_char("abc", 10), "abc");
        assert_eq!(human_bytes(256 * 1024), "256 KiB");
        assert_eq!(human_bytes(1024 * 1024), "1 MiB");
        assert_eq!(human_bytes(10), "10 bytes");
    }

    #[test]
    fn bounded_lines() {
        let mut reader = io::BufReader::with_capacity(4, &b"abcdefghij\nxy\n\nz"[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 3).unwrap(), 11);
        assert_eq!(buf, b"abc");
        buf.clear();
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 100).unwrap(), 3);
        assert_eq!(buf, b"xy\n");
        buf.clear();
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 0).unwrap(), 1);
        assert!(buf.is_empty());
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 100).unwrap(), 1);
        assert_eq!(buf, b"z");
        buf.clear();
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 100).unwrap(), 0);
    }
}

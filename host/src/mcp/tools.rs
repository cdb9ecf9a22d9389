//! What an agent sees of a server's tools (names, capped descriptions and schemas) and
//! of their results (text, capped; images and audio dropped with a note). Pure.

use serde_json::{Map, Value, json};

use crate::provider::ToolSpec;
use crate::tool::run_command::OUTPUT_CAP_BYTES;

/// The most tools one server may offer an agent; the rest are cut with a warning.
pub const MAX_TOOLS: usize = 128;
/// The longest description shown to the model (bytes).
pub const MAX_DESCRIPTION_BYTES: usize = 2 * 1024;
/// The largest input schema passed to the model (bytes of JSON).
pub const MAX_SCHEMA_BYTES: usize = 16 * 1024;
/// The longest tool name a model API accepts.
pub const MAX_NAME_LEN: usize = 64;
/// Text of one result kept for the model (as `run_command` output).
pub const RESULT_CAP_BYTES: usize = OUTPUT_CAP_BYTES;

/// Prefix of every MCP tool's name.
pub const PREFIX: &str = "mcp__";

/// One tool of a server, as offered.
#[derive(Clone, Debug, PartialEq)]
pub struct OfferedTool {
    /// The name the model calls (`mcp__SERVER__TOOL`, sanitised).
    pub agent_name: String,
    /// The server's own name for it.
    pub tool: String,
    /// The spec shown to the model.
    pub spec: ToolSpec,
    /// The server's `readOnlyHint`, shown, never trusted.
    pub read_only_hint: Option<bool>,
}

/// What listing a server's tools gave.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Offer {
    /// The tools offered.
    pub tools: Vec<OfferedTool>,
    /// What was left out and why (one line each).
    pub warnings: Vec<String>,
}

/// `mcp__SERVER__TOOL` with every character a model API refuses replaced by `_`.
pub fn agent_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = format!("{PREFIX}{server}__{clean}");
    name.truncate(MAX_NAME_LEN);
    name
}

/// The server part of an MCP tool name.
pub fn server_of(agent_name: &str) -> Option<&str> {
    agent_name
        .strip_prefix(PREFIX)?
        .split_once("__")
        .map(|(s, _)| s)
}

fn cap_text(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let cut = crate::tool::support::truncate_at_char(s, max);
    format!("{cut} [… cut: {} bytes in all]", s.len())
}

/// The tools of `server` from its `tools/list` answer (raw MCP `Tool` objects), under
/// `allows` and the caps. `cut` says why the listing was not read to its end (then the
/// server offers more than `listed` holds).
pub fn offer(
    server: &str,
    listed: &[Value],
    cut: Option<String>,
    allows: impl Fn(&str) -> bool,
) -> Offer {
    let mut out = Offer::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut allowed = 0usize;
    for t in listed {
        let Some(tool) = t
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.trim().is_empty())
        else {
            out.warnings
                .push(format!("server `{server}` listed a tool without a name"));
            continue;
        };
        if !allows(tool) {
            continue;
        }
        // A tool that runs only as a task (MCP 2025-11-25) fails every plain call.
        // `execution` as listed, or as the stdio reader kept it through the SDK's types.
        let task_only = t
            .get("execution")
            .or_else(|| {
                t.get("_meta")
                    .and_then(|m| m.get(super::lines::EXECUTION_META))
            })
            .and_then(|e| e.get("taskSupport"))
            .and_then(Value::as_str)
            == Some("required");
        if task_only {
            out.warnings.push(format!(
                "server `{server}`: tool `{tool}` left out: it runs only as a task \
                 (`execution.taskSupport: \"required\"`), which crewbox does not ask for"
            ));
            continue;
        }
        allowed += 1;
        if out.tools.len() >= MAX_TOOLS {
            continue;
        }
        let name = agent_name(server, tool);
        if !seen.insert(name.clone()) {
            out.warnings.push(format!(
                "server `{server}`: tool `{}` left out: its name clashes with another as `{name}`",
                tool
            ));
            continue;
        }
        let read_only_hint = t
            .get("annotations")
            .and_then(|a| a.get("readOnlyHint"))
            .and_then(Value::as_bool);
        let mut description = t
            .get("description")
            .and_then(Value::as_str)
            .map(|d| cap_text(d, MAX_DESCRIPTION_BYTES))
            .unwrap_or_default();
        let mut schema = t
            .get("inputSchema")
            .filter(|s| s.is_object())
            .cloned()
            .unwrap_or_else(|| json!({"type": "object"}));
        if schema.get("type").is_none()
            && let Some(obj) = schema.as_object_mut()
        {
            obj.insert("type".into(), json!("object"));
        }
        let size = serde_json::to_string(&schema).map(|s| s.len()).unwrap_or(0);
        let refused = if size > MAX_SCHEMA_BYTES {
            Some(format!("{size} bytes, over {MAX_SCHEMA_BYTES}"))
        } else if schema.get("type") != Some(&json!("object")) {
            Some("not an object schema".to_owned())
        } else {
            super::schema::problem(&schema)
        };
        if let Some(why) = refused {
            schema = json!({"type": "object"});
            description.push_str(&format!(
                " [The server's input schema was not passed on ({why}); send the arguments as a JSON object.]"
            ));
        }
        description.push_str(&format!(" (MCP server `{server}`"));
        if let Some(hint) = read_only_hint {
            description.push_str(&format!(
                ", which says this tool is {}read-only",
                if hint { "" } else { "not " }
            ));
        }
        description.push(')');
        out.tools.push(OfferedTool {
            agent_name: name.clone(),
            tool: tool.to_owned(),
            spec: ToolSpec {
                name,
                description,
                parameters: schema,
            },
            read_only_hint,
        });
    }
    if allowed > MAX_TOOLS {
        let more = if cut.is_some() { "more than " } else { "" };
        out.warnings.push(format!(
            "server `{server}` offers {more}{allowed} tools; only the first {MAX_TOOLS} are given to agents \
             (choose with `enabled_tools`)"
        ));
    }
    out.warnings
        .extend(cut.map(|why| format!("server `{server}`: {why}")));
    out
}

/// The most notes (dropped media, links, binary resources) one result holds; the
/// rest are counted.
const MAX_NOTES: usize = 20;

/// A tool result (a raw MCP `CallToolResult`) as the model reads it: its text blocks
/// and, each in the place of the block it stands for, a note for what is not text (so
/// "the image above" still reads right); `Err` for an `isError` result. Redacted,
/// capped.
pub fn render_result(result: &Value) -> Result<String, String> {
    let mut parts: Vec<String> = Vec::new();
    let (mut has_text, mut notes) = (false, 0usize);
    let mut note = |parts: &mut Vec<String>, n: String| {
        notes += 1;
        if notes <= MAX_NOTES {
            parts.push(n);
        }
    };
    let empty = Vec::new();
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                has_text = true;
                parts.push(
                    block
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                );
            }
            Some(kind @ ("image" | "audio")) => {
                let mime = block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown type");
                note(
                    &mut parts,
                    format!(
                        "[{kind} content ({mime}) dropped: crewbox passes only text to the model]"
                    ),
                );
            }
            Some("resource_link") => {
                let uri = block.get("uri").and_then(Value::as_str).unwrap_or("?");
                let name = block.get("name").and_then(Value::as_str).unwrap_or("");
                note(&mut parts, format!("[resource link: {uri} {name}]"));
            }
            Some("resource") => {
                let r = block.get("resource").unwrap_or(&Value::Null);
                let uri = r.get("uri").and_then(Value::as_str).unwrap_or("?");
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => {
                        has_text = true;
                        parts.push(format!("[resource {uri}]\n{t}"));
                    }
                    None => note(&mut parts, format!("[binary resource {uri} dropped]")),
                }
            }
            other => note(
                &mut parts,
                format!("[content of type `{}` dropped]", other.unwrap_or("?")),
            ),
        }
    }
    if notes > MAX_NOTES {
        parts.push(format!("[{} more notes left out]", notes - MAX_NOTES));
    }
    if !has_text && let Some(s) = result.get("structuredContent").filter(|s| !s.is_null()) {
        // The media a server repeats there (server-filesystem's `read_media_file` puts
        // its image in both) is dropped as it is from `content`: no base64 for the model.
        let mut s = s.clone();
        drop_media(&mut s, 0);
        parts.insert(0, serde_json::to_string(&s).unwrap_or_default());
    }
    let mut out = cap_result(&parts.join("\n"));
    if out.is_empty() {
        out.push_str("(no content)");
    }
    let out = crate::redact::clean_owned(out);
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        Err(out)
    } else {
        Ok(out)
    }
}

/// Replaces each image or audio object (`"type": "image"|"audio"` with `data`) inside
/// `v` by a note, down to a bounded depth.
fn drop_media(v: &mut Value, depth: usize) {
    if depth > 64 {
        return;
    }
    match v {
        Value::Object(o) => {
            let kind = o.get("type").and_then(Value::as_str);
            if let Some(kind @ ("image" | "audio")) = kind
                && o.get("data").is_some_and(Value::is_string)
            {
                let mime = o.get("mimeType").and_then(Value::as_str).unwrap_or("?");
                *v = Value::String(format!("[{kind} content ({mime}) dropped]"));
                return;
            }
            for x in o.values_mut() {
                drop_media(x, depth + 1);
            }
        }
        Value::Array(a) => {
            for x in a {
                drop_media(x, depth + 1);
            }
        }
        _ => {}
    }
}

/// `text` within [`RESULT_CAP_BYTES`], keeping the start and the end, the cut marked.
pub fn cap_result(text: &str) -> String {
    if text.len() <= RESULT_CAP_BYTES {
        return text.to_owned();
    }
    let half = RESULT_CAP_BYTES / 2;
    let head = crate::text::within(text, half);
    let tail = crate::text::tail_within(text, half);
    format!(
        "{head}\n[... {} bytes omitted; {} bytes in all ...]\n{tail}",
        text.len() - head.len() - tail.len(),
        text.len(),
    )
}

/// Arguments for a call: an object (`null` as `{}`), or an error the model can read.
pub fn arguments(tool: &str, args: Value) -> Result<Map<String, Value>, String> {
    match args {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => Ok(m),
        _ => Err(format!(
            "invalid arguments for `{tool}`: arguments must be a JSON object"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_and_bounded() {
        assert_eq!(agent_name("fs", "read_file"), "mcp__fs__read_file");
        assert_eq!(agent_name("fs", "a.b/c d"), "mcp__fs__a_b_c_d");
        assert_eq!(agent_name("s", &"x".repeat(100)).len(), MAX_NAME_LEN);
        assert_eq!(server_of("mcp__fs__read_file"), Some("fs"));
        assert_eq!(server_of("read_file"), None);
    }

    #[test]
    fn offer_caps_count_description_and_schema() {
        let many: Vec<Value> = (0..10_000)
            .map(|i| json!({"name": format!("t{i}"), "inputSchema": {"type": "object"}}))
            .collect();
        let o = offer("s", &many, None, |_| true);
        assert_eq!(o.tools.len(), MAX_TOOLS);
        assert!(o.warnings[0].contains("10000 tools"), "{:?}", o.warnings);

        let big = vec![json!({
            "name": "big",
            "description": "d".repeat(1 << 20),
            "inputSchema": {"type": "object", "properties": {"p": {"description": "x".repeat(1 << 20)}}},
            "annotations": {"readOnlyHint": true}
        })];
        let o = offer("s", &big, None, |_| true);
        let t = &o.tools[0];
        assert!(t.spec.description.len() < MAX_DESCRIPTION_BYTES + 400);
        assert_eq!(t.spec.parameters, json!({"type": "object"}));
        assert!(t.spec.description.contains("says this tool is read-only"));
        assert_eq!(t.read_only_hint, Some(true));

        let o = offer("s", &many[..3], None, |n| n != "t1");
        assert_eq!(o.tools.len(), 2);
    }

    #[test]
    fn a_malformed_schema_or_a_task_only_tool_is_not_offered_as_is() {
        let listed = vec![
            json!({"name": "bad", "inputSchema":
                {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}, "required": 5}}),
            json!({"name": "research", "inputSchema": {"type": "object"},
                   "execution": {"taskSupport": "required"}}),
            json!({"name": "maybe", "inputSchema": {"type": "object"},
                   "execution": {"taskSupport": "optional"}}),
        ];
        let o = offer("s", &listed, None, |_| true);
        let names: Vec<&str> = o.tools.iter().map(|t| t.tool.as_str()).collect();
        assert_eq!(names, ["bad", "maybe"]);
        assert_eq!(o.tools[0].spec.parameters, json!({"type": "object"}));
        assert!(
            o.tools[0]
                .spec
                .description
                .contains("was not passed on (`$ref` #/nowhere"),
            "{}",
            o.tools[0].spec.description
        );
        assert!(
            o.warnings[0].contains("`research` left out"),
            "{:?}",
            o.warnings
        );
    }

    #[test]
    fn results_keep_text_and_note_the_rest() {
        let r = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///x", "name": "x"}
        ]});
        let text = render_result(&r).unwrap();
        assert!(text.starts_with("hello\n[image content (image/png) dropped"));
        assert!(text.contains("resource link: file:///x"));
        assert_eq!(
            render_result(&json!({"content": [{"type": "text", "text": "bad"}], "isError": true})),
            Err("bad".into())
        );
        let huge = "y".repeat(50 << 20);
        let text = render_result(&json!({"content": [{"type": "text", "text": huge}]})).unwrap();
        assert!(text.len() < RESULT_CAP_BYTES + 200);
        assert!(text.contains("bytes omitted"));
        assert_eq!(render_result(&json!({})).unwrap(), "(no content)");
    }

    /// server-everything's `get-tiny-image`: text, image, text. The note stands where
    /// the image stood, so "the image above" reads right; notes past 20 are counted,
    /// and a server's endless link is capped with the rest.
    #[test]
    fn notes_stand_in_place_of_their_blocks() {
        let r = json!({"content": [
            {"type": "text", "text": "Here's the image you requested:"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "The image above is the MCP logo."}
        ]});
        assert_eq!(
            render_result(&r).unwrap(),
            "Here's the image you requested:\n\
             [image content (image/png) dropped: crewbox passes only text to the model]\n\
             The image above is the MCP logo."
        );
        let mut content: Vec<Value> = (0..25)
            .map(|i| json!({"type": "resource_link", "uri": format!("file:///{i}"), "name": "n"}))
            .collect();
        content.push(json!({"type": "text", "text": "end"}));
        let text = render_result(&json!({ "content": content })).unwrap();
        assert!(
            text.contains("file:///19 n") && !text.contains("file:///20 "),
            "{text}"
        );
        assert!(text.ends_with("end\n[5 more notes left out]"), "{text}");
        let long = format!("file:///{}", "u".repeat(1 << 20));
        let text = render_result(&json!({"content": [
            {"type": "resource_link", "uri": long, "name": "n"}
        ]}))
        .unwrap();
        assert!(text.len() < RESULT_CAP_BYTES + 200, "{}", text.len());
    }

    /// server-filesystem's `read_media_file` repeats its image in `structuredContent`,
    /// which is what the model gets when `content` has no text: the base64 reached the
    /// model (16,610 input tokens for one call).
    #[test]
    fn media_repeated_in_structured_content_is_dropped_too() {
        let data = "iVBORw0KGgo".repeat(1000);
        let r = json!({
            "content": [{"type": "image", "data": data, "mimeType": "image/png"}],
            "structuredContent": {"content": [
                {"type": "image", "data": data, "mimeType": "image/png"},
                {"type": "text", "text": "caption"}
            ], "size": 3}
        });
        let text = render_result(&r).unwrap();
        assert!(!text.contains("iVBORw0KGgo"), "{text}");
        assert!(
            text.contains("[image content (image/png) dropped]"),
            "{text}"
        );
        assert!(
            text.contains("caption") && text.contains("\"size\":3"),
            "{text}"
        );
    }

    #[test]
    fn a_tool_with_an_empty_name_is_left_out() {
        let listed = [
            json!({"name": ""}),
            json!({"name": "  "}),
            json!({"name": "ok"}),
        ];
        let o = offer("s", &listed, None, |_| true);
        let names: Vec<&str> = o.tools.iter().map(|t| t.agent_name.as_str()).collect();
        assert_eq!(names, ["mcp__s__ok"]);
        assert_eq!(o.warnings.len(), 2, "{:?}", o.warnings);
    }
}

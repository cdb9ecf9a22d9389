//! Building blocks of scripted-model scripts (see the README's script format).

/// Entries for agent `agent` (a name or a role): it writes `content` to `path` on its
/// first turn, then answers `text` on its second, after `delay_ms`. `content` and
/// `text` are plain text (escaped here).
pub fn writes_then(agent: &str, path: &str, content: &str, delay_ms: u64, text: &str) -> String {
    format!(
        r#"
[[reply]]
agent = "{agent}"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = {{ path = "{path}", content = {content} }}

[[reply]]
agent = "{agent}"
turn = 2
delay_ms = {delay_ms}
text = {text}
"#,
        content = toml_string(content),
        text = toml_string(text),
    )
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// A single agent that starts one sub-agent (role `kid`, which writes `kid.txt`) on its
/// first turn and finishes on its second, after `delay_ms`.
pub fn delegates(delay_ms: u64) -> String {
    format!(
        r#"
[[reply]]
system = "You are a sub-agent"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = {{ path = "kid.txt", content = "kid\n" }}

[[reply]]
system = "You are a sub-agent"
turn = 2
text = "KID: wrote kid.txt"

[[reply]]
agent = "agent"
turn = 1
text = "delegating"
[[reply.tool_calls]]
name = "spawn_agent"
args = {{ role = "kid", task = "write kid.txt" }}

[[reply]]
agent = "agent"
turn = 2
delay_ms = {delay_ms}
text = "done"
"#
    )
}

//! The conversation in the order both chat APIs require, whatever the history holds.
//!
//! OpenAI answers every `tool_call_id` with a `tool` message right after the assistant
//! message, before any other role; Anthropic wants every `tool_use` answered by a
//! `tool_result` block in the very next user message. A history can break that (a
//! message queued between two tool results, a turn cut short by a budget, a fix round
//! appended after a partial batch), and the APIs answer such a request with a 400 — so
//! the wires send [`well_formed`], not the raw history.

use super::{Message, Role};

/// Text of the result supplied for a call the history never answered.
pub const NOT_RUN: &str = "error: this tool call was not run";

/// `messages` with each assistant tool-call batch followed directly by its results, in
/// call order (missing ones supplied as errors), then whatever else was said before the
/// next assistant message. A tool result that answers no call becomes user text, so
/// nothing is lost and nothing dangles.
pub fn well_formed(messages: &[Message]) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        match m.role {
            Role::Assistant if !m.tool_calls.is_empty() => {
                let end = messages[i + 1..]
                    .iter()
                    .position(|x| x.role == Role::Assistant)
                    .map_or(messages.len(), |p| i + 1 + p);
                let mut answers: Vec<Option<&Message>> = vec![None; m.tool_calls.len()];
                let mut rest = Vec::new();
                for x in &messages[i + 1..end] {
                    let slot = (x.role == Role::Tool)
                        .then(|| {
                            m.tool_calls.iter().zip(&answers).position(|(c, a)| {
                                a.is_none() && x.tool_call_id.as_deref() == Some(c.id.as_str())
                            })
                        })
                        .flatten();
                    match slot {
                        Some(k) => answers[k] = Some(x),
                        None if x.role == Role::Tool => rest.push(stray(x)),
                        None => rest.push(x.clone()),
                    }
                }
                out.push(m.clone());
                for (call, answer) in m.tool_calls.iter().zip(answers) {
                    out.push(match answer {
                        Some(a) => a.clone(),
                        None => Message::tool_error(call.id.clone(), NOT_RUN),
                    });
                }
                out.extend(rest);
                i = end;
            }
            Role::Tool => {
                out.push(stray(m));
                i += 1;
            }
            Role::System | Role::User | Role::Assistant => {
                out.push(m.clone());
                i += 1;
            }
        }
    }
    out
}

/// A tool result without its call, as user text.
fn stray(m: &Message) -> Message {
    Message::user(format!(
        "[result of tool call {}]\n{}",
        m.tool_call_id.as_deref().unwrap_or("?"),
        m.content
    ))
}

/// Whether a text says nothing (the APIs reject empty and whitespace-only text blocks).
pub fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolCall;
    use serde_json::json;

    fn calls(ids: &[&str]) -> Message {
        Message::assistant(
            "",
            ids.iter()
                .map(|id| ToolCall::new(*id, "read_file", json!({})))
                .collect(),
        )
    }

    #[test]
    fn a_message_between_results_moves_after_the_batch() {
        let history = vec![
            Message::user("task"),
            calls(&["a", "b"]),
            Message::tool("a", "A"),
            Message::user("steer"),
            Message::tool("b", "B"),
        ];
        assert_eq!(
            well_formed(&history),
            vec![
                Message::user("task"),
                calls(&["a", "b"]),
                Message::tool("a", "A"),
                Message::tool("b", "B"),
                Message::user("steer"),
            ]
        );
    }

    #[test]
    fn results_follow_call_order_missing_ones_are_errors_and_strays_become_text() {
        let history = vec![
            calls(&["a", "b"]),
            Message::tool("b", "B"),
            Message::tool("zzz", "lost"),
            Message::user("fix this"),
        ];
        let out = well_formed(&history);
        assert_eq!(out[1], Message::tool("a", "").clone_with(NOT_RUN, true));
        assert_eq!(out[2], Message::tool("b", "B"));
        assert_eq!(out[3].role, Role::User);
        assert!(out[3].content.contains("zzz") && out[3].content.contains("lost"));
        assert_eq!(out[4], Message::user("fix this"));
        assert_eq!(well_formed(&out), out, "idempotent");
    }

    impl Message {
        fn clone_with(&self, content: &str, is_error: bool) -> Message {
            Message {
                content: content.into(),
                is_error,
                ..self.clone()
            }
        }
    }
}

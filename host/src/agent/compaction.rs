//! Context compaction: when the conversation nears the context budget, old tool outputs
//! are replaced by a short note, keeping the system prompt, the task and the last N turns
//! verbatim. Deterministic, so scripted runs replay identically.

use crate::provider::{Message, Role, Usage};

/// Estimated tokens of a conversation.
pub fn estimate(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|m| {
            Usage::estimate(&m.content)
                + m.tool_calls
                    .iter()
                    .map(|c| Usage::estimate(&c.args.to_string()))
                    .sum::<u64>()
                + 4
        })
        .sum()
}

/// Compacts in place when the estimate exceeds 80% of `budget`; returns how many tool
/// outputs were dropped.
pub fn compact(messages: &mut [Message], budget: u64, keep_turns: u32) -> usize {
    if estimate(messages) * 5 <= budget * 4 {
        return 0;
    }
    // A turn starts at each assistant message; keep the last `keep_turns` of them intact.
    let assistant_positions: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Assistant)
        .map(|(i, _)| i)
        .collect();
    let keep_from = assistant_positions
        .len()
        .checked_sub(keep_turns as usize)
        .and_then(|i| assistant_positions.get(i).copied())
        .unwrap_or(0);
    let mut dropped = 0;
    for m in messages[..keep_from].iter_mut() {
        if m.role == Role::Tool && !m.content.starts_with("[compacted") {
            m.content = format!(
                "[compacted: {} bytes of tool output dropped to save context]",
                m.content.len()
            );
            dropped += 1;
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_only_old_tool_outputs_when_near_budget() {
        let mut msgs = vec![Message::system("sys"), Message::user("task")];
        for i in 0..5 {
            msgs.push(Message::assistant("", vec![]));
            msgs.push(Message::tool(format!("c{i}"), "x".repeat(400)));
        }
        let before = msgs.clone();
        assert_eq!(
            compact(&mut msgs, 100_000, 2),
            0,
            "far below budget: untouched"
        );
        assert_eq!(msgs, before);
        let dropped = compact(&mut msgs, 500, 2);
        assert_eq!(dropped, 3);
        assert!(msgs[3].content.starts_with("[compacted"));
        assert_eq!(msgs[9].content.len(), 400, "last turns kept");
        assert_eq!(msgs[1].content, "task");
    }
}

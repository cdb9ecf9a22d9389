//! Context compaction: when the conversation nears the context budget, old tool outputs
//! are replaced by a short note, keeping the system prompt, the task and the last N turns
//! verbatim. A finished conversation carried into an agent's next task (a team member's
//! next iteration) is bounded by [`carry`]. Deterministic, so scripted runs replay
//! identically.

use crate::provider::conversation::well_formed;
use crate::provider::{Message, Role, Usage};

/// Starts the note that stands for the messages [`carry`] left out.
pub const CARRY_MARKER: &str = "[earlier conversation compacted:";

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
    // Fewer turns than that: all kept. `keep_turns = 0`: none (it compacted nothing).
    let keep_from = match assistant_positions.len().checked_sub(keep_turns as usize) {
        Some(i) => assistant_positions
            .get(i)
            .copied()
            .unwrap_or(messages.len()),
        None => 0,
    };
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

/// The conversation an agent continues with for its next `task`: `history` made
/// well-formed, its system message replaced by `system`, then at most `budget` tokens
/// and `keep_turns` model turns of it. Kept: the system message, the first task, and
/// the latest messages that fit, starting where a turn starts (a user or assistant
/// message, never a tool result, so no tool call loses its result); what is left out
/// becomes one note saying so. `task` comes last.
pub fn carry(
    history: &[Message],
    system: &str,
    task: &str,
    budget: u64,
    keep_turns: u32,
) -> Vec<Message> {
    let body: Vec<Message> = well_formed(history)
        .into_iter()
        .filter(|m| m.role != Role::System)
        .collect();
    let (first, rest) = match body.split_first() {
        Some((first, rest)) if first.role == Role::User => (Some(first.clone()), rest),
        Some(_) | None => (None, body.as_slice()),
    };
    let mut out = vec![Message::system(system)];
    out.extend(first);
    let fixed =
        estimate(&out) + estimate(&[Message::user(task), Message::user(marker(rest.len()))]);
    // Suffix costs from the end, so each candidate start is checked in O(1).
    let mut cost = vec![0u64; rest.len() + 1];
    let mut turns = vec![0u32; rest.len() + 1];
    for i in (0..rest.len()).rev() {
        cost[i] = cost[i + 1] + estimate(std::slice::from_ref(&rest[i]));
        turns[i] = turns[i + 1] + u32::from(rest[i].role == Role::Assistant);
    }
    let start = (0..rest.len())
        .filter(|&i| rest[i].role != Role::Tool)
        .find(|&i| fixed + cost[i] <= budget && turns[i] <= keep_turns)
        .unwrap_or(rest.len());
    if start > 0 {
        out.push(Message::user(marker(start)));
    }
    out.extend_from_slice(&rest[start..]);
    out.push(Message::user(task));
    out
}

fn marker(dropped: usize) -> String {
    format!(
        "{CARRY_MARKER} {dropped} message(s) of your earlier work here were left out to stay \
         within the context budget; the files you changed are in the workspace]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolCall;

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
        // Keeping no turn whole compacts every tool output (probe 17: it compacted none).
        let mut all = before.clone();
        assert_eq!(compact(&mut all, 500, 0), 5);
        // Keeping more turns than there are compacts none.
        let mut none = before.clone();
        assert_eq!(compact(&mut none, 500, 9), 0);
    }

    fn exchange(i: usize, size: usize) -> Vec<Message> {
        let id = format!("c{i}");
        vec![
            Message::assistant(
                "",
                vec![ToolCall::new(&id, "read_file", serde_json::json!({}))],
            ),
            Message::tool(&id, "r".repeat(size)),
            Message::assistant(format!("reply {i}"), vec![]),
        ]
    }

    #[test]
    fn a_short_conversation_is_carried_whole_with_the_new_system_and_task() {
        let mut h = vec![Message::system("old"), Message::user("task 1")];
        h.extend(exchange(1, 10));
        let out = carry(&h, "new", "task 2", 10_000, 10);
        assert_eq!(out[0], Message::system("new"));
        assert_eq!(&out[1..5], &h[1..5]);
        assert_eq!(out.last(), Some(&Message::user("task 2")));
        assert_eq!(out.len(), 6);
    }

    #[test]
    fn a_long_conversation_keeps_the_first_task_and_the_latest_whole_turns() {
        let mut h = vec![Message::system("sys"), Message::user("task 1")];
        for i in 0..20 {
            h.extend(exchange(i, 400));
            h.push(Message::user(format!("task {}", i + 2)));
        }
        let budget = 1_000;
        let out = carry(&h, "sys", "next", budget, 100);
        assert!(estimate(&out) <= budget, "{} > {budget}", estimate(&out));
        assert_eq!(out[1], Message::user("task 1"));
        assert!(out[2].content.starts_with(CARRY_MARKER), "{:?}", out[2]);
        assert!(
            out.iter().any(|m| m.content == "reply 19"),
            "the latest turn is kept"
        );
        // Every kept call still has its result right after it.
        for (i, m) in out.iter().enumerate() {
            for c in &m.tool_calls {
                assert_eq!(out[i + 1].tool_call_id.as_deref(), Some(c.id.as_str()));
            }
            if m.role == Role::Tool {
                assert!(
                    !out[i - 1].tool_calls.is_empty(),
                    "a result without its call"
                );
            }
        }
        // The turn bound applies too.
        let out = carry(&h, "sys", "next", u64::MAX, 4);
        let turns = out.iter().filter(|m| m.role == Role::Assistant).count();
        assert!(turns <= 4, "{turns}");
        assert!(out[2].content.starts_with(CARRY_MARKER));
    }

    #[test]
    fn a_huge_tool_result_goes_with_its_call_and_nothing_fitting_leaves_the_frame() {
        let mut h = vec![Message::system("sys"), Message::user("task 1")];
        h.extend(exchange(1, 100_000));
        let out = carry(&h, "sys", "next", 100, 10);
        assert_eq!(out.len(), 5, "{out:?}");
        assert!(out[2].content.starts_with(CARRY_MARKER));
        assert_eq!(
            out[3].content, "reply 1",
            "call and result dropped together"
        );
        let out = carry(&h, "sys", "next", 10, 10);
        assert_eq!(out.len(), 4, "{out:?}");
        assert!(out[2].content.starts_with(CARRY_MARKER));
    }
}

//! The conversation rules the real APIs enforce (and answer with a 400 when broken),
//! checked on request bodies a test server recorded.
//!
//! OpenAI Chat Completions: an assistant message with `tool_calls` is followed by one
//! `tool` message per call id, before any other role; a `tool` message answers a call of
//! the assistant message right before its run of tool messages; arguments are strings.
//! Anthropic Messages: roles alternate starting with `user`; every content block list is
//! non-empty; no text block is empty or whitespace-only; in a user message the
//! `tool_result` blocks come first and answer exactly the previous assistant's
//! `tool_use` ids.

use std::collections::BTreeSet;

use serde_json::Value;

fn texts(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Every rule an OpenAI-format body breaks (empty when it is well-formed).
pub fn openai_violations(body: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let msgs = texts(&body["messages"]);
    if msgs.is_empty() {
        bad.push("no messages".to_owned());
    }
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        let role = m["role"].as_str().unwrap_or("");
        match role {
            "assistant" if m.get("tool_calls").is_some_and(|c| !c.is_null()) => {
                let calls = texts(&m["tool_calls"]);
                let mut ids = BTreeSet::new();
                for c in calls {
                    let id = c["id"].as_str().unwrap_or("");
                    if id.is_empty() || !ids.insert(id.to_owned()) {
                        bad.push(format!(
                            "message {i}: missing or repeated tool call id `{id}`"
                        ));
                    }
                    if !c["function"]["arguments"].is_string() {
                        bad.push(format!("message {i}: arguments of `{id}` are not a string"));
                    }
                }
                let mut answered = BTreeSet::new();
                let mut j = i + 1;
                while j < msgs.len() && msgs[j]["role"] == "tool" {
                    let id = msgs[j]["tool_call_id"].as_str().unwrap_or("").to_owned();
                    if !ids.contains(&id) {
                        bad.push(format!("message {j}: tool result for unknown call `{id}`"));
                    }
                    answered.insert(id);
                    j += 1;
                }
                for missing in ids.difference(&answered) {
                    bad.push(format!(
                        "message {i}: call `{missing}` is not answered right after it (next: {})",
                        msgs.get(j)
                            .map(|m| m["role"].to_string())
                            .unwrap_or_default()
                    ));
                }
                i = j;
                continue;
            }
            "tool" => bad.push(format!("message {i}: tool result without a call before it")),
            "assistant" => {
                if !m["content"].is_string() {
                    bad.push(format!("message {i}: assistant without content or calls"));
                }
            }
            "system" | "user" | "developer" => {}
            other => bad.push(format!("message {i}: unknown role `{other}`")),
        }
        i += 1;
    }
    bad
}

/// Every rule an Anthropic-format body breaks (empty when it is well-formed).
pub fn anthropic_violations(body: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let msgs = texts(&body["messages"]);
    if msgs.is_empty() {
        bad.push("no messages".to_owned());
    }
    let mut expect_results: BTreeSet<String> = BTreeSet::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if role != want {
            bad.push(format!("message {i}: role `{role}`, expected `{want}`"));
        }
        let blocks = match &m["content"] {
            Value::String(s) => {
                if s.trim().is_empty() {
                    bad.push(format!("message {i}: empty string content"));
                }
                Vec::new()
            }
            Value::Array(b) => b.clone(),
            _ => {
                bad.push(format!("message {i}: content is neither text nor blocks"));
                Vec::new()
            }
        };
        if m["content"].is_array() && blocks.is_empty() {
            bad.push(format!("message {i}: no content blocks"));
        }
        let mut seen_other = false;
        let mut results = BTreeSet::new();
        let mut uses = BTreeSet::new();
        for (k, b) in blocks.iter().enumerate() {
            match b["type"].as_str().unwrap_or("") {
                "text" => {
                    seen_other = true;
                    if b["text"].as_str().is_none_or(|t| t.trim().is_empty()) {
                        bad.push(format!("message {i} block {k}: empty or blank text block"));
                    }
                }
                "tool_result" => {
                    if role != "user" {
                        bad.push(format!(
                            "message {i} block {k}: tool_result outside a user turn"
                        ));
                    }
                    if seen_other {
                        bad.push(format!(
                            "message {i} block {k}: tool_result after another block"
                        ));
                    }
                    if let Some(c) = b.get("content")
                        && c.as_str().is_some_and(|t| t.is_empty())
                    {
                        bad.push(format!("message {i} block {k}: empty tool_result content"));
                    }
                    results.insert(b["tool_use_id"].as_str().unwrap_or("").to_owned());
                }
                "tool_use" => {
                    seen_other = true;
                    if role != "assistant" {
                        bad.push(format!(
                            "message {i} block {k}: tool_use outside an assistant turn"
                        ));
                    }
                    if !b["input"].is_object() {
                        bad.push(format!(
                            "message {i} block {k}: tool_use input is not an object"
                        ));
                    }
                    uses.insert(b["id"].as_str().unwrap_or("").to_owned());
                }
                kind @ ("thinking" | "redacted_thinking") => {
                    // Extended thinking: only in assistant turns, before any text or
                    // tool_use of that turn, and signed (or encrypted) by the API.
                    if role != "assistant" {
                        bad.push(format!(
                            "message {i} block {k}: {kind} outside an assistant turn"
                        ));
                    }
                    if seen_other {
                        bad.push(format!("message {i} block {k}: {kind} after another block"));
                    }
                    let proof = if kind == "thinking" {
                        "signature"
                    } else {
                        "data"
                    };
                    if b[proof].as_str().is_none_or(str::is_empty) {
                        bad.push(format!("message {i} block {k}: {kind} without its {proof}"));
                    }
                }
                other => {
                    seen_other = true;
                    bad.push(format!(
                        "message {i} block {k}: unexpected block type `{other}`"
                    ));
                }
            }
        }
        if role == "user" && results != expect_results {
            bad.push(format!(
                "message {i}: tool results {results:?}, the previous turn called {expect_results:?}"
            ));
        }
        expect_results = if role == "assistant" {
            uses
        } else {
            BTreeSet::new()
        };
    }
    if !expect_results.is_empty() {
        bad.push(format!(
            "the last turn's calls {expect_results:?} are not answered"
        ));
    }
    bad
}

/// Panics with the broken rules of every recorded body.
pub fn assert_well_formed(bodies: &[Value], check: fn(&Value) -> Vec<String>) {
    for (n, body) in bodies.iter().enumerate() {
        let bad = check(body);
        assert!(
            bad.is_empty(),
            "request {n} breaks the API's rules: {bad:#?}\n{}",
            serde_json::to_string_pretty(&body["messages"]).unwrap()
        );
    }
}

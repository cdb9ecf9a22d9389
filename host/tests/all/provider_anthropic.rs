//! The Anthropic Messages provider against a local HTTP server speaking the wire format.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::http::{Chunk, Reply, TestServer, build_provider};
use crewbox::unstable::provider::{
    AgentLabel, BreakerState, Breakers, CompletionRequest, Message, Provider, ProviderError,
    StopReason, Thought, ToolCall, ToolSpec, Usage,
};
use pretty_assertions::assert_eq;
use serde_json::json;

const KEY: &str = "sk-ant-test-secret-42";

fn provider(server: &TestServer, extra: &str) -> (Arc<dyn Provider>, Breakers) {
    let text = format!(
        "kind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-test\"\nmax_tokens = 1024\n\
         stall_timeout_s = 0.5\ntimeout_s = 5\nretry_base_ms = 20\n{extra}",
        server.url
    );
    build_provider("claude", &text, &[("ANTHROPIC_API_KEY", KEY)]).expect("build")
}

fn request() -> CompletionRequest {
    CompletionRequest {
        progress: None,
        agent: AgentLabel {
            id: "a1".into(),
            name: "executor".into(),
            role: "executor".into(),
        },
        turn: 2,
        messages: vec![
            Message::system("You write code."),
            Message::user("Create hello.txt"),
            Message::assistant(
                "On it.",
                vec![ToolCall::new(
                    "toolu_1",
                    "write_file",
                    json!({"path": "hello.txt"}),
                )],
            ),
            Message::tool("toolu_1", "wrote 5 bytes"),
            Message::user("Steering: also add a newline."),
        ],
        tools: vec![ToolSpec {
            name: "write_file".into(),
            description: "Write a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]
        .into(),
        max_tokens: None,
        workspace: None,
    }
}

fn message(content: serde_json::Value, stop: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 30, "output_tokens": 9}
        }),
    )
}

#[tokio::test]
async fn non_streaming_request_shape_and_tool_use_reply() {
    let server = TestServer::start(vec![message(
        json!([
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "hello.txt"}}
        ]),
        "tool_use",
    )])
    .await;
    let (p, _) = provider(&server, "stream = false\n");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!(c.text, "Reading it.");
    assert_eq!(c.stop, StopReason::ToolUse);
    assert_eq!(
        c.tool_calls,
        vec![ToolCall::new(
            "toolu_2",
            "read_file",
            json!({"path": "hello.txt"})
        )]
    );
    assert_eq!(
        c.usage,
        Usage {
            input: 30,
            output: 9
        }
    );

    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(
        r.json(),
        json!({
            "model": "claude-test",
            "max_tokens": 1024,
            "system": "You write code.",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Create hello.txt"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "On it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {"path": "hello.txt"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "wrote 5 bytes"},
                    {"type": "text", "text": "Steering: also add a newline."}
                ]}
            ],
            "tools": [{"name": "write_file", "description": "Write a file",
                       "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
        })
    );
}

fn stream_events() -> Vec<(&'static str, serde_json::Value)> {
    vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "content": [], "model": "claude-test", "stop_reason": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Writ"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ing."}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_9", "name": "write_file", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"a"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": ".txt\"}"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 17}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

#[tokio::test]
async fn streamed_text_and_tool_use() {
    let server = TestServer::start(vec![Reply::sse_events(&stream_events())]).await;
    let (p, _) = provider(&server, "");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!(c.text, "Writing.");
    assert_eq!(c.stop, StopReason::ToolUse);
    assert_eq!(
        c.tool_calls,
        vec![ToolCall::new(
            "toolu_9",
            "write_file",
            json!({"path": "a.txt"})
        )]
    );
    assert_eq!(
        c.usage,
        Usage {
            input: 25,
            output: 17
        }
    );
    assert_eq!(server.requests()[0].json()["stream"], json!(true));
}

#[tokio::test]
async fn overloaded_error_event_is_retried() {
    let server = TestServer::start(vec![
        Reply::sse_events(&[
            stream_events()[0].clone(),
            (
                "error",
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ),
        ]),
        Reply::sse_events(&stream_events()),
    ])
    .await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Overloaded { status: 529, .. }),
        "{err}"
    );
    let (p, _) = provider(&server, "");
    assert_eq!(p.complete(&request()).await.unwrap().text, "Writing.");
}

/// How long a call took whose first attempt got `refusal` with `Retry-After: retry_after`.
async fn time_after(refusal: Reply, retry_after: &str) -> Duration {
    let server = TestServer::start(vec![
        refusal.header("retry-after", retry_after),
        message(json!([{"type": "text", "text": "ok"}]), "end_turn"),
    ])
    .await;
    let (p, _) = provider(&server, "stream = false\n");
    let t0 = Instant::now();
    assert_eq!(p.complete(&request()).await.unwrap().text, "ok");
    t0.elapsed()
}

#[tokio::test]
async fn rate_limit_with_http_date_retry_after_then_success() {
    let at = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(2));
    let refusal = Reply::json(
        429,
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}),
    );
    // The date has one-second resolution: at least ~1 s of the 2 s must have been waited.
    let waited = time_after(refusal, &at).await;
    assert!(waited >= Duration::from_millis(900), "{waited:?}");
}

#[tokio::test]
async fn retry_after_is_honoured_on_529() {
    let refusal = Reply::json(
        529,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let waited = time_after(refusal, "1").await;
    assert!(
        waited >= Duration::from_secs(1),
        "Retry-After on 529 was not honoured: {waited:?}"
    );
}

#[tokio::test]
async fn bad_key_is_rejected_once() {
    let server = TestServer::start(vec![Reply::json(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    )])
    .await;
    let (p, _) = provider(&server, "stream = false\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Rejected { status: 401, message } if message == "invalid x-api-key"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn stream_without_message_stop_is_a_connection_error() {
    let events = stream_events();
    let mut chunks: Vec<Chunk> = events[..5]
        .iter()
        .map(|(e, d)| Chunk::Data(format!("event: {e}\ndata: {d}\n\n")))
        .collect();
    chunks.push(Chunk::Drop);
    let server = TestServer::start(vec![Reply::Chunked {
        status: 200,
        chunks,
    }])
    .await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(matches!(err, ProviderError::Connection(_)), "{err}");
}

#[tokio::test]
async fn stalled_stream_times_out_and_counts_for_the_breaker() {
    let stalled = || Reply::Chunked {
        status: 200,
        chunks: vec![
            Chunk::Data(format!(
                "event: message_start\ndata: {}\n\n",
                stream_events()[0].1
            )),
            Chunk::Pause(Duration::from_secs(5)),
        ],
    };
    let server = TestServer::start((0..5).map(|_| stalled()).collect()).await;
    let (p, breakers) = provider(&server, "max_retries = 4\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::CircuitOpen { opened_now: true, cause, .. } if cause.contains("stalled")),
        "{err}"
    );
    assert_eq!(breakers.snapshot()[0].state, BreakerState::Open);
    assert!(matches!(
        p.complete(&request()).await,
        Err(ProviderError::CircuitOpen { cause, .. }) if cause.contains("stalled")
    ));
}

#[tokio::test]
async fn missing_key_variable_is_a_config_error() {
    let text = "kind = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"MY_ANTHROPIC_KEY\"\n";
    let err = build_provider("claude", text, &[]).err().expect("no key");
    assert!(
        matches!(&err, ProviderError::Config(m) if m.contains("`MY_ANTHROPIC_KEY`")),
        "{err}"
    );
}

/// The `messages` of the request sent for `history` (checked against the API's rules).
async fn sent_messages(history: Vec<Message>) -> serde_json::Value {
    let server = TestServer::start(vec![message(
        json!([{"type": "text", "text": "ok"}]),
        "end_turn",
    )])
    .await;
    let (p, _) = provider(&server, "stream = false\n");
    let mut req = request();
    req.messages = history;
    p.complete(&req).await.unwrap();
    let body = server.requests()[0].json();
    crate::support::wire::assert_well_formed(
        std::slice::from_ref(&body),
        crate::support::wire::anthropic_violations,
    );
    body["messages"].clone()
}

#[tokio::test]
async fn never_sends_blank_text_and_marks_tool_errors() {
    // An empty assistant turn, a fix round after it, a whitespace-only reply with a call
    // that failed, a blank steer: what fix rounds, revisions and nudges leave behind.
    let sent = sent_messages(vec![
        Message::system("sys"),
        Message::user("task"),
        Message::assistant("", vec![]),
        Message::user("Validation failed: fix it."),
        Message::assistant(
            "  \n",
            vec![ToolCall::new("toolu_1", "write_file", json!({"path": "a"}))],
        ),
        Message::tool_error("toolu_1", "error: permission denied"),
        Message::user("   "),
        Message::tool("stray", ""),
    ])
    .await;
    assert_eq!(
        sent,
        json!([
            {"role": "user", "content": [
                {"type": "text", "text": "task"},
                {"type": "text", "text": "Validation failed: fix it."}
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {"path": "a"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "error: permission denied", "is_error": true},
                {"type": "text", "text": "[result of tool call stray]\n"}
            ]}
        ])
    );
}

#[tokio::test]
async fn a_steer_between_tool_results_is_sent_after_all_of_them() {
    let sent = sent_messages(vec![
        Message::user("task"),
        Message::assistant(
            "",
            vec![
                ToolCall::new("t1", "list_dir", json!({})),
                ToolCall::new("t2", "read_file", json!({"path": "a"})),
            ],
        ),
        Message::tool("t1", "a"),
        Message::user("Message from the operator: hurry"),
        Message::tool("t2", "alpha"),
    ])
    .await;
    assert_eq!(
        sent[2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "t1", "content": "a"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "alpha"},
            {"type": "text", "text": "Message from the operator: hurry"}
        ])
    );
}

#[tokio::test]
async fn a_200_error_body_is_an_error_not_an_empty_reply() {
    let server = TestServer::start(vec![Reply::json(
        200,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    )])
    .await;
    let (p, _) = provider(&server, "stream = false\nmax_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Overloaded { status: 529, message, .. } if message == "Overloaded"),
        "{err}"
    );
}

#[tokio::test]
async fn a_rate_limit_error_event_mid_stream_is_a_rate_limit() {
    let server = TestServer::start(vec![Reply::sse_events(&[
        stream_events()[0].clone(),
        (
            "error",
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "Number of request tokens has exceeded your rate limit"}}),
        ),
    ])])
    .await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::RateLimited { message, .. } if message.contains("rate limit")),
        "{err}"
    );
}

#[tokio::test]
async fn the_key_never_reaches_an_error_from_an_error_event() {
    let server = TestServer::start(vec![Reply::sse_events(&[(
        "error",
        json!({"type": "error", "error": {"type": "api_error", "message": format!("bad key {KEY}")}}),
    )])])
    .await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err().to_string();
    assert!(!err.contains(KEY) && err.contains("[redacted]"), "{err}");
}

#[tokio::test]
async fn thinking_blocks_are_reasoning_not_the_answer() {
    let server = TestServer::start(vec![message(
        json!([
            {"type": "thinking", "thinking": "The user wants a file.", "signature": "sig-abc"},
            {"type": "redacted_thinking", "data": "EncryptedBlob=="},
            {"type": "text", "text": "Writing it."},
            {"type": "tool_use", "id": "toolu_2", "name": "write_file", "input": {"path": "b.txt"}}
        ]),
        "tool_use",
    )])
    .await;
    let (p, _) = provider(&server, "stream = false\n");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!(c.text, "Writing it.");
    assert_eq!(c.reasoning, "The user wants a file.[redacted thinking]");
    assert_eq!(c.tool_calls.len(), 1);
    assert_eq!(c.stop, StopReason::ToolUse);
    assert_eq!(
        c.thoughts,
        vec![
            Thought::Thinking {
                thinking: "The user wants a file.".into(),
                signature: "sig-abc".into()
            },
            Thought::RedactedThinking {
                data: "EncryptedBlob==".into()
            },
        ]
    );
}

/// With extended thinking on, a tool-use turn's thinking blocks go back unchanged
/// (signature and encrypted data included), before its text and calls, as the API
/// requires when the tool results come back; the thinking budget rides on top of the
/// answer's `max_tokens`.
#[tokio::test]
async fn thinking_blocks_go_back_signed_with_the_tool_results() {
    let server = TestServer::start(vec![
        message(
            json!([
                {"type": "thinking", "thinking": "Need b.txt.", "signature": "sig-1"},
                {"type": "redacted_thinking", "data": "Blob=="},
                {"type": "tool_use", "id": "toolu_9", "name": "write_file", "input": {"path": "b.txt"}}
            ]),
            "tool_use",
        ),
        message(json!([{"type": "text", "text": "Done."}]), "end_turn"),
    ])
    .await;
    let (p, _) = provider(&server, "stream = false\nthinking_budget_tokens = 2048\n");
    let mut req = request();
    req.messages.truncate(2);
    let first = p.complete(&req).await.unwrap();
    req.messages.push(Message::from_reply(&first));
    req.messages.push(Message::tool("toolu_9", "wrote 3 bytes"));
    p.complete(&req).await.unwrap();
    let sent = server.requests();
    crate::support::wire::assert_well_formed(
        &sent.iter().map(|r| r.json()).collect::<Vec<_>>(),
        crate::support::wire::anthropic_violations,
    );
    let body = sent[1].json();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(
        body["max_tokens"],
        json!(1024 + 2048),
        "answer cap + budget"
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Need b.txt.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "Blob=="},
            {"type": "tool_use", "id": "toolu_9", "name": "write_file", "input": {"path": "b.txt"}}
        ]})
    );
    assert_eq!(body["messages"][2]["content"][0]["tool_use_id"], "toolu_9");
}

/// A thinking block a compatible server did not sign is shown as reasoning but not
/// sent back (the API could not verify it), and without a budget no `thinking` is
/// asked for.
#[tokio::test]
async fn unsigned_thinking_is_not_sent_back() {
    let mut history = request().messages;
    history.truncate(2);
    history.push(Message {
        thoughts: vec![Thought::Thinking {
            thinking: "unsigned".into(),
            signature: String::new(),
        }],
        ..Message::assistant("", vec![ToolCall::new("t1", "write_file", json!({}))])
    });
    history.push(Message::tool("t1", "ok"));
    let sent = sent_messages(history).await;
    assert_eq!(
        sent[1]["content"],
        json!([{"type": "tool_use", "id": "t1", "name": "write_file", "input": {}}])
    );
}

#[tokio::test]
async fn streamed_thinking_deltas_are_reasoning_and_the_signed_block_is_kept() {
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant",
            "content": [], "model": "claude-test", "stop_reason": null, "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "think."}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
    ];
    // A thinking-only reply: no text, no call (the agent loop then sends its one
    // answer-now nudge, as for any reasoning-only reply).
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
        "usage": {"output_tokens": 12}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let server = TestServer::start(vec![Reply::sse_events(&events)]).await;
    let (p, _) = provider(&server, "");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!(c.reasoning, "Let me think.");
    assert_eq!(c.text, "");
    assert!(c.tool_calls.is_empty());
    assert_eq!(
        c.thoughts,
        vec![Thought::Thinking {
            thinking: "Let me think.".into(),
            signature: "EqQBCgIYAhIM".into()
        }],
        "the streamed block is kept whole, its signature from the signature_delta"
    );
    assert!(
        server.requests()[0].json().get("thinking").is_none(),
        "no thinking asked for without a budget"
    );
}

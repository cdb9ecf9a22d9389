//! The OpenAI-compatible provider against a local HTTP server speaking the wire format.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::http::{Chunk, Reply, TestServer, build_provider};
use crewbox::unstable::provider::{
    AgentLabel, BreakerState, Breakers, CompletionRequest, Message, Provider, ProviderError,
    StopReason, ToolCall, ToolSpec, Usage,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const KEY: &str = "sk-test-secret-0123456789";

fn provider(server: &TestServer, extra: &str) -> (Arc<dyn Provider>, Breakers) {
    let text = format!(
        "kind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"gpt-test\"\napi_key_env = \"TEST_KEY\"\n\
         stall_timeout_s = 0.5\ntimeout_s = 5\nretry_base_ms = 20\n{extra}",
        server.url
    );
    build_provider("local", &text, &[("TEST_KEY", KEY)]).expect("build")
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
                "",
                vec![ToolCall::new(
                    "call_9",
                    "write_file",
                    json!({"path": "hello.txt"}),
                )],
            ),
            Message::tool("call_9", "wrote 5 bytes"),
        ],
        tools: vec![ToolSpec {
            name: "write_file".into(),
            description: "Write a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]
        .into(),
        max_tokens: Some(256),
        workspace: None,
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        .to_string()
}

fn text_response(text: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}
        }),
    )
}

#[tokio::test]
async fn non_streaming_request_has_the_wire_shape_and_reply_is_read() {
    let server = TestServer::start(vec![text_response("Done.")]).await;
    let (p, _) = provider(&server, "stream = false\n");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!(c.text, "Done.");
    assert_eq!(
        c.usage,
        Usage {
            input: 40,
            output: 3
        }
    );
    assert_eq!(c.stop, StopReason::EndTurn);

    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(
        reqs[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        reqs[0].json(),
        json!({
            "model": "gpt-test",
            "stream": false,
            "max_completion_tokens": 256,
            "messages": [
                {"role": "system", "content": "You write code."},
                {"role": "user", "content": "Create hello.txt"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_9", "type": "function", "function": {"name": "write_file", "arguments": "{\"path\":\"hello.txt\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_9", "content": "wrote 5 bytes"}
            ],
            "tools": [{"type": "function", "function": {
                "name": "write_file", "description": "Write a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}
            }}]
        })
    );
}

#[tokio::test]
async fn no_authorization_header_without_a_key() {
    let server = TestServer::start(vec![text_response("hi")]).await;
    let text = format!(
        "kind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"llama\"\nstream = false\n",
        server.url
    );
    let (p, _) = build_provider("ollama", &text, &[]).unwrap();
    assert_eq!(p.complete(&request()).await.unwrap().text, "hi");
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn non_streaming_tool_calls() {
    let server = TestServer::start(vec![Reply::json(
        200,
        json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}}]}}]}),
    )])
    .await;
    let (p, _) = provider(&server, "stream = false\n");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!(c.stop, StopReason::ToolUse);
    assert_eq!(
        c.tool_calls,
        vec![ToolCall::new(
            "call_a",
            "read_file",
            json!({"path": "a.rs"})
        )]
    );
    // No usage reported: estimated from the texts.
    assert!(c.usage.input > 0);
}

#[tokio::test]
async fn streamed_text_and_usage() {
    let server = TestServer::start(vec![Reply::sse(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo"}), None),
        chunk(json!({}), Some("stop")),
        json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 2}}).to_string(),
        "[DONE]".into(),
    ])])
    .await;
    let (p, _) = provider(&server, "");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!(
        (c.text.as_str(), c.stop, c.usage),
        (
            "Hello",
            StopReason::EndTurn,
            Usage {
                input: 12,
                output: 2
            }
        )
    );
    let body = server.requests()[0].json();
    assert_eq!(body["stream"], json!(true));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn streamed_tool_call_fragments_are_assembled_by_index() {
    let server = TestServer::start(vec![Reply::sse(&[
        chunk(json!({"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_x", "type": "function", "function": {"name": "write_file", "arguments": ""}}
        ]}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]}), None),
        chunk(json!({"tool_calls": [
            {"index": 1, "id": "call_y", "type": "function", "function": {"name": "finish", "arguments": "{}"}}
        ]}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "th\":\"b.txt\"}"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
        "[DONE]".into(),
    ])])
    .await;
    let (p, _) = provider(&server, "");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!(c.stop, StopReason::ToolUse);
    assert_eq!(
        c.tool_calls,
        vec![
            ToolCall::new("call_x", "write_file", json!({"path": "b.txt"})),
            ToolCall::new("call_y", "finish", json!({})),
        ]
    );
}

/// How long a call took whose first attempt got `refusal` (which says `Retry-After: 1`).
async fn time_after(refusal: Reply) -> Duration {
    let server = TestServer::start(vec![
        refusal.header("retry-after", "1"),
        text_response("after the wait"),
    ])
    .await;
    let (p, _) = provider(&server, "stream = false\n");
    let t0 = Instant::now();
    assert_eq!(p.complete(&request()).await.unwrap().text, "after the wait");
    assert_eq!(server.requests().len(), 2);
    t0.elapsed()
}

#[tokio::test]
async fn retry_after_is_honoured_on_429_and_503() {
    for refusal in [
        Reply::json(429, json!({"error": {"message": "slow down"}})),
        Reply::text(503, "busy"),
    ] {
        let waited = time_after(refusal).await;
        assert!(
            waited >= Duration::from_secs(1),
            "Retry-After was not honoured: {waited:?}"
        );
    }
}

#[tokio::test]
async fn server_error_then_success() {
    let server = TestServer::start(vec![Reply::text(500, "boom"), text_response("ok")]).await;
    let (p, _) = provider(&server, "stream = false\n");
    assert_eq!(p.complete(&request()).await.unwrap().text, "ok");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_never_shows_the_key() {
    let server = TestServer::start(vec![
        Reply::json(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}),
        ),
        text_response("must not be reached"),
    ])
    .await;
    let (p, breakers) = provider(&server, "stream = false\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Rejected { status: 401, .. }),
        "{err}"
    );
    assert!(!err.to_string().contains(KEY), "{err}");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(breakers.snapshot()[0].consecutive_failures, 0);
}

#[tokio::test]
async fn malformed_json_is_a_bad_response() {
    let server = TestServer::start(vec![Reply::text(200, "{\"choices\": [ oops")]).await;
    let (p, _) = provider(&server, "stream = false\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(matches!(err, ProviderError::BadResponse(_)), "{err}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn malformed_stream_chunk_is_a_bad_response() {
    let server = TestServer::start(vec![Reply::sse(&["{not json".into()])]).await;
    let (p, _) = provider(&server, "");
    assert!(matches!(
        p.complete(&request()).await,
        Err(ProviderError::BadResponse(_))
    ));
}

#[tokio::test]
async fn connection_dropped_mid_stream_is_retried() {
    let server = TestServer::start(vec![
        Reply::Chunked {
            status: 200,
            chunks: vec![
                Chunk::Data(format!(
                    "data: {}\n\n",
                    chunk(json!({"content": "Hal"}), None)
                )),
                Chunk::Drop,
            ],
        },
        Reply::sse(&[
            chunk(json!({"content": "Whole"}), Some("stop")),
            "[DONE]".into(),
        ]),
    ])
    .await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(matches!(err, ProviderError::Connection(_)), "{err}");
    // With retries the second, complete stream answers.
    let (p, _) = provider(&server, "");
    assert_eq!(p.complete(&request()).await.unwrap().text, "Whole");
}

#[tokio::test]
async fn stalled_stream_times_out() {
    let server = TestServer::start(vec![Reply::Chunked {
        status: 200,
        chunks: vec![
            Chunk::Data(format!(
                "data: {}\n\n",
                chunk(json!({"content": "thinking"}), None)
            )),
            Chunk::Pause(Duration::from_secs(5)),
        ],
    }])
    .await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let t0 = Instant::now();
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Timeout(m) if m.contains("stalled")),
        "{err}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

#[tokio::test]
async fn refused_connection_is_a_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let text =
        format!("kind = \"openai\"\nbase_url = \"{url}/v1\"\nmodel = \"m\"\nmax_retries = 0\n");
    let (p, _) = build_provider("down", &text, &[]).unwrap();
    assert!(matches!(
        p.complete(&request()).await,
        Err(ProviderError::Connection(_))
    ));
}

#[tokio::test]
async fn breaker_opens_after_five_failures_and_names_the_cause() {
    let server = TestServer::start((0..10).map(|_| Reply::text(503, "overloaded")).collect()).await;
    // One call with four retries = five failed attempts.
    let (p, breakers) = provider(&server, "stream = false\nmax_retries = 4\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::CircuitOpen { key, cause, opened_now: true, .. }
            if key == "local/gpt-test" && cause.contains("503") && cause.contains("overloaded")),
        "the failure that opens the circuit is reported as the opening, naming it: {err}"
    );
    let snap = breakers.snapshot();
    assert_eq!(snap.len(), 1);
    assert_eq!(snap[0].key, "local/gpt-test");
    assert_eq!(snap[0].state, BreakerState::Open);
    assert_eq!(snap[0].consecutive_failures, 5);
    assert!(snap[0].opened_at.is_some());
    // Refused at once: the server sees nothing more, and the error still says why.
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::CircuitOpen { key, cause, opened_now: false, .. }
            if key == "local/gpt-test" && cause.contains("overloaded")),
        "{err}"
    );
    assert!(err.to_string().contains("overloaded"), "{err}");
    assert_eq!(server.requests().len(), 5);
}

// What OpenAI-compatible servers that are not OpenAI send.

#[tokio::test]
async fn null_tool_calls_and_null_choices_are_accepted() {
    // SGLang sends `"tool_calls": null` in deltas and messages; vLLM ends with a usage
    // chunk whose `choices` is null.
    let server = TestServer::start(vec![
        Reply::sse(&[
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi", "tool_calls": null}, "finish_reason": null}]}).to_string(),
            json!({"choices": [{"index": 0, "delta": {"content": null, "tool_calls": null}, "finish_reason": "stop"}]}).to_string(),
            json!({"choices": null, "usage": {"prompt_tokens": 5, "completion_tokens": 1}}).to_string(),
            "[DONE]".into(),
        ]),
        Reply::json(
            200,
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok", "tool_calls": null}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 7, "completion_tokens": null}}),
        ),
    ])
    .await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!(
        (c.text.as_str(), c.usage),
        (
            "Hi",
            Usage {
                input: 5,
                output: 1
            }
        )
    );
    let (p, _) = provider(&server, "stream = false\nmax_retries = 0\n");
    let c = p.complete(&request()).await.unwrap();
    assert_eq!((c.text.as_str(), c.usage.input), ("ok", 7));
}

/// The tool calls a streamed reply made of `chunks` comes to.
async fn streamed_calls(chunks: Vec<String>) -> Vec<ToolCall> {
    let server = TestServer::start(vec![Reply::sse(&chunks)]).await;
    let (p, _) = provider(&server, "");
    p.complete(&request()).await.unwrap().tool_calls
}

fn list_then_read(list: &str, read: &str) -> Vec<ToolCall> {
    vec![
        ToolCall::new(list, "list_dir", json!({"path": "."})),
        ToolCall::new(read, "read_file", json!({"path": "a"})),
    ]
}

#[tokio::test]
async fn parallel_calls_streamed_without_index_stay_apart() {
    // Gemini's compatible endpoint: each call whole in its own chunk, ids, no `index`.
    let calls = streamed_calls(vec![
        chunk(json!({"role": "assistant", "tool_calls": [
            {"id": "g1", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\":\".\"}"}}
        ]}), None),
        chunk(json!({"tool_calls": [
            {"id": "g2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}
        ]}), Some("tool_calls")),
        "[DONE]".into(),
    ])
    .await;
    assert_eq!(calls, list_then_read("g1", "g2"));
}

#[tokio::test]
async fn parallel_calls_all_at_index_0_with_distinct_ids_stay_apart() {
    // Reported for Ollama: every call carries `index: 0`, told apart only by its id.
    let calls = streamed_calls(vec![
        chunk(json!({"tool_calls": [
            {"index": 0, "id": "o1", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\":"}}
        ]}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\".\"}"}}]}), None),
        chunk(json!({"tool_calls": [
            {"index": 0, "id": "o2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}}
        ]}), Some("tool_calls")),
        "[DONE]".into(),
    ])
    .await;
    assert_eq!(calls, list_then_read("o1", "o2"));
}

#[tokio::test]
async fn token_limit_field_can_be_max_tokens_for_servers_that_only_know_it() {
    let server = TestServer::start(vec![text_response("a"), text_response("b")]).await;
    let (p, _) = provider(&server, "stream = false\n");
    p.complete(&request()).await.unwrap();
    let (p, _) = provider(
        &server,
        "stream = false\ntoken_limit_field = \"max_tokens\"\n",
    );
    p.complete(&request()).await.unwrap();
    let bodies: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(bodies[0]["max_completion_tokens"], json!(256));
    assert_eq!(bodies[0].get("max_tokens"), None, "deprecated at OpenAI");
    assert_eq!(bodies[1]["max_tokens"], json!(256));
    assert_eq!(bodies[1].get("max_completion_tokens"), None);
}

#[tokio::test]
async fn invalid_argument_json_is_sent_back_as_an_empty_object() {
    let server = TestServer::start(vec![text_response("ok")]).await;
    let (p, _) = provider(&server, "stream = false\n");
    let mut req = request();
    req.messages[2].tool_calls = vec![ToolCall::from_wire(
        "call_9",
        "write_file",
        "{\"path\": \"hello.t",
    )];
    p.complete(&req).await.unwrap();
    let body = server.requests()[0].json();
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        json!("{}"),
        "never the broken text (llama.cpp answers 500 to every later request)"
    );
}

fn huge_content_stream(len: usize) -> Reply {
    Reply::Chunked {
        status: 200,
        chunks: vec![
            Chunk::Data("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"".into()),
            Chunk::Filler(b'x', len),
            Chunk::Data("\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n".into()),
        ],
    }
}

#[tokio::test]
async fn one_huge_sse_line_is_refused_at_the_default_cap() {
    let server = TestServer::start(vec![huge_content_stream(9 << 20)]).await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::ReplyTooLarge { limit } if limit == 8 << 20),
        "{err}"
    );
    assert!(err.to_string().contains("max_reply_bytes"), "{err}");
}

#[tokio::test]
async fn a_huge_json_reply_is_refused_at_the_configured_cap() {
    let server = TestServer::start(vec![
        Reply::Stream {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![
                Chunk::Data("{\"choices\":[{\"index\":0,\"message\":{\"content\":\"".into()),
                Chunk::Filler(b'y', 2 << 20),
                Chunk::Data("\"},\"finish_reason\":\"stop\"}]}".into()),
            ],
        },
        text_response(&"z".repeat(2 << 20)),
        text_response("small"),
    ])
    .await;
    let (p, _) = provider(&server, "stream = false\nmax_reply_bytes = 1048576\n");
    for _ in 0..2 {
        // Chunked, then with a Content-Length over the cap.
        let err = p.complete(&request()).await.unwrap_err();
        assert!(
            matches!(err, ProviderError::ReplyTooLarge { limit: 1048576 }),
            "{err}"
        );
    }
    assert_eq!(p.complete(&request()).await.unwrap().text, "small");
}

#[tokio::test]
async fn a_200_that_is_not_an_event_stream_says_what_came_instead() {
    let server = TestServer::start(vec![
        Reply::text(200, "<html><body>502 Bad Gateway</body></html>")
            .header("content-type", "text/html"),
        // A server that ignores `stream: true` and answers one JSON document.
        text_response("whole"),
    ])
    .await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::BadResponse(m) if m.contains("text/html") && m.contains("502 Bad Gateway")),
        "{err}"
    );
    assert_eq!(p.complete(&request()).await.unwrap().text, "whole");
}

#[tokio::test]
async fn errors_inside_a_stream_or_a_200_body_name_their_cause() {
    let server = TestServer::start(vec![
        Reply::sse(&[
            chunk(json!({"content": "par"}), None),
            json!({"error": {"message": "Rate limit reached for gpt-test", "type": "requests", "code": "rate_limit_exceeded"}}).to_string(),
        ]),
        Reply::json(
            200,
            json!({"error": {"message": "context too long", "type": "invalid_request_error"}}),
        ),
    ])
    .await;
    let (p, _) = provider(&server, "max_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::RateLimited { message, .. } if message.contains("Rate limit reached")),
        "{err}"
    );
    let (p, _) = provider(&server, "stream = false\nmax_retries = 0\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Rejected { status: 400, message } if message == "context too long"),
        "{err}"
    );
}

#[tokio::test]
async fn the_key_never_reaches_an_error_whatever_path_echoes_it() {
    let echo = format!("invalid key {KEY} for this model");
    let server = TestServer::start(vec![
        Reply::sse(&[json!({"error": {"message": echo, "type": "server_error"}}).to_string()]),
        Reply::json(200, json!({"error": {"message": echo}})),
        Reply::text(200, &format!("{{\"choices\": [ {echo}"))
            .header("content-type", "application/json"),
        Reply::text(400, &echo),
        Reply::text(200, &echo).header("content-type", "text/plain"),
    ])
    .await;
    let (stream, _) = provider(&server, "max_retries = 0\n");
    let (whole, _) = provider(&server, "stream = false\nmax_retries = 0\n");
    for p in [&stream, &whole, &whole, &whole, &stream] {
        let err = p.complete(&request()).await.unwrap_err().to_string();
        assert!(!err.contains(KEY), "{err}");
        assert!(
            err.contains("[redacted]"),
            "the echo was seen and masked: {err}"
        );
    }
    assert_eq!(server.requests().len(), 5);
}

#[tokio::test]
async fn a_validators_model_call_sends_max_completion_tokens() {
    // The criteria judge's budgeted completion goes through the run's provider.
    use crewbox::unstable::engine::ProviderModel;
    use crewbox::unstable::plugin::ModelAccess;
    let server = TestServer::start(vec![text_response("PASS")]).await;
    let (p, _) = provider(&server, "stream = false\n");
    let judge = ProviderModel::new(p, AgentLabel::default());
    let reply = judge
        .complete(Some("judge".into()), "is it done?".into(), Some(300))
        .await
        .unwrap();
    assert_eq!(reply.text, "PASS");
    let body = server.requests()[0].json();
    assert_eq!(body["max_completion_tokens"], json!(300));
    assert_eq!(body.get("max_tokens"), None);
}

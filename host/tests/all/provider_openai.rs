//! The OpenAI-compatible provider against a local HTTP server speaking the wire format.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::http::{Chunk, Reply, TestServer};
use crewbox::provider::{
    AgentLabel, BreakerState, Breakers, BuildContext, CompletionRequest, Message, Provider,
    ProviderConfig, ProviderError, StopReason, ToolCall, ToolSpec, Usage, build,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const KEY: &str = "sk-test-secret-0123456789";

fn provider(server: &TestServer, extra: &str) -> (Arc<dyn Provider>, Breakers) {
    let cfg: ProviderConfig = toml::from_str(&format!(
        "kind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"gpt-test\"\napi_key_env = \"TEST_KEY\"\n\
         stall_timeout_s = 0.5\ntimeout_s = 5\nretry_base_ms = 20\n{extra}",
        server.url
    ))
    .expect("config");
    let breakers = Breakers::default();
    let env_map = HashMap::from([("TEST_KEY".to_owned(), KEY.to_owned())]);
    let env = move |k: &str| env_map.get(k).cloned();
    let ctx = BuildContext {
        breakers: &breakers,
        base_dir: Path::new("."),
        env: &env,
        default_script: "",
        sandbox: &crewbox::sandbox::Sandbox::missing(),
    };
    (
        build("local", &cfg, &ctx)
            .map_err(|e| e.to_string())
            .expect("build"),
        breakers,
    )
}

fn request() -> CompletionRequest {
    CompletionRequest {
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
                vec![ToolCall {
                    id: "call_9".into(),
                    name: "write_file".into(),
                    args: json!({"path": "hello.txt"}),
                }],
            ),
            Message::tool("call_9", "wrote 5 bytes"),
        ],
        tools: vec![ToolSpec {
            name: "write_file".into(),
            description: "Write a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
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
            "max_tokens": 256,
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
    let cfg: ProviderConfig = toml::from_str(&format!(
        "kind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"llama\"\nstream = false\n",
        server.url
    ))
    .unwrap();
    let breakers = Breakers::default();
    let env = |_: &str| None;
    let ctx = BuildContext {
        breakers: &breakers,
        base_dir: Path::new("."),
        env: &env,
        default_script: "",
        sandbox: &crewbox::sandbox::Sandbox::missing(),
    };
    let p = build("ollama", &cfg, &ctx)
        .map_err(|e| e.to_string())
        .unwrap();
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
        vec![ToolCall {
            id: "call_a".into(),
            name: "read_file".into(),
            args: json!({"path": "a.rs"})
        }]
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
            ToolCall {
                id: "call_x".into(),
                name: "write_file".into(),
                args: json!({"path": "b.txt"})
            },
            ToolCall {
                id: "call_y".into(),
                name: "finish".into(),
                args: json!({})
            },
        ]
    );
}

#[tokio::test]
async fn rate_limit_with_retry_after_then_success() {
    let server = TestServer::start(vec![
        Reply::json(429, json!({"error": {"message": "slow down"}})).header("retry-after", "1"),
        text_response("after the wait"),
    ])
    .await;
    let (p, _) = provider(&server, "stream = false\n");
    let t0 = Instant::now();
    assert_eq!(p.complete(&request()).await.unwrap().text, "after the wait");
    assert!(
        t0.elapsed() >= Duration::from_secs(1),
        "Retry-After was not honoured: {:?}",
        t0.elapsed()
    );
    assert_eq!(server.requests().len(), 2);
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
    let cfg: ProviderConfig = toml::from_str(&format!(
        "kind = \"openai\"\nbase_url = \"{url}/v1\"\nmodel = \"m\"\nmax_retries = 0\n"
    ))
    .unwrap();
    let breakers = Breakers::default();
    let env = |_: &str| None;
    let ctx = BuildContext {
        breakers: &breakers,
        base_dir: Path::new("."),
        env: &env,
        default_script: "",
        sandbox: &crewbox::sandbox::Sandbox::missing(),
    };
    let p = build("down", &cfg, &ctx)
        .map_err(|e| e.to_string())
        .unwrap();
    assert!(matches!(
        p.complete(&request()).await,
        Err(ProviderError::Connection(_))
    ));
}

#[tokio::test]
async fn breaker_opens_after_five_failures() {
    let server = TestServer::start((0..10).map(|_| Reply::text(503, "overloaded")).collect()).await;
    // One call with four retries = five failed attempts.
    let (p, breakers) = provider(&server, "stream = false\nmax_retries = 4\n");
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::Server { status: 503, .. }),
        "{err}"
    );
    let snap = breakers.snapshot();
    assert_eq!(snap.len(), 1);
    assert_eq!(snap[0].key, "local/gpt-test");
    assert_eq!(snap[0].state, BreakerState::Open);
    assert_eq!(snap[0].consecutive_failures, 5);
    assert!(snap[0].opened_at.is_some());
    // Refused at once: the server sees nothing more.
    let err = p.complete(&request()).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::CircuitOpen { key, .. } if key == "local/gpt-test"),
        "{err}"
    );
    assert_eq!(server.requests().len(), 5);
}

//! What crewbox sends a model server and how it bounds a call, end to end against a
//! local server speaking llama.cpp's wire format: the per-turn output cap with
//! temperature and stop, the overall `model_timeout_s` named apart from a stall (and
//! the tokens generated charged), reasoning-only replies, `max_concurrent`, and the
//! settings `crewbox config` shows.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::provider_llama::{recording, run, user_config};
use crate::support::http::{Chunk, Reply, TestServer, build_provider};
use crate::support::repo::git_repo;
use crewbox::unstable::provider::{AgentLabel, CompletionRequest, Message};

/// A finished non-streamed reply, in llama.cpp's shape.
fn answer(text: &str) -> Reply {
    Reply::json(
        200,
        json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 900, "completion_tokens": 5, "total_tokens": 905}}),
    )
}

/// One streamed chunk of `delta`, as llama.cpp sends it.
fn delta(delta: Value, finish: Option<&str>) -> String {
    format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "finish_reason": finish, "delta": delta}],
            "object": "chat.completion.chunk", "model": "m"})
    )
}

fn provider_table(name: &str, url: &str, extra: &str) -> String {
    format!(
        "[providers.{name}]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\nmodel = \"m\"\n\
         max_retries = 0\n{extra}"
    )
}

/// `crewbox run --mode single --provider NAME TASK --json`, its report.
async fn run_single(dir: &Path, provider: &str) -> Value {
    let out = run(
        dir,
        &[
            "run",
            "--mode",
            "single",
            "--provider",
            provider,
            "say what the repository is",
            "--json",
        ],
    )
    .await;
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    })
}

#[tokio::test]
async fn every_agent_request_carries_the_output_cap_temperature_and_stop() {
    let server = TestServer::start(vec![answer("a"), answer("b"), answer("c")]).await;
    let dir = git_repo(|_| {});
    let url = &server.url;
    user_config(
        dir.path(),
        &format!(
            "{}\n{}\n{}",
            provider_table("plain", url, "stream = false\n"),
            provider_table(
                "tuned",
                url,
                "stream = false\ntoken_limit_field = \"max_tokens\"\nmax_output_tokens = 64\n\
                 temperature = 0.2\nstop = [\"</answer>\", \"\\nUser:\"]\n"
            ),
            provider_table(
                "capped",
                url,
                "stream = false\ntoken_limit_field = \"max_tokens\"\n"
            ),
        ),
    );
    for name in ["plain", "tuned"] {
        let report = run_single(dir.path(), name).await;
        assert_eq!(report["status"], "completed", "{report:#}");
    }
    // The quota, written by the user.
    let config = dir.path().join("config/crewbox/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.insert_str(0, "[quotas]\nmax_output_tokens = 300\n\n");
    std::fs::write(&config, text).unwrap();
    let report = run_single(dir.path(), "capped").await;
    assert_eq!(report["status"], "completed", "{report:#}");

    let bodies: Vec<Value> = server.requests().iter().map(|r| r.json()).collect();
    assert_eq!(bodies.len(), 3);
    // Default: 4096 in OpenAI's field, no sampling settings.
    assert_eq!(bodies[0]["max_completion_tokens"], 4096, "{:#}", bodies[0]);
    assert!(bodies[0].get("max_tokens").is_none() && bodies[0].get("temperature").is_none());
    assert!(bodies[0].get("stop").is_none());
    // The provider's own cap overrides the quota, in the field it names.
    assert_eq!(bodies[1]["max_tokens"], 64, "{:#}", bodies[1]);
    assert!(bodies[1].get("max_completion_tokens").is_none());
    assert_eq!(bodies[1]["temperature"], 0.2);
    assert_eq!(bodies[1]["stop"], json!(["</answer>", "\nUser:"]));
    // `quotas.max_output_tokens`.
    assert_eq!(bodies[2]["max_tokens"], 300, "{:#}", bodies[2]);
}

#[tokio::test]
async fn model_timeout_while_tokens_arrive_is_named_and_charged_apart_from_a_stall() {
    // Tokens keep coming, one every 150 ms, for 6 s: only the overall limit can end it.
    let mut slow = Vec::new();
    for i in 0..40 {
        slow.push(Chunk::Data(delta(
            json!({"content": format!("word{i} ")}),
            None,
        )));
        slow.push(Chunk::Pause(Duration::from_millis(150)));
    }
    // The head and one token, then silence.
    let silent = vec![
        Chunk::Data(delta(
            json!({"role": "assistant", "content": "I will"}),
            None,
        )),
        Chunk::Pause(Duration::from_secs(20)),
    ];
    let server = TestServer::start(vec![
        Reply::Chunked {
            status: 200,
            chunks: slow,
        },
        Reply::Chunked {
            status: 200,
            chunks: silent,
        },
    ])
    .await;
    let dir = git_repo(|_| {});
    user_config(
        dir.path(),
        &format!(
            "[quotas]\nmodel_timeout_s = 1\n\n{}\n{}",
            provider_table("slow", &server.url, "stall_timeout_s = 5\n"),
            provider_table("silent", &server.url, "stall_timeout_s = 0.5\n"),
        ),
    );
    let report = run_single(dir.path(), "slow").await;
    let agent = &report["agents"][0];
    let error = agent["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(
            "model-timeout: model_timeout_s = 1 elapsed while the reply was still arriving"
        ),
        "{report:#}"
    );
    assert!(!error.contains("stall"), "{error}");
    let output = agent["tokens"]["output"].as_u64().unwrap();
    assert!(output > 0, "the tokens generated are charged: {report:#}");
    assert!(
        error.contains(&format!("({output} tokens generated so far, charged)")),
        "{error}"
    );
    assert!(agent["tokens"]["input"].as_u64().unwrap() > 0, "{report:#}");

    let report = run_single(dir.path(), "silent").await;
    let agent = &report["agents"][0];
    let error = agent["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the stream stalled: no data for 0.5 s (stall_timeout_s)"),
        "{report:#}"
    );
    assert!(!error.contains("model_timeout_s"), "{error}");
    assert_eq!(
        agent["tokens"]["output"], 2,
        "\"I will\" is charged: {report:#}"
    );
}

#[tokio::test]
async fn a_reasoning_only_reply_gets_one_answer_now_nudge() {
    // Hand-written in llama.cpp's shape (`--reasoning-format deepseek`): see the
    // recordings' README.
    let (_, thinking) = recording("hand-written/reasoning-only-stream");
    let (_, answered) = recording("hand-written/reasoning-then-answer-stream");
    let (_, json_thinking) = recording("hand-written/reasoning-only");
    let server = TestServer::start(vec![
        thinking,
        answered,
        json_thinking.clone(),
        json_thinking,
    ])
    .await;
    let dir = git_repo(|_| {});
    user_config(
        dir.path(),
        &format!(
            "{}\n{}",
            provider_table("thinker", &server.url, ""),
            provider_table("plain", &server.url, "stream = false\n"),
        ),
    );
    let report = run_single(dir.path(), "thinker").await;
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(
        report["agents"][0]["result"], "It holds a README.",
        "{report:#}"
    );
    let requests = server.requests();
    let second = requests[1].json();
    let messages = second["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"].as_str().unwrap().contains("Answer now"),
        "{second:#}"
    );
    let sent = second.to_string();
    assert!(
        !sent.contains("Let me look") && !sent.contains("reasoning_content"),
        "reasoning is not sent back to an OpenAI-compatible server: {second:#}"
    );
    // The reasoning is in the events, not the result.
    let run_id = report["run_id"].as_str().unwrap();
    let events = run(dir.path(), &["events", "--run", run_id]).await;
    let replies: Vec<Value> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "model.reply")
        .collect();
    assert_eq!(
        replies[0]["data"]["reasoning"], "The user wants to know what is here. Let me look.",
        "{replies:#?}"
    );
    assert_eq!(
        replies[1]["data"]["reasoning"], "So: a README.",
        "{replies:#?}"
    );

    // Reasoning only, twice (non-streamed): one nudge, then `empty-reply` saying what
    // came.
    let report = run_single(dir.path(), "plain").await;
    let error = report["agents"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("empty-reply: the model answered with reasoning only"),
        "{report:#}"
    );
    assert_eq!(server.requests().len(), 4, "one nudge, no more");
}

fn request() -> CompletionRequest {
    CompletionRequest {
        agent: AgentLabel::default(),
        turn: 1,
        messages: vec![Message::user("hi")],
        tools: Vec::new().into(),
        max_tokens: Some(16),
        workspace: None,
        progress: None,
    }
}

/// Calls `calls` at once on a provider built from `extra`; the most requests the
/// server was answering at the same time.
async fn peak_with(extra: &str, calls: usize) -> usize {
    let slow = || Reply::Chunked {
        status: 200,
        chunks: vec![
            Chunk::Pause(Duration::from_millis(300)),
            Chunk::Data(delta(json!({"content": "ok"}), Some("stop"))),
            Chunk::Data("data: [DONE]\n\n".into()),
        ],
    };
    let server = TestServer::start((0..calls).map(|_| slow()).collect()).await;
    let (p, _) = build_provider(
        "llama",
        &format!(
            "kind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\n{extra}",
            server.url
        ),
        &[],
    )
    .unwrap();
    let req = request();
    let results = futures::future::join_all((0..calls).map(|_| p.complete(&req))).await;
    for r in results {
        assert_eq!(r.unwrap().text, "ok");
    }
    assert_eq!(server.requests().len(), calls);
    server.peak_in_flight()
}

#[tokio::test]
async fn max_concurrent_keeps_the_server_at_that_many_requests_in_flight() {
    assert_eq!(peak_with("max_concurrent = 1\n", 3).await, 1);
    assert_eq!(peak_with("max_concurrent = 2\n", 4).await, 2);
    // Without the setting the same calls overlap (so the test can fail).
    assert!(peak_with("", 3).await >= 2);
}

#[tokio::test]
async fn config_shows_the_server_settings_in_force() {
    let dir = git_repo(|_| {});
    user_config(
        dir.path(),
        &provider_table(
            "llama",
            "http://127.0.0.1:8080",
            "stream = false\ntoken_limit_field = \"max_tokens\"\nmax_concurrent = 1\n\
             first_byte_timeout_s = 900\nretry_base_ms = 2000\n",
        ),
    );
    let out = run(dir.path(), &["config", "--json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg: Value = serde_json::from_slice(&out.stdout).unwrap();
    let settings = cfg["settings"].as_array().unwrap();
    let get = |key: &str| {
        settings
            .iter()
            .find(|s| s["key"] == key)
            .map(|s| s["value"].clone())
            .unwrap_or_else(|| panic!("no {key}: {cfg:#}"))
    };
    let llama = get("providers.llama");
    for (key, want) in [
        ("stream", json!(false)),
        ("token_limit_field", json!("max_tokens")),
        ("max_retries", json!(0)),
        ("retry_base_ms", json!(2000)),
        ("max_concurrent", json!(1)),
        ("first_byte_timeout_s", json!(900.0)),
        ("stall_timeout_s", json!(60.0)),
        ("max_output_tokens", Value::Null),
    ] {
        assert_eq!(llama[key], want, "{key}: {llama:#}");
    }
    assert_eq!(get("quotas.max_output_tokens"), 4096);
    let out = run(dir.path(), &["config"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"token_limit_field\":\"max_tokens\"") && text.contains("max_output_tokens"),
        "{text}"
    );
}

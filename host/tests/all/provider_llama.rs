//! The OpenAI-compatible provider and the agent loop against replayed responses of a
//! real llama.cpp `llama-server` (SmolLM2-135M-Instruct), recorded by
//! `scripts/real-model.sh --record` into `recordings/llama-server/` (see the README
//! there): a request rejected for its content is not retried, arguments that are not
//! JSON are never sent back, a reply cut inside a tool call is answered "not run", and
//! a chat template that drops the tools fails the agent (and `health --provider` says
//! so from `/props`).

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::support::http::{Reply, TestServer, build_provider};
use crate::support::repo::{command, git_repo};
use crewbox::unstable::provider::{
    AgentLabel, CompletionRequest, Message, ProviderError, ToolCall, ToolSpec,
};

/// A recording: (the request crewbox-shaped clients sent, the server's reply).
pub(crate) fn recording(name: &str) -> (Value, Reply) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/all/recordings/llama-server")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let rec: Value = serde_json::from_str(&text).unwrap();
    let status = rec["response"]["status"].as_u64().unwrap() as u16;
    let body = rec["response"]["body"].as_str().unwrap();
    let ctype = rec["response"]["content_type"]
        .as_str()
        .unwrap_or("application/json");
    (
        rec["request"].clone(),
        Reply::text(status, body).header("content-type", ctype),
    )
}

fn request(messages: Vec<Message>) -> CompletionRequest {
    CompletionRequest {
        progress: None,
        agent: AgentLabel {
            id: "a1".into(),
            name: "executor".into(),
            role: "executor".into(),
        },
        turn: 2,
        messages,
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file of the workspace and returns its text.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]
        .into(),
        max_tokens: Some(16),
        workspace: None,
    }
}

fn cut_history() -> Vec<Message> {
    vec![
        Message::system("You are a coding agent. Use the tools to act."),
        Message::user("Read README.md and say what it is about."),
        Message::assistant(
            "",
            vec![ToolCall::from_wire("c1", "read_file", "{\"path\": \"READ")],
        ),
        Message::tool_error("c1", "not run: cut off"),
    ]
}

#[tokio::test]
async fn a_request_the_server_rejected_for_its_content_is_not_retried() {
    let (_, rejected) = recording("tool-template/invalid-arguments-rejected");
    let (_, again) = recording("tool-template/invalid-arguments-rejected");
    let server = TestServer::start(vec![rejected, again]).await;
    let (p, _) = build_provider(
        "llama",
        &format!(
            "kind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\nstream = false\n\
             max_retries = 3\nretry_base_ms = 1\n",
            server.url
        ),
        &[],
    )
    .unwrap();
    // A history built by hand with a broken call: crewbox sends `{}`, so even this
    // server's 500 would only come from another cause. Force the wire error by the
    // recorded reply and check it is final.
    let err = p.complete(&request(cut_history())).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::Rejected { status: 500, message }
            if message.contains("Failed to parse tool call arguments as JSON")),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1, "never retried: {err}");
}

#[tokio::test]
async fn arguments_that_are_not_json_are_sent_back_as_an_empty_object() {
    let (recorded_request, accepted) = recording("tool-template/empty-arguments-accepted");
    let server = TestServer::start(vec![accepted]).await;
    let (p, _) = build_provider(
        "llama",
        &format!(
            "kind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\nstream = false\n",
            server.url
        ),
        &[],
    )
    .unwrap();
    let c = p.complete(&request(cut_history())).await.unwrap();
    let sent = server.requests()[0].json();
    let call = &sent["messages"][2]["tool_calls"][0];
    assert_eq!(call["function"]["arguments"], "{}", "{sent:#}");
    // The same shape the real server accepted (200) in the recording.
    assert_eq!(
        recorded_request["body"]["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{}"
    );
    // The recorded reply is itself cut inside a call (`"arguments": "{"`).
    assert_eq!(c.tool_calls.len(), 1);
    assert!(c.tool_calls[0].invalid_args.is_some(), "{c:?}");
}

pub(crate) fn user_config(dir: &Path, text: &str) {
    let d = dir.join("config").join("crewbox");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("config.toml"), text).unwrap();
}

pub(crate) async fn run(dir: &Path, args: &[&str]) -> Output {
    let mut c = command(dir, args);
    tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap()
}

/// The recorded cut reply (llama-server stopped at `max_tokens` inside a `list_dir`
/// call), preceded by a complete `list_dir` call in the same reply: the shape
/// llama.cpp streams for parallel calls, with the second call's arguments cut.
fn cut_with_a_complete_call() -> Reply {
    let (_, reply) = recording("tool-template/empty-arguments-accepted");
    let Reply::Full { body, .. } = reply else {
        unreachable!()
    };
    let mut v: Value = serde_json::from_str(&body).unwrap();
    let calls = v["choices"][0]["message"]["tool_calls"]
        .as_array_mut()
        .unwrap();
    calls.insert(
        0,
        json!({"type": "function", "id": "done1", "function": {"name": "list_dir", "arguments": "{\"path\": \".\"}"}}),
    );
    Reply::json(200, v)
}

#[tokio::test]
async fn a_cut_reply_runs_its_complete_calls_and_answers_only_the_broken_one() {
    let finished = Reply::json(
        200,
        json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "The repository holds a README."}}],
               "usage": {"prompt_tokens": 400, "completion_tokens": 8, "total_tokens": 408}}),
    );
    let server = TestServer::start(vec![cut_with_a_complete_call(), finished]).await;
    let dir = git_repo(|work| std::fs::write(work.join("README.md"), "# hi\n").unwrap());
    user_config(
        dir.path(),
        &format!(
            "[providers.llama]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n",
            server.url
        ),
    );
    let out = run(
        dir.path(),
        &[
            "run",
            "--mode",
            "single",
            "--provider",
            "llama",
            "what is in the repository",
            "--json",
        ],
    )
    .await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(report["status"], "completed", "{report:#}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{report:#}");
    let second = requests[1].json();
    let msgs = second["messages"].as_array().unwrap();
    let assistant = msgs
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .unwrap();
    let args: Vec<&str> = assistant["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(args, ["{\"path\":\".\"}", "{}"], "{second:#}");
    let results: Vec<&str> = msgs
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(results.len(), 2, "{second:#}");
    assert!(
        !results[0].starts_with("error") && results[0].contains("notes.txt"),
        "the complete call ran (it lists the workspace): {results:?}"
    );
    assert!(
        results[1].starts_with("error: not run: your reply was cut off"),
        "{results:?}"
    );
}

/// The tools of a recorded request, as crewbox offers them.
fn recorded_tools(request: &Value) -> Vec<ToolSpec> {
    request["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| ToolSpec {
            name: t["function"]["name"].as_str().unwrap().into(),
            description: t["function"]["description"].as_str().unwrap().into(),
            parameters: t["function"]["parameters"].clone(),
        })
        .collect()
}

fn llama(url: &str) -> String {
    format!(
        "kind = \"openai\"\nbase_url = \"{url}/v1\"\nmodel = \"m\"\nstream = false\nmax_retries = 0\n"
    )
}

#[tokio::test]
async fn a_prompt_far_smaller_than_the_tool_schemas_means_the_tools_were_dropped() {
    // The same request (three tool schemas, ~190 tokens of them): the model's own
    // template counted 38 prompt tokens, the tool template 285.
    let (dropped_req, dropped) = recording("no-tool-template/tools-dropped");
    let (rendered_req, rendered) = recording("tool-template/tools-rendered");
    assert_eq!(dropped_req["body"]["tools"], rendered_req["body"]["tools"]);
    let tools = recorded_tools(&dropped_req);
    let messages = vec![
        Message::system("You are a coding agent. Use the tools to act."),
        Message::user("Read README.md and say what it is about."),
    ];
    let ask = CompletionRequest {
        tools: tools.into(),
        ..request(messages)
    };
    // No /props on this server (404): the error still names the cause it can see.
    let server = TestServer::start(vec![dropped, Reply::text(404, "not found")]).await;
    let (p, _) = build_provider("llama", &llama(&server.url), &[]).unwrap();
    let err = p.complete(&ask).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ProviderError::ToolsIgnored(_)), "{err:?}");
    assert!(
        text.contains("provider `llama`")
            && text.contains("counted 38 prompt tokens")
            && text.contains("chat template")
            && text.contains("--jinja"),
        "{text}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one call, one /props probe, no retry");
    assert_eq!(
        (requests[1].method.as_str(), requests[1].path.as_str()),
        ("GET", "/props")
    );

    let server = TestServer::start(vec![rendered]).await;
    let (p, _) = build_provider("llama", &llama(&server.url), &[]).unwrap();
    let c = p.complete(&ask).await.unwrap();
    assert_eq!(c.usage.input, 285);
    assert_eq!(
        server.requests().len(),
        1,
        "no probe when the tools were rendered"
    );

    // The same counts from a server that is not llama.cpp (no `timings`: a mock's
    // made-up usage) are not taken as dropped tools; nor are they when llama.cpp's
    // `/props` says its template renders tools.
    let (_, dropped) = recording("no-tool-template/tools-dropped");
    let Reply::Full { body, .. } = dropped else {
        unreachable!()
    };
    let mut other: Value = serde_json::from_str(&body).unwrap();
    other.as_object_mut().unwrap().remove("timings");
    let (_, dropped) = recording("no-tool-template/tools-dropped");
    let (_, tool_props) = recording("tool-template/props");
    let server = TestServer::start(vec![Reply::json(200, other), dropped, tool_props]).await;
    let (p, _) = build_provider("llama", &llama(&server.url), &[]).unwrap();
    assert!(p.complete(&ask).await.is_ok());
    assert_eq!(
        server.requests().len(),
        1,
        "no probe of a server that is not llama.cpp"
    );
    assert!(p.complete(&ask).await.is_ok());
    assert_eq!(server.requests()[2].path, "/props");
}

#[tokio::test]
async fn an_agent_whose_server_template_has_no_tools_fails_naming_the_template() {
    let (_, dropped) = recording("no-tool-template/tools-dropped");
    let (_, props) = recording("no-tool-template/props");
    let server = TestServer::start(vec![dropped, props]).await;
    let dir = git_repo(|work| std::fs::write(work.join("README.md"), "# hi\n").unwrap());
    user_config(
        dir.path(),
        &format!("[providers.llama]\n{}", llama(&server.url)),
    );
    let out = run(
        dir.path(),
        &[
            "run",
            "--mode",
            "single",
            "--provider",
            "llama",
            "read the README",
            "--json",
        ],
    )
    .await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_ne!(report["status"], "completed", "{report:#}");
    assert!(!out.status.success());
    let error = report["agents"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("chat_template_caps.supports_tools = false")
            && error.contains("SmolLM2-135M-Instruct")
            && error.contains("rendered none of the tools"),
        "{report:#}"
    );
    assert_eq!(server.requests().len(), 2, "{report:#}");
}

#[tokio::test]
async fn health_probes_the_servers_props() {
    for (dir_name, ok, says) in [
        (
            "no-tool-template",
            false,
            "NOT SUPPORTED by the chat template",
        ),
        ("tool-template", true, "the chat template renders them"),
    ] {
        let (_, props) = recording(&format!("{dir_name}/props"));
        let server = TestServer::start(vec![props]).await;
        let dir = git_repo(|_| {});
        user_config(
            dir.path(),
            &format!("[providers.llama]\n{}", llama(&server.url)),
        );
        let out = run(dir.path(), &["health", "--provider", "llama"]).await;
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.success(),
            ok,
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(says), "{text}");
        assert!(
            text.contains("n_ctx = 4096") && text.contains("set context_tokens = 4096"),
            "{text}"
        );
        assert!(
            text.contains("slots: 1") && text.contains("max_concurrent = 1"),
            "{text}"
        );
        assert_eq!(server.requests()[0].path, "/props");
    }
    // JSON, and a server without /props.
    let server = TestServer::start(vec![Reply::text(404, "File Not Found")]).await;
    let dir = git_repo(|_| {});
    user_config(
        dir.path(),
        &format!("[providers.llama]\n{}", llama(&server.url)),
    );
    let out = run(dir.path(), &["health", "--provider", "llama", "--json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["provider"]["props"], Value::Null, "{report:#}");
    assert_eq!(report["provider"]["reachable"], true, "{report:#}");
}

/// A llama.cpp chat completion (it carries `timings`) calling `read_file` on `path`,
/// or answering `text` when `path` is empty.
fn llama_reply(path: &str, text: &str) -> Reply {
    let message = if path.is_empty() {
        json!({"role": "assistant", "content": text})
    } else {
        json!({"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": format!("c-{path}"),
               "function": {"name": "read_file", "arguments": json!({"path": path}).to_string()}}]})
    };
    let finish = if path.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    Reply::json(
        200,
        json!({"choices": [{"index": 0, "finish_reason": finish, "message": message}],
               "usage": {"prompt_tokens": 900, "completion_tokens": 10, "total_tokens": 910},
               "timings": {"prompt_n": 900, "predicted_n": 10}}),
    )
}

/// Runs one agent on a llama.cpp server that reads a 12 KB file, then a small one,
/// then answers; `/props` (asked once the conversation outgrows the floor) publishes
/// `n_ctx` = 4096. `provider_extra` is added to the provider's config. Returns the
/// requests the server saw.
async fn run_against_small_context(provider_extra: &str, replies: Vec<Reply>) -> Vec<Value> {
    let server = TestServer::start(replies).await;
    let dir = git_repo(|_| {});
    let work = dir.path().join("repo");
    std::fs::write(
        work.join("big.txt"),
        "lorem ipsum dolor sit amet\n".repeat(460),
    )
    .unwrap();
    let git = git2::Repository::open(&work).unwrap();
    let mut index = git.index().unwrap();
    index.add_path(Path::new("big.txt")).unwrap();
    index.write().unwrap();
    let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@localhost").unwrap();
    let head = git.head().unwrap().peel_to_commit().unwrap();
    git.commit(Some("HEAD"), &sig, &sig, "big", &tree, &[&head])
        .unwrap();
    user_config(
        dir.path(),
        &format!(
            "[quotas]\nkeep_turns = 1\n[providers.llama]\n{}max_output_tokens = 256\n{provider_extra}",
            llama(&server.url)
        ),
    );
    let out = run(
        dir.path(),
        &[
            "run",
            "--mode",
            "single",
            "--provider",
            "llama",
            "read big.txt",
            "--json",
        ],
    )
    .await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    let seen: Vec<(String, String)> = server
        .requests()
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    assert_eq!(report["status"], "completed", "{seen:?} {report:#}");
    server
        .requests()
        .iter()
        .map(|r| json!({"method": r.method, "path": r.path, "body": if r.method == "POST" { r.json() } else { Value::Null }}))
        .collect()
}

/// The `tool` messages of a recorded chat request.
fn tool_results(request: &Value) -> Vec<String> {
    request["body"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_continuation_is_compacted_to_the_servers_published_context() {
    let props = Reply::json(
        200,
        json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}),
    );
    let requests = run_against_small_context(
        "",
        vec![
            llama_reply("big.txt", ""),
            props,
            llama_reply("notes.txt", ""),
            llama_reply("", "done"),
        ],
    )
    .await;
    let shape: Vec<(&str, &str)> = requests
        .iter()
        .map(|r| (r["method"].as_str().unwrap(), r["path"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shape,
        [
            ("POST", "/v1/chat/completions"),
            ("GET", "/props"),
            ("POST", "/v1/chat/completions"),
            ("POST", "/v1/chat/completions")
        ],
        "/props is asked once, when the conversation outgrew the floor"
    );
    // The second request still holds the 12 KB read (it is the latest turn) ...
    assert!(tool_results(&requests[2])[0].contains("lorem ipsum"));
    // ... the third, which would not fit 4096 tokens with it, has it compacted.
    let third = tool_results(&requests[3]);
    assert!(third[0].starts_with("[compacted"), "{third:?}");
    assert!(third[1].contains("alpha"), "{third:?}");
}

#[tokio::test]
async fn a_configured_context_wins_over_props() {
    // The config's window is large: nothing is compacted and /props is never asked.
    let requests = run_against_small_context(
        "context_tokens = 100000\n",
        vec![
            llama_reply("big.txt", ""),
            llama_reply("notes.txt", ""),
            llama_reply("", "done"),
        ],
    )
    .await;
    assert!(
        requests.iter().all(|r| r["path"] != "/props"),
        "{requests:#?}"
    );
    assert_eq!(requests.len(), 3);
    let third = tool_results(&requests[2]);
    assert!(third[0].contains("lorem ipsum"), "{third:?}");
}

//! The real `crewbox` binary against local model servers: a configured key never reaches
//! a sink (report, events, status, the SQLite file, stderr) whichever path echoes it;
//! errors say what happened once; logs carry no colour codes off a terminal; the report
//! names why an agent failed.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::support::http::{Reply, TestServer};
use crate::support::repo::{command, git_repo, state_dir};

const KEY: &str = "sk-e2e-openai-7f3a9c1d2e";
const KEY2: &str = "sk-ant-e2e-5b8e0f4a6c";

/// Writes the user config (providers live there, never in a repository).
fn user_config(dir: &Path, text: &str) {
    let d = dir.join("config").join("crewbox");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("config.toml"), text).unwrap();
}

/// Runs `crewbox ARGS` off the async runtime (the test server lives on it).
async fn crewbox(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = command(dir, args);
    for (k, v) in env {
        c.env(k, v);
    }
    tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap()
}

/// `crewbox run --mode single --provider PROVIDER PROMPT --json`.
async fn run_single(dir: &Path, provider: &str, prompt: &str, env: &[(&str, &str)]) -> Output {
    let args = [
        "run",
        "--mode",
        "single",
        "--provider",
        provider,
        prompt,
        "--json",
    ];
    crewbox(dir, &args, env).await
}

/// A repository whose user config has one non-streaming OpenAI provider `oa` at `url`.
fn repo_with_openai(url: &str, extra: &str) -> tempfile::TempDir {
    let dir = git_repo(|_| {});
    user_config(
        dir.path(),
        &format!(
            "[providers.oa]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\nmodel = \"m\"\nstream = false\n{extra}"
        ),
    );
    dir
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn providers(url: &str) -> String {
    format!(
        r#"
[providers.oa-stream]
kind = "openai"
base_url = "{url}/v1"
model = "m"
api_key_env = "CREWBOX_E2E_KEY"
max_retries = 1
retry_base_ms = 1

[providers.oa]
kind = "openai"
base_url = "{url}/v1"
model = "m"
api_key_env = "CREWBOX_E2E_KEY"
stream = false
max_retries = 1
retry_base_ms = 1

[providers.an]
kind = "anthropic"
base_url = "{url}"
model = "c"
api_key_env = "CREWBOX_E2E_KEY2"
max_retries = 1
retry_base_ms = 1

[providers.cli]
kind = "command"
command = ["sh", "-c", "echo 'auth failed for {KEY2}' >&2; exit 3"]
"#
    )
}

#[tokio::test]
async fn a_key_echoed_by_any_path_reaches_no_sink() {
    let echo = |k: &str| format!("the key {k} is not valid here");
    let server = TestServer::start(vec![
        // OpenAI: an error event in the middle of a stream (retried once).
        Reply::sse(&[json!({"error": {"message": echo(KEY), "type": "server_error"}}).to_string()]),
        Reply::sse(&[json!({"error": {"message": echo(KEY), "type": "server_error"}}).to_string()]),
        // A 200 whose body is an error (retried once).
        Reply::json(200, json!({"error": {"message": echo(KEY)}})),
        Reply::json(200, json!({"error": {"message": echo(KEY)}})),
        // Malformed JSON: its excerpt goes into the error.
        Reply::text(200, &format!("{{\"choices\": [ {}", echo(KEY)))
            .header("content-type", "application/json"),
        // An HTTP error body.
        Reply::text(401, &echo(KEY)),
        // Anthropic `event: error` (retried once).
        Reply::sse_events(&[(
            "error",
            json!({"type": "error", "error": {"type": "api_error", "message": echo(KEY2)}}),
        )]),
        Reply::sse_events(&[(
            "error",
            json!({"type": "error", "error": {"type": "api_error", "message": echo(KEY2)}}),
        )]),
    ])
    .await;
    let dir = git_repo(|_| {});
    user_config(dir.path(), &providers(&server.url));
    let env = [
        ("CREWBOX_E2E_KEY", KEY),
        ("CREWBOX_E2E_KEY2", KEY2),
        ("RUST_LOG", "debug"),
    ];
    let mut sinks = Vec::new();
    let mut runs = Vec::new();
    for provider in ["oa-stream", "oa", "oa", "oa", "an", "cli"] {
        let out = run_single(dir.path(), provider, "read the notes", &env).await;
        let report = json_of(&out);
        assert_eq!(
            report["agents"][0]["state"], "error",
            "{provider}: {report:#}"
        );
        let error = report["agents"][0]["error"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(
            error.contains("[redacted]"),
            "{provider}: the echo was seen: {error}"
        );
        runs.push(report["run_id"].as_str().unwrap().to_owned());
        sinks.push((
            format!("{provider}: report"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
        sinks.push((
            format!("{provider}: stderr"),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    assert_eq!(server.requests().len(), 8, "every scripted reply was used");
    for run in &runs {
        let out = crewbox(dir.path(), &["events", "--run", run], &env).await;
        sinks.push((
            format!("events {run}"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
        let out = crewbox(dir.path(), &["status", run, "--json"], &env).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        sinks.push((
            format!("status {run}"),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        ));
    }
    let out = crewbox(dir.path(), &["status", "--json"], &env).await;
    sinks.push((
        "status --json".into(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ));
    for entry in std::fs::read_dir(state_dir(dir.path())).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            sinks.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    assert!(
        sinks.iter().any(|(name, _)| name.ends_with("crewbox.db")),
        "the store file itself is one of the sinks checked"
    );
    let all: String = sinks.iter().map(|(_, t)| t.as_str()).collect();
    assert!(all.contains("[redacted]"));
    for (sink, text) in &sinks {
        for key in [KEY, KEY2] {
            assert!(!text.contains(key), "{sink} holds a key:\n{text}");
        }
    }
}

#[tokio::test]
async fn a_provider_error_names_the_provider_once() {
    let dir = git_repo(|_| {});
    user_config(
        dir.path(),
        "[providers.mine]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key_env = \"CREWBOX_E2E_UNSET_KEY\"\n",
    );
    let out = crewbox(
        dir.path(),
        &["run", "--provider", "mine", "hi", "--json"],
        &[],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("provider `mine`").count(), 1, "{stderr}");
    assert!(stderr.contains("CREWBOX_E2E_UNSET_KEY"), "{stderr}");
}

#[tokio::test]
async fn logs_off_a_terminal_carry_no_colour_codes() {
    let server = TestServer::start(vec![
        Reply::text(500, "boom"),
        Reply::json(
            200,
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}]}),
        ),
    ])
    .await;
    let dir = repo_with_openai(&server.url, "retry_base_ms = 1\n");
    let out = run_single(dir.path(), "oa", "hi", &[("RUST_LOG", "warn")]).await;
    assert_eq!(json_of(&out)["status"], "completed");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("retrying"), "the retry is logged: {stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes in a pipe: {stderr:?}"
    );
}

#[tokio::test]
async fn the_report_names_why_an_agent_failed() {
    let cut = Reply::json(
        200,
        json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a long ans"}, "finish_reason": "length"}]}),
    );
    let server = TestServer::start(vec![cut.clone(), cut.clone(), cut]).await;
    let dir = repo_with_openai(&server.url, "");
    let out = run_single(dir.path(), "oa", "explain", &[]).await;
    let report = json_of(&out);
    let error = report["agents"][0]["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("truncated: "), "{report:#}");
    let run = report["run_id"].as_str().unwrap();
    let out = crewbox(dir.path(), &["status", run], &[]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("error: truncated: "), "{text}");
    let events = crate::support::repo::events(dir.path(), run);
    let ended = events
        .iter()
        .rev()
        .find(|e| e["kind"] == "agent.state")
        .unwrap();
    assert_eq!(ended["data"]["reason"], "truncated", "{ended:#}");
}

/// A team whose orchestrator plans without tools: its one turn is text only.
const DUO: &str = "mode = \"orchestrate\"\n[[members]]\nname = \"alice\"\nrole = \"architect\"\n[[members]]\nname = \"bob\"\nrole = \"tester\"\n";

const ORCHESTRATE_SCRIPT: &str = r#"
[[reply]]
agent = "orchestrator"
when = "Message from the operator: only alice"
text = "@worker:alice\nDesign the API.\n@end\n"

[[reply]]
agent = "orchestrator"
when = "Split the request below into tasks"
delay_ms = 2500
text = "@worker:alice\nDesign the API.\n@end\n@worker:bob\nWrite the tests.\n@end\n"

[[reply]]
agent = "alice"
text = "ALICE: push and pop"

[[reply]]
agent = "bob"
text = "BOB: tests"

[[reply]]
agent = "synthesis"
repeat = true
text = "SYNTHESIS"
"#;

#[test]
fn crewbox_steer_reaches_an_orchestrator_that_plans_without_tools() {
    use crewbox::unstable::store::Store;
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/duo.toml"), DUO).unwrap();
    });
    let script = dir.path().join("script.toml");
    std::fs::write(&script, ORCHESTRATE_SCRIPT).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = Store::open(&state_dir(dir.path())).unwrap();
    let child = command(
        dir.path(),
        &[
            "run",
            "build a queue",
            "--team",
            "duo",
            "--mode",
            "orchestrate",
            "--script",
            script.to_str().unwrap(),
            "--json",
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // The orchestrator is thinking (its reply is delayed): steer it from another process.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let orchestrator = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no running orchestrator"
        );
        let runs = rt.block_on(store.unfinished_runs()).unwrap();
        if let Some(run) = runs.first() {
            let agents = rt.block_on(store.agents(&run.id)).unwrap();
            if let Some(a) = agents.iter().find(|a| {
                a.name == "orchestrator" && a.state == crewbox::unstable::agent::AgentState::Running
            }) {
                break a.id.clone();
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out =
        crate::support::repo::bin(dir.path(), &["steer", orchestrator.as_str(), "only alice"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = child.wait_with_output().unwrap();
    let report = json_of(&out);
    assert_eq!(report["status"], "completed", "{report:#}");
    let workers: Vec<&str> = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .filter(|n| ["alice", "bob"].contains(n))
        .collect();
    assert_eq!(
        workers,
        ["alice"],
        "the plan followed the steer: {report:#}"
    );
    let events = crate::support::repo::events(dir.path(), report["run_id"].as_str().unwrap());
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "agent.steer" && e["agent_id"] == orchestrator.as_str()),
        "{events:#?}"
    );
}

#[test]
fn a_large_result_is_stored_once_and_still_reported() {
    let dir = git_repo(|_| {});
    let big = "Q".repeat(1 << 20);
    let (out, report) = crate::support::repo::crewbox(
        dir.path(),
        &format!("[[reply]]\ntext = \"{big}\"\n"),
        &["run", "--mode", "single", "a long answer"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["result"].as_str().map(str::len), Some(1 << 20));
    assert_eq!(
        report["agents"][0]["result"].as_str().map(str::len),
        Some(1 << 20)
    );
    let run = report["run_id"].as_str().unwrap();
    let status = json_of(&crate::support::repo::bin(
        dir.path(),
        &["status", run, "--json"],
    ));
    assert_eq!(
        status["result"], report["result"],
        "read back through the agent"
    );
    // The store holds the text once, not once per row that names it.
    let db = rusqlite::Connection::open(state_dir(dir.path()).join("crewbox.db")).unwrap();
    let mut stored = 0i64;
    for (table, column) in [
        ("runs", "result"),
        ("agents", "result"),
        ("events", "data"),
        ("steps", "data"),
    ] {
        stored += db
            .query_row(
                &format!("SELECT COALESCE(SUM(LENGTH({column})), 0) FROM {table} WHERE instr({column}, 'QQQQQQQQ') > 0"),
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap();
    }
    let copies = stored as f64 / (1 << 20) as f64;
    assert!(
        (1.0..1.5).contains(&copies),
        "the store holds the result {copies:.2} times"
    );
}

/// A child process killed when the test ends, even by a panic.
struct Killed(Option<std::process::Child>);

impl Killed {
    fn wait(mut self) -> Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

const QUEUED_SCRIPT: &str = r#"
[[reply]]
when = "Message from the operator: check the edge cases"
text = "STEERED: checked the edge cases"

[[reply]]
repeat = true
delay_ms = 2500
text = "plain answer"
"#;

#[test]
fn a_steer_to_a_queued_agent_is_delivered_with_its_first_model_call() {
    use crewbox::unstable::agent::AgentState;
    use crewbox::unstable::store::Store;
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(
            work.join(".crewbox/teams/pair.toml"),
            DUO.replace("orchestrate", "broadcast"),
        )
        .unwrap();
    });
    // One slot: bob waits queued while alice thinks.
    user_config(dir.path(), "max_concurrent = 1\n");
    let script = dir.path().join("script.toml");
    std::fs::write(&script, QUEUED_SCRIPT).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = Store::open(&state_dir(dir.path())).unwrap();
    let child = Killed(Some(
        command(
            dir.path(),
            &[
                "run",
                "review the queue",
                "--team",
                "pair",
                "--script",
                script.to_str().unwrap(),
                "--json",
            ],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap(),
    ));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seen = Vec::new();
    let (queued, name) = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no queued member: {seen:?}"
        );
        let runs = rt.block_on(store.unfinished_runs()).unwrap();
        if let Some(run) = runs.first() {
            let agents = rt.block_on(store.agents(&run.id)).unwrap();
            seen = agents.iter().map(|a| (a.name.clone(), a.state)).collect();
            // Whichever member got the slot thinks for a while; the other waits queued.
            let one_running = agents.iter().any(|a| a.state == AgentState::Running);
            if let Some(b) = agents.iter().find(|a| a.state == AgentState::Queued)
                && one_running
            {
                break (b.id.clone(), b.name.clone());
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = crate::support::repo::bin(
        dir.path(),
        &["steer", queued.as_str(), "check the edge cases"],
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("queued, will be delivered at start"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = child.wait();
    let report = json_of(&out);
    assert_eq!(report["status"], "completed", "{report:#}");
    let results: Vec<(String, String)> = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["name"] == "alice" || a["name"] == "bob")
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_owned(),
                a["result"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for (who, result) in &results {
        let want = if *who == name {
            "STEERED: checked the edge cases"
        } else {
            "plain answer"
        };
        assert_eq!(
            result, want,
            "the steer reached {name}'s first model call: {report:#}"
        );
    }
    assert_eq!(results.len(), 2, "{report:#}");
    let events = crate::support::repo::events(dir.path(), report["run_id"].as_str().unwrap());
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "agent.steer" && e["agent_id"] == queued.as_str()),
        "{events:#?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| e["kind"] == "agent.steer_undelivered"),
        "{events:#?}"
    );
}

/// End to end through the agent loop: a Claude agent with extended thinking calls a
/// tool; the request that carries the tool result also carries that turn's thinking
/// blocks, unchanged and first (the API refuses a continuation without them), and the
/// thinking is shown as reasoning in the events, never as the result.
#[tokio::test]
async fn a_thinking_agent_sends_its_signed_thinking_back_with_the_tool_result() {
    let message = |content: Value, stop: &str| {
        Reply::json(
            200,
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "c",
                "content": content, "stop_reason": stop,
                "usage": {"input_tokens": 40, "output_tokens": 9}}),
        )
    };
    let server = TestServer::start(vec![
        message(
            json!([
                {"type": "thinking", "thinking": "Look at the files first.", "signature": "sig-xyz"},
                {"type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {}}
            ]),
            "tool_use",
        ),
        message(json!([{"type": "text", "text": "All read."}]), "end_turn"),
    ])
    .await;
    let dir = git_repo(|_| {});
    user_config(
        dir.path(),
        &format!(
            "[providers.an]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"c\"\n\
             api_key_env = \"CREWBOX_E2E_KEY2\"\nstream = false\nthinking_budget_tokens = 1024\n",
            server.url
        ),
    );
    let out = run_single(
        dir.path(),
        "an",
        "look around",
        &[("CREWBOX_E2E_KEY2", KEY2)],
    )
    .await;
    let report = json_of(&out);
    assert_eq!(report["agents"][0]["state"], "completed", "{report:#}");
    let sent = server.requests();
    assert_eq!(sent.len(), 2, "{report:#}");
    crate::support::wire::assert_well_formed(
        &sent.iter().map(|r| r.json()).collect::<Vec<_>>(),
        crate::support::wire::anthropic_violations,
    );
    let second = sent[1].json();
    assert_eq!(second["thinking"]["budget_tokens"], 1024);
    let turn = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap_or_else(|| panic!("no assistant turn sent back: {second:#}"))
        .clone();
    assert_eq!(
        turn["content"][0],
        json!({"type": "thinking", "thinking": "Look at the files first.", "signature": "sig-xyz"}),
        "{turn:#}"
    );
    assert_eq!(turn["content"][1]["type"], "tool_use", "{turn:#}");
    let result = report["agents"][0]["result"].as_str().unwrap_or_default();
    assert!(
        !result.contains("Look at the files"),
        "thinking is not the result: {result}"
    );
}

/// A server other than llama.cpp whose prompt count is far below what the offered tool
/// schemas alone take, and whose model calls no tool, may have dropped the tools: the
/// run goes on (mock and proxy servers report made-up counts) but the user is warned
/// once, naming the provider; an honest count draws no warning.
#[tokio::test]
async fn a_prompt_count_below_the_tool_schemas_warns_once() {
    let reply = |message: Value, prompt_tokens: u64| {
        Reply::json(
            200,
            json!({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 2, "total_tokens": prompt_tokens + 2}}),
        )
    };
    for (prompt_tokens, warned) in [(12, true), (40_000, false)] {
        // Two replies without a tool call, each with the same count: a reasoning-only
        // one (the agent is nudged to answer) and the answer.
        let server = TestServer::start(vec![
            reply(
                json!({"role": "assistant", "content": "", "reasoning_content": "hmm"}),
                prompt_tokens,
            ),
            reply(
                json!({"role": "assistant", "content": "fine"}),
                prompt_tokens,
            ),
        ])
        .await;
        let dir = repo_with_openai(&server.url, "max_retries = 0\n");
        let out = run_single(dir.path(), "oa", "hi", &[("RUST_LOG", "warn")]).await;
        assert_eq!(json_of(&out)["status"], "completed");
        assert_eq!(server.requests().len(), 2, "both replies were asked for");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.matches("may not render tools").count(),
            usize::from(warned),
            "{prompt_tokens} prompt tokens: {stderr}"
        );
        if warned {
            assert!(stderr.contains("oa"), "names the provider: {stderr}");
        }
    }
}

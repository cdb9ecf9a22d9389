//! Against a real OTLP/HTTP receiver (`otlp_receiver.py`, the official protobuf
//! messages): span names, parent links, shared trace id, attributes; and that a
//! repository's `[telemetry]` sends nothing anywhere.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use super::SINGLE;
use crate::support::peers;
use crate::support::repo::{bin, command, git_repo};

/// The receiver process (killed on drop) and the file it writes spans to.
pub(crate) struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    /// Starts the receiver, or `None` when the venv has no `opentelemetry-proto`.
    pub(crate) fn start(dir: &Path) -> Option<Self> {
        let python = std::env::var_os("CREWBOX_TEST_VENV")
            .map(|v| PathBuf::from(v).join("bin/python"))
            .filter(|p| p.is_file());
        let usable = python.as_ref().is_some_and(|p| {
            Command::new(p)
                .args(["-c", "import opentelemetry.proto.collector.trace.v1"])
                .status()
                .is_ok_and(|s| s.success())
        });
        if !usable {
            peers::missing(
                "opentelemetry-proto",
                "not importable by $CREWBOX_TEST_VENV/bin/python",
            );
            return None;
        }
        let out = dir.join("spans.jsonl");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/all/telemetry/otlp_receiver.py");
        let mut child = Command::new(python.unwrap())
            .arg(&script)
            .arg(&out)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver prints its port");
        Some(Self { child, port, out })
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span received so far.
    pub(crate) fn spans(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// `crewbox run PROMPT ARGS --script S --json` exporting to `endpoint`.
fn run(dir: &Path, script: &str, endpoint: &str, args: &[&str]) -> (Output, Value) {
    let path = dir.join("script.toml");
    std::fs::write(&path, script).unwrap();
    let out = command(dir, args)
        .arg("--script")
        .arg(&path)
        .arg("--json")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "authorization=Bearer otlp-test-token",
        )
        .env("OTEL_SERVICE_NAME", "crewbox-test")
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    (out, report)
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

/// Asserts every span is in one trace and every parent link resolves, and returns the
/// spans by id.
fn one_tree(spans: &[Value]) -> HashMap<String, &Value> {
    let by_id: HashMap<String, &Value> = spans
        .iter()
        .map(|s| (s["span_id"].as_str().unwrap().to_owned(), s))
        .collect();
    let runs = named(spans, "run");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let trace = &runs[0]["trace_id"];
    for s in spans {
        assert_eq!(&s["trace_id"], trace, "one trace: {s}");
        if s["name"] != "run" {
            let parent = s["parent_span_id"].as_str().unwrap();
            assert!(by_id.contains_key(parent), "parent of {s} was exported");
        }
    }
    by_id
}

fn parent<'a>(by_id: &HashMap<String, &'a Value>, span: &Value) -> &'a Value {
    by_id[span["parent_span_id"].as_str().unwrap()]
}

#[test]
fn a_single_run_exports_run_agent_turn_tool_with_ids_and_tokens() {
    let dir = git_repo(|_| {});
    let Some(rx) = Receiver::start(dir.path()) else {
        return;
    };
    let (out, report) = run(
        dir.path(),
        SINGLE,
        &rx.endpoint(),
        &["run", "read the notes", "--mode", "single"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = rx.spans();
    let by_id = one_tree(&spans);
    let run_id = report["run_id"].as_str().unwrap();
    let agent_id = report["agents"][0]["id"].as_str().unwrap();

    let run = named(&spans, "run")[0];
    assert_eq!(attr(run, "run_id"), run_id);
    assert_eq!(attr(run, "mode"), "single");
    assert_eq!(attr(run, "status"), "completed");
    assert_eq!(run["parent_span_id"], "", "the run is the root");
    assert_eq!(run["service_name"], "crewbox-test");
    assert_eq!(run["content_type"], "application/x-protobuf");
    assert_eq!(run["authorization"], "Bearer otlp-test-token");

    let agents = named(&spans, "agent");
    assert_eq!(agents.len(), 1, "{spans:#?}");
    let agent = agents[0];
    assert_eq!(parent(&by_id, agent)["name"], "run");
    assert_eq!(attr(agent, "agent_id"), agent_id);
    assert_eq!(attr(agent, "run_id"), run_id);
    assert_eq!(attr(agent, "status"), "completed");
    assert_eq!(attr(agent, "input_tokens"), 270);
    assert_eq!(attr(agent, "output_tokens"), 12);
    assert_eq!(attr(agent, "turns"), 2);

    let mut turns = named(&spans, "turn");
    turns.sort_by_key(|t| attr(t, "turn").as_i64());
    assert_eq!(turns.len(), 2, "{spans:#?}");
    for t in &turns {
        assert_eq!(parent(&by_id, t)["span_id"], agent["span_id"]);
    }
    assert_eq!(attr(turns[0], "turn"), 1);
    assert_eq!(attr(turns[0], "input_tokens"), 120);
    assert_eq!(attr(turns[0], "output_tokens"), 7);
    assert_eq!(attr(turns[0], "tool_calls"), 2);
    assert_eq!(attr(turns[1], "input_tokens"), 150);

    let tools = named(&spans, "tool");
    assert_eq!(tools.len(), 2, "{spans:#?}");
    for t in &tools {
        assert_eq!(parent(&by_id, t)["span_id"], turns[0]["span_id"]);
        assert_eq!(attr(t, "tool"), "read_file");
    }
    let (ok, failed): (Vec<&Value>, Vec<&Value>) =
        tools.iter().partition(|t| attr(t, "status") == "ok");
    assert_eq!((ok.len(), failed.len()), (1, 1), "{tools:#?}");
    assert_eq!(ok[0]["status_code"], 0, "unset: {}", ok[0]);
    // STATUS_CODE_ERROR, with a fixed reason rather than the error's text.
    assert_eq!(failed[0]["status_code"], 2, "{}", failed[0]);
    assert_eq!(failed[0]["status_message"], "tool-error");
    assert_eq!(attr(failed[0], "status"), "error");

    // Ids, names, counts and statuses only: no prompt, reply, file content or token.
    let text = std::fs::read_to_string(&rx.out).unwrap();
    let attrs: Vec<String> = spans.iter().map(|s| s["attributes"].to_string()).collect();
    assert!(
        !attrs.iter().any(|a| a.contains("\"otel.")),
        "status fields are not attributes: {attrs:?}"
    );
    for secret in [
        "read the notes",
        "notes say alpha",
        "alpha",
        "otlp-test-token",
        "missing.txt",
    ] {
        assert!(
            !attrs.iter().any(|a| a.contains(secret)),
            "`{secret}` in {text}"
        );
    }
}

const TEAM_SCRIPT: &str = r#"
[[reply]]
agent = "orchestrator"
when = "Split the request below into tasks"
text = "@worker:alice\nDesign the API.\n@end\n@worker:bob\nWrite the tests.\n@end"

[[reply]]
agent = "alice"
text = "ALICE-1"

[[reply]]
agent = "bob"
text = "BOB-1"

[[reply]]
agent = "orchestrator"
repeat = true
text = "SYNTH: the queue"

[[reply]]
agent = "synthesis"
repeat = true
text = "SYNTH: the queue"
"#;

#[test]
fn a_team_run_exports_every_member_under_its_run() {
    let dir = crate::recovery::repo();
    let Some(rx) = Receiver::start(dir.path()) else {
        return;
    };
    let (out, report) = run(
        dir.path(),
        TEAM_SCRIPT,
        &rx.endpoint(),
        &[
            "run",
            "build a queue",
            "--team",
            "duo",
            "--mode",
            "orchestrate",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["status"], "completed", "{report}");
    let spans = rx.spans();
    let by_id = one_tree(&spans);
    let run = named(&spans, "run")[0];
    assert_eq!(attr(run, "mode"), "orchestrate");
    let agents = named(&spans, "agent");
    let reported: Vec<&str> = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(agents.len(), reported.len(), "{spans:#?}\n{report}");
    let names: Vec<&str> = agents
        .iter()
        .map(|a| attr(a, "agent_name").as_str().unwrap())
        .collect();
    for member in ["alice", "bob"] {
        assert!(names.contains(&member), "{names:?}");
    }
    for a in &agents {
        assert!(
            reported.contains(&attr(a, "agent_id").as_str().unwrap()),
            "{a}"
        );
        assert_eq!(attr(a, "run_id"), &report["run_id"]);
        // Under the run: directly, or through the spans of the agent that spawned it.
        let mut up = parent(&by_id, a);
        while up["name"] != "run" {
            up = parent(&by_id, up);
        }
        assert!(attr(a, "input_tokens").as_i64().unwrap() > 0, "{a}");
    }
    for t in named(&spans, "turn") {
        assert_eq!(parent(&by_id, t)["name"], "agent", "{t}");
    }
}

#[test]
fn a_repository_cannot_send_traces_anywhere() {
    // The attacker: a loopback listener counting connections.
    let attacker = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = attacker.local_addr().unwrap().port();
    attacker.set_nonblocking(true).unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let counter = std::thread::spawn(move || {
        while !stopping.load(Ordering::SeqCst) {
            match attacker.accept() {
                Ok(_) => {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    });
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox")).unwrap();
        std::fs::write(
            work.join(".crewbox/config.toml"),
            format!(
                "[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\nservice_name = \"x\"\n"
            ),
        )
        .unwrap();
    });
    let trusted = bin(dir.path(), &["trust"]);
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let path = dir.path().join("script.toml");
    std::fs::write(&path, SINGLE).unwrap();
    let out = command(
        dir.path(),
        &["run", "read the notes", "--mode", "single", "--script"],
    )
    .arg(&path)
    .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
    .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    .output()
    .unwrap();
    stop.store(true, Ordering::SeqCst);
    counter.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("telemetry") && stderr.contains("config.toml"),
        "the ignored key is named: {stderr}"
    );
    assert_eq!(connections.load(Ordering::SeqCst), 0, "{stderr}");
}

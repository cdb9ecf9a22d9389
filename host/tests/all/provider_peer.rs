//! The real `crewbox` binary against a third-party mock of both APIs (llm-mock-api,
//! installed by scripts/test-deps.sh): multi-turn tool-using agents in the OpenAI and
//! Anthropic formats, streamed and not, plus errors — on wire formats written by
//! someone else, not by our own test server.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::peers;
use crate::support::repo::git_repo;
use crate::support::wire::{anthropic_violations, assert_well_formed, openai_violations};

const DRIVER: &str = include_str!("peers/llm_mock_api.py");

/// The mock server child; killed (by its own handle) when dropped.
struct Peer {
    child: Child,
    url: String,
    record: PathBuf,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Peer {
    /// Starts the mock with `script` (model name → replies) on a free loopback port.
    fn start(dir: &Path, script: &Value) -> Option<Self> {
        let mock = peers::tool("llm-mock-api")?;
        // The driver runs on the interpreter of the venv the package is installed in.
        let python = mock.with_file_name("python");
        let driver = dir.join("llm_mock_api_driver.py");
        std::fs::write(&driver, DRIVER).unwrap();
        let script_path = dir.join("peer-script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let record = dir.join("peer-requests.jsonl");
        let mut child = Command::new(&python)
            .arg(&driver)
            .arg(&script_path)
            .arg(&record)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut peer = Self {
            child,
            url: String::new(),
            record,
        };
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("llm-mock-api printed its URL");
        peer.url = line.trim().to_owned();
        assert!(
            peer.url.starts_with("http://127.0.0.1:"),
            "llm-mock-api did not start on loopback: {line:?}"
        );
        Some(peer)
    }

    /// The request bodies it received for `model`, oldest first.
    fn bodies(&self, model: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|r| r["body"]["model"] == model)
            .map(|r| r["body"].clone())
            .collect()
    }
}

/// Three turns: two parallel reads, a write, then the answer.
fn conversation() -> Value {
    json!([
        {"text": "Looking at the notes.", "tools": [
            {"name": "list_dir", "args": {"path": "."}},
            {"name": "read_file", "args": {"path": "notes.txt"}}
        ]},
        {"tools": [{"name": "write_file", "args": {"path": "summary.txt", "content": "alpha, summarised\n"}}]},
        {"text": "Done: summary.txt holds the summary."}
    ])
}

fn config(url: &str) -> String {
    let mut text = String::new();
    for (name, kind, stream) in [
        ("oa-stream", "openai", true),
        ("oa-json", "openai", false),
        ("an-stream", "anthropic", true),
        ("an-json", "anthropic", false),
    ] {
        let base = if kind == "openai" {
            format!("{url}/v1")
        } else {
            url.to_owned()
        };
        text.push_str(&format!(
            "[providers.{name}]\nkind = \"{kind}\"\nbase_url = \"{base}\"\nmodel = \"{name}\"\n\
             api_key_env = \"CREWBOX_PEER_KEY\"\nstream = {stream}\nretry_base_ms = 1\n\n"
        ));
    }
    text
}

fn run(dir: &Path, provider: &str, model: Option<&str>) -> Value {
    let mut args = vec!["run", "--mode", "single", "--provider", provider];
    if let Some(m) = model {
        args.extend(["--model", m]);
    }
    args.extend(["Summarise notes.txt into summary.txt", "--json"]);
    let mut c = crate::support::repo::command(dir, &args);
    c.env("CREWBOX_PEER_KEY", "peer-key-0123456789");
    let out = c.output().unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{provider}: not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The file the agent wrote, as committed on its branch.
fn committed(dir: &Path, report: &Value, path: &str) -> String {
    let branch = report["agents"][0]["branch"]["branch"]
        .as_str()
        .unwrap_or_else(|| panic!("no branch artifact: {report:#}"));
    let out = Command::new("git")
        .args(["show", &format!("{branch}:{path}")])
        .current_dir(dir.join("repo"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn multi_turn_tool_agents_in_both_formats_streamed_and_not() {
    let dir = git_repo(|_| {});
    let script = json!({
        "oa-stream": conversation(),
        "oa-json": conversation(),
        "an-stream": conversation(),
        "an-json": conversation(),
    });
    let Some(peer) = Peer::start(dir.path(), &script) else {
        return;
    };
    let cfg = dir.path().join("config").join("crewbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), config(&peer.url)).unwrap();
    for provider in ["oa-stream", "oa-json", "an-stream", "an-json"] {
        let report = run(dir.path(), provider, None);
        let agent = &report["agents"][0];
        assert_eq!(report["status"], "completed", "{provider}: {report:#}");
        assert_eq!(
            agent["result"], "Done: summary.txt holds the summary.",
            "{provider}"
        );
        assert_eq!(
            (agent["turns"].clone(), agent["tool_calls"].clone()),
            (json!(3), json!(3)),
            "{provider}"
        );
        assert_eq!(
            committed(dir.path(), &report, "summary.txt"),
            "alpha, summarised\n",
            "{provider}"
        );
        let bodies = peer.bodies(provider);
        assert_eq!(bodies.len(), 3, "{provider}");
        let check = if provider.starts_with("oa") {
            openai_violations
        } else {
            anthropic_violations
        };
        assert_well_formed(&bodies, check);
        // The second request carries both results of the parallel reads, the file's
        // content among them.
        assert!(
            bodies[1].to_string().contains("alpha"),
            "{provider}: {}",
            bodies[1]
        );
        let streamed = bodies[0]["stream"].as_bool().unwrap_or(false);
        assert_eq!(streamed, provider.ends_with("stream"), "{provider}");
    }
}

#[test]
fn errors_from_the_peer_are_retried_or_named() {
    let dir = git_repo(|_| {});
    let script = json!({
        // A 500 is retried; the retry gets the answer.
        "flaky": [
            {"error": {"status": 500, "message": "upstream hiccup"}},
            {"text": "recovered"}
        ],
        // A 401 is not retried and its message reaches the report.
        "denied": [
            {"error": {"status": 401, "message": "invalid x-api-key", "type": "authentication_error"}},
            {"text": "must not be reached"}
        ],
    });
    let Some(peer) = Peer::start(dir.path(), &script) else {
        return;
    };
    let cfg = dir.path().join("config").join("crewbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), config(&peer.url)).unwrap();

    let report = run(dir.path(), "oa-stream", Some("flaky"));
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(report["agents"][0]["result"], "recovered");
    assert_eq!(peer.bodies("flaky").len(), 2);

    let report = run(dir.path(), "an-json", Some("denied"));
    assert_eq!(report["agents"][0]["state"], "error", "{report:#}");
    let error = report["agents"][0]["error"].as_str().unwrap();
    assert!(
        error.contains("401") && error.contains("invalid x-api-key"),
        "{error}"
    );
    assert_eq!(peer.bodies("denied").len(), 1, "a 401 is not retried");
}

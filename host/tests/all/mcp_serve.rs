//! `crewbox mcp serve` end to end: the official Python MCP SDK (`mcp/drive.py`) as the
//! client of the real binary, over stdio and streamable HTTP, in a scratch repository
//! whose user config makes the scripted model the default provider.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::peers;
use crate::support::repo::{bin, git_repo};
use crate::support::script::writes_then;

const DRIVE: &str = include_str!("mcp/drive.py");
const TOKEN: &str = "s3cret-token-0123456789";

/// One crew revision that passes: the executor writes `gamma` into `notes.txt` (its
/// second turn after `exec_ms`), the reviewer passes it.
fn crew_script(exec_ms: u64) -> String {
    let executor = writes_then("executor", "notes.txt", "gamma\n", exec_ms, "wrote it");
    format!(
        r#"
[[reply]]
agent = "planner"
text = "1. Write gamma into notes.txt"
{executor}
[[reply]]
agent = "reviewer"
when = "(?m)^\\+gamma$"
text = "Correct.\nVERDICT: PASS"
"#
    )
}

/// A scratch repository whose user config runs `script` as the default provider, and
/// the venv's python (or `None` after reporting the SDK missing).
fn setup(script: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let python = peers::tool("python")?;
    let ok = Command::new(&python)
        .args(["-c", "import mcp.client.stdio, httpx2"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        peers::missing("mcp", "the Python MCP SDK does not import");
        return None;
    }
    let dir = git_repo(|_| {});
    let d = dir.path();
    std::fs::write(d.join("drive.py"), DRIVE).unwrap();
    std::fs::write(d.join("script.toml"), script).unwrap();
    let cfg = d.join("config/crewbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "default_provider = \"replay\"\n\n[providers.replay]\nkind = \"scripted\"\nscript = {}\n",
            toml::Value::String(d.join("script.toml").display().to_string())
        ),
    )
    .unwrap();
    Some((dir, python))
}

/// The environment `support::repo::command` gives crewbox, for a server the SDK starts.
fn env(dir: &Path) -> Value {
    json!({
        "CREWBOX_STATE_DIR": dir.join("state"),
        "XDG_CONFIG_HOME": dir.join("config"),
        "XDG_STATE_HOME": dir.join("xdg-state"),
        "HOME": dir.join("home"),
        "XDG_CACHE_HOME": crate::support::shared_cache_home(),
        "PATH": std::env::var("PATH").unwrap_or_default(),
    })
}

/// Runs `steps` through the SDK over `transport` (`stdio` or `http`); one result each.
fn drive(dir: &Path, python: &Path, transport: &str, target: Value, steps: Value) -> Vec<Value> {
    let out = Command::new(python)
        .arg(dir.join("drive.py"))
        .args([transport, &target.to_string(), &steps.to_string()])
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let server_log = std::fs::read_to_string(dir.join("serve.stderr")).unwrap_or_default();
    let results: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "drive.py printed no JSON ({e}): {text}\nstderr: {}\nserver: {server_log}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    results.as_array().unwrap().clone()
}

/// Over stdio: the SDK starts `crewbox mcp serve` in the repository.
fn stdio(dir: &Path, python: &Path, steps: Value) -> Vec<Value> {
    let target = json!({
        "command": env!("CARGO_BIN_EXE_crewbox"),
        "args": ["mcp", "serve"],
        "env": env(dir),
        "cwd": dir.join("repo"),
        "stderr": dir.join("serve.stderr"),
    });
    drive(dir, python, "stdio", target, steps)
}

/// A tool result's text as JSON.
fn body(result: &Value) -> Value {
    let text = result["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `crewbox mcp serve --http 127.0.0.1:0 --token-env …` started in the background,
/// and the URL it serves (read from its stderr).
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(dir: &Path) -> Self {
        let mut child = crate::support::repo::command(
            dir,
            &[
                "mcp",
                "serve",
                "--http",
                "127.0.0.1:0",
                "--token-env",
                "CREWBOX_MCP_TOKEN",
            ],
        )
        .env("CREWBOX_MCP_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .unwrap_or_else(|| panic!("the server exited before serving"))
                .unwrap();
            if let Some(url) = line.strip_prefix("crewbox: serving MCP on ") {
                break url.trim().to_owned();
            }
        };
        // Keep draining its stderr so it never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, url }
    }

    fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http(dir: &Path, python: &Path, url: &str, token: Option<&str>, steps: Value) -> Vec<Value> {
    drive(
        dir,
        python,
        "http",
        json!({"url": url, "token": token}),
        steps,
    )
}

/// `crewbox status RUN --json` until `done` holds (a minute at most).
fn status_until(dir: &Path, run: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = bin(dir, &["status", run, "--json"]);
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if done(&report) {
            return report;
        }
        assert!(Instant::now() < deadline, "{what} not reached: {report}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The status `run` ended with (`crewbox status RUN` until it is not `running`).
fn ended(dir: &Path, run: &str) -> Value {
    status_until(dir, run, "the run's end", |r| {
        r["status"].as_str().is_some_and(|s| s != "running")
    })["status"]
        .clone()
}

/// The ids of the repository's runs, newest first (at most 100).
fn run_ids(dir: &Path) -> Vec<String> {
    let out = bin(dir, &["status", "--limit", "100", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["runs"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|x| x["run_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The run ids once there are at least `n` runs (a minute at most).
fn until_runs(dir: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ids = run_ids(dir);
        if ids.len() >= n {
            return ids;
        }
        assert!(Instant::now() < deadline, "{n} runs never started");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn branch_file(dir: &Path, branch: &str, file: &str) -> String {
    let out = Command::new("git")
        .args(["show", &format!("{branch}:{file}")])
        .current_dir(dir.join("repo"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run_crew(wait: bool) -> Value {
    json!({"op": "call", "tool": "run", "progress": true,
           "args": {"prompt": "write gamma", "mode": "crew", "wait": wait}})
}

#[test]
fn a_client_over_stdio_runs_a_crew_with_progress_and_reviews_its_diff() {
    let Some((dir, python)) = setup(&crew_script(0)) else {
        return;
    };
    let d = dir.path();
    let r = stdio(
        d,
        &python,
        json!([
            {"op": "list_tools"},
            run_crew(true),
            {"op": "call", "tool": "diff", "args": {"run_id": "$RUN"}},
            {"op": "call", "tool": "status", "args": {}},
            {"op": "call", "tool": "events", "args": {"run_id": "$RUN", "limit": 3}},
            {"op": "call", "tool": "tree", "args": {"run_id": "$RUN"}},
            {"op": "call", "tool": "branches", "args": {}},
            {"op": "list_resources"},
            {"op": "templates"},
            {"op": "read", "uri": "crewbox://runs/$RUN"},
        ]),
    );
    let tools = r[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for want in [
        "run", "status", "events", "tree", "diff", "steer", "stop", "send", "resume", "branches",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for t in tools {
        let read =
            ["status", "events", "tree", "diff", "branches"].contains(&t["name"].as_str().unwrap());
        assert_eq!(t["read_only"], read, "{t}");
        assert_eq!(t["schema"]["type"], "object", "{t}");
    }

    assert_eq!(r[1]["is_error"], false, "{}", r[1]);
    let report = body(&r[1]);
    assert_eq!(report["mode"], "crew");
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["verdict"]["verdict"], "PASS");
    let progress: Vec<&str> = r[1]["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["message"].as_str().unwrap())
        .collect();
    for phase in ["planning", "executing", "reviewing", "run completed"] {
        assert!(
            progress.iter().any(|m| m.contains(phase)),
            "no `{phase}` in {progress:?}"
        );
    }
    let run = report["run_id"].as_str().unwrap();

    let diff = body(&r[2]);
    assert!(diff["diff"].as_str().unwrap().contains("+gamma"), "{diff}");
    let branch = diff["branch"].as_str().unwrap();
    assert!(branch.starts_with("crewbox/"), "{branch}");
    assert_eq!(branch_file(d, branch, "notes.txt"), "gamma\n");

    assert_eq!(body(&r[3])["runs"][0]["run_id"], run);
    let events = body(&r[4]);
    assert_eq!(events["events"].as_array().unwrap().len(), 3);
    assert_eq!(events["more"], true);
    assert_eq!(body(&r[5])["run_id"], run);
    assert!(
        body(&r[6])["branches"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["name"] == branch),
        "{}",
        r[6]
    );
    let uris: Vec<&str> = r[7]["uris"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u.as_str().unwrap())
        .collect();
    assert!(
        uris.contains(&format!("crewbox://runs/{run}").as_str()),
        "{uris:?}"
    );
    assert!(
        uris.contains(&format!("crewbox://runs/{run}/events").as_str()),
        "{uris:?}"
    );
    assert_eq!(r[8]["templates"].as_array().unwrap().len(), 2);
    let read: Value = serde_json::from_str(r[9]["text"].as_str().unwrap()).unwrap();
    assert_eq!(read["status"], "completed");

    // The server's stdout carried only protocol; it logged nothing there.
    let log = std::fs::read_to_string(d.join("serve.stderr")).unwrap_or_default();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn http_needs_the_bearer_token_and_a_disconnect_leaves_the_run_going() {
    let Some((dir, python)) = setup(&crew_script(1500)) else {
        return;
    };
    let d = dir.path();
    let server = HttpServer::start(d);
    let short = &TOKEN[..TOKEN.len() - 1];
    for token in [None, Some("wrong-token-0123456789"), Some(short)] {
        // The SDK cannot even initialize; the plain request says why: 401.
        let r = http(
            d,
            &python,
            &server.url,
            token,
            json!([{"op": "list_tools"}]),
        );
        assert!(r[0]["exception"].is_string(), "{token:?}: {}", r[0]);
        let probe = json!({"url": server.url, "token": token});
        let r = drive(d, &python, "http-status", probe, json!([]));
        assert_eq!(r[0]["status"], 401, "{token:?}: {}", r[0]);
        assert_eq!(r[0]["www_authenticate"], "Bearer");
    }
    let probe = json!({"url": server.url, "token": TOKEN});
    let r = drive(d, &python, "http-status", probe, json!([]));
    assert_eq!(r[0]["status"], 200, "{}", r[0]);
    // Started without waiting; the client then goes away.
    let r = http(
        d,
        &python,
        &server.url,
        Some(TOKEN),
        json!([run_crew(false)]),
    );
    assert_eq!(r[0]["is_error"], false, "{}", r[0]);
    let run = body(&r[0])["run_id"].as_str().unwrap().to_owned();
    let report = status_until(d, &run, "the run's end", |r| {
        r["status"] != "running" && !r.is_null()
    });
    assert_eq!(report["status"], "completed", "{report}");

    // The same over HTTP with the token: run with wait, then the diff.
    let r = http(
        d,
        &python,
        &server.url,
        Some(TOKEN),
        json!([run_crew(true), {"op": "call", "tool": "diff", "args": {"run_id": "$RUN"}}]),
    );
    assert_eq!(body(&r[0])["status"], "completed", "{}", r[0]);
    assert!(!r[0]["progress"].as_array().unwrap().is_empty(), "{}", r[0]);
    assert!(
        body(&r[1])["diff"].as_str().unwrap().contains("+gamma"),
        "{}",
        r[1]
    );
}

#[test]
fn http_refuses_a_remote_address_and_a_missing_token() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    let out = bin(
        d,
        &["mcp", "serve", "--http", "0.0.0.0:0", "--token-env", "X"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a loopback address"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = bin(d, &["mcp", "serve", "--http", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token-env"));
    let out = crate::support::repo::command(
        d,
        &["mcp", "serve", "--http", "127.0.0.1:0", "--token-env", "T"],
    )
    .env("T", "short")
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 16"));
    assert!(out.stdout.is_empty());
}

#[test]
fn a_killed_server_leaves_its_run_for_resume_and_a_second_server_sees_it() {
    let Some((dir, python)) = setup(&crew_script(4000)) else {
        return;
    };
    let d = dir.path();
    let mut server = HttpServer::start(d);
    let r = http(
        d,
        &python,
        &server.url,
        Some(TOKEN),
        json!([run_crew(false)]),
    );
    let run = body(&r[0])["run_id"].as_str().unwrap().to_owned();
    status_until(d, &run, "the executor running", |r| {
        r["agents"].as_array().is_some_and(|a| {
            a.iter()
                .any(|a| a["role"] == "executor" && a["state"] == "running")
        })
    });
    server.kill9();
    let interrupted = status_until(d, &run, "interrupted", |r| r["interrupted"] == true);
    assert_eq!(interrupted["status"], "running");

    let out = bin(d, &["resume", &run, "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["status"], "completed", "{report}");

    let r = stdio(
        d,
        &python,
        json!([{"op": "call", "tool": "status", "args": {"run_id": run}}]),
    );
    let seen = body(&r[0]);
    assert_eq!(seen["status"], "completed", "{seen}");
    assert_eq!(seen["verdict"]["verdict"], "PASS");
}

#[test]
fn a_cancelled_waiting_run_is_stopped() {
    let Some((dir, python)) = setup(&crew_script(30_000)) else {
        return;
    };
    let d = dir.path();
    let r = stdio(
        d,
        &python,
        json!([
            {"op": "cancel", "tool": "run", "after": 3,
             "args": {"prompt": "write gamma", "mode": "crew", "wait": true}},
            {"op": "call", "tool": "status", "args": {}},
        ]),
    );
    assert_eq!(r[0]["cancelled"], true, "{}", r[0]);
    let run = body(&r[1])["runs"][0]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(ended(d, &run), "cancelled");
}

#[test]
fn hostile_input_gets_clear_errors_and_the_server_keeps_answering() {
    // (The `network` refusal was shown failing without its check.)
    let Some((dir, python)) = setup(&crew_script(0)) else {
        return;
    };
    let d = dir.path();
    let huge = json!({"$repeat": ["x", 10 * 1024 * 1024]});
    let r = stdio(
        d,
        &python,
        json!([
            {"op": "call", "tool": "no_such_tool", "args": {}},
            {"op": "call", "tool": "run", "args": {"prompt": 5}},
            {"op": "call", "tool": "status", "args": {"limit": "ten"}},
            {"op": "call", "tool": "stop", "args": {"target": "x", "extra": true}},
            {"op": "call", "tool": "run", "args": {"prompt": "x", "team": "nosuch"}},
            {"op": "call", "tool": "run", "args": {"prompt": "x", "mode": "../../x"}},
            {"op": "call", "tool": "run", "args": {"prompt": "x", "team": "../../x"}},
            {"op": "call", "tool": "run", "args": {"prompt": huge}},
            {"op": "call", "tool": "status", "args": {"run_id": "r-nope"}},
            {"op": "read", "uri": "crewbox://runs/../../etc/passwd"},
            {"op": "concurrent", "tool": "status", "args": {}, "n": 1000},
            {"op": "call", "tool": "status", "args": {}},
            // The network is the user's to give (`--allow-network`), not a client's.
            {"op": "call", "tool": "run", "args": {"prompt": "x", "network": true}},
            {"op": "call", "tool": "status", "args": {}},
            // Out of the range each schema declares (they were clamped silently).
            {"op": "call", "tool": "status", "args": {"limit": 0}},
            {"op": "call", "tool": "events", "args": {"run_id": "r-nope", "limit": 501}},
            {"op": "call", "tool": "diff", "args": {"run_id": "r-nope", "max_bytes": 0}},
            // A model name the CLI refuses (it was stored with the run as given).
            {"op": "call", "tool": "run", "args": {"prompt": "x", "model": "bad model"}},
            {"op": "call", "tool": "run", "args": {"prompt": "x", "model": "\u{1b}[31mred"}},
            {"op": "call", "tool": "run", "args": {"prompt": "x", "model": ""}},
            {"op": "call", "tool": "status", "args": {}},
        ]),
    );
    let error = |i: usize, want: &str| {
        let text = r[i]["text"].as_str().unwrap_or_default();
        let exc = r[i]["exception"].as_str().unwrap_or_default();
        assert!(
            (r[i]["is_error"] == true && text.contains(want)) || exc.contains(want),
            "step {i}: want `{want}`: {}",
            r[i]
        );
    };
    error(0, "unknown tool `no_such_tool`");
    error(
        1,
        "`run`: invalid arguments: invalid type: integer `5`, expected a string",
    );
    error(2, "`status`: invalid arguments");
    error(3, "unknown field `extra`");
    error(4, "unknown team `nosuch`");
    error(5, "unknown mode `../../x` (one of: auto,");
    error(6, "`../../x` is not a team name");
    error(7, "request refused");
    error(7, "1048576");
    error(8, "no run matches `r-nope`");
    error(9, "no resource");
    assert_eq!(r[10]["answered"], 1000, "{}", r[10]);
    assert_eq!(r[10]["ok"], 1000, "{}", r[10]);
    assert_eq!(r[11]["is_error"], false, "{}", r[11]);
    // Nothing ran: every refusal came before a run was recorded.
    assert_eq!(
        body(&r[11])["runs"].as_array().unwrap().len(),
        0,
        "{}",
        r[11]
    );
    error(12, "`network: true` is refused");
    error(12, "--allow-network");
    assert_eq!(
        body(&r[13])["runs"].as_array().unwrap().len(),
        0,
        "{}",
        r[13]
    );
    error(14, "`status`: `limit` must be 1..=100 (got 0)");
    error(15, "`events`: `limit` must be 1..=500 (got 501)");
    error(16, "`diff`: `max_bytes` must be 1..=524288 (got 0)");
    error(
        17,
        "`model`: a model name has no spaces or control characters",
    );
    error(
        18,
        "`model`: a model name has no spaces or control characters",
    );
    error(19, "`model`: a model name has 1 to 256 characters");
    assert_eq!(
        body(&r[20])["runs"].as_array().unwrap().len(),
        0,
        "{}",
        r[20]
    );
}

/// The official conformance suite (`scripts/mcp-conformance.sh`, server mode) against
/// `crewbox mcp serve --http`: every server scenario that applies to crewbox passes
/// (the script exits with the number that failed; it takes a few seconds).
#[test]
fn conformance_server_scenarios_that_apply_pass() {
    let Some(_) = peers::node_tool("conformance") else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/mcp-conformance.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_crewbox"))
        .env("ONLY_APPLICABLE", "1")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{table}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for s in [
        "server-initialize",
        "ping",
        "tools-list",
        "resources-list",
        "dns-rebinding-protection",
    ] {
        assert!(
            table
                .lines()
                .any(|l| l.starts_with(s) && l.contains(" pass ")),
            "{s} did not pass:\n{table}"
        );
    }
}

/// `crewbox mcp serve` over stdio in `dir`: the process, its stdin, and each line of
/// its stdout that reads as JSON.
fn raw_serve(
    dir: &Path,
) -> (
    Child,
    std::process::ChildStdin,
    std::sync::mpsc::Receiver<Value>,
) {
    let mut server = crate::support::repo::command(dir, &["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let input = server.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stdout = server.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    (server, input, rx)
}

/// Lines a client's SDK could never produce, written raw to `crewbox mcp serve` over
/// stdio: each with an id gets an answer under that id (the SDK alone dropped the first
/// three without one, leaving the client waiting), and the server keeps answering.
#[test]
fn raw_lines_that_do_not_read_are_answered_under_their_id() {
    use std::io::Write as _;
    let dir = git_repo(|_| {});
    let (mut server, mut input, rx) = raw_serve(dir.path());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let mut lines: Vec<Vec<u8>> = vec![
        init.to_string().into_bytes(),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
    ];
    // Nested past the parser's depth; bytes that are not UTF-8 in a string; a syntax
    // error; a protocol method whose params are not its params.
    lines.push(
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"status","arguments":{{"x":{}{}}}}}}}"#,
            "[".repeat(300),
            "]".repeat(300)
        )
        .into_bytes(),
    );
    let mut not_utf8 = br#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"x":""#.to_vec();
    not_utf8.extend_from_slice(b"\xff\xfe\"}}");
    lines.push(not_utf8);
    lines.push(br#"{"jsonrpc":"2.0","id":4,"method":"tools/list",}"#.to_vec());
    lines.push(br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":7}}"#.to_vec());
    lines.push(br#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#.to_vec());
    // Not JSON-RPC 2.0 (another version, or none), with a readable id.
    lines.push(br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#.to_vec());
    lines.push(br#"{"id":"eight","method":"ping"}"#.to_vec());
    for mut line in lines {
        line.push(b'\n');
        input.write_all(&line).unwrap();
    }
    input.flush().unwrap();
    let mut answers = std::collections::BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while answers.len() < 8 {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(v) = rx.recv_timeout(left) else { break };
        if let Some(id) = v["id"].as_i64() {
            answers.insert(id, v);
        } else if v["id"] == "eight" {
            answers.insert(8, v);
        }
    }
    drop(input);
    let _ = server.kill();
    let _ = server.wait();
    let code = |id: i64| answers.get(&id).map(|v| v["error"]["code"].clone());
    for id in [2, 3, 4] {
        assert_eq!(code(id), Some(json!(-32700)), "{id}: {answers:?}");
        let message = answers[&id]["error"]["message"].as_str().unwrap();
        assert!(message.contains("does not read as JSON"), "{message}");
    }
    assert_eq!(code(5), Some(json!(-32602)), "{answers:?}");
    assert!(
        answers[&5]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the params of `tools/call` do not read"),
        "{answers:?}"
    );
    assert!(answers[&6]["result"]["tools"].is_array(), "{answers:?}");
    for id in [7, 8] {
        assert_eq!(code(id), Some(json!(-32600)), "{id}: {answers:?}");
        let message = answers[&id]["error"]["message"].as_str().unwrap();
        assert!(message.contains("not a JSON-RPC message"), "{message}");
    }
}

/// A raw stdio client of `crewbox mcp serve` in `dir` (initialized): send lines with
/// `send`, read answers with `answer`.
struct RawStdio {
    server: std::process::Child,
    input: std::process::ChildStdin,
    answers: std::sync::mpsc::Receiver<Value>,
}

impl RawStdio {
    fn start(dir: &Path) -> Self {
        let mut server = crate::support::repo::command(dir, &["mcp", "serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = server.stdin.take().unwrap();
        let (tx, answers) = std::sync::mpsc::channel::<Value>();
        let stdout = server.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        let mut raw = Self {
            server,
            input,
            answers,
        };
        raw.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        );
        assert!(raw.answer(&json!(0)).get("result").is_some());
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    fn send(&mut self, message: &Value) {
        use std::io::Write as _;
        writeln!(self.input, "{message}").unwrap();
        self.input.flush().unwrap();
    }

    /// The next answer under `id` (within `most`), or `None`; others are dropped.
    fn answer_within(&self, id: &Value, most: Duration) -> Option<Value> {
        let deadline = Instant::now() + most;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let v = self.answers.recv_timeout(left).ok()?;
            if v["id"] == *id && v.get("method").is_none() {
                return Some(v);
            }
        }
    }

    fn answer(&self, id: &Value) -> Value {
        self.answer_within(id, Duration::from_secs(60))
            .unwrap_or_else(|| panic!("no answer under id {id}"))
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// A request reusing the id of a waiting `run` call is answered with an error at once
/// and never reaches the SDK: the first call's report still comes under the id, and a
/// later cancellation of the id still stops its run. The SDK kept one cancellation
/// token per id, so the duplicate took the first call's place: its report was never
/// sent, and its cancellation found nothing. Shown failing without the fix.
#[test]
fn a_request_reusing_an_id_in_flight_leaves_the_first_call_whole() {
    let Some((dir, _)) = setup(&crew_script(3_000)) else {
        return;
    };
    let d = dir.path();
    let mut raw = RawStdio::start(d);
    let run = |id: i64, prompt: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "run", "arguments": {"prompt": prompt, "mode": "crew", "wait": true}}})
    };
    raw.send(&run(42, "write gamma"));
    until_runs(d, 1);
    raw.send(&json!({"jsonrpc": "2.0", "id": 42, "method": "tools/call",
                      "params": {"name": "status", "arguments": {}}}));
    let refused = raw.answer(&json!(42));
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("still in flight"), "{refused}");
    let report = raw.answer(&json!(42));
    assert_eq!(
        body(&report["result"]["content"][0])["status"],
        "completed",
        "the first call's report came: {report}"
    );

    // The same, then the id cancelled: the first call's run stops.
    let mut raw = RawStdio::start(d);
    raw.send(&run(7, "write gamma again"));
    let first = until_runs(d, 2)[0].clone();
    raw.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    assert!(raw.answer(&json!(7))["error"].is_object());
    // The same id written `7.0`, which the SDK reads as 7: refused as well (it passed
    // the guard, and its answer under 7 took the run call's place).
    raw.send(&json!({"jsonrpc": "2.0", "id": 7.0, "method": "ping"}));
    let refused = raw.answer(&json!(7));
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("still in flight")),
        "{refused}"
    );
    raw.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 7, "reason": "changed my mind"}}),
    );
    assert_eq!(ended(d, &first), "cancelled");
    // The id is free again once cancelled.
    raw.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    assert!(raw.answer(&json!(7))["result"].is_object());
    // A session is initialized once.
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 8, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "again", "version": "1"}}}),
    );
    let again = raw.answer(&json!(8));
    assert!(
        again["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("initialized already")),
        "{again}"
    );
    raw.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}));
    assert!(raw.answer(&json!(9))["result"].is_object());
    // A batch, and ids that are no string or integer, are answered with `"id": null`
    // (JSON-RPC's rule; the answers had no id member).
    for (message, says) in [
        (
            json!([{"jsonrpc": "2.0", "id": 10, "method": "ping"}]),
            "batches",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}),
            "neither a string nor an integer",
        ),
        (
            json!({"jsonrpc": "2.0", "id": true, "method": "ping"}),
            "neither a string nor an integer",
        ),
    ] {
        raw.send(&message);
        let answer = raw.answer(&Value::Null);
        assert_eq!(answer.get("id"), Some(&Value::Null), "{message}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(says)),
            "{message}: {answer}"
        );
    }
}

/// One raw HTTP/1.1 POST of `body` as JSON to the server at `url`, with its token:
/// the status and the body of the answer.
fn raw_post(url: &str, body: &[u8]) -> (u16, String) {
    use std::io::{Read as _, Write as _};
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // A server may answer (413) before it read the whole of a large body.
    let _ = stream.write_all(body);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let code = answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (code, body)
}

/// Over HTTP a body that is not a JSON-RPC message is `400` with a JSON-RPC error
/// (the SDK alone answered `415` in plain text), one over 1 MiB is `413`, and the
/// server keeps answering well-formed requests.
#[test]
fn http_answers_a_body_that_is_not_a_message_with_400_and_a_json_rpc_error() {
    let dir = git_repo(|_| {});
    let server = HttpServer::start(dir.path());
    let error = |body: &[u8]| {
        let (code, text) = raw_post(&server.url, body);
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        (code, v)
    };
    let (code, v) = error(b"not json");
    assert_eq!(
        (code, v["error"]["code"].clone()),
        (400, json!(-32700)),
        "{v}"
    );
    assert_eq!(v["id"], Value::Null);
    let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
    let (code, v) = error(deep.as_bytes());
    assert_eq!(
        (code, v["error"]["code"].clone()),
        (400, json!(-32700)),
        "{v}"
    );
    let (code, v) = error(br#"{"jsonrpc":"2.0","id":7,"method":5}"#);
    assert_eq!(
        (code, v["error"]["code"].clone()),
        (400, json!(-32600)),
        "{v}"
    );
    assert_eq!(v["id"], 7, "{v}");
    let (code, text) = raw_post(&server.url, &vec![b' '; 2 * 1024 * 1024]);
    assert_eq!(code, 413, "{text}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let (code, text) = raw_post(&server.url, init.to_string().as_bytes());
    assert_eq!(code, 200, "{text}");
    assert!(text.contains("\"serverInfo\""), "{text}");
}

/// One raw HTTP/1.1 request to the server at `url` with its token, in session
/// `session` (if any): the status, the session id the answer names, and its body.
fn raw_http(
    url: &str,
    method: &str,
    session: Option<&str>,
    body: &Value,
) -> (u16, Option<String>, String) {
    use std::io::{Read as _, Write as _};
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let body = body.to_string();
    let session = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
         {session}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer}"));
    let id = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("mcp-session-id")
            .then(|| v.trim().to_owned())
    });
    (code, id, body.to_owned())
}

/// A new raw HTTP session: its id.
fn raw_session(url: &str) -> String {
    let (code, id, body) = raw_http(
        url,
        "POST",
        None,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    assert_eq!(code, 200, "{body}");
    let id = id.unwrap_or_else(|| panic!("no session id: {body}"));
    let (code, _, body) = raw_http(
        url,
        "POST",
        Some(&id),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert_eq!(code, 202, "{body}");
    id
}

/// Two HTTP sessions number their requests alike, and each one's cancellation is its
/// own: sessions A and B each wait on a run under request id 1; B cancels its request,
/// and B's run stops; A then cancels its own, and A's run stops too. A second call of
/// id 1 in A while the first waits is refused (it could never be told apart) and
/// starts nothing (the server is then left waiting on the first; the client broke the
/// protocol). Shown failing when calls were kept per request id alone, for every
/// session (B's call was refused as A's duplicate; before that refusal, B's call ending
/// took request 1's record from A, whose cancellation then left its run going).
#[test]
fn each_sessions_cancellation_stops_its_own_run() {
    let Some((dir, _)) = setup(&crew_script(20_000)) else {
        return;
    };
    let d = dir.path();
    let server = HttpServer::start(d);
    let start = |session: &str| {
        let (url, s) = (server.url.clone(), session.to_owned());
        std::thread::spawn(move || {
            raw_http(
                &url,
                "POST",
                Some(&s),
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                    "name": "run",
                    "arguments": {"prompt": "write gamma", "mode": "crew", "wait": true}}}),
            )
        })
    };
    let cancel = |session: &str| {
        let (code, _, body) = raw_http(
            &server.url,
            "POST",
            Some(session),
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 1}}),
        );
        assert_eq!(code, 202, "{body}");
    };
    let a = raw_session(&server.url);
    let wait_a = start(&a);
    let run_a = until_runs(d, 1)[0].clone();
    let b = raw_session(&server.url);
    let wait_b = start(&b);
    let run_b = until_runs(d, 2).into_iter().find(|r| *r != run_a).unwrap();
    cancel(&b);
    assert_eq!(ended(d, &run_b), "cancelled");
    let _ = wait_b.join();
    cancel(&a);
    assert_eq!(ended(d, &run_a), "cancelled");
    let _ = wait_a.join();
    // A session's second call of an id that waits is refused and starts nothing.
    let c = raw_session(&server.url);
    let _first = start(&c);
    until_runs(d, 3);
    let (_, _, again) = start(&c).join().unwrap();
    assert!(again.contains("still in flight in this session"), "{again}");
    assert_eq!(run_ids(d).len(), 3);
    // The refused duplicate did not take the first call's place: cancelling the id
    // still stops the first call's run (the SDK had kept the second's token under the
    // id, then dropped it, so this cancellation found nothing and the run went on).
    cancel(&c);
    let run_c = run_ids(d)
        .into_iter()
        .find(|r| *r != run_a && *r != run_b)
        .unwrap();
    assert_eq!(ended(d, &run_c), "cancelled");
    // A session is initialized once, over HTTP as over stdio (it was answered as a
    // fresh handshake in the middle of the session).
    let (code, _, body) = raw_http(
        &server.url,
        "POST",
        Some(&c),
        &json!({"jsonrpc": "2.0", "id": 77, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "again", "version": "0"}}}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("initialized already") && body.contains("\"id\":77"),
        "{body}"
    );
    // Closing a session: `200` (the SDK's `202` made the Python SDK warn that closing
    // failed); closing one that is not open is `404`, as any request naming it.
    let (code, _, _) = raw_http(&server.url, "DELETE", Some(&c), &json!({}));
    assert_eq!(code, 200);
    let (code, _, body) = raw_http(&server.url, "DELETE", Some(&c), &json!({}));
    assert_eq!(code, 404, "{body}");
    let (code, _, body) = raw_http(&server.url, "DELETE", Some("no-such-session"), &json!({}));
    assert_eq!(code, 404, "{body}");
}

/// SIGTERM stops a stdio server whose client keeps its stdin open: the run it started
/// is left resumable and the process exits (within the shutdown grace), instead of
/// waiting for an end of input that never comes. Shown failing (still alive after 30 s)
/// when the runtime waited for its blocking read of stdin.
#[test]
fn sigterm_ends_a_stdio_server_whose_client_keeps_stdin_open() {
    use std::io::Write as _;
    let Some((dir, _)) = setup(&crew_script(30_000)) else {
        return;
    };
    let d = dir.path();
    let mut server = crate::support::repo::command(d, &["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = server.stdin.take().unwrap();
    let stdout = server.stdout.take().unwrap();
    std::thread::spawn(move || BufReader::new(stdout).lines().for_each(drop));
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run", "arguments": {"prompt": "write gamma", "mode": "crew", "wait": true}}}),
    ] {
        writeln!(input, "{msg}").unwrap();
    }
    input.flush().unwrap();
    let run = until_runs(d, 1)[0].clone();
    let pid = server.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let exited = loop {
        if let Some(status) = server.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(input);
    if exited.is_none() {
        let _ = server.kill();
        let _ = server.wait();
    }
    assert!(exited.is_some(), "still running 30 s after SIGTERM");
    let report = status_until(d, &run, "the run left resumable", |r| {
        r["interrupted"] == true
    });
    assert_eq!(report["status"], "running", "{report}");
}

/// A client cannot start runs without bound: past `MAX_RUNS` (16) going at once, a
/// `run` call is refused, saying why, and starts nothing (1,000 calls made 1,000
/// worktrees and ran the server out of file descriptors). Shown failing (20 started)
/// without the bound.
#[test]
fn runs_started_through_the_server_are_bounded() {
    let slow = "[[reply]]\nrepeat = true\ndelay_ms = 30000\ntext = \"done\"\n";
    let Some((dir, python)) = setup(slow) else {
        return;
    };
    let d = dir.path();
    let r = stdio(
        d,
        &python,
        json!([
            {"op": "concurrent", "tool": "run", "n": 20,
             "args": {"prompt": "wait", "mode": "single"}},
            {"op": "call", "tool": "run", "args": {"prompt": "one more", "mode": "single"}},
        ]),
    );
    assert_eq!(r[0]["answered"], 20, "{}", r[0]);
    assert_eq!(r[0]["ok"], 16, "{}", r[0]);
    assert_eq!(r[1]["is_error"], true, "{}", r[1]);
    assert!(
        r[1]["text"]
            .as_str()
            .unwrap()
            .contains("16 runs started through this server are still going"),
        "{}",
        r[1]
    );
    assert_eq!(run_ids(d).len(), 16);
}

/// What a client reads is as inert as what the CLI prints: C1 controls (the 8-bit CSI
/// U+009B) and bidi overrides from a model's reply or from the client's own arguments
/// come back as escapes — in a run's report, `events`, a resource and an error echoing
/// an argument — never raw. Shown failing (raw U+009B in the report) when the texts
/// were only redacted.
#[test]
fn what_a_client_reads_holds_no_raw_control_or_bidi_characters() {
    let script = "[[reply]]\nrepeat = true\ntext = \"done \\u009b31m \\u202e drow\"\n";
    let Some((dir, python)) = setup(script) else {
        return;
    };
    let d = dir.path();
    let r = stdio(
        d,
        &python,
        json!([
            {"op": "call", "tool": "run", "args": {"prompt": "go", "mode": "single", "wait": true}},
            {"op": "call", "tool": "events", "args": {"run_id": "$RUN"}},
            {"op": "read", "uri": "crewbox://runs/$RUN"},
            {"op": "call", "tool": "status", "args": {"run_id": "r-\u{9b}31m\u{202e}"}},
        ]),
    );
    assert_eq!(r[0]["is_error"], false, "{}", r[0]);
    assert_eq!(
        body(&r[0])["result"],
        "done \u{9b}31m \u{202e} drow",
        "{}",
        r[0]
    );
    assert_eq!(r[3]["is_error"], true, "{}", r[3]);
    for (i, step) in r.iter().enumerate() {
        let text = step["text"].as_str().unwrap_or_default();
        assert!(!text.is_empty(), "step {i}: {step}");
        assert!(
            !text.contains(['\u{9b}', '\u{202e}']),
            "step {i} holds a raw control or bidi character: {text}"
        );
        assert!(text.contains("\\u009b"), "step {i}: {text}");
    }
}

/// A `resume` the engine refuses (the run has finished) is an error whether or not the
/// call waits. Shown failing (`wait: false` answered "running", the run goes on) when a
/// resumed run's id was taken as known before the engine held the run.
#[test]
fn a_refused_resume_is_an_error_without_wait_too() {
    let Some((dir, python)) = setup("[[reply]]\nrepeat = true\ntext = \"done\"\n") else {
        return;
    };
    let r = stdio(
        dir.path(),
        &python,
        json!([
            {"op": "call", "tool": "run", "args": {"prompt": "go", "mode": "single", "wait": true}},
            {"op": "call", "tool": "resume", "args": {"run_id": "$RUN", "wait": false}},
            {"op": "call", "tool": "resume", "args": {"run_id": "$RUN", "wait": true}},
        ]),
    );
    assert_eq!(body(&r[0])["status"], "completed", "{}", r[0]);
    for step in &r[1..] {
        assert_eq!(step["is_error"], true, "{step}");
        assert!(
            step["text"].as_str().unwrap().contains("finished"),
            "{step}"
        );
    }
}

/// Over HTTP a request from a web page of another origin is refused (`403`, before the
/// token is looked at: the MCP transport asks servers to check `Origin` against DNS
/// rebinding), a loopback origin is served, and a connection that never finishes its
/// request's head is closed after the header timeout (10 s) instead of holding a
/// descriptor for good. Shown failing without each: the foreign origin was served, the
/// half-sent request stayed open.
#[test]
fn http_refuses_foreign_origins_and_drops_half_sent_requests() {
    use std::io::{Read as _, Write as _};
    let dir = git_repo(|_| {});
    let server = HttpServer::start(dir.path());
    let rest = server.url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let with_origin = |origin: &str| -> u16 {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}})
        .to_string();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nOrigin: {origin}\r\n\
             Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        answer
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(with_origin("http://evil.example.com"), 403);
    assert_eq!(with_origin("null"), 403);
    assert_eq!(with_origin("http://localhost:5173"), 200);

    let mut half = std::net::TcpStream::connect(addr).unwrap();
    write!(half, "POST {path} HTTP/1.1\r\nHost: {addr}\r\n").unwrap();
    half.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = half.read_to_end(&mut buf);
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "a half-sent request held its connection for {:?}",
        started.elapsed()
    );
}

/// At most 256 HTTP sessions are open at once: the next `initialize` is refused with
/// an error saying why, and once a client closes one (`DELETE`), a new one opens.
/// Shown failing without the bound (the 257th session opened; a client opening
/// sessions in a loop grew the server without end).
#[test]
fn http_sessions_are_bounded_and_a_closed_one_makes_room() {
    let dir = git_repo(|_| {});
    let server = HttpServer::start(dir.path());
    // A request outside any session is refused, saying what to do (the SDK served
    // one carrying its protocol fields in `_meta`, around the bound below).
    let (code, _, body) = raw_http(
        &server.url,
        "POST",
        None,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2025-11-25",
            "io.modelcontextprotocol/clientCapabilities": {}}}}),
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("no session") && body.contains("\"id\":3"),
        "{body}"
    );
    let open: Vec<String> = (0..256).map(|_| raw_session(&server.url)).collect();
    let (code, id, body) = raw_http(
        &server.url,
        "POST",
        None,
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}),
    );
    assert!(
        id.is_none(),
        "a session past the bound opened: {code} {body}"
    );
    assert!(body.contains("256 sessions are open"), "{code} {body}");
    // A refusal a client can tell from a crash (the SDK's `500`), as JSON-RPC.
    assert_eq!(code, 503, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["id"], 0, "{body}");
    let (code, _, body) = raw_http(&server.url, "DELETE", Some(&open[0]), &json!({}));
    assert!((200..300).contains(&code), "{code} {body}");
    raw_session(&server.url);
}

/// A `resume` of a run the serving process itself drives is refused: the store's
/// claim tells drivers apart by pid, and one long-lived server drives many runs. It was
/// accepted: the live agent was marked interrupted while it went on, a second agent
/// redid its step, and the run finished twice. Shown failing without the fix.
#[test]
fn a_resume_of_a_run_this_server_drives_is_refused() {
    let Some((dir, python)) = setup("[[reply]]\nrepeat = true\ndelay_ms = 2500\ntext = \"done\"\n")
    else {
        return;
    };
    let r = stdio(
        dir.path(),
        &python,
        json!([
            {"op": "call", "tool": "run", "args": {"prompt": "go", "mode": "single", "wait": false}},
            {"op": "call", "tool": "resume", "args": {"run_id": "$RUN", "wait": false}},
            {"op": "call", "tool": "resume", "args": {"run_id": "$RUN", "wait": true}},
            {"op": "sleep", "seconds": 4},
        ]),
    );
    for step in &r[1..3] {
        assert_eq!(step["is_error"], true, "{step}");
        assert!(
            step["text"]
                .as_str()
                .unwrap()
                .contains("still being driven by process"),
            "{step}"
        );
    }
    let run = body(&r[0])["run_id"].as_str().unwrap().to_owned();
    assert_eq!(ended(dir.path(), &run), "completed");
    let report = status_until(dir.path(), &run, "the run's report", |_| true);
    let agents = report["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{report}");
    assert_eq!(agents[0]["state"], "completed", "{report}");
    let events = bin(dir.path(), &["events", &run]);
    let finished = String::from_utf8_lossy(&events.stdout)
        .matches("run.finished")
        .count();
    assert_eq!(finished, 1, "{}", String::from_utf8_lossy(&events.stdout));
}

/// Over stdio only `initialize` and `ping` come before the handshake (a request
/// carrying protocol fields in `_meta` was served without one, and others were refused
/// naming those fields), and params of a shape no MCP method takes are `-32602` naming
/// the method (they were `-32600`, "not a JSON-RPC message").
#[test]
fn stdio_requests_wait_for_initialize_and_bad_params_name_their_method() {
    use std::io::Write as _;
    let dir = git_repo(|_| {});
    let (mut server, mut input, rx) = raw_serve(dir.path());
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2025-11-25",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "status", "arguments": {}, "_meta": meta}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": [1]}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
               "params": {"name": "status", "_meta": "garbage"}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}),
    ];
    for line in lines {
        writeln!(input, "{line}").unwrap();
    }
    input.flush().unwrap();
    let mut answers = std::collections::BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while answers.len() < 6 {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(v) = rx.recv_timeout(left) else { break };
        if let Some(id) = v["id"].as_i64() {
            answers.insert(id, v);
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    let error = |id: i64| {
        answers
            .get(&id)
            .map(|a| a["error"].clone())
            .unwrap_or_default()
    };
    assert_eq!(error(1)["code"], -32600, "{answers:?}");
    assert!(
        error(1)["message"]
            .as_str()
            .unwrap_or_default()
            .contains("send `initialize` first"),
        "{answers:?}"
    );
    assert!(answers[&2]["result"].is_object(), "{answers:?}");
    assert!(answers[&3]["result"].is_object(), "{answers:?}");
    for id in [4, 5] {
        assert_eq!(error(id)["code"], -32602, "{id}: {answers:?}");
        assert!(
            error(id)["message"]
                .as_str()
                .unwrap_or_default()
                .contains("`tools/"),
            "{id}: {answers:?}"
        );
    }
    assert!(answers[&6]["result"]["tools"].is_array(), "{answers:?}");
}

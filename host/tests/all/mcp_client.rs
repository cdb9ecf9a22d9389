//! MCP servers end to end against the real binary: `crewbox mcp list|tools|call` and a
//! scripted agent's `mcp__SERVER__TOOL` calls, with stdio servers inside the real
//! sandbox — hostile ones written here (`mcp/hostile.py`) and the reference servers
//! `scripts/test-deps.sh` installs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::repo::{bin, command, crewbox, events, git_repo};

const HOSTILE: &str = include_str!("mcp/hostile.py");

/// A temp repository whose user config defines `servers` (TOML under `[mcp]`), with
/// `hostile.py` in `servers/` (shown to the sandbox read-only).
fn setup(servers: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = git_repo(|_| {});
    let srv = dir.path().join("servers");
    std::fs::create_dir_all(&srv).unwrap();
    let script = srv.join("hostile.py");
    std::fs::write(&script, HOSTILE).unwrap();
    let mut reads = vec![srv.display().to_string()];
    if let Some(node) = std::env::var_os("CREWBOX_TEST_NODE") {
        reads.push(PathBuf::from(node).display().to_string());
    }
    let config = format!(
        "[sandbox]\nread = {}\n\n{}",
        serde_json::to_string(&reads).unwrap(),
        servers.replace("HOSTILE", &script.display().to_string())
    );
    let cfg = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), config).unwrap();
    (dir, script)
}

fn server(name: &str, mode: &str, extra: &str) -> String {
    timed(name, mode, 5, 5, extra)
}

fn timed(name: &str, mode: &str, startup: u64, call: u64, extra: &str) -> String {
    format!(
        "[mcp.servers.{name}]\ncommand = \"python3\"\nargs = [\"HOSTILE\", \"{mode}\"]\n\
         startup_timeout_s = {startup}\ncall_timeout_s = {call}\n{extra}\n"
    )
}

/// A directory `name` in the test's temp dir that the user's config (made by [`setup`])
/// lets sandboxed processes write (`[sandbox] write`).
fn user_write_path(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::create_dir_all(&path).unwrap();
    let cfg = dir.join("config/crewbox/config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap().replacen(
        "[sandbox]\n",
        &format!(
            "[sandbox]\nwrite = [{}]\n",
            toml::Value::String(path.display().to_string())
        ),
        1,
    );
    std::fs::write(&cfg, text).unwrap();
    path
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn call(dir: &Path, srv: &str, tool: &str, args: Value) -> Value {
    json_of(&bin(
        dir,
        &["mcp", "call", srv, tool, &args.to_string(), "--json"],
    ))
}

#[test]
fn a_scripted_agent_lists_and_calls_mcp_tools() {
    let (dir, _) = setup(&server("echo", "echo", ""));
    let d = dir.path();
    let listed = json_of(&bin(d, &["mcp", "list", "--json"]));
    assert_eq!(listed["servers"][0]["name"], "echo");
    assert_eq!(listed["servers"][0]["state"], "ok", "{listed}");
    assert_eq!(listed["servers"][0]["tools"], 11);
    let tools = json_of(&bin(d, &["mcp", "tools", "echo", "--json"]));
    assert_eq!(tools["tools"][0]["name"], "mcp__echo__echo");
    assert!(
        tools["tools"][0]["description"]
            .as_str()
            .unwrap()
            .contains("says this tool is read-only")
    );

    let script = toml::to_string(&json!({"reply": [
        {"turn": 1, "text": "calling", "tool_calls": [
            {"name": "mcp__echo__echo", "args": {"text": "hi there"}},
            {"name": "mcp__echo__fail", "args": {}},
            {"name": "mcp__echo__rpc_error", "args": {}},
        ]},
        // The prompt names `mcp` among the agent's tools only with a server to reach.
        {"turn": 2, "system": "tools allow: [^.]*\\bmcp\\b", "text": "told of mcp"},
        {"turn": 2, "text": "not told of mcp"},
    ]}))
    .unwrap();
    let (_, report) = crewbox(
        d,
        &script,
        &["run", "go", "--mode", "single", "--mcp", "echo"],
    );
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "told of mcp", "{report}");
    let run = report["run_id"].as_str().unwrap();
    let calls: Vec<Value> = events(d, run)
        .into_iter()
        .filter(|e| e["kind"] == "tool.call")
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(calls.iter().all(|c| c["server"] == "echo"), "{calls:?}");
    assert_eq!(calls[0]["ok"], true);
    assert!(
        calls[0]["output"]
            .as_str()
            .unwrap()
            .contains("echo: hi there")
    );
    assert_eq!(calls[1]["ok"], false);
    assert!(
        calls[1]["output"]
            .as_str()
            .unwrap()
            .contains("it went wrong")
    );
    assert_eq!(calls[2]["ok"], false);
    assert!(
        calls[2]["output"]
            .as_str()
            .unwrap()
            .contains("no such thing")
    );

    // Without the grant the agent has no such tool.
    let (_, report) = crewbox(d, &script, &["run", "go", "--mode", "single"]);
    assert_eq!(report["result"], "not told of mcp", "{report}");
    let run = report["run_id"].as_str().unwrap();
    let first = events(d, run)
        .into_iter()
        .find(|e| e["kind"] == "tool.call")
        .unwrap();
    assert_eq!(first["data"]["ok"], false);
    assert!(
        first["data"]["output"]
            .as_str()
            .unwrap()
            .contains("unknown tool")
    );

    // An unknown server is a usage error naming it.
    let out = bin(d, &["run", "go", "--mcp", "nope", "--script", "x"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`nope` is not one of your MCP servers"));
}

/// SECURITY: a stdio server runs inside the agent's sandbox: it cannot read other
/// processes' environments (crewbox's own holds the canary), cannot write outside the
/// worktree, has no network, and sees only the variables its config lists. Shown failing
/// with `sandbox = "off"` in the user config.
#[test]
fn a_stdio_server_is_confined_by_the_sandbox() {
    if crate::support::sandbox::disabled() {
        return;
    }
    let (dir, _) = setup(&server("probe", "probe", "env = { MCP_SET = \"given\" }"));
    let d = dir.path();
    // Shown to the sandbox read-only (`[sandbox] read`): the server sees it, cannot write.
    let outside = d.join("servers/escaped.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = command(
        d,
        &[
            "mcp",
            "call",
            "probe",
            "probe",
            &json!({"outside": outside, "port": port}).to_string(),
            "--json",
        ],
    )
    .env("CREWBOX_MCP_CANARY", "canary-value-123456")
    .output()
    .unwrap();
    let v = json_of(&out);
    assert_eq!(v["ok"], true, "{v}");
    let probe: Value = serde_json::from_str(v["content"].as_str().unwrap()).unwrap();
    assert_eq!(probe["environ_canary"], json!([]), "{probe}");
    assert_eq!(probe["own_env_canary"], false, "{probe}");
    assert_eq!(probe["wrote_outside"], false, "{probe}");
    assert!(!outside.exists());
    assert_eq!(probe["connected"], false, "{probe}");
    assert_eq!(probe["set_env"], "given");
}

#[test]
fn hostile_servers_are_bounded() {
    let servers = [
        server("many", "many", ""),
        server("bigdesc", "bigdesc", ""),
        timed("silent", "silent", 2, 5, ""),
        timed("garbage", "garbage", 2, 5, ""),
        timed("echo", "echo", 5, 2, ""),
        timed("badver", "badver", 5, 5, ""),
        timed("reqflood", "reqflood", 5, 20, ""),
        timed("badschema", "badschema", 5, 5, ""),
    ]
    .join("\n");
    let (dir, _) = setup(&servers);
    let d = dir.path();

    let many = json_of(&bin(d, &["mcp", "tools", "many", "--json"]));
    assert_eq!(many["tools"].as_array().unwrap().len(), 128);
    // One page of 10,000: the first 512 are read, the rest said to be there.
    assert!(
        many["warnings"][0]
            .as_str()
            .unwrap()
            .contains("offers more than 512 tools"),
        "{many}"
    );
    assert!(
        many["warnings"][1]
            .as_str()
            .unwrap()
            .contains("the rest were not read"),
        "{many}"
    );

    let big = json_of(&bin(d, &["mcp", "tools", "bigdesc", "--json"]));
    let t = &big["tools"][0];
    assert!(t["description"].as_str().unwrap().len() < 4096);
    assert_eq!(t["input_schema"], json!({"type": "object"}));

    for name in ["silent", "garbage"] {
        let started = Instant::now();
        let out = bin(d, &["mcp", "tools", name]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("MCP server `{name}` could not start")),
            "{err}"
        );
        // What a server wrote on stdout that was no message is named.
        if name == "garbage" {
            assert!(err.contains("`{this is not json`"), "{err}");
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{name}");
    }

    // Tools the SDK cannot type (no input schema; a string for one) are offered with
    // the object schema, and the server's other tools stay usable (the SDK failed the
    // whole listing: "Unexpected response type").
    let bad = json_of(&bin(d, &["mcp", "tools", "badschema", "--json"]));
    let names: Vec<&str> = bad["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"mcp__badschema__noschema")
            && names.contains(&"mcp__badschema__strschema")
            && names.contains(&"mcp__badschema__echo"),
        "{bad}"
    );
    let v = call(d, "badschema", "echo", json!({"text": "still here"}));
    assert_eq!(v["content"], "echo: still here", "{v}");

    // A protocol version crewbox does not speak is refused, naming it (the SDK took it).
    let out = bin(d, &["mcp", "tools", "badver"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("protocol version `1999-01-01`"), "{err}");

    // A server asking crewbox for more than it may (5,000 requests of its own, reading
    // no answer) is stopped, and the call says why (without the bound the call was
    // answered while crewbox held every unread answer in memory).
    let v = call(d, "reqflood", "echo", json!({"text": "x"}));
    assert_eq!(v["ok"], false, "{v}");
    assert!(
        v["content"]
            .as_str()
            .unwrap()
            .contains("more than 1000 requests of its own"),
        "{v}"
    );

    let v = call(d, "echo", "big", json!({}));
    assert_eq!(v["ok"], true);
    let text = v["content"].as_str().unwrap();
    assert!(
        text.len() < 70 * 1024 && text.contains("bytes omitted"),
        "{}",
        text.len()
    );

    let started = Instant::now();
    let v = call(d, "echo", "slow", json!({}));
    assert_eq!(v["ok"], false);
    assert!(
        v["content"]
            .as_str()
            .unwrap()
            .contains("timed out after 2 s"),
        "{v}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
}

fn reference(name: &str) -> Option<PathBuf> {
    crate::support::peers::node_tool(name)
}

#[test]
fn server_everything_echoes_through_crewbox() {
    let Some(everything) = reference("mcp-server-everything") else {
        return;
    };
    let (dir, _) = setup(&format!(
        "[mcp.servers.everything]\ncommand = \"{}\"\nargs = [\"stdio\"]\nstartup_timeout_s = 30\n",
        everything.display()
    ));
    let v = call(
        dir.path(),
        "everything",
        "echo",
        json!({"message": "round trip"}),
    );
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["content"].as_str().unwrap().contains("round trip"), "{v}");
    // Its `simulate-research-query` runs only as a task (`execution.taskSupport:
    // "required"`) in a listing the SDK reads with its own types (which have no
    // `execution`): left out with a warning, its other tools offered.
    let out = command(dir.path(), &["mcp", "tools", "everything", "--json"])
        .output()
        .unwrap();
    let v = json_of(&out);
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tool"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"echo"), "{v}");
    assert!(!names.contains(&"simulate-research-query"), "{v}");
    assert!(
        v["warnings"].as_array().unwrap().iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("`simulate-research-query` left out: it runs only as a task")),
        "{v}"
    );
}

/// SECURITY: server-filesystem given the worktree as its root reads inside it, not
/// outside (its own check, and the sandbox's view beneath it).
#[test]
fn server_filesystem_cannot_read_outside_the_worktree() {
    let Some(fs) = reference("mcp-server-filesystem") else {
        return;
    };
    let (dir, _) = setup(&format!(
        "[mcp.servers.fs]\ncommand = \"{}\"\nargs = [\".\"]\nstartup_timeout_s = 30\n",
        fs.display()
    ));
    let d = dir.path();
    let secret = d.join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    let inside = call(d, "fs", "read_text_file", json!({"path": "notes.txt"}));
    assert_eq!(inside["ok"], true, "{inside}");
    assert!(inside["content"].as_str().unwrap().contains("alpha"));
    for path in [secret.display().to_string(), "../secret.txt".to_owned()] {
        let v = call(d, "fs", "read_text_file", json!({"path": path}));
        assert_eq!(v["ok"], false, "{v}");
        assert!(!v["content"].as_str().unwrap().contains("top secret"));
    }
}

/// SECURITY: a repository's `.mcp.json` is never started when the repository is
/// untrusted, nor in a trusted one for a server the user has not approved; an approval
/// covers the definition as it was.
#[test]
fn repository_mcp_json_needs_trust_and_approval() {
    let (dir, script) = setup("");
    let d = dir.path();
    let canary = d.join("canary-started");
    let def = |arg: &str| {
        json!({"mcpServers": {
            "canary": {"command": "python3", "args": [script.display().to_string(), "echo", arg]},
            "other": {"command": "python3", "args": ["-c", format!("open('{}','w')", canary.display())]},
        }})
        .to_string()
    };
    std::fs::write(d.join("repo/.mcp.json"), def("v1")).unwrap();
    let names = |d: &Path| -> Vec<String> {
        json_of(&bin(d, &["mcp", "list", "--json"]))["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let state = |d: &Path, name: &str| -> String {
        let cfg = json_of(&bin(d, &["config", "--json"]));
        cfg["mcp"]["repository"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["state"].as_str().unwrap().to_owned())
            .unwrap_or_default()
    };

    // Untrusted: listed as ignored, never started, not grantable.
    assert!(names(d).is_empty());
    assert_eq!(state(d, "canary"), "untrusted");
    let out = bin(d, &["run", "go", "--mcp", "canary", "--script", "x"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("`canary` is not one of your MCP servers")
    );

    // Trusted, not approved.
    assert!(bin(d, &["trust"]).status.success());
    assert!(names(d).is_empty());
    assert_eq!(state(d, "canary"), "not-approved");
    assert!(!canary.exists());

    // Approved by name: only that one.
    let out = bin(d, &["trust", "--mcp", "canary"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(names(d), ["canary"]);
    let listed = json_of(&bin(d, &["mcp", "list", "--json"]));
    assert_eq!(listed["servers"][0]["source"], "repository");
    assert_eq!(listed["servers"][0]["state"], "ok", "{listed}");
    assert_eq!(state(d, "other"), "not-approved");
    assert!(!canary.exists(), "an unapproved server was started");

    // A changed definition is not approved any more.
    std::fs::write(d.join("repo/.mcp.json"), def("v2")).unwrap();
    assert!(names(d).is_empty());
    assert_eq!(state(d, "canary"), "changed");
    assert!(
        !bin(d, &["trust", "--mcp", "nope"]).status.success(),
        "approving a server the file does not define"
    );
}

/// SECURITY: a read-only agent reaches a server only when the user marked it
/// `read_only = true` (the `mcp` capability is `full`'s). Shown failing with `may_use`
/// answering true for every agent.
#[test]
fn read_only_agents_reach_only_read_only_servers() {
    let (dir, _) = setup(&format!(
        "{}\n{}",
        server("open", "echo", ""),
        server("safe", "echo", "read_only = true")
    ));
    let d = dir.path();
    let script = toml::to_string(&json!({"reply": [
        {"turn": 1, "text": "calling", "tool_calls": [
            {"name": "mcp__open__echo", "args": {"text": "a"}},
            {"name": "mcp__safe__echo", "args": {"text": "b"}},
        ]},
        {"turn": 2, "text": "done"},
    ]}))
    .unwrap();
    let (out, report) = crewbox(
        d,
        &script,
        &[
            "run",
            "go",
            "--mode",
            "single",
            "--read-only",
            "--mcp",
            "open",
            "--mcp",
            "safe",
        ],
    );
    // The server left out is named at the start, the one kept is not.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("MCP server `open` is left out of this read-only run"),
        "{stderr}"
    );
    assert!(!stderr.contains("`safe` is left out"), "{stderr}");
    let run = report["run_id"].as_str().unwrap();
    let calls: Vec<Value> = events(d, run)
        .into_iter()
        .filter(|e| e["kind"] == "tool.call")
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(calls[0]["ok"], false, "{calls:?}");
    assert!(
        calls[0]["output"]
            .as_str()
            .unwrap()
            .contains("unknown tool")
    );
    assert_eq!(calls[1]["ok"], true, "{calls:?}");
    assert!(calls[1]["output"].as_str().unwrap().contains("echo: b"));
}

/// A team's `mcp = [...]` grants its members the server, in a team run.
#[test]
fn a_team_grants_its_members_a_server() {
    let (dir, _) = setup(&server("echo", "echo", "read_only = true"));
    let d = dir.path();
    let teams = d.join("repo/.crewbox/teams");
    std::fs::create_dir_all(&teams).unwrap();
    std::fs::write(
        teams.join("t.toml"),
        "mode = \"broadcast\"\nmcp = [\"echo\"]\n[[members]]\nname = \"alice\"\n",
    )
    .unwrap();
    let script = toml::to_string(&json!({"reply": [
        {"turn": 1, "text": "calling", "tool_calls": [
            {"name": "mcp__echo__echo", "args": {"text": "from the team"}},
        ]},
        {"turn": 2, "text": "done"},
    ]}))
    .unwrap();
    let (_, report) = crewbox(d, &script, &["run", "go", "--team", "t"]);
    let run = report["run_id"].as_str().unwrap();
    let calls: Vec<Value> = events(d, run)
        .into_iter()
        .filter(|e| e["kind"] == "tool.call" && e["data"]["tool"] == "mcp__echo__echo")
        .map(|e| e["data"].clone())
        .collect();
    assert!(!calls.is_empty(), "{report}");
    assert!(calls.iter().all(|c| c["ok"] == true), "{calls:?}");
    assert!(
        calls[0]["output"]
            .as_str()
            .unwrap()
            .contains("from the team")
    );
}

/// The pids of processes whose command line holds `marker`.
fn with_marker(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

fn gone(marker: &str) -> bool {
    crate::support::procs::wait_for(Duration::from_secs(10), || with_marker(marker).is_empty())
}

/// A 50 MB answer (over the 16 MiB message limit), or one that does not read as JSON
/// (the SDK drops either unread), fails its call at once with an error that says so,
/// not when the call times out. The unreadable case was shown failing (a timeout after
/// 60 s) when the SDK read the server's stdout directly.
#[test]
fn an_answer_over_the_message_limit_or_unreadable_fails_its_call_at_once() {
    let (dir, _) = setup(&timed("echo", "echo", 5, 60, ""));
    for (tool, says) in [
        ("unreadable", "does not read as JSON"),
        ("huge", "its answer was over the 16 MiB limit"),
    ] {
        let started = Instant::now();
        let v = call(dir.path(), "echo", tool, json!({}));
        assert_eq!(v["ok"], false, "{v}");
        let text = v["content"].as_str().unwrap();
        assert!(text.contains(says), "{tool}: {text}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{tool}: waited {:?} (the call timeout is 60 s)",
            started.elapsed()
        );
    }
}

/// A server's grandchild in a session of its own dies with the server; so does the
/// server when crewbox is killed with SIGKILL in the middle of a call.
#[test]
fn a_servers_processes_do_not_outlive_crewbox_even_under_kill_9() {
    let marker = format!("mk-{}", std::process::id());
    let (dir, _) = setup(&timed(
        "echo",
        &format!("echo\", \"{marker}-server"),
        5,
        60,
        "",
    ));
    let d = dir.path();
    let v = call(
        d,
        "echo",
        "fork",
        json!({ "marker": format!("{marker}-orphan") }),
    );
    assert_eq!(v["content"], "forked", "{v}");
    assert!(
        gone(&format!("{marker}-orphan")),
        "the grandchild outlived crewbox"
    );

    let mut running = command(d, &["mcp", "call", "echo", "slow", "{}"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let server = format!("{marker}-server");
    assert!(
        crate::support::procs::wait_for(Duration::from_secs(20), || !with_marker(&server)
            .is_empty()),
        "the server never started"
    );
    running.kill().unwrap();
    running.wait().unwrap();
    assert!(gone(&server), "the server outlived crewbox's SIGKILL");
}

/// The official conformance suite in client mode (`scripts/mcp-conformance-client.sh`):
/// its test servers over streamable HTTP, `crewbox mcp tools|call` as the client —
/// `tools_call` (list and call `add_numbers`) and `sse-retry` (reconnect after the
/// server closes the call's stream, honouring `retry` and sending `Last-Event-ID`) pass.
#[test]
fn conformance_client_scenarios_that_apply_pass() {
    let Some(_) = crate::support::peers::node_tool("conformance") else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/mcp-conformance-client.sh");
    let passes = |table: &str, s: &str| {
        table
            .lines()
            .any(|l| l.starts_with(s) && l.contains(" pass "))
    };
    // `sse-retry` also checks how long the client waited before reconnecting; on a
    // loaded machine (the whole suite in parallel on two cores) one attempt can be late,
    // so the suite gets three tries. A client that never honours `retry` fails all three.
    let mut tries = Vec::new();
    for _ in 0..3 {
        let out = std::process::Command::new("bash")
            .arg(&script)
            .arg(env!("CARGO_BIN_EXE_crewbox"))
            .env("ONLY_APPLICABLE", "1")
            .output()
            .unwrap();
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        let ok = out.status.success()
            && ["tools_call", "sse-retry"]
                .iter()
                .all(|s| passes(&table, s));
        tries.push(format!("{table}\n{}", String::from_utf8_lossy(&out.stderr)));
        if ok {
            return;
        }
    }
    panic!(
        "tools_call and sse-retry did not both pass in 3 tries:\n{}",
        tries.join("\n---\n")
    );
}

/// server-everything in its streamable-HTTP mode on a loopback port, until dropped.
struct HttpEverything(std::process::Child, u16);

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn http_everything() -> Option<HttpEverything> {
    use std::io::{BufRead, BufReader};
    let everything = reference("mcp-server-everything")?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(everything)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let started = Instant::now();
    loop {
        let line = lines.next().expect("server-everything exited").unwrap();
        if line.contains("listening on port") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "no start");
    }
    // Keep draining its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Some(HttpEverything(child, port))
}

/// Every file under `dir`, read whole, contains `needle` nowhere.
fn nowhere_in(dir: &Path, needle: &[u8]) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            nowhere_in(&p, needle);
        } else if let Ok(bytes) = std::fs::read(&p) {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "{} holds the token",
                p.display()
            );
        }
    }
}

/// A scripted agent and `crewbox mcp call` use a real streamable-HTTP server
/// (server-everything's `streamableHttp` mode), reached by crewbox itself with a bearer
/// token from `bearer_token_env`; SECURITY: the token value appears nowhere in the
/// events, the store or the output.
#[test]
fn an_agent_uses_a_streamable_http_server_without_leaking_its_token() {
    let Some(server) = http_everything() else {
        return;
    };
    const TOKEN: &str = "tok-7f3a9c1e5b2d4086aa11";
    let (dir, _) = setup(&format!(
        "[mcp.servers.web]\nurl = \"http://127.0.0.1:{}/mcp\"\nbearer_token_env = \"WEB_MCP_TOKEN\"\n\
         startup_timeout_s = 30\n",
        server.1
    ));
    let d = dir.path();
    let with_token = |args: &[&str]| {
        command(d, args)
            .env("WEB_MCP_TOKEN", TOKEN)
            .output()
            .unwrap()
    };
    let out = with_token(&[
        "mcp",
        "call",
        "web",
        "echo",
        r#"{"message": "over http"}"#,
        "--json",
    ]);
    let v = json_of(&out);
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["content"].as_str().unwrap().contains("over http"), "{v}");

    let script = toml::to_string(&json!({"reply": [
        {"turn": 1, "text": "calling", "tool_calls": [
            {"name": "mcp__web__echo", "args": {"message": "agent over http"}},
        ]},
        {"turn": 2, "text": "done"},
    ]}))
    .unwrap();
    std::fs::write(d.join("script.toml"), &script).unwrap();
    let out = with_token(&[
        "run",
        "go",
        "--mode",
        "single",
        "--mcp",
        "web",
        "--script",
        d.join("script.toml").to_str().unwrap(),
        "--json",
    ]);
    let report = json_of(&out);
    assert_eq!(report["status"], "completed", "{report}");
    let run = report["run_id"].as_str().unwrap();
    let call = events(d, run)
        .into_iter()
        .find(|e| e["kind"] == "tool.call")
        .unwrap();
    assert_eq!(call["data"]["server"], "web", "{call}");
    assert_eq!(call["data"]["ok"], true, "{call}");
    assert!(
        call["data"]["output"]
            .as_str()
            .unwrap()
            .contains("agent over http"),
        "{call}"
    );
    for bytes in [&out.stdout, &out.stderr] {
        assert!(!String::from_utf8_lossy(bytes).contains(TOKEN));
    }
    nowhere_in(&d.join("state"), TOKEN.as_bytes());
}

/// Runs `cmd` to its end, or kills it after `secs` (then `None`).
fn output_within(mut cmd: std::process::Command, secs: u64) -> Option<std::process::Output> {
    use std::process::Stdio;
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A server that lists its tools page after page without end is read for a bounded
/// number of pages and tools: it starts with a warning, at once, instead of holding
/// crewbox (and ever more of its memory) until its startup timeout. Shown failing with
/// the SDK's `list_all_tools`, which read pages until the timeout.
#[test]
fn a_server_that_pages_forever_is_listed_within_bounds() {
    let (dir, _) = setup(&timed("pages", "pages", 30, 5, ""));
    let started = Instant::now();
    let out = bin(dir.path(), &["mcp", "tools", "pages", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    assert_eq!(v["tools"].as_array().unwrap().len(), 128, "{v}");
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("the rest were not read")),
        "{v}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}

/// A server that says its tools changed and then never lists them does not hold the
/// agent: the refresh is bounded by the server's startup timeout, the call fails naming
/// it, and the run ends. Shown failing (the run hung) without the bound.
#[test]
fn a_server_that_never_lists_its_changed_tools_does_not_hold_the_agent() {
    let (dir, _) = setup(&timed("h", "changing", 2, 5, ""));
    let d = dir.path();
    let script = toml::to_string(&json!({"reply": [
        {"turn": 1, "tool_calls": [{"name": "mcp__h__echo", "args": {"text": "one"}}]},
        {"turn": 2, "tool_calls": [{"name": "mcp__h__echo", "args": {"text": "two"}}]},
        {"turn": 3, "text": "done"},
    ]}))
    .unwrap();
    std::fs::write(d.join("script.toml"), &script).unwrap();
    let script_path = d.join("script.toml");
    let cmd = command(
        d,
        &[
            "run",
            "go",
            "--mode",
            "single",
            "--mcp",
            "h",
            "--json",
            "--script",
            script_path.to_str().unwrap(),
        ],
    );
    let out = output_within(cmd, 45).expect("the run hung on the server's tool list");
    let report = json_of(&out);
    assert_eq!(report["status"], "completed", "{report}");
    let calls: Vec<Value> = events(d, report["run_id"].as_str().unwrap())
        .into_iter()
        .filter(|e| e["kind"] == "tool.call")
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0]["ok"], true, "{calls:?}");
    // The second call or the next turn's tool list (whichever sees the notification
    // first) waited for the list, and said why it gave up; the tools it listed before
    // are still offered (and still answer), never reported as a failed start.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("listing them again failed: it did not list them within 2 s")
            && err.contains("its earlier tools are offered"),
        "{err}"
    );
    assert!(!err.contains("could not start"), "{err}");
    assert_eq!(calls[1]["ok"], true, "{calls:?}");
}

/// A server that exits during a call is started again once, in a sandbox of its own,
/// for the *next* call: the call it was on is never made again (it may have run in
/// part: a tool that writes ran twice, and one that crashes its server each time used
/// up the restart on one call). The error says so, never that the sandbox is
/// unavailable. Shown failing without the fix (the first error said only that it
/// exited, after the call was sent to the restarted server). Shown failing earlier (most
/// tries) when the restart reused the first start's private directories, which that
/// start's cleanup was removing.
#[test]
fn a_server_that_exits_mid_call_is_started_again_for_the_next_call_only() {
    if crate::support::sandbox::disabled() {
        return;
    }
    let (dir, _) = setup(&timed("x", "exitcall", 5, 5, ""));
    let d = dir.path();
    let v = call(d, "x", "echo", json!({"text": "hi"}));
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(
        v["content"],
        "MCP server `x` exited during the call of `echo`; the call was not made again (it \
         may have run in part); the server is started again for the next call",
        "{v}"
    );
    // In one run: the first call ends the first start, the second the restart, and the
    // third finds the server unavailable.
    let script = toml::to_string(&json!({"reply": [
        {"turn": 1, "text": "1", "tool_calls": [{"name": "mcp__x__echo", "args": {"text": "a"}}]},
        {"turn": 2, "text": "2", "tool_calls": [{"name": "mcp__x__echo", "args": {"text": "b"}}]},
        {"turn": 3, "text": "3", "tool_calls": [{"name": "mcp__x__echo", "args": {"text": "c"}}]},
        {"turn": 4, "text": "done"},
    ]}))
    .unwrap();
    let (_, report) = crewbox(d, &script, &["run", "go", "--mode", "single", "--mcp", "x"]);
    assert_eq!(report["status"], "completed", "{report}");
    let run = report["run_id"].as_str().unwrap();
    let outputs: Vec<String> = events(d, run)
        .into_iter()
        .filter(|e| e["kind"] == "tool.call")
        .map(|e| e["data"]["output"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(outputs.len(), 3, "{outputs:?}");
    for o in &outputs[..2] {
        assert!(
            o.contains("exited during the call of `echo`"),
            "{outputs:?}"
        );
    }
    assert!(
        outputs[2].contains("unavailable for the rest of this run"),
        "{outputs:?}"
    );
}

/// SECURITY: a model provider's key never reaches an MCP server, whoever wrote the
/// definition: a user server whose `env` or command line holds the key does not start
/// (the error names the variable or argument, not the key); a repository's `.mcp.json` that reads the key's
/// variable (`${OPENAI_API_KEY}`) into an argument, a variable or a bearer header of a
/// server it picks cannot be approved, and the key is in no message. Shown failing
/// without the checks: the server started with the key, the approvals went through.
#[test]
fn a_provider_key_never_reaches_an_mcp_server() {
    const KEY: &str = "sk-test-mcp-KEY-0123456789";
    let servers = format!(
        "{}\n[mcp.servers.litarg]\ncommand = \"python3\"\nargs = [\"HOSTILE\", \"echo\", \"--key={KEY}\"]\n\n{}\n\
         [mcp.servers.webkey]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_token_env = \"OPENAI_API_KEY\"\n\n\
         [mcp.servers.webhead]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = {{ \"X-Key\" = \"OPENAI_API_KEY\" }}\n",
        server("lit", "echo", &format!("env = {{ K = \"{KEY}\" }}")),
        server("passed", "echo", "pass_env = [\"OPENAI_API_KEY\"]"),
    );
    let (dir, script) = setup(&servers);
    let d = dir.path();
    let run = |args: &[&str]| {
        command(d, args)
            .env("OPENAI_API_KEY", KEY)
            .output()
            .unwrap()
    };
    let out = run(&["mcp", "tools", "lit"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("`env.K` would give the server a model provider's key"),
        "{err}"
    );
    assert!(!err.contains(KEY), "{err}");
    let out = run(&["mcp", "tools", "litarg"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("`args[2]` holds a model provider's key"),
        "{err}"
    );
    assert!(!err.contains(KEY), "{err}");
    // Named in `pass_env`: refused, not silently left out while the listing names it
    // as passed.
    let out = run(&["mcp", "tools", "passed"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("`pass_env` names `OPENAI_API_KEY`, a model provider's key variable"),
        "{err}"
    );
    assert!(!err.contains(KEY), "{err}");
    // Nor as an HTTP server's bearer token or header, which crewbox sent (the server
    // need not exist: nothing is sent).
    for name in ["webkey", "webhead"] {
        let out = run(&["mcp", "tools", name]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains("`OPENAI_API_KEY` is a model provider's key variable"),
            "{name}: {err}"
        );
        assert!(!err.contains(KEY), "{err}");
    }

    let mcp_json = json!({"mcpServers": {
        "arg": {"command": "python3", "args": [script.display().to_string(), "echo", "${OPENAI_API_KEY}"]},
        "var": {"command": "python3", "args": [script.display().to_string(), "echo"], "env": {"T": "${OPENAI_API_KEY}"}},
        "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${OPENAI_API_KEY}"}},
        "fine": {"command": "python3", "args": [script.display().to_string(), "echo", "${HOME}"]},
    }});
    std::fs::write(d.join("repo/.mcp.json"), mcp_json.to_string()).unwrap();
    assert!(run(&["trust"]).status.success());
    for name in ["arg", "var", "web"] {
        let out = run(&["trust", "--mcp", name]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} was approved: {err}");
        assert!(
            err.contains("`${OPENAI_API_KEY}` is a model provider's key"),
            "{name}: {err}"
        );
        assert!(!err.contains(KEY), "{err}");
    }
    let out = run(&["trust", "--mcp", "fine"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = json_of(&run(&["mcp", "list", "--json"]));
    assert!(!listed.to_string().contains(KEY), "{listed}");
}

/// SECURITY: a read-only agent's server sees the user's `[sandbox] write` paths
/// read-only: `read_only = true` trusts the server's tools, it grants the agent no
/// writes. A writable agent's server writes there. Shown failing without the fix: the
/// read-only agent's server wrote the shared cache.
#[test]
fn a_read_only_agents_server_cannot_write_the_users_write_paths() {
    let (dir, _) = setup(&server("safe", "echo", "read_only = true"));
    let d = dir.path();
    let cache = user_write_path(d, "cache");
    let probe = |file: &str, read_only: bool| -> Value {
        let script = toml::to_string(&json!({"reply": [
            {"turn": 1, "text": "probing", "tool_calls": [
                {"name": "mcp__safe__probe", "args": {
                    "outside": cache.join(file).display().to_string(), "port": 9}},
            ]},
            {"turn": 2, "text": "done"},
        ]}))
        .unwrap();
        let mut args = vec!["run", "go", "--mode", "single", "--mcp", "safe"];
        if read_only {
            args.push("--read-only");
        }
        let (_, report) = crewbox(d, &script, &args);
        let run = report["run_id"].as_str().unwrap();
        let call = events(d, run)
            .into_iter()
            .find(|e| e["kind"] == "tool.call")
            .unwrap_or_else(|| panic!("no call: {report:#}"));
        assert_eq!(call["data"]["ok"], true, "{call}");
        serde_json::from_str(call["data"]["output"].as_str().unwrap()).unwrap()
    };
    let ro = probe("read-only.txt", true);
    assert_eq!(ro["wrote_outside"], false, "{ro}");
    assert!(!cache.join("read-only.txt").exists());
    let rw = probe("writable.txt", false);
    assert_eq!(rw["wrote_outside"], true, "{rw}");
}

/// A name in `enabled_tools` or `disabled_tools` that the server does not list is said:
/// a typo in `enabled_tools` left a server with no tools in silence (MCP probe).
/// Shown failing without the warning.
#[test]
fn a_tool_filter_naming_no_listed_tool_is_said() {
    let (dir, _) = setup(&server(
        "f",
        "echo",
        "enabled_tools = [\"echo\", \"ecoh\"]\ndisabled_tools = [\"nope\"]",
    ));
    let listed = json_of(&bin(dir.path(), &["mcp", "tools", "f", "--json"]));
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tool"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo"], "{listed:#}");
    let warnings: Vec<&str> = listed["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        [
            "server `f`: `enabled_tools` names `ecoh`, which the server does not list",
            "server `f`: `disabled_tools` names `nope`, which the server does not list",
        ],
        "{listed:#}"
    );
}

/// An HTTP server that cannot be reached, or that asks for authorization, is named
/// with its cause (the refused connection; the 401 with its `WWW-Authenticate`
/// challenge), not with the SDK's Rust type names; the SDK's own log lines stay off.
#[test]
fn an_http_server_start_failure_says_why() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(4) {
            let Ok(mut s) = stream else { continue };
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"mcp-test\"\r\n\
                  Content-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (dir, _) = setup(&format!(
        "[mcp.servers.auth]\nurl = \"http://127.0.0.1:{port}/mcp\"\nstartup_timeout_s = 10\n\n\
         [mcp.servers.closed]\nurl = \"http://127.0.0.1:{closed}/mcp\"\nstartup_timeout_s = 10\n"
    ));
    let stderr = |name: &str| {
        let out = command(dir.path(), &["mcp", "tools", name])
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let auth = stderr("auth");
    assert!(
        auth.contains("HTTP 401") && auth.contains(r#"Bearer realm="mcp-test""#),
        "{auth}"
    );
    let closed = stderr("closed");
    assert!(
        closed.contains("cannot connect") && closed.contains("Connection refused"),
        "{closed}"
    );
    for err in [&auth, &closed] {
        assert!(!err.contains("rmcp::"), "{err}");
        assert!(err.contains("could not start"), "{err}");
    }
}

/// crewbox declares no `roots` capability, and a server that asks for roots anyway is
/// told the method is not there (JSON-RPC -32601), not given an empty list it could
/// read as "no directory allowed". Shown failing without the fix (`{"roots": []}`).
#[test]
fn roots_are_not_declared_and_not_answered_as_empty() {
    let (dir, _) = setup(&server("r", "echo", ""));
    let v = call(dir.path(), "r", "roots", json!({}));
    assert_eq!(v["ok"], true, "{v}");
    let answer: Value = serde_json::from_str(v["content"].as_str().unwrap()).unwrap();
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert!(answer.get("result").is_none(), "{answer}");
}

/// SECURITY: what an agent's MCP server started in the background is gone before
/// crewbox commits the agent's worktree as the user. Such a process, alive during the
/// commit, swapped a directory for a link to the host under the commit's walk (the
/// commit listed a host directory and opened its files: probe). Here the process
/// writes the time every 2 ms; its last write comes before the commit's artifact.
/// Shown failing without the fix (it wrote until after the commit).
#[test]
fn an_mcp_servers_background_processes_end_before_the_commit() {
    let (dir, _) = setup(&server("bg", "echo", ""));
    let d = dir.path();
    let out = user_write_path(d, "out");
    let log = out.join("bg.log");
    let script = toml::to_string(&json!({"reply": [
        {"turn": 1, "text": "starting", "tool_calls": [
            {"name": "mcp__bg__bg", "args": {"out": log.display().to_string()}},
            {"name": "write_file", "args": {"path": "made.txt", "content": "made\n"}},
        ]},
        {"turn": 2, "text": "done", "delay_ms": 100},
    ]}))
    .unwrap();
    let (_, report) = crewbox(
        d,
        &script,
        &["run", "go", "--mode", "single", "--mcp", "bg"],
    );
    assert_eq!(report["status"], "completed", "{report:#}");
    let run = report["run_id"].as_str().unwrap();
    let committed = events(d, run)
        .into_iter()
        .find(|e| e["kind"] == "agent.artifact")
        .unwrap_or_else(|| panic!("no artifact: {report:#}"));
    let committed_at = committed["at"].as_i64().unwrap();
    let written = std::fs::read_to_string(&log).unwrap();
    let last: i64 = written.lines().last().unwrap().parse().unwrap();
    assert!(
        last < committed_at,
        "the background process wrote at {last}, after the commit at {committed_at}"
    );
}

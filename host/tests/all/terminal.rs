//! Text others wrote reaches the terminal escaped, through the real binary: a scripted
//! model's replies, a sandboxed command's output, an agent name a model chose
//! (`spawn_agent`), a team file's display names, a branch an agent could create and a
//! team name on the command line, all full of terminal controls (OSC 52 clipboard
//! writes, OSC 0 titles, `ESC[2J`, OSC 8 hyperlinks, the 8-bit CSI, bidi overrides),
//! then `run` (with its live progress on a real pty), `status`, `events`, `tree`,
//! `history`, `branches` and `team`. No raw control reaches stdout or stderr; the text
//! stays readable as visible escapes (`\x1b]52;…`), and JSON output parses back to
//! exactly what was stored.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::peers;
use crate::support::repo::{bin, command, git_repo};
use crate::support::sandbox as sbx;

/// Every kind of control a hostile text carries.
const HOSTILE: &str = "\x1b]52;c;cHduZWQ=\x07 \x1b]0;pwned\x07 \x1b[2J \
    \x1b]8;;http://evil.example\x07click\x1b]8;;\x07 \u{9b}31m \u{202e}gnp.exe \
    \u{2066}iso\u{2069} \r\x08\x7f end";

/// The raw controls in a command's output: C0 but newline and tab, DEL, C1 (as UTF-8
/// or as a raw byte), and bidi embeddings, overrides and isolates.
fn raw_controls(bytes: &[u8]) -> Vec<String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return vec![format!("bytes that are not UTF-8: {bytes:?}")];
    };
    text.chars()
        .filter(|c| {
            matches!(c,
                '\0'..='\x08' | '\x0b'..='\x1f' | '\x7f'..='\u{9f}'
                | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .map(|c| format!("{:?}", c))
        .collect()
}

/// Asserts `out` carries no raw control on stdout or stderr.
fn assert_inert(what: &str, out: &Output) {
    for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        let found = raw_controls(bytes);
        assert!(
            found.is_empty(),
            "`{what}` wrote raw terminal controls on {stream}: {found:?}\n{}",
            String::from_utf8_lossy(bytes)
        );
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The agent: replies with hostile text, runs a command printing controls, spawns a
/// child whose role (its name) is hostile, then answers with a hostile handoff.
fn script() -> String {
    let command = "printf 'tool \\033]52;c;cHduZWQ=\\007 \\302\\233 2J \\342\\200\\256 out'";
    let handoff = json!({"status": "done", "summary": HOSTILE, "next_steps": [HOSTILE]});
    let script = json!({"reply": [
        {"agent": "agent", "turn": 1, "text": HOSTILE, "tool_calls": [
            {"name": "run_command", "args": {"command": command}},
            {"name": "spawn_agent", "args": {"role": format!("helper{HOSTILE}"), "task": "t"}},
        ]},
        {"agent": "agent", "turn": 2,
         "text": format!("final {HOSTILE}\n```json\n{handoff}\n```\n")},
        {"repeat": true, "text": format!("child {HOSTILE}")},
    ]});
    toml::to_string(&script).unwrap()
}

/// A repository with a team whose member shows a hostile display name, and a branch
/// named with the controls git allows in a ref (C1 and bidi: an agent's command can
/// create one in the shared repository).
fn fixture() -> tempfile::TempDir {
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        let team = json!({
            "mode": "broadcast",
            "members": [{"name": "alice", "display": "Alice\x1b]0;t\x07\u{9b}2J\u{202e}x",
                         "charter": "You help."}],
        });
        std::fs::write(
            work.join(".crewbox/teams/crew.toml"),
            toml::to_string(&team).unwrap(),
        )
        .unwrap();
    });
    let git = git2::Repository::open(dir.path().join("repo")).unwrap();
    let head = git.head().unwrap().peel_to_commit().unwrap();
    git.branch("crewbox/evil\u{9b}2J\u{202e}txt", &head, false)
        .unwrap();
    let config = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), sbx::user_config_table("")).unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::fs::write(dir.path().join("script.toml"), script()).unwrap();
    dir
}

/// `crewbox run` on a pseudo-terminal (util-linux `script`), so the live progress is
/// shown; returns what the terminal received.
fn run_on_a_pty(dir: &Path) -> Option<Output> {
    let Some(script) = peers::venv_tool("script") else {
        peers::missing("script", "util-linux `script` is not on PATH");
        return None;
    };
    let bin = env!("CARGO_BIN_EXE_crewbox");
    let script_file = dir.join("script.toml");
    let line = format!(
        "'{bin}' --color never run go --mode single --script '{}'",
        script_file.display()
    );
    // `script` runs crewbox with the environment the suite gives it.
    let env = command(dir, &[]);
    let mut pty = Command::new(script);
    pty.args(["-qec", &line, "/dev/null"])
        .current_dir(dir.join("repo"))
        .envs(env.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env_remove("RUST_LOG");
    let mut out = pty.output().unwrap();
    // The terminal itself ends each line with CR LF (`onlcr`).
    let mut lf = Vec::with_capacity(out.stdout.len());
    for (i, b) in out.stdout.iter().enumerate() {
        if !(*b == b'\r' && out.stdout.get(i + 1) == Some(&b'\n')) {
            lf.push(*b);
        }
    }
    out.stdout = lf;
    Some(out)
}

#[test]
fn text_others_wrote_reaches_the_terminal_escaped() {
    let dir = fixture();
    let d = dir.path();
    let script = d.join("script.toml");
    let script = script.to_str().unwrap();

    let run = bin(d, &["run", "go", "--mode", "single", "--script", script]);
    assert_inert("run", &run);
    assert!(run.status.success(), "{run:?}");
    let shown = stdout(&run);
    // Readable: each control is a visible escape, where it was.
    for visible in [
        "\\x1b]52;c;cHduZWQ=\\x07",
        "\\x1b]0;pwned\\x07",
        "\\x1b[2J",
        "\\x1b]8;;http://evil.example\\x07click",
        "\\u009b31m",
        "\\u202egnp.exe",
        "\\r\\x08\\u007f end",
        "helper\\x1b]52",
    ] {
        assert!(shown.contains(visible), "`{visible}` in:\n{shown}");
    }

    let status = bin(d, &["status", "--json"]);
    let runs: Value = serde_json::from_slice(&status.stdout).unwrap();
    let id = runs["runs"][0]["run_id"].as_str().unwrap().to_owned();

    let mut outputs = vec![];
    for args in [
        vec!["status", &id],
        vec!["status"],
        vec!["events", &id],
        vec!["tree", &id],
        vec!["tree", &id, "--format", "mermaid"],
        vec!["tree", &id, "--json"],
        vec!["history"],
        vec!["branches"],
        vec!["team", "list"],
        vec!["team", "show", "crew"],
        vec!["status", &id, "--json"],
    ] {
        let out = bin(d, &args);
        assert_inert(&args.join(" "), &out);
        assert!(out.status.success(), "{args:?}: {out:?}");
        outputs.push((args.join(" "), out));
    }
    let text = |name: &str| stdout(&outputs.iter().find(|(n, _)| n == name).unwrap().1);
    assert!(text(&format!("status {id}")).contains("\\x1b]0;pwned\\x07"));
    assert!(text(&format!("tree {id}")).contains("helper\\x1b]52;c;"));
    // A branch crewbox did not make is not listed (its names are ASCII ids), however
    // it is named; what is listed went through the same sink (`assert_inert` above).
    assert!(!text("branches").contains("evil"), "{}", text("branches"));
    assert!(text("team show crew").contains("Alice\\x1b]0;t\\x07\\u009b2J\\u202ex"));

    // JSON stays exact: the escapes are JSON's own, so the stored text comes back.
    let report: Value = serde_json::from_str(&text(&format!("status {id} --json"))).unwrap();
    assert_eq!(
        report["result"].as_str().map(|r| r.contains(HOSTILE)),
        Some(true)
    );
    let child = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["role"] != "executor")
        .unwrap();
    assert_eq!(child["name"], format!("helper{HOSTILE}"));
    let events = text(&format!("events {id}"));
    let tool_output = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "tool.call" && e["data"]["tool"] == "run_command")
        .unwrap();
    assert_eq!(
        tool_output["data"]["output"]
            .as_str()
            .map(|o| o.contains("\x1b]52;c;")),
        Some(true),
        "{tool_output}"
    );

    // An error naming what the user typed.
    let wrong = bin(
        d,
        &[
            "run",
            "go",
            "--team",
            &format!("nosuch{HOSTILE}"),
            "--script",
            script,
        ],
    );
    assert!(!wrong.status.success());
    assert_inert("run --team", &wrong);
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("nosuch\\x1b]52"),
        "{wrong:?}"
    );

    // The live progress, on a real terminal.
    if let Some(pty) = run_on_a_pty(d) {
        assert_inert("run (on a terminal)", &pty);
        let seen = stdout(&pty);
        assert!(
            seen.contains("turn 1: \\x1b]52;c;cHduZWQ=\\x07") && seen.contains("▶ run"),
            "{seen}"
        );
    }
}

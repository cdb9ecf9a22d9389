//! SIGTERM and SIGINT on `crewbox run` behave the same: exit 130, the run left
//! resumable, the message names `crewbox resume`, and the agent's commands are gone.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::support::procs;
use crate::support::repo::{bin, command, git_repo};

/// A script whose agent starts a long command carrying `marker`, in a session of its
/// own (as a daemon would), and would then say done.
fn long_command_script(marker: &str) -> String {
    let command = format!("setsid sh -c 'sleep 120; :' {marker} & sleep 120; :");
    let script = json!({"reply": [
        {"turn": 1, "text": "working", "tool_calls": [
            {"name": "run_command", "args": {"command": command, "timeout_s": 300}}
        ]},
        {"turn": 2, "text": "done"},
    ]});
    toml::to_string(&script).unwrap()
}

fn interrupted_by(signal: libc::c_int) {
    let dir = git_repo(|_| {});
    let marker = procs::marker("signal");
    let script = dir.path().join("script.toml");
    std::fs::write(&script, long_command_script(&marker)).unwrap();
    let child = command(
        dir.path(),
        &[
            "run",
            "work",
            "--mode",
            "single",
            "--script",
            script.to_str().unwrap(),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let started = procs::wait_for(Duration::from_secs(60), || {
        !procs::marked(&marker).is_empty()
    });
    if !started {
        let _ = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
        let out = child.wait_with_output().unwrap();
        panic!(
            "the agent's command never started: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let orphans = !procs::gone(&marker);
    procs::kill(&marker);
    assert_eq!(out.status.code(), Some(130), "signal {signal}: {err}");
    assert!(err.contains("crewbox resume"), "signal {signal}: {err}");
    assert!(
        !orphans,
        "signal {signal}: the agent's command outlived the run"
    );
    let status = bin(dir.path(), &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["runs"][0]["interrupted"], true, "{status}");
    let run = status["runs"][0]["run_id"].as_str().unwrap();
    let report = bin(dir.path(), &["status", run]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("status interrupted") && text.contains(&format!("crewbox resume {run}")),
        "{text}"
    );
}

#[test]
fn sigterm_on_run_exits_130_resumable_without_orphans() {
    interrupted_by(libc::SIGTERM);
}

#[test]
fn sigint_on_run_exits_130_resumable_without_orphans() {
    interrupted_by(libc::SIGINT);
}

//! The documented exit codes, through the real binary: 3 when a plugin fault decides a
//! run (in dispatch, in a crew role, in a validator whose verdict decides the run), 2
//! for usage and configuration. Faults are provoked with real components hitting real
//! limits: the runtime caps every list a plugin returns at 4096 items.

use std::path::Path;

use crate::support::repo::{bin, crewbox, git_repo};

/// More list items than any plugin may return (`Limits::max_list_items` is 4096).
const TOO_MANY: usize = 5000;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn user_config(dir: &Path, text: &str) {
    let config = dir.join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), text).unwrap();
}

#[test]
fn a_dispatcher_fault_exits_3_before_anything_runs() {
    let dir = git_repo(|_| {});
    // The echo dispatcher turns every `- ` line into a task: past the list cap.
    user_config(
        dir.path(),
        &format!(
            "dispatcher = \"{}\"\n",
            crate::support::guest_path("echo-dispatcher.wasm")
        ),
    );
    let tasks: String = (0..TOO_MANY).map(|i| format!("- task {i}\n")).collect();
    let prompt = format!("do all of these:\n{tasks}");
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "[[reply]]\nrepeat = true\ntext = \"x\"\n").unwrap();
    let script = script.to_str().unwrap();
    let out = bin(
        dir.path(),
        &[
            "run", &prompt, "--mode", "auto", "--json", "--script", script,
        ],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("dispatcher fault") && err.contains("echo-dispatcher"),
        "{err}"
    );
    let status = bin(dir.path(), &["status", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        runs["runs"].as_array().map(Vec::len),
        Some(0),
        "a dispatch fault records no run"
    );
}

#[test]
fn a_role_fault_exits_3_and_the_run_records_it() {
    let dir = git_repo(|_| {});
    // The built-in planner reads every bullet of its agent's reply as a plan step.
    let plan: String = (0..TOO_MANY).map(|i| format!("- step {i}\\n")).collect();
    let script = format!("[[reply]]\nagent = \"planner\"\ntext = \"{plan}\"\n");
    let (out, report) = crewbox(dir.path(), &script, &["run", "fix it", "--mode", "crew"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(report["status"], "failed");
    let fault = &report["fault"];
    assert!(
        fault["step"]
            .as_str()
            .unwrap()
            .contains("role `planner` faulted in interpret"),
        "{fault}"
    );
    assert!(
        fault["fault"].as_str().unwrap().contains("planner"),
        "the fault names the plugin: {fault}"
    );
}

#[test]
fn a_validator_fault_that_decides_the_run_exits_3() {
    let dir = git_repo(|_| {});
    let script = "[[reply]]\nagent = \"executor\"\nrepeat = true\ntext = \"done\"\n";
    let trap = format!("{}=panic", crate::support::guest_path("hostile-trap.wasm"));
    let (out, report) = crewbox(
        dir.path(),
        script,
        &["run", "do it", "--mode", "single", "--validator", &trap],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(report["validation"], "faulted");
    assert!(
        report["fault"]["step"]
            .as_str()
            .unwrap()
            .contains("validator `hostile-trap` faulted"),
        "{}",
        report["fault"]
    );
}

#[test]
fn a_failed_verdict_is_not_a_fault() {
    let dir = git_repo(|_| {});
    let script = "[[reply]]\nagent = \"executor\"\nrepeat = true\ntext = \"done, no handoff\"\n";
    let (out, report) = crewbox(
        dir.path(),
        script,
        &[
            "run",
            "do it",
            "--mode",
            "single",
            "--validator",
            "handoff-schema",
            "--max-fix-rounds",
            "0",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(report.get("fault").is_none(), "{report}");
}

#[test]
fn usage_and_configuration_errors_exit_2() {
    let dir = git_repo(|_| {});
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "[[reply]]\nrepeat = true\ntext = \"x\"\n").unwrap();
    let script = script.to_str().unwrap();
    for (args, says) in [
        (
            vec!["run", "x", "--mode", "broadcast", "--script", script],
            "runs a team",
        ),
        (
            vec![
                "run",
                "x",
                "--validator",
                &crate::support::guest_path("echo-dispatcher.wasm"),
                "--script",
                script,
            ],
            "not a validator",
        ),
        (
            vec!["run", "x", "--team", "nobody", "--script", script],
            "unknown team",
        ),
        (
            vec!["run", "x", "--provider", "nowhere"],
            "unknown provider",
        ),
    ] {
        let out = bin(dir.path(), &args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn an_error_says_each_cause_once() {
    let dir = git_repo(|_| {});
    // A cause the outer error already quotes (the OS's reason for a missing directory,
    // a confined read's refusal) is not printed a second time.
    let missing = dir.path().join("nowhere");
    let out = bin(dir.path(), &["--repo", missing.to_str().unwrap(), "status"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nowhere"), "{err}");
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");

    let config = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    let fifo = config.join("config.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let out = bin(dir.path(), &["status"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.matches("is a FIFO, not a regular file").count(),
        1,
        "{err}"
    );
}

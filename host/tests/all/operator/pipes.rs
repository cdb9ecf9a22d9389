//! A closed stdout is success for every command, and read-side commands never create
//! a store.

use std::path::Path;
use std::process::Stdio;

use crate::support::repo::{bin, command, crewbox, git_repo, state_dir};

const DONE: &str = "[[reply]]\nrepeat = true\ntext = \"done\"\n";

/// The read-side commands; `RUN` is replaced by a run id.
const READ_SIDE: &[&[&str]] = &[
    &["status"],
    &["status", "--json"],
    &["status", "RUN"],
    &["status", "RUN", "--json"],
    &["events", "RUN"],
    &["tree", "RUN"],
    &["history"],
    &["history", "--json"],
    &["health"],
    &["health", "--json"],
    &["schedule", "list"],
    &["schedule", "list", "--json"],
    &["worktree", "list"],
    &["worktree", "list", "--json"],
    &["team", "list"],
    &["config"],
    &["dispatch", "explain", "fix the bug"],
    &["plugin", "list"],
    &["trust", "--list"],
    &["completions", "bash"],
    &["branches"],
    &["branches", "--json"],
    &["--help"],
];

fn with_run<'a>(args: &[&'a str], run: &'a str) -> Vec<&'a str> {
    args.iter()
        .map(|a| if *a == "RUN" { run } else { a })
        .collect()
}

#[test]
fn a_closed_stdout_is_success_for_every_command() {
    let dir = git_repo(|_| {});
    let (out, report) = crewbox(dir.path(), DONE, &["run", "say done", "--mode", "single"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = report["run_id"].as_str().unwrap().to_owned();
    // A repository with several schedules, so `schedule list` has lines to write.
    for i in 0..3 {
        let name = format!("job{i}");
        let add = bin(
            dir.path(),
            &[
                "schedule", "add", "--every", "1h", "--prompt", "x", "--name", &name,
            ],
        );
        assert!(
            add.status.success(),
            "{}",
            String::from_utf8_lossy(&add.stderr)
        );
    }
    for args in READ_SIDE {
        let args = with_run(args, &run);
        let mut child = command(dir.path(), &args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // What `| head -0` does: the reader is gone before the first write.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "crewbox {args:?}: {err}");
        assert!(!err.contains("panicked"), "crewbox {args:?}: {err}");
    }
}

fn has_store(dir: &Path) -> bool {
    state_dir(dir).join("crewbox.db").exists()
}

#[test]
fn read_side_commands_never_create_a_store() {
    let dir = git_repo(|_| {});
    for args in READ_SIDE {
        let args = with_run(args, "0123456789abcdef");
        let out = bin(dir.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "crewbox {args:?}: {err}");
        assert!(!has_store(dir.path()), "crewbox {args:?} created a store");
    }
    // And the ones that list say there is nothing, successfully.
    for args in [
        &["status"][..],
        &["history"],
        &["health"],
        &["schedule", "list"],
        &["worktree", "list"],
    ] {
        let out = bin(dir.path(), args);
        assert!(
            out.status.success(),
            "crewbox {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let missing = bin(dir.path(), &["schedule", "rm", "nope"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(!has_store(dir.path()), "schedule rm created a store");
}

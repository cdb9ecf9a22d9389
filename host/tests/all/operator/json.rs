//! Every read command takes `--json` and prints one JSON document (and the control
//! commands acknowledge in JSON with it).

use crate::support::kill::{Db, spawn_run, wait_for};
use crate::support::repo::{bin, crewbox, git_repo};

#[test]
fn every_read_command_prints_json() {
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(
            work.join(".crewbox/teams/duo.toml"),
            "mode = \"broadcast\"\n[[members]]\nname = \"alice\"\nrole = \"architect\"\n",
        )
        .unwrap();
    });
    let (out, report) = crewbox(
        dir.path(),
        "[[reply]]\nrepeat = true\ntext = \"done\"\n",
        &["run", "say done", "--mode", "single"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = report["run_id"].as_str().unwrap();
    let commands: &[&[&str]] = &[
        &["status"],
        &["status", run],
        &["tree", run],
        &["history"],
        &["health"],
        &["schedule", "list"],
        &["worktree", "list"],
        &["branches"],
        &["trust", "--list"],
        &["team", "list"],
        &["team", "show", "duo"],
        &["config"],
        &["dispatch", "explain", "fix the typo in the README"],
        &["plugin", "list"],
    ];
    for args in commands {
        let mut all = args.to_vec();
        all.push("--json");
        let out = bin(dir.path(), &all);
        assert!(
            out.status.success(),
            "{all:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&out.stdout);
        assert!(
            parsed.is_ok(),
            "{all:?} printed no JSON: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // A stop acknowledges in JSON; it needs a run a live process drives (a finished
    // one is refused).
    let refused = bin(dir.path(), &["stop", run, "--json"]);
    assert_eq!(refused.status.code(), Some(1));
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        "[[reply]]\nrepeat = true\ndelay_ms = 20000\ntext = \"done\"\n",
        &["run", "say done slowly", "--mode", "single"],
    );
    let live = wait_for(
        dir.path(),
        &db,
        &mut child,
        "the agent runs",
        |_, agents| !agents.is_empty(),
    );
    let out = bin(dir.path(), &["stop", live.as_str(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ack: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ack["queued"], true, "{ack}");
    assert_eq!(ack["target"], live.as_str(), "{ack}");
    let _ = child.wait();
}

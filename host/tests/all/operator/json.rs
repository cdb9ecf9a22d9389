//! Every read command takes `--json` and prints one JSON document (and the control
//! commands acknowledge in JSON with it).

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
        &["stop", run],
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
        if args[0] == "stop" {
            let ack = parsed.unwrap();
            assert_eq!(ack["queued"], true, "{ack}");
            assert_eq!(ack["target"], run, "{ack}");
        }
    }
}

//! Regression: a repository under a directory whose name is not UTF-8 was unusable —
//! its store recorded the root lossily and then refused the real one, `trust` could not
//! write its record, and a run's stored request lost its script path. Unix paths are
//! bytes: the repository, its state base, its config and the script all live under such
//! a directory here, and everything works (worktree, sandboxed command, trust, JSON).

#![cfg(unix)]

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::repo::{command, git_repo};
use crate::support::sandbox as sbx;

/// `crewbox ARGS` (plus `extra`, which may be any bytes) in the repository under `dir`.
fn crewbox(dir: &Path, args: &[&str], extra: &[&OsStr]) -> std::process::Output {
    command(dir, args).args(extra).output().unwrap()
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

fn bytes_of(p: &Path) -> Value {
    json!(p.as_os_str().as_bytes())
}

#[test]
fn a_repository_under_a_non_utf8_directory_works() {
    let tmp = git_repo(|_| {});
    // Everything of the fixture moves under `café` spelled in Latin-1.
    let dir = tmp.path().join(OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::rename(tmp.path().join("repo"), dir.join("repo")).unwrap();
    assert!(dir.to_str().is_none());
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let config = dir.join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), sbx::user_config_table("")).unwrap();
    let script: PathBuf = dir.join("script.toml");
    let text = json!({"reply": [
        {"turn": 1, "tool_calls": [
            {"name": "write_file", "args": {"path": "out.txt", "content": "hi"}},
            {"name": "run_command", "args": {"command": "pwd; cat out.txt"}},
        ]},
        {"turn": 2, "text": "done"},
    ]});
    std::fs::write(&script, toml::to_string(&text).unwrap()).unwrap();

    let args = ["run", "go", "--mode", "single", "--json", "--script"];
    let out = crewbox(&dir, &args, &[script.as_os_str()]);
    let report = json_of(&out);
    assert_eq!(report["status"], "completed", "{report}");
    let agent = &report["agents"][0];
    assert_eq!(agent["state"], "completed", "{report}");
    let branch = agent["branch"]["branch"].as_str().unwrap();
    assert!(branch.starts_with("crewbox/"), "{report}");
    let run = report["run_id"].as_str().unwrap();
    let events = crate::support::repo::events(&dir, run);
    let ran = events
        .iter()
        .find(|e| e["kind"] == "tool.call" && e["data"]["tool"] == "run_command")
        .unwrap();
    assert!(ran["data"]["ok"].as_bool().unwrap(), "{ran}");
    assert!(
        ran["data"]["output"].as_str().unwrap().contains("hi"),
        "{ran}"
    );

    // The store serves the repository it recorded (it used to refuse it).
    for args in [vec!["status"], vec!["status", run], vec!["tree", run]] {
        let out = crewbox(&dir, &args, &[]);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let status = json_of(&crewbox(&dir, &["status", run, "--json"], &[]));
    assert_eq!(status["status"], "completed");

    // Trust is recorded for the root as it is, and listed as its bytes; the team file
    // is written first because it is part of what is trusted.
    std::fs::create_dir_all(dir.join("repo/.crewbox/teams")).unwrap();
    std::fs::write(
        dir.join("repo/.crewbox/teams/duo.toml"),
        "mode = \"broadcast\"\n[[members]]\nname = \"a\"\n",
    )
    .unwrap();
    let trusted = crewbox(&dir, &["trust"], &[]);
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let root = dir.join("repo").canonicalize().unwrap();
    let listed = json_of(&crewbox(&dir, &["trust", "--list", "--json"], &[]));
    assert_eq!(listed[0]["root"], bytes_of(&root), "{listed}");
    let config = json_of(&crewbox(&dir, &["config", "--json"], &[]));
    assert_eq!(config["trust"], "trusted", "{config}");
    assert_eq!(config["repository"], bytes_of(&root));
    let teams = json_of(&crewbox(&dir, &["team", "list", "--json"], &[]));
    assert_eq!(
        teams[0]["path"],
        bytes_of(&root.join(".crewbox/teams/duo.toml"))
    );

    // A run's stored request keeps its script, so it can be resumed from it.
    let again = crewbox(&dir, &args, &[script.as_os_str()]);
    assert_eq!(json_of(&again)["status"], "completed");
    let resumed = crewbox(&dir, &["resume", "--json"], &[]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let db = crate::support::repo::repo_state_dir(&dir.join("state"), &dir.join("repo"))
        .join("crewbox.db");
    let conn = rusqlite::Connection::open(db).unwrap();
    let spec: String = conn
        .query_row(
            "SELECT spec FROM runs ORDER BY created_at DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let spec: Value = serde_json::from_str(&spec).unwrap();
    assert_eq!(spec["request"]["script"], bytes_of(&script), "{spec}");
}

//! `crewbox history` and `crewbox tree` on the store written by a real run.

use std::path::Path;
use std::process::Output;

fn crewbox(dir: &Path, args: &[&str]) -> Output {
    use crate::support::cli;
    cli::crewbox(dir, &cli::Homes::hidden_in(dir), args)
        .output()
        .expect("running crewbox")
}

fn ok_stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("utf-8 output")
}

fn json(out: &Output) -> serde_json::Value {
    let text = ok_stdout(out);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn history_and_tree_show_a_finished_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), "[[reply]]\ntext = \"done\"\n").unwrap();

    // No store yet: a clear usage error, not an empty tree.
    assert_eq!(crewbox(dir.path(), &["tree"]).status.code(), Some(2));
    let run_args = [
        "run",
        "x",
        "--mode",
        "single",
        "--isolation",
        "none",
        "--script",
        "s.toml",
        "--json",
    ];
    let report = json(&crewbox(dir.path(), &run_args));
    let run_id = report["run_id"].as_str().expect("run id").to_owned();
    let agent = &report["agents"][0];
    let agent_id = agent["id"].as_str().unwrap().to_owned();
    let agent_name = agent["name"].as_str().unwrap().to_owned();

    let hist = json(&crewbox(dir.path(), &["history", "--json"]));
    assert_eq!(
        hist,
        serde_json::json!({
            "total": 1,
            "by_kind": {"single": 1},
            "by_source": {"explicit": 1},
            "auto_by_kind": {},
        })
    );
    let text = ok_stdout(&crewbox(dir.path(), &["history"]));
    assert!(text.starts_with("dispatch decisions: 1\n"), "{text}");
    assert!(text.contains("explicit"), "{text}");

    let tree = json(&crewbox(dir.path(), &["tree", "--format", "json"]));
    assert_eq!(tree["run_id"], run_id.as_str());
    assert_eq!(tree["agents"], 1);
    let root = &tree["roots"][0];
    assert_eq!(root["id"], agent_id.as_str());
    assert_eq!(root["name"], agent_name.as_str());
    assert_eq!(root["state"], "completed");
    assert_eq!(root["children"], serde_json::json!([]));

    let prefix = &run_id[..run_id.len() - 4];
    let mermaid = ok_stdout(&crewbox(
        dir.path(),
        &["tree", "--run", prefix, "--format", "mermaid"],
    ));
    assert!(mermaid.starts_with("flowchart TD\n"), "{mermaid}");
    assert!(mermaid.contains(&agent_id), "{mermaid}");

    let text = ok_stdout(&crewbox(dir.path(), &["tree"]));
    assert!(text.contains(&run_id), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with(&agent_name) && l.ends_with(&agent_id)),
        "{text}"
    );

    let missing = crewbox(dir.path(), &["tree", "--run", "r-nope"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("r-nope"));
}

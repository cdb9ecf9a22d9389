//! The agent tree of a team run through the binary: workers under the orchestrator
//! that assigned them, in team order; the synthesis beside it under the run.

use crate::support::repo::{bin, crewbox, git_repo};

const TRIO: &str = "mode = \"orchestrate\"\n[[members]]\nname = \"carol\"\nrole = \"writer\"\n[[members]]\nname = \"alice\"\nrole = \"architect\"\n[[members]]\nname = \"bob\"\nrole = \"tester\"\n";

/// The plan names the workers out of team order; the tree keeps team order.
const SCRIPT: &str = r#"
[[reply]]
agent = "orchestrator"
text = "@worker:bob\nWrite the tests.\n@end\n@worker:alice\nDesign the API.\n@end\n@worker:carol\nDocument it.\n@end\n"

[[reply]]
agent = "alice"
text = "ALICE"

[[reply]]
agent = "bob"
text = "BOB"

[[reply]]
agent = "carol"
text = "CAROL"

[[reply]]
agent = "synthesis"
repeat = true
text = "SYNTHESIS"
"#;

#[test]
fn tree_of_a_team_run_puts_workers_under_the_orchestrator() {
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/trio.toml"), TRIO).unwrap();
    });
    let (out, report) = crewbox(
        dir.path(),
        SCRIPT,
        &[
            "run",
            "document a queue",
            "--team",
            "trio",
            "--mode",
            "orchestrate",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = report["run_id"].as_str().unwrap();
    let tree = bin(dir.path(), &["tree", run, "--format", "json"]);
    let tree: serde_json::Value = serde_json::from_slice(&tree.stdout).unwrap();
    let roots: Vec<&str> = tree["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(roots, ["orchestrator", "synthesis"], "{tree:#}");
    let workers: Vec<&str> = tree["roots"][0]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(workers, ["carol", "alice", "bob"], "team order: {tree:#}");
    let text = bin(dir.path(), &["tree", run]);
    let text = String::from_utf8_lossy(&text.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[1].starts_with("orchestrator (orchestrator) completed"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("├─ carol (writer) completed"),
        "{text}"
    );
    assert!(
        lines[3].starts_with("├─ alice (architect) completed"),
        "{text}"
    );
    assert!(lines[4].starts_with("└─ bob (tester) completed"), "{text}");
    assert!(
        lines[5].starts_with("synthesis (orchestrator) completed"),
        "{text}"
    );
}

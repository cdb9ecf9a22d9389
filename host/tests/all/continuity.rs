//! Team runs that build on their own work, through the real binary: the integration
//! branch `crewbox/run/<run-id>` carries members' commits to the next member, the
//! next iteration, the synthesis and the evaluator; conflicts are reported, not
//! dropped; a run that changed nothing leaves no branch.

use crate::support::repo::{bin, crewbox, git_repo};
use crate::support::script::writes_then;

fn repo(name: &str, team: &str) -> tempfile::TempDir {
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(format!(".crewbox/teams/{name}.toml")), team).unwrap();
    });
    // Full access for members applies only in a trusted repository.
    assert!(bin(dir.path(), &["trust"]).status.success());
    dir
}

fn ok(out: &std::process::Output, report: &serde_json::Value) {
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The file `path` in the tree of `branch`, if it is there.
fn file_at(dir: &std::path::Path, branch: &str, path: &str) -> Option<String> {
    let git = git2::Repository::open(dir.join("repo")).unwrap();
    let tree = git
        .find_branch(branch, git2::BranchType::Local)
        .ok()?
        .get()
        .peel_to_tree()
        .unwrap();
    let entry = tree.get_path(std::path::Path::new(path)).ok()?;
    let blob = git.find_blob(entry.id()).unwrap();
    Some(String::from_utf8_lossy(blob.content()).into_owned())
}

fn branches(dir: &std::path::Path) -> Vec<String> {
    let git = git2::Repository::open(dir.join("repo")).unwrap();
    git.branches(Some(git2::BranchType::Local))
        .unwrap()
        .map(|b| b.unwrap().0.name().unwrap().unwrap().to_owned())
        .collect()
}

const PAIR: &str = r#"
mode = "sequential"

[[members]]
name = "alice"
access = "full"

[[members]]
name = "bob"
access = "full"
"#;

/// Member `name` writes `path` on turn 1, then finishes.
fn writes(name: &str, path: &str, content: &str) -> String {
    writes_then(name, path, content, 0, &format!("{name}: wrote {path}"))
}

#[test]
fn sequential_member_two_works_on_member_ones_files() {
    let dir = repo("pair", PAIR);
    let script = [
        writes("alice", "DRAFT.md", "draft body by alice"),
        r#"
[[reply]]
agent = "bob"
turn = 1
[[reply.tool_calls]]
name = "read_file"
args = { path = "DRAFT.md" }

[[reply]]
agent = "bob"
turn = 2
when = "draft body by alice"
[[reply.tool_calls]]
name = "write_file"
args = { path = "REVIEW.md", content = "bob read the draft" }

[[reply]]
agent = "bob"
turn = 2
text = "bob: there is no draft"

[[reply]]
agent = "bob"
turn = 3
text = "bob: reviewed the draft"
"#
        .to_owned(),
    ]
    .concat();
    let (out, report) = crewbox(dir.path(), &script, &["run", "write it", "--team", "pair"]);
    ok(&out, &report);
    let result = report["result"].as_str().unwrap();
    assert!(result.contains("bob: reviewed the draft"), "{result}");
    let run = report["run_id"].as_str().unwrap();
    let branch = format!("crewbox/run/{run}");
    let integration = &report["integration"];
    assert_eq!(integration["branch"]["branch"], branch.as_str(), "{report}");
    assert_eq!(
        integration["branch"]["commits"].as_array().unwrap().len(),
        2,
        "one commit per member, fast-forwarded: {report}"
    );
    let merges: Vec<(&str, &str)> = integration["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["member"].as_str().unwrap(),
                m["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(merges, [("alice", "fast-forward"), ("bob", "fast-forward")]);
    assert_eq!(
        file_at(dir.path(), &branch, "DRAFT.md").as_deref(),
        Some("draft body by alice")
    );
    assert_eq!(
        file_at(dir.path(), &branch, "REVIEW.md").as_deref(),
        Some("bob read the draft")
    );
    // The user's checkout is untouched; the result lives on the branch.
    assert!(!dir.path().join("repo/DRAFT.md").exists());
    let text = bin(dir.path(), &["status", run]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("integration {branch} (2 commit(s)")),
        "{text}"
    );
}

const BROAD: &str = r#"
mode = "broadcast"

[[members]]
name = "alice"
access = "full"

[[members]]
name = "bob"
access = "full"
"#;

#[test]
fn a_conflict_keeps_the_later_branch_and_is_reported() {
    let dir = repo("broad", BROAD);
    let script = [
        writes("alice", "notes.txt", "alice was here"),
        writes("bob", "notes.txt", "bob was here"),
    ]
    .concat();
    let (out, report) = crewbox(
        dir.path(),
        &script,
        &["run", "edit notes", "--team", "broad"],
    );
    assert!(!out.status.success(), "a conflict fails the run: {report}");
    assert_eq!(report["status"], "failed");
    let run = report["run_id"].as_str().unwrap();
    let branch = format!("crewbox/run/{run}");
    let merges = report["integration"]["merges"].as_array().unwrap();
    assert_eq!(merges.len(), 2, "{report}");
    assert_eq!(merges[0]["member"], "alice");
    assert_eq!(merges[0]["outcome"], "fast-forward");
    assert_eq!(merges[1]["member"], "bob");
    assert_eq!(merges[1]["outcome"], "conflict");
    assert_eq!(merges[1]["files"], serde_json::json!(["notes.txt"]));
    // The integration branch has alice's work; bob's stays on his own branch.
    assert_eq!(
        file_at(dir.path(), &branch, "notes.txt").as_deref(),
        Some("alice was here")
    );
    let bob_branch = merges[1]["branch"].as_str().unwrap();
    assert!(branches(dir.path()).iter().any(|b| b == bob_branch));
    assert_eq!(
        file_at(dir.path(), bob_branch, "notes.txt").as_deref(),
        Some("bob was here")
    );
    let result = report["result"].as_str().unwrap();
    assert!(result.contains("merge-conflict"), "{result}");
    let text = bin(dir.path(), &["status", run]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "merge-conflict bob: {bob_branch} kept, not merged (notes.txt)"
        )),
        "{text}"
    );
}

#[test]
fn a_run_that_changed_nothing_leaves_no_branch() {
    let dir = repo("pair", PAIR);
    let script = r#"
[[reply]]
repeat = true
text = "nothing to change"
"#;
    let (out, report) = crewbox(dir.path(), script, &["run", "look", "--team", "pair"]);
    ok(&out, &report);
    assert!(report.get("integration").is_none(), "{report}");
    assert!(
        !branches(dir.path())
            .iter()
            .any(|b| b.starts_with("crewbox/")),
        "{:?}",
        branches(dir.path())
    );
}

const LOOP: &str = r#"
mode = "reflect"

[evaluator]
threshold = 0.9

[[members]]
name = "alice"
access = "full"
"#;

#[test]
fn the_next_iteration_and_the_evaluator_see_the_work_so_far() {
    let dir = repo("loop", LOOP);
    let script = r#"
[[reply]]
agent = "synthesis"
repeat = true
text = "synthesis of the iteration"

[[reply]]
agent = "orchestrator"
repeat = true
text = "@worker:alice\nkeep notes\n@end"

[[reply]]
agent = "alice"
turn = 1
repeat = true
[[reply.tool_calls]]
name = "read_file"
args = { path = "NOTE.txt" }

[[reply]]
agent = "alice"
turn = 2
when = "first note"
[[reply.tool_calls]]
name = "write_file"
args = { path = "NOTE.txt", content = "first note\nsecond note" }

[[reply]]
agent = "alice"
turn = 2
when = "(?i)not exist|no such|not found"
[[reply.tool_calls]]
name = "write_file"
args = { path = "NOTE.txt", content = "first note" }

[[reply]]
agent = "alice"
repeat = true
text = "alice: notes kept"

[[reply]]
agent = "evaluator"
when = "(?s)The diff since the run started.*\\+second note"
text = "SCORE: 1.0"

[[reply]]
agent = "evaluator"
when = "(?s)The diff since the run started.*\\+first note"
text = "SCORE: 0.3"
"#;
    let (out, report) = crewbox(
        dir.path(),
        script,
        &[
            "run",
            "keep notes",
            "--team",
            "loop",
            "--max-iterations",
            "3",
        ],
    );
    ok(&out, &report);
    assert_eq!(report["exit_reason"], "goal-met", "{report}");
    assert_eq!(
        report["iterations"].as_array().unwrap().len(),
        2,
        "{report}"
    );
    let run = report["run_id"].as_str().unwrap();
    assert_eq!(
        file_at(dir.path(), &format!("crewbox/run/{run}"), "NOTE.txt").as_deref(),
        Some("first note\nsecond note"),
        "iteration 2 read iteration 1's note and added to it"
    );
}

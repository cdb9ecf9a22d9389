//! Branches carry the name of the agent that made them and the handoff's summary as
//! their commit message; `crewbox branches` lists them and prunes only merged work
//! unless forced.

use std::path::Path;

use crate::support::repo::{bin, crewbox, git_repo};

const WRITE: &str = r#"
[[reply]]
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "FILE", content = "one\n" }

[[reply]]
turn = 2
text = '''
Here is the handoff the validators asked for.
```json
{"status": "success", "summary": "Add FILE with its first line", "findings": ["done"]}
```
'''
"#;

fn branches(dir: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["branches", "--json"];
    all.extend(args);
    let out = bin(dir, &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn branches_are_named_after_their_agent_and_pruned_only_when_merged() {
    let dir = git_repo(|_| {});
    let repo = dir.path().join("repo");
    let mut made = Vec::new();
    for file in ["a.txt", "b.txt"] {
        let script = WRITE.replace("FILE", file);
        let (out, report) = crewbox(dir.path(), &script, &["run", "write", "--mode", "single"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let agent = report["agents"][0]["id"].as_str().unwrap().to_owned();
        let branch = format!("crewbox/{agent}");
        let subject = git(&repo, &["log", "-1", "--format=%s", &branch]);
        assert_eq!(
            subject,
            format!("crewbox executor: Add {file} with its first line")
        );
        made.push(branch);
    }
    let listed: Vec<_> = branches(dir.path(), &[])
        .iter()
        .map(|b| b["name"].clone())
        .collect();
    assert_eq!(listed, made, "oldest first");
    // Merge the first into HEAD: only it is merged, and only it is pruned.
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "merge",
            "-q",
            "--ff-only",
            &made[0],
        ],
    );
    let merged = branches(dir.path(), &["--merged"]);
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0]["name"], made[0].as_str());
    let pruned = branches(dir.path(), &["--prune"]);
    assert_eq!(pruned[0]["pruned"], true, "{pruned:?}");
    assert_eq!(pruned[1]["pruned"], false, "{pruned:?}");
    assert!(
        pruned[1]["kept_because"]
            .as_str()
            .unwrap()
            .contains("unmerged")
    );
    let left: Vec<_> = branches(dir.path(), &[])
        .iter()
        .map(|b| b["name"].clone())
        .collect();
    assert_eq!(left, [made[1].as_str()], "unmerged work is kept");
    // A user's own branch under `crewbox/` is not crewbox's: not listed, never pruned
    // (probe 18: `--prune --force` deleted it with its unmerged work).
    git(&repo, &["branch", "crewbox/mywork", made[1].as_str()]);
    let forced = branches(dir.path(), &["--prune", "--force"]);
    assert_eq!(forced.len(), 1, "{forced:?}");
    assert_eq!(forced[0]["pruned"], true);
    assert!(branches(dir.path(), &[]).is_empty());
    git(
        &repo,
        &["rev-parse", "--verify", "refs/heads/crewbox/mywork"],
    );
    assert_eq!(
        bin(dir.path(), &["branches", "--force"]).status.code(),
        Some(2)
    );
}

//! One vocabulary: ids as unique prefixes or tails everywhere (ambiguous: exit 2 with
//! the candidates), the same positional run id across commands (old flags kept),
//! `status --state/--limit`, the decision said once, completions.

use crate::support::repo::{bin, crewbox, git_repo};

const DONE: &str = "[[reply]]\nrepeat = true\ntext = \"done\"\n";

fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ids_are_accepted_by_prefix_and_tail_and_ambiguity_lists_candidates() {
    let dir = git_repo(|_| {});
    let (_, first) = crewbox(dir.path(), DONE, &["run", "one", "--mode", "single"]);
    let (_, second) = crewbox(dir.path(), DONE, &["run", "two", "--mode", "single"]);
    let run = first["run_id"].as_str().unwrap();
    let agent = first["agents"][0]["id"].as_str().unwrap();
    let other = second["agents"][0]["id"].as_str().unwrap();
    let tail = &agent[agent.len() - 6..];

    // The tail the progress view shows names the agent: it has ended, so exit 1.
    for args in [&["steer", tail, "hi"][..], &["stop", tail]] {
        let out = bin(dir.path(), args);
        let (_, err) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(agent) && err.contains("already ended"),
            "{err}"
        );
    }
    // A prefix both agents share is ambiguous: exit 2, both ids listed.
    let out = bin(dir.path(), &["steer", "a-", "hi"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(agent) && err.contains(other), "{err}");
    // Run ids: a prefix without the `r-`, positional or with the old flag.
    let bare = &run[2..14];
    for args in [
        &["tree", bare][..],
        &["tree", "--run", bare],
        &["events", bare],
        &["events", "--run", bare],
        &["status", bare],
    ] {
        let out = bin(dir.path(), args);
        let (stdout, err) = text(&out);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(stdout.contains(run), "{args:?}: {stdout}");
    }
    let out = bin(dir.path(), &["tree", "r-"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out).1);
    let out = bin(dir.path(), &["status", "nothing-like-this"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn status_filters_by_state_and_says_the_decision_once() {
    let dir = git_repo(|_| {});
    for prompt in ["one", "two"] {
        let (out, _) = crewbox(dir.path(), DONE, &["run", prompt, "--mode", "single"]);
        assert!(out.status.success());
    }
    let runs = |args: &[&str]| -> Vec<serde_json::Value> {
        let out = bin(dir.path(), args);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["runs"].as_array().unwrap().clone()
    };
    assert_eq!(runs(&["status", "--json"]).len(), 2);
    assert_eq!(runs(&["status", "--json", "--limit", "1"]).len(), 1);
    assert_eq!(runs(&["status", "--json", "--state", "completed"]).len(), 2);
    assert_eq!(runs(&["status", "--json", "--state", "failed"]).len(), 0);
    assert_eq!(
        runs(&["status", "--json", "--state", "interrupted"]).len(),
        0
    );
    let bad = bin(dir.path(), &["status", "--state", "sleeping"]);
    assert_eq!(bad.status.code(), Some(2));
    let newest = runs(&["status", "--json"])[0]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (report, _) = text(&bin(dir.path(), &["status", &newest]));
    assert!(report.contains("decision: single (explicit)\n"), "{report}");
}

#[test]
fn completions_are_generated_for_each_shell() {
    let dir = git_repo(|_| {});
    for shell in ["bash", "zsh", "fish"] {
        let out = bin(dir.path(), &["completions", shell]);
        let (script, err) = text(&out);
        assert!(out.status.success(), "{shell}: {err}");
        assert!(
            script.contains("schedule") && script.contains("state"),
            "{shell}"
        );
    }
    assert_eq!(
        bin(dir.path(), &["completions", "tcsh"]).status.code(),
        Some(2)
    );
}

//! `spawn_agent` fan-out is bounded by quotas, not only by the tool-call budget: a
//! scripted agent asking for a dozen children in one turn gets `max_children` of them
//! (a trusted repository may lower it, never raise it), the agents of a run share
//! `max_children_per_run`, and every refused call is a tool error telling the model
//! which quota it hit. Through the real binary.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::repo::{bin, crewbox, git_repo};

/// Children answer at once; each agent of the run asks for `n` children in its first
/// turn (roles `kid-1` …), then finishes.
fn script(n: usize) -> String {
    let spawns: Vec<Value> = (1..=n)
        .map(|i| json!({"name": "spawn_agent", "args": {"role": format!("kid-{i}"), "task": "say hi"}}))
        .collect();
    let script = json!({"reply": [
        {"system": "You are a sub-agent", "repeat": true, "text": "hi"},
        {"turn": 1, "repeat": true, "text": "delegating", "tool_calls": spawns},
        {"turn": 2, "repeat": true, "text": "done"},
    ]});
    toml::to_string(&script).unwrap()
}

fn user_config(dir: &Path, text: &str) {
    let config = dir.join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), text).unwrap();
}

/// The run's `spawn_agent` calls: (ok, output), in order.
fn spawn_calls(dir: &Path, run: &str) -> Vec<(bool, String)> {
    crate::support::repo::events(dir, run)
        .iter()
        .filter(|e| e["kind"] == "tool.call" && e["data"]["tool"] == "spawn_agent")
        .map(|e| {
            (
                e["data"]["ok"].as_bool().unwrap(),
                e["data"]["output"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn children(report: &Value) -> usize {
    report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["role"].as_str().unwrap().starts_with("kid-"))
        .count()
}

#[test]
fn an_agent_gets_max_children_and_a_tool_error_for_the_rest() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    let (out, report) = crewbox(d, &script(12), &["run", "go", "--mode", "single"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(children(&report), 8, "the default max_children");
    let calls = spawn_calls(d, report["run_id"].as_str().unwrap());
    assert_eq!(calls.len(), 12);
    assert!(calls[..8].iter().all(|(ok, _)| *ok), "{calls:?}");
    for (ok, output) in &calls[8..] {
        assert!(!ok);
        assert!(
            output.contains("no child started")
                && output.contains("8 child agents")
                && output.contains("`max_children`"),
            "{output}"
        );
    }

    // A trusted repository lowers it; raising it is clamped to the user's value.
    std::fs::create_dir_all(d.join("repo/.crewbox")).unwrap();
    std::fs::write(
        d.join("repo/.crewbox/config.toml"),
        "[quotas]\nmax_children = 2\n",
    )
    .unwrap();
    assert!(bin(d, &["trust"]).status.success());
    let (_, report) = crewbox(d, &script(5), &["run", "go", "--mode", "single"]);
    assert_eq!(children(&report), 2);
    std::fs::write(
        d.join("repo/.crewbox/config.toml"),
        "[quotas]\nmax_children = 100\n",
    )
    .unwrap();
    // Trust covers the files as they were: the changed config is trusted again.
    assert!(bin(d, &["trust"]).status.success());
    let (out, report) = crewbox(d, &script(12), &["run", "go", "--mode", "single"]);
    assert_eq!(children(&report), 8);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("quotas.max_children = 100") && stderr.contains("clamped to 8"),
        "{stderr}"
    );
}

#[test]
fn the_agents_of_a_run_share_max_children_per_run() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    user_config(d, "[quotas]\nmax_children_per_run = 3\n");
    let (out, report) = crewbox(
        d,
        &script(2),
        &["run", "go", "--mode", "swarm", "--swarm-size", "2"],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(children(&report), 3);
    let calls = spawn_calls(d, report["run_id"].as_str().unwrap());
    assert_eq!(calls.len(), 4);
    let refused: Vec<&String> = calls.iter().filter(|(ok, _)| !ok).map(|(_, o)| o).collect();
    assert_eq!(refused.len(), 1, "{calls:?}");
    assert!(
        refused[0].contains("this run's agents") && refused[0].contains("`max_children_per_run`"),
        "{}",
        refused[0]
    );

    // Zero means no children at all.
    user_config(d, "[quotas]\nmax_children = 0\n");
    let (_, report) = crewbox(d, &script(1), &["run", "go", "--mode", "single"]);
    assert_eq!(children(&report), 0);
}

/// Children started by `spawn_agent` take the spawn path of every agent: each is in a
/// finalised batch (recorded before it starts) and runs through the executor, in its
/// parent's slot, so a run limited to one agent at a time does not deadlock on them.
#[test]
fn spawn_agent_children_are_batched_and_run_in_their_parents_slot() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    user_config(d, "max_concurrent = 1\n");
    let (out, report) = crewbox(d, &script(3), &["run", "go", "--mode", "single"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(report["status"], "completed", "{report}");
    let kids: Vec<&str> = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["role"].as_str().unwrap().starts_with("kid-"))
        .map(|a| {
            assert_eq!(a["state"], "completed", "{a}");
            a["id"].as_str().unwrap()
        })
        .collect();
    assert_eq!(kids.len(), 3, "{report}");
    let events = crate::support::repo::events(d, report["run_id"].as_str().unwrap());
    let batched: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "batch.finalized")
        .flat_map(|e| {
            e["data"]["individuals"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    for kid in &kids {
        assert!(
            batched.iter().any(|b| b == kid),
            "child {kid} was never in a finalised batch: {batched:?}"
        );
    }
}

//! The team modes end to end through the real binary: a real git repository in a temp
//! dir with a team file, the scripted model answering each member by its agent name.

use crate::support::repo::{bin, crewbox, events, git_repo};

fn repo(team: &str) -> tempfile::TempDir {
    git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/trio.toml"), team).unwrap();
    })
}

const TRIO: &str = r#"
mode = "broadcast"
shared_context = "We keep answers short."

[[members]]
name = "alice"
role = "architect"
charter = "Designs things."

[[members]]
name = "bob"
role = "tester"
charter = "Tests things."

[[members]]
name = "carol"
role = "writer"
charter = "Writes the docs."
"#;

fn agent<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no agent {name}: {report}"))
}

#[test]
fn broadcast_runs_every_member_as_one_group_each_told_the_others() {
    let dir = repo(TRIO);
    // Each member answers only when its prompt names the other two, and its charter is
    // its system prompt (naming the team file it came from).
    let script = r#"
[[reply]]
agent = "alice"
when = "(?s)You are `alice`, the architect.*bob, carol.*We keep answers short"
system = "(?s)## Your charter \\(from \\.crewbox/teams/trio\\.toml\\)\nDesigns things"
text = "alice: use a queue"

[[reply]]
agent = "bob"
when = "(?s)You are `bob`.*alice, carol"
system = "Tests things"
text = "bob: test the queue"

[[reply]]
agent = "carol"
when = "(?s)You are `carol`.*alice, bob"
system = "Writes the docs"
text = "carol: document the queue"
"#;
    let (out, report) = crewbox(
        dir.path(),
        script,
        &["run", "design a queue", "--team", "trio"],
    );
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        report["mode"], "broadcast",
        "the team's mode is the default"
    );
    assert_eq!(report["team"], "trio", "{report}");
    let result = report["result"].as_str().unwrap();
    for (name, reply) in [
        ("alice", "use a queue"),
        ("bob", "test the queue"),
        ("carol", "document the queue"),
    ] {
        assert!(result.contains(&format!("## {name}")), "{result}");
        assert!(result.contains(reply), "{result}");
    }
    let members = report["members"].as_array().unwrap();
    assert_eq!(members.len(), 3);
    assert!(
        members.iter().all(|m| m["state"] == "completed"),
        "{members:?}"
    );
    // The three went through the spawn batcher as one group, recorded before any ran.
    let events = events(dir.path(), report["run_id"].as_str().unwrap());
    let batch = events
        .iter()
        .position(|e| e["kind"] == "batch.finalized")
        .expect("a batch event");
    assert_eq!(
        events[batch]["data"]["groups"][0]["members"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "{}",
        events[batch]
    );
    let first_start = events
        .iter()
        .position(|e| e["kind"] == "agent.state" && e["data"]["state"] == "running")
        .unwrap();
    assert!(batch < first_start);
    // The group join delivered all three results once, all-or-nothing, after the last one.
    let deliveries: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["kind"] == "group.delivery")
        .collect();
    assert_eq!(deliveries.len(), 1, "{deliveries:?}");
    assert_eq!(deliveries[0]["data"]["kind"], "All");
    assert_eq!(
        deliveries[0]["data"]["counts"],
        serde_json::json!({"total": 3, "completed": 3, "delivered": 3})
    );
    assert_eq!(
        deliveries[0]["data"]["results"].as_array().unwrap().len(),
        3
    );
    let last_end = events
        .iter()
        .rposition(|e| e["kind"] == "agent.state" && e["data"]["state"] == "completed")
        .unwrap();
    let delivered_at = events
        .iter()
        .position(|e| e["kind"] == "group.delivery")
        .unwrap();
    assert!(
        delivered_at > last_end,
        "delivered only once every member finished"
    );
}

#[test]
fn sequential_members_see_the_earlier_replies() {
    let dir = repo(TRIO);
    let script = r#"
[[reply]]
agent = "alice"
when = "you go first"
text = "alice: the plan is ZEBRA"

[[reply]]
agent = "bob"
when = "(?s)alice.*the plan is ZEBRA"
text = "bob: agreed on zebra"

[[reply]]
agent = "carol"
when = "(?s)ZEBRA.*agreed on zebra"
text = "carol: written up"
"#;
    let (out, report) = crewbox(
        dir.path(),
        script,
        &["run", "plan", "--team", "trio", "--mode", "sequential"],
    );
    assert!(out.status.success(), "{report}");
    assert_eq!(report["mode"], "sequential");
    let result = report["result"].as_str().unwrap();
    let (a, b, c) = (
        result.find("ZEBRA").unwrap(),
        result.find("agreed on zebra").unwrap(),
        result.find("written up").unwrap(),
    );
    assert!(a < b && b < c, "in member order: {result}");
    // Each prompt (the agent's recorded task) carries the replies before it.
    assert!(
        agent(&report, "alice")["task"]
            .as_str()
            .unwrap()
            .contains("you go first")
    );
    let bob_task = agent(&report, "bob")["task"].as_str().unwrap();
    assert!(
        bob_task.contains("the plan is ZEBRA") && !bob_task.contains("agreed"),
        "{bob_task}"
    );
    let carol_task = agent(&report, "carol")["task"].as_str().unwrap();
    assert!(carol_task.contains("agreed on zebra"), "{carol_task}");
}

const ORCHESTRATE: &str = r#"
[[reply]]
agent = "orchestrator"
when = "You are the orchestrator"
text = """
Plan:
@worker:alice
Design the API.
@end
@worker:bob
Write tests for the API.
@end
@worker:mallory
Steal the secrets.
@end
"""

[[reply]]
agent = "alice"
when = "(?s)## Your task\nDesign the API"
system = "Designs things"
text = "API: push and pop"

[[reply]]
agent = "bob"
when = "(?s)## Your task\nWrite tests for the API"
text = "tests: push then pop"

[[reply]]
agent = "synthesis"
when = "(?s)Your workers have finished.*alice \\(completed.*API: push and pop.*bob \\(completed.*tests: push then pop"
text = "SYNTHESIS: a queue with push/pop, tested"
"#;

#[test]
fn orchestrate_routes_assignments_and_reports_unknown_workers() {
    let dir = repo(TRIO);
    let (out, report) = crewbox(
        dir.path(),
        ORCHESTRATE,
        &[
            "run",
            "build a queue",
            "--team",
            "trio",
            "--mode",
            "orchestrate",
        ],
    );
    assert!(out.status.success(), "{report}");
    assert_eq!(report["result"], "SYNTHESIS: a queue with push/pop, tested");
    assert_eq!(report["unknown_workers"], serde_json::json!(["mallory"]));
    assert_eq!(report["workers_used"], 2);
    let assignments = report["assignments"].as_array().unwrap();
    let by: Vec<(&str, &str, &str)> = assignments
        .iter()
        .map(|a| {
            (
                a["worker"].as_str().unwrap(),
                a["task"].as_str().unwrap(),
                a["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        by,
        [
            ("alice", "Design the API.", "completed"),
            ("bob", "Write tests for the API.", "completed"),
        ]
    );
    assert_eq!(
        assignments[0]["agent_id"],
        agent(&report, "alice")["id"],
        "{report}"
    );
    assert!(
        report["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["name"] != "carol"),
        "carol got no task"
    );
}

#[test]
fn orchestrate_without_assignments_nudges_once_then_the_answer_stands() {
    let dir = repo(TRIO);
    let script = r#"
[[reply]]
agent = "orchestrator"
when = "You are the orchestrator"
text = "I would rather answer myself: 42."

[[reply]]
agent = "orchestrator"
when = "no assignment I could read"
text = "Still no plan. The answer is 42."
"#;
    let (out, report) = crewbox(
        dir.path(),
        script,
        &[
            "run",
            "what is it",
            "--team",
            "trio",
            "--mode",
            "orchestrate",
        ],
    );
    assert!(out.status.success(), "{report}");
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["exit_reason"], "answered-directly", "{report}");
    assert_eq!(report["workers_used"], 0);
    assert_eq!(report["nudged"], true);
    assert_eq!(report["result"], "Still no plan. The answer is 42.");
    let names: Vec<&str> = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["orchestrator", "orchestrator"], "no worker ran");
}

#[test]
fn a_failing_worker_is_a_failed_result_and_the_run_still_synthesises() {
    let dir = repo(TRIO);
    // bob has no reply in the script: its model call fails.
    let script = r#"
[[reply]]
agent = "orchestrator"
when = "You are the orchestrator"
text = "@worker:alice\nDesign it.\n@end\n@worker:bob\nTest it.\n@end"

[[reply]]
agent = "alice"
text = "designed"

[[reply]]
agent = "synthesis"
when = "(?s)### bob \\(failed"
text = "alice designed it; bob's tests failed, so it is untested"
"#;
    let (out, report) = crewbox(
        dir.path(),
        script,
        &["run", "build", "--team", "trio", "--mode", "orchestrate"],
    );
    assert!(out.status.success(), "{report}");
    assert_eq!(report["status"], "completed");
    let statuses: Vec<(&str, &str)> = report["assignments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["worker"].as_str().unwrap(), a["status"].as_str().unwrap()))
        .collect();
    assert_eq!(statuses, [("alice", "completed"), ("bob", "failed")]);
    assert_eq!(
        report["result"],
        "alice designed it; bob's tests failed, so it is untested"
    );
}

#[test]
fn unknown_team_is_a_usage_error_listing_known_teams_and_creates_no_run() {
    let dir = repo(TRIO);
    let out = bin(
        dir.path(),
        &["run", "x", "--team", "nope", "--script", "none.toml"],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown team `nope`") && err.contains("trio"),
        "{err}"
    );
    // A run of the known team is recorded; the unknown one left nothing behind.
    let (ok, _) = crewbox(
        dir.path(),
        "[[reply]]\nrepeat = true\ntext = \"ok\"\n",
        &["run", "x", "--team", "trio"],
    );
    assert!(ok.status.success());
    let status = bin(dir.path(), &["status", "--json"]);
    let runs = serde_json::from_slice::<serde_json::Value>(&status.stdout)
        .map(|v| v["runs"].as_array().map_or(0, Vec::len))
        .unwrap_or(0);
    assert_eq!(runs, 1, "only the known team's run was recorded");
}

#[test]
fn team_list_and_show_print_members_and_source() {
    let dir = repo(TRIO);
    let out = bin(dir.path(), &["team", "list", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let teams: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(teams.as_array().unwrap().len(), 1);
    let t = &teams[0];
    assert_eq!(t["name"], "trio");
    assert_eq!(t["mode"], "broadcast");
    assert_eq!(t["source"], "repo");
    assert!(t["path"].as_str().unwrap().ends_with("trio.toml"));
    let members: Vec<(&str, &str, &str)> = t["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["role"].as_str().unwrap(),
                m["access"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        members,
        [
            ("alice", "architect", "read-only"),
            ("bob", "tester", "read-only"),
            ("carol", "writer", "read-only"),
        ]
    );
    let show = bin(dir.path(), &["team", "show", "trio"]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("mode:   broadcast") && text.contains("architect"),
        "{text}"
    );
    let missing = bin(dir.path(), &["team", "show", "ghost"]);
    assert_eq!(missing.status.code(), Some(2));
}

/// A hostile team file of one 200 KB line (brackets nested past the parser's depth)
/// is a warning of a few lines naming the file, line and column, not the whole line
/// echoed to the terminal; the other teams still list.
#[test]
fn a_team_file_of_one_huge_line_is_a_short_warning() {
    let dir = repo(TRIO);
    let deep = format!("a = {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    std::fs::write(dir.path().join("repo/.crewbox/teams/deep.toml"), deep).unwrap();
    let out = bin(dir.path(), &["team", "list"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.len() < 1_000, "{} bytes of stderr", err.len());
    assert!(
        err.contains("deep.toml") && err.contains("line 1, column"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("trio"));
}

#[test]
fn team_and_member_validators_check_member_work() {
    let team = r#"
mode = "broadcast"
validators = ["handoff-schema"]

[[members]]
name = "dev"
access = "full"

[[members]]
name = "sec"
access = "full"
validators = ["no-secrets"]
"#;
    let script = r#"
[[reply]]
agent = "dev"
when = "Validators checked your work"
text = '''
```json
{"status": "success", "summary": "done", "findings": ["ok"]}
```
'''

[[reply]]
agent = "dev"
text = "done, but no handoff"

[[reply]]
agent = "sec"
repeat = true
text = '''
```json
{"status": "success", "summary": "checked", "findings": ["ok"]}
```
'''
"#;
    let dir = repo(team);
    // A team's validators (and full access) apply only in a trusted repository.
    assert!(bin(dir.path(), &["trust"]).status.success());
    let (out, report) = crewbox(dir.path(), script, &["run", "work", "--team", "trio"]);
    assert!(
        out.status.success(),
        "{}\n{report}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dev = agent(&report, "dev");
    let validators: Vec<(&str, u64, &str)> = dev["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["validator"].as_str().unwrap(),
                v["round"].as_u64().unwrap(),
                v["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        validators,
        [
            ("handoff-schema", 0, "failed"),
            ("handoff-schema", 1, "passed")
        ]
    );
    let sec = agent(&report, "sec");
    let mut names: Vec<&str> = sec["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["validator"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["handoff-schema", "no-secrets"],
        "team validators plus its own"
    );
}

#[test]
fn progressive_delivery_hands_results_on_in_waves_each_once() {
    let team = r#"
mode = "broadcast"
delivery = "progressive"
first_wave_s = 1
wave_every_s = 1

[[members]]
name = "alice"

[[members]]
name = "bob"

[[members]]
name = "carol"
"#;
    let script = r#"
[[reply]]
agent = "alice"
text = "fast"

[[reply]]
agent = "bob"
text = "slower"
delay_ms = 2500

[[reply]]
agent = "carol"
text = "slowest"
delay_ms = 4500
"#;
    let dir = repo(team);
    let (out, report) = crewbox(dir.path(), script, &["run", "go", "--team", "trio"]);
    assert!(
        out.status.success(),
        "{}\n{report}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = events(dir.path(), report["run_id"].as_str().unwrap());
    let deliveries: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["kind"] == "group.delivery")
        .map(|e| &e["data"])
        .collect();
    assert!(
        deliveries.len() >= 2,
        "waves, not one delivery: {deliveries:?}"
    );
    assert_eq!(
        deliveries.last().unwrap()["kind"],
        "Final",
        "{deliveries:?}"
    );
    assert!(
        deliveries[0]["kind"].as_str().unwrap().starts_with("Wave"),
        "{deliveries:?}"
    );
    let mut delivered: Vec<String> = deliveries
        .iter()
        .flat_map(|d| d["results"].as_array().unwrap())
        .map(|r| r["agent"].as_str().unwrap().to_owned())
        .collect();
    delivered.sort();
    delivered.dedup();
    assert_eq!(
        delivered.len(),
        3,
        "each member delivered exactly once: {deliveries:?}"
    );
    let total: usize = deliveries
        .iter()
        .map(|d| d["results"].as_array().unwrap().len())
        .sum();
    assert_eq!(total, 3);
    assert_eq!(deliveries.last().unwrap()["counts"]["delivered"], 3);
}

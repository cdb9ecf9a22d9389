//! Team members keep their conversation within a run, end to end through the real
//! binary: a reflect member's next iteration continues its earlier exchange (the
//! scripted replies below only answer when the request carries it), a resumed run
//! rebuilds it from the store after `kill -9`, and a long loop stays within the bound.

use crate::support::kill::{Db, is, kill9, named, resume, spawn_run, states, wait_for};
use crate::support::repo::{crewbox, git_repo};

use crewbox::unstable::agent::AgentState;
use crewbox::unstable::store::StepState;

const TEAM: &str = r#"
mode = "reflect"

[[members]]
name = "alice"
role = "architect"

[[members]]
name = "bob"
role = "tester"
"#;

fn repo(config: Option<&str>) -> tempfile::TempDir {
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/duo.toml"), TEAM).unwrap();
    });
    if let Some(config) = config {
        let at = dir.path().join("config/crewbox");
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join("config.toml"), config).unwrap();
    }
    dir
}

/// Two iterations judged by the orchestrator: alice designs and bob tests in the first,
/// alice polishes in the second — and her second reply is only there for a request
/// whose conversation holds her first task, her first reply and then the new task.
fn script(second_plan_ms: u64) -> String {
    format!(
        r###"
[[reply]]
agent = "synthesis"
when = "(?s)### alice \\(completed.*ALICE-1.*### bob \\(completed.*BOB-1"
text = "SYNTH-1: a first draft"

[[reply]]
agent = "synthesis"
when = "(?s)### alice \\(completed.*ALICE-2"
text = "SYNTH-2: the polished queue"

[[reply]]
agent = "evaluator"
when = "SYNTH-1"
text = "[[NEEDS_ITERATION]]\nRATIONALE: the API needs polish"

[[reply]]
agent = "evaluator"
when = "SYNTH-2"
text = "SCORE: 0.95\n[[GROUP_REFLECT_COMPLETE]]"

[[reply]]
agent = "orchestrator"
when = "(?s)## Previous iteration \\(1\\).*the API needs polish"
delay_ms = {second_plan_ms}
text = "@worker:alice\nPolish the API.\n@end"

[[reply]]
agent = "orchestrator"
when = "Split the request below into tasks"
text = "@worker:alice\nDesign the API.\n@end\n@worker:bob\nWrite the tests.\n@end"

[[reply]]
agent = "alice"
when = "## Your task\nPolish the API\\."
conversation = "(?s)^user: .*## Your task\nDesign the API\\..*\nassistant: ALICE-1: push and pop\nuser: .*## Your task\nPolish the API\\.\n+$"
text = "ALICE-2"

[[reply]]
agent = "alice"
when = "## Your task\nDesign the API\\."
text = "ALICE-1: push and pop"

[[reply]]
agent = "bob"
when = "## Your task\nWrite the tests\\."
text = "BOB-1"
"###
    )
}

fn args() -> [&'static str; 8] {
    [
        "run",
        "build a queue",
        "--team",
        "duo",
        "--mode",
        "reflect",
        "--max-iterations",
        "3",
    ]
}

fn assert_polished(report: &serde_json::Value) {
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["exit_reason"], "goal-met", "{report}");
    assert_eq!(report["result"], "SYNTH-2: the polished queue", "{report}");
}

#[test]
fn a_reflect_member_continues_its_own_conversation_in_the_next_iteration() {
    let dir = repo(None);
    let (out, report) = crewbox(dir.path(), &script(0), &args());
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_polished(&report);
    // Bob worked only once, so nothing of alice's reached him (and his one run was fresh).
    let iterations = report["iterations"].as_array().unwrap();
    assert_eq!(iterations.len(), 2, "{report}");
}

#[test]
fn a_resumed_loop_gives_the_next_iteration_the_stored_conversation() {
    let dir = repo(None);
    let db = Db::create(dir.path());
    let mut child = spawn_run(dir.path(), &script(3000), &args());
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "iteration 1 stored, iteration 2 planning",
        |steps, agents| {
            is(steps, "it1/evaluation", StepState::Done)
                && is(steps, "it2/plan", StepState::Started)
                && named(agents, "orchestrator")
                    .iter()
                    .any(|a| a.state == AgentState::Running)
        },
    );
    kill9(&mut child);

    // The new process has only the store to rebuild alice's conversation from.
    let report = resume(dir.path(), &run);
    assert_polished(&report);
    let agents = db.agents(&run);
    let alice = named(&agents, "alice");
    assert_eq!(
        states(&alice),
        [AgentState::Completed, AgentState::Completed],
        "once per iteration: {agents:?}"
    );
    assert!(alice[1].task.contains("## Your task\nPolish the API."));
}

/// Alice gets `steps` iterations, each answered with a long reply; from the third on, her
/// request must still start with her first task and hold her latest reply, with the
/// older ones compacted into one note.
fn long_script(steps: u32, reply_bytes: usize) -> String {
    let mut s = String::new();
    for n in (1..=steps).rev() {
        let carried = match n {
            1 => String::new(),
            2 => "conversation = \"(?s)Step 1\\\\..*assistant: ALICE-1 \"\n".to_owned(),
            _ => format!(
                "conversation = \"(?s)^user: .*Step 1\\\\..*\\\\[earlier conversation compacted:.*assistant: ALICE-{} .*Step {n}\\\\.\\n+$\"\n",
                n - 1
            ),
        };
        let plan_when = match n {
            1 => "Split the request below into tasks".to_owned(),
            _ => format!("## Previous iteration \\\\({}\\\\)", n - 1),
        };
        s.push_str(&format!(
            r###"
[[reply]]
agent = "orchestrator"
when = "{plan_when}"
text = "@worker:alice\nStep {n}.\n@end"

[[reply]]
agent = "alice"
when = "## Your task\nStep {n}\\."
{carried}text = "ALICE-{n} {filler}"

[[reply]]
agent = "synthesis"
when = "ALICE-{n} "
text = "SYNTH-{n}"

[[reply]]
agent = "evaluator"
when = "SYNTH-{n}"
text = "[[NEEDS_ITERATION]]\nRATIONALE: more"
"###,
            filler = "x".repeat(reply_bytes),
        ));
    }
    s
}

#[test]
fn a_long_loop_carries_a_bounded_conversation() {
    const CONTEXT: u64 = 4000;
    let dir = repo(Some(&format!("[quotas]\ncontext_tokens = {CONTEXT}\n")));
    let steps = 6;
    let (out, report) = crewbox(
        dir.path(),
        &long_script(steps, 4000),
        &[
            "run",
            "grow",
            "--team",
            "duo",
            "--mode",
            "reflect",
            "--max-iterations",
            &steps.to_string(),
        ],
    );
    assert_eq!(report["exit_reason"], "max-iterations", "{report}");
    assert!(
        out.status.code().is_some(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let alice: Vec<&serde_json::Value> = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["name"] == "alice")
        .collect();
    assert_eq!(alice.len(), steps as usize, "{report}");
    for (i, a) in alice.iter().enumerate() {
        assert_eq!(a["state"], "completed", "iteration {}: {a}", i + 1);
        // One model call each: what was sent stays within the context budget.
        let sent = a["tokens"]["input"].as_u64().unwrap();
        assert!(sent <= CONTEXT, "iteration {} sent {sent} tokens", i + 1);
    }
}

//! Reflect and orchestrate behaving as the seeds say, each through the real binary:
//! sentinels in any case, `[[NEEDS_ITERATION]]` as 0.4, bulleted and inline-ended
//! assignment blocks, unknown workers in the report, "no more work" as the goal met,
//! failed tries retried without using up an iteration, a stopped orchestrator agent
//! cancelling the loop, and messages that belong to the loop they were sent to.

use std::time::{Duration, Instant};

use crate::reflect::{
    BOTH, SELF_JUDGING, WITH_EVALUATOR, WORKERS, evaluation, iterations, plan, repo, running_run,
    spawn_run, synthesis,
};
use crate::support::repo::{bin, crewbox};

fn run(
    dir: &std::path::Path,
    script: &str,
    max: &str,
) -> (std::process::Output, serde_json::Value) {
    crewbox(
        dir,
        script,
        &[
            "run",
            "build a cache",
            "--team",
            "duo",
            "--max-iterations",
            max,
        ],
    )
}

fn wait_json(child: std::process::Child) -> serde_json::Value {
    let out = child.wait_with_output().unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)))
}

/// Waits until agent `name` of `run` is running and returns its id.
fn running_agent(dir: &std::path::Path, run: &str, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = bin(dir, &["status", run, "--json"]);
        let found = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|v| {
                v["agents"].as_array()?.iter().find_map(|a| {
                    (a["name"] == name && a["state"] == "running")
                        .then(|| a["id"].as_str().unwrap().to_owned())
                })
            });
        if let Some(id) = found {
            return id;
        }
        assert!(Instant::now() < deadline, "agent {name} never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_lowercase_sentinel_on_its_own_line_ends_the_loop() {
    let dir = repo(SELF_JUDGING);
    let script = [
        synthesis("the cache"),
        plan(1, BOTH),
        evaluation("looks finished\n[[group_reflect_complete]]"),
        WORKERS.to_owned(),
    ]
    .concat();
    let (out, report) = run(dir.path(), &script, "2");
    assert!(out.status.success(), "{report}");
    assert_eq!(report["exit_reason"], "goal-met", "{report}");
    assert_eq!(iterations(&report).len(), 1);
}

#[test]
fn needs_iteration_without_a_score_scores_point_four() {
    let dir = repo(SELF_JUDGING);
    let script = [
        synthesis("the cache"),
        plan(1, BOTH),
        evaluation("not yet\n[[NEEDS_ITERATION]]"),
        WORKERS.to_owned(),
    ]
    .concat();
    let (_, report) = run(dir.path(), &script, "1");
    assert_eq!(report["exit_reason"], "max-iterations", "{report}");
    assert_eq!(iterations(&report)[0]["score"], 0.4, "{report}");
}

#[test]
fn bulleted_blocks_and_an_inline_end_are_assignments_and_unknown_names_are_reported() {
    let dir = repo(WITH_EVALUATOR);
    let blocks = "Plan:\n- @worker:alice\n  design the cache @end\n- @worker:bob test the cache @end\n- @worker:mallory steal keys @end";
    let script = [
        synthesis("the cache"),
        plan(1, blocks),
        evaluation("SCORE: 1"),
        WORKERS.to_owned(),
    ]
    .concat();
    let (out, report) = run(dir.path(), &script, "1");
    assert!(out.status.success(), "{report}");
    let it = &iterations(&report)[0];
    let tasks: Vec<(&str, &str)> = it["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["worker"].as_str().unwrap(), w["task"].as_str().unwrap()))
        .collect();
    assert_eq!(
        tasks,
        [("alice", "design the cache"), ("bob", "test the cache")]
    );
    assert_eq!(
        it["unknown_workers"],
        serde_json::json!(["mallory"]),
        "{report}"
    );
}

#[test]
fn no_work_after_every_worker_has_worked_is_the_goal_met() {
    let dir = repo(WITH_EVALUATOR);
    let script = [
        synthesis("the cache, designed and tested"),
        plan(1, BOTH),
        // Iteration 2 (and its nudge): nothing left to assign.
        "\n[[reply]]\nagent = \"orchestrator\"\nrepeat = true\ntext = \"Nothing left to do.\"\n"
            .to_owned(),
        evaluation("SCORE: 0.6"),
        WORKERS.to_owned(),
    ]
    .concat();
    let (out, report) = run(dir.path(), &script, "5");
    assert!(out.status.success(), "{report}");
    assert_eq!(report["exit_reason"], "goal-met", "{report}");
    assert_eq!(iterations(&report).len(), 2, "{report}");
    assert_eq!(report["result"], "the cache, designed and tested");
}

#[test]
fn a_failed_try_is_retried_without_using_up_an_iteration() {
    let dir = repo(WITH_EVALUATOR);
    // The first planning answer and its nudge assign nothing: a failed try.
    let script = [
        synthesis("the cache"),
        "\n[[reply]]\nagent = \"orchestrator\"\ntext = \"Let me think.\"\n".to_owned(),
        "\n[[reply]]\nagent = \"orchestrator\"\ntext = \"Still thinking.\"\n".to_owned(),
        plan(1, BOTH),
        evaluation("SCORE: 0.95"),
        WORKERS.to_owned(),
    ]
    .concat();
    let (out, report) = run(dir.path(), &script, "1");
    assert!(out.status.success(), "{report}");
    assert_eq!(report["exit_reason"], "goal-met", "{report}");
    let its = iterations(&report);
    assert_eq!(its.len(), 2, "{report}");
    assert_eq!(
        (its[0]["iteration"].as_u64(), its[1]["iteration"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(its[0]["error"].as_str().unwrap().contains("no worker"));
    assert_eq!(its[1]["retry"], 1, "{report}");
}

#[test]
fn stopping_the_orchestrator_agent_cancels_the_loop() {
    let dir = repo(WITH_EVALUATOR);
    let script = [
        "\n[[reply]]\nagent = \"orchestrator\"\ndelay_ms = 30000\ntext = \"@worker:alice\\nx\\n@end\"\n"
            .to_owned(),
        WORKERS.to_owned(),
    ]
    .concat();
    let child = spawn_run(dir.path(), &script);
    let run = running_run(dir.path());
    let agent = running_agent(dir.path(), &run, "orchestrator");
    assert!(bin(dir.path(), &["stop", &agent]).status.success());
    let started = Instant::now();
    let report = wait_json(child);
    assert_eq!(report["status"], "cancelled", "{report}");
    assert_eq!(report["exit_reason"], "cancelled");
    assert_eq!(iterations(&report).len(), 1, "no retry: {report}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "not a 30 s wait"
    );
}

#[test]
fn a_late_message_is_reported_by_its_loop_and_never_reaches_the_next() {
    let dir = repo(WITH_EVALUATOR);
    // The synthesis is slow: the message arrives after the only iteration began.
    let script = [
        "\n[[reply]]\nagent = \"synthesis\"\ndelay_ms = 2500\ntext = \"v1\"\n".to_owned(),
        plan(1, BOTH),
        evaluation("SCORE: 1"),
        WORKERS.to_owned(),
    ]
    .concat();
    let child = spawn_run(dir.path(), &script);
    let id = running_run(dir.path());
    running_agent(dir.path(), &id, "synthesis");
    let sent = bin(dir.path(), &["send", "--team", "duo", "too late for it1"]);
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let first = wait_json(child);
    assert_eq!(first["exit_reason"], "goal-met", "{first}");
    assert_eq!(
        first["unread_messages"],
        serde_json::json!(["too late for it1"]),
        "{first}"
    );
    // A second, unrelated loop on the team starts with an empty inbox.
    let script = [
        synthesis("v2"),
        plan(1, BOTH),
        evaluation("SCORE: 1"),
        WORKERS.to_owned(),
    ]
    .concat();
    let (out, second) = run(dir.path(), &script, "1");
    assert!(out.status.success(), "{second}");
    assert!(
        iterations(&second)[0].get("messages").is_none(),
        "the old loop's message leaked: {second}"
    );
}

//! Crash recovery end to end: the real binary runs an orchestrate or reflect team, is
//! killed with SIGKILL at a chosen step (found by watching the run's journal in the
//! store), and `crewbox resume` finishes the run. The checks count agent rows and
//! compare agent ids, so a resume that ignored the journal and ran steps again fails.

use crate::support::kill::{
    Db, SLOW_MS, assert_interrupted, is, kill9, named, resume, spawn, spawn_run, states, stderr,
    step, wait_for,
};
use crate::support::repo::{bin, crewbox, git_repo};
use std::time::{Duration, Instant};

use crewbox::unstable::agent::AgentState;
use crewbox::unstable::store::{AgentRecord, StepRecord, StepState};

/// Two workers, so one can be done while the other still runs.
pub(crate) const TEAM: &str = r#"
mode = "orchestrate"

[[members]]
name = "alice"
role = "architect"

[[members]]
name = "bob"
role = "tester"
"#;

/// A repository with the two-worker team `duo` (shared with the telemetry tests).
pub(crate) fn repo() -> tempfile::TempDir {
    git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/duo.toml"), TEAM).unwrap();
    })
}

/// One orchestrate round: alice designs, bob tests, the synthesis (matched only when
/// it sees both workers' replies) combines them. Delays in milliseconds.
pub(crate) fn orchestrate_script(alice_ms: u64, bob_ms: u64, synthesis_ms: u64) -> String {
    format!(
        r###"
[[reply]]
agent = "synthesis"
when = "(?s)Your workers have finished.*### alice \\(completed.*ALICE: push and pop.*### bob \\(completed.*BOB: push then pop passes"
delay_ms = {synthesis_ms}
text = "SYNTHESIS: a queue with push/pop, tested"

[[reply]]
agent = "orchestrator"
when = "Split the request below into tasks"
text = """
@worker:alice
Design the API.
@end
@worker:bob
Write the tests.
@end
"""

[[reply]]
agent = "alice"
when = "## Your task\nDesign the API\\."
delay_ms = {alice_ms}
text = "ALICE: push and pop"

[[reply]]
agent = "bob"
when = "## Your task\nWrite the tests\\."
delay_ms = {bob_ms}
text = "BOB: push then pop passes"
"###
    )
}

/// Every step of a finished orchestrate round, done.
fn assert_round_done(steps: &[StepRecord], prefix: &str, workers: &[&str]) {
    for key in ["plan", "synthesis"]
        .iter()
        .map(|k| format!("{prefix}{k}"))
        .chain(workers.iter().map(|w| format!("{prefix}worker/{w}")))
    {
        assert!(is(steps, &key, StepState::Done), "{key}: {steps:?}");
    }
}

fn orchestrate_args() -> [&'static str; 6] {
    [
        "run",
        "build a queue",
        "--team",
        "duo",
        "--mode",
        "orchestrate",
    ]
}

#[test]
fn killed_after_planning_resumes_without_planning_again() {
    let dir = repo();
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        &orchestrate_script(SLOW_MS, SLOW_MS, 0),
        &orchestrate_args(),
    );
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "plan stored, both workers running",
        |steps, agents| {
            is(steps, "plan", StepState::Done)
                && ["alice", "bob"].iter().all(|w| {
                    named(agents, w)
                        .iter()
                        .any(|a| a.state == AgentState::Running)
                })
        },
    );
    kill9(&mut child);
    let steps = db.steps(&run);
    let plan = step(&steps, "plan").unwrap().clone();
    assert!(
        ["worker/alice", "worker/bob", "synthesis"]
            .iter()
            .all(|k| !is(&steps, k, StepState::Done)),
        "killed before any worker finished: {steps:?}"
    );

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["exit_reason"], "goal-met");
    assert_eq!(report["result"], "SYNTHESIS: a queue with push/pop, tested");
    // Read back: the decision and the plan.
    assert_eq!(report["resumed_steps"], 2, "{report}");

    let steps = db.steps(&run);
    assert_eq!(
        step(&steps, "plan").unwrap(),
        &plan,
        "the stored plan is untouched"
    );
    assert_round_done(&steps, "", &["alice", "bob"]);
    let agents = db.agents(&run);
    let orchestrators = named(&agents, "orchestrator");
    assert_eq!(
        states(&orchestrators),
        [AgentState::Completed],
        "planned once: {agents:?}"
    );
    assert_eq!(
        orchestrators[0].id.as_str(),
        plan.agent_id.as_deref().unwrap()
    );
    for (worker, task) in [("alice", "Design the API."), ("bob", "Write the tests.")] {
        let rows = named(&agents, worker);
        assert_eq!(
            states(&rows),
            [AgentState::Error, AgentState::Completed],
            "{worker}: interrupted, then run again: {agents:?}"
        );
        assert_interrupted(rows[0]);
        assert!(rows[1].task.contains(task), "{worker}: {}", rows[1].task);
        assert_eq!(
            step(&steps, &format!("worker/{worker}"))
                .unwrap()
                .agent_id
                .as_deref(),
            Some(rows[1].id.as_str())
        );
    }
    assert_eq!(
        states(&named(&agents, "synthesis")),
        [AgentState::Completed]
    );
    assert_eq!(agents.len(), 6, "{agents:?}");
}

#[test]
fn killed_while_workers_run_resumes_only_the_unfinished_worker_with_its_task() {
    let dir = repo();
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        &orchestrate_script(0, SLOW_MS, 0),
        &orchestrate_args(),
    );
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "alice done, bob running",
        |steps, agents| {
            is(steps, "worker/alice", StepState::Done)
                && is(steps, "worker/bob", StepState::Started)
                && named(agents, "bob")
                    .iter()
                    .any(|a| a.state == AgentState::Running)
        },
    );
    kill9(&mut child);
    let steps = db.steps(&run);
    assert!(
        is(&steps, "worker/bob", StepState::Started),
        "bob was still running at the kill: {steps:?}"
    );
    let alice_step = step(&steps, "worker/alice").unwrap().clone();
    let alice_id = alice_step.agent_id.clone().unwrap();
    let old_bob = step(&steps, "worker/bob")
        .unwrap()
        .agent_id
        .clone()
        .unwrap();

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    // The synthesis only matches when it sees alice's stored reply and bob's new one.
    assert_eq!(report["result"], "SYNTHESIS: a queue with push/pop, tested");
    assert_eq!(
        report["resumed_steps"], 3,
        "decision, plan, alice: {report}"
    );

    let steps = db.steps(&run);
    assert_eq!(
        step(&steps, "worker/alice").unwrap(),
        &alice_step,
        "alice's stored result is untouched"
    );
    assert_round_done(&steps, "", &["alice", "bob"]);
    let agents = db.agents(&run);
    let alice = named(&agents, "alice");
    assert_eq!(alice.len(), 1, "alice ran once: {agents:?}");
    assert_eq!(alice[0].id.as_str(), alice_id);
    assert_eq!(alice[0].state, AgentState::Completed);

    let bob = named(&agents, "bob");
    assert_eq!(
        states(&bob),
        [AgentState::Error, AgentState::Completed],
        "{agents:?}"
    );
    assert_eq!(bob[0].id.as_str(), old_bob);
    assert_interrupted(bob[0]);
    assert!(
        bob[1].task.contains("## Your task\nWrite the tests.")
            && !bob[1].task.contains("Design the API"),
        "bob got his own task again: {}",
        bob[1].task
    );
    assert_eq!(
        step(&steps, "worker/bob").unwrap().agent_id.as_deref(),
        Some(bob[1].id.as_str())
    );
    assert_eq!(named(&agents, "orchestrator").len(), 1, "{agents:?}");
    assert_eq!(named(&agents, "synthesis").len(), 1, "{agents:?}");

    // The report's assignments point at the agents whose results were used.
    let assignments: Vec<(&str, &str, &str)> = report["assignments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["worker"].as_str().unwrap(),
                a["agent_id"].as_str().unwrap(),
                a["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        assignments,
        [
            ("alice", alice_id.as_str(), "completed"),
            ("bob", bob[1].id.as_str(), "completed"),
        ]
    );
}

#[test]
fn a_resume_killed_in_turn_is_resumed_again() {
    let dir = repo();
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        &orchestrate_script(0, SLOW_MS, 0),
        &orchestrate_args(),
    );
    let bob_running = |agents: &[AgentRecord], rows: usize| {
        let bob = named(agents, "bob");
        bob.len() == rows && bob.last().is_some_and(|a| a.state == AgentState::Running)
    };
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "alice done, bob running",
        |steps, agents| is(steps, "worker/alice", StepState::Done) && bob_running(agents, 1),
    );
    kill9(&mut child);
    // The resuming process dies too, while it runs bob again.
    let mut resuming = spawn(dir.path(), &["resume", run.as_str(), "--json"]);
    wait_for(
        dir.path(),
        &db,
        &mut resuming,
        "bob running again",
        |_, agents| bob_running(agents, 2),
    );
    kill9(&mut resuming);
    assert!(is(&db.steps(&run), "worker/bob", StepState::Started));

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "SYNTHESIS: a queue with push/pop, tested");
    assert_eq!(
        report["resumed_steps"], 3,
        "decision, plan, alice: {report}"
    );
    let agents = db.agents(&run);
    let bob = named(&agents, "bob");
    assert_eq!(
        states(&bob),
        [AgentState::Error, AgentState::Error, AgentState::Completed],
        "{agents:?}"
    );
    assert_interrupted(bob[0]);
    assert_interrupted(bob[1]);
    for name in ["orchestrator", "alice", "synthesis"] {
        assert_eq!(
            states(&named(&agents, name)),
            [AgentState::Completed],
            "{name} ran once over three processes: {agents:?}"
        );
    }
}

#[test]
fn killed_during_synthesis_resumes_only_the_synthesis() {
    let dir = repo();
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        &orchestrate_script(0, 0, SLOW_MS),
        &orchestrate_args(),
    );
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "synthesis running",
        |steps, agents| {
            is(steps, "synthesis", StepState::Started)
                && named(agents, "synthesis")
                    .iter()
                    .any(|a| a.state == AgentState::Running)
        },
    );
    kill9(&mut child);
    let before = db.steps(&run);
    assert!(
        is(&before, "synthesis", StepState::Started),
        "the synthesis was pending at the kill: {before:?}"
    );
    let old_synthesis = step(&before, "synthesis")
        .unwrap()
        .agent_id
        .clone()
        .unwrap();

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "SYNTHESIS: a queue with push/pop, tested");
    assert_eq!(
        report["resumed_steps"], 4,
        "decision, plan, two workers: {report}"
    );

    let steps = db.steps(&run);
    for key in ["plan", "worker/alice", "worker/bob"] {
        assert_eq!(step(&steps, key), step(&before, key), "{key} untouched");
    }
    assert_round_done(&steps, "", &["alice", "bob"]);
    let agents = db.agents(&run);
    for name in ["orchestrator", "alice", "bob"] {
        assert_eq!(
            states(&named(&agents, name)),
            [AgentState::Completed],
            "{name} ran once: {agents:?}"
        );
    }
    let synthesis = named(&agents, "synthesis");
    assert_eq!(
        states(&synthesis),
        [AgentState::Error, AgentState::Completed],
        "{agents:?}"
    );
    assert_eq!(synthesis[0].id.as_str(), old_synthesis);
    assert_interrupted(synthesis[0]);
    assert_eq!(
        step(&steps, "synthesis").unwrap().agent_id.as_deref(),
        Some(synthesis[1].id.as_str())
    );
}

/// Two reflect iterations judged by the orchestrator itself: iteration 1 (alice and
/// bob) needs another round, iteration 2 (alice alone) is complete. Each reply is
/// matched by content, since a resumed process starts the script afresh.
const REFLECT_SCRIPT: &str = r###"
[[reply]]
agent = "synthesis"
when = "(?s)Your workers have finished.*### alice \\(completed.*ALICE-1.*### bob \\(completed.*BOB-1"
text = "SYNTH-1: a first draft"

[[reply]]
agent = "synthesis"
when = "(?s)Your workers have finished.*### alice \\(completed.*ALICE-2"
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
delay_ms = 3000
text = "@worker:alice\nPolish the API.\n@end"

[[reply]]
agent = "orchestrator"
when = "Split the request below into tasks"
text = "@worker:alice\nDesign the API.\n@end\n@worker:bob\nWrite the tests.\n@end"

[[reply]]
agent = "alice"
when = "## Your task\nDesign the API\\."
text = "ALICE-1"

[[reply]]
agent = "alice"
when = "## Your task\nPolish the API\\."
text = "ALICE-2"

[[reply]]
agent = "bob"
when = "## Your task\nWrite the tests\\."
text = "BOB-1"
"###;

#[test]
fn killed_between_reflect_iterations_resumes_at_the_second_plan() {
    let dir = repo();
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        REFLECT_SCRIPT,
        &[
            "run",
            "build a queue",
            "--team",
            "duo",
            "--mode",
            "reflect",
            "--max-iterations",
            "3",
        ],
    );
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "iteration 1 evaluated, iteration 2 planning",
        |steps, agents| {
            is(steps, "it1/evaluation", StepState::Done)
                && is(steps, "it2/plan", StepState::Started)
                && named(agents, "orchestrator")
                    .iter()
                    .any(|a| a.state == AgentState::Running)
        },
    );
    kill9(&mut child);
    let before = db.steps(&run);
    assert!(
        is(&before, "it2/plan", StepState::Started),
        "iteration 2 was planning at the kill: {before:?}"
    );
    let it1_keys = [
        "it1/inbox",
        "it1/plan",
        "it1/worker/alice",
        "it1/worker/bob",
        "it1/synthesis",
        "it1/evaluation",
        "it2/inbox",
    ];
    for key in it1_keys {
        assert!(is(&before, key, StepState::Done), "{key}: {before:?}");
    }

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["exit_reason"], "goal-met", "{report}");
    assert_eq!(report["result"], "SYNTH-2: the polished queue");
    assert_eq!(report["best_iteration"], 2);
    // The decision and the seven stored steps above.
    assert_eq!(report["resumed_steps"], 8, "{report}");
    let iterations = report["iterations"].as_array().unwrap();
    assert_eq!(iterations.len(), 2, "{report}");
    assert_eq!(iterations[0]["iteration"], 1);
    assert_eq!(iterations[1]["iteration"], 2);
    assert_eq!(iterations[1]["complete"], true);
    let workers = |i: usize| -> Vec<(String, String)> {
        iterations[i]["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                (
                    w["worker"].as_str().unwrap().to_owned(),
                    w["agent_id"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let stored_id = |key: &str| step(&before, key).unwrap().agent_id.clone().unwrap();
    assert_eq!(
        workers(0),
        [
            ("alice".to_owned(), stored_id("it1/worker/alice")),
            ("bob".to_owned(), stored_id("it1/worker/bob")),
        ],
        "iteration 1 is reported from the journal"
    );

    let steps = db.steps(&run);
    for key in it1_keys {
        assert_eq!(step(&steps, key), step(&before, key), "{key} untouched");
    }
    assert_round_done(&steps, "it2/", &["alice"]);
    assert!(is(&steps, "it2/evaluation", StepState::Done));
    assert!(
        step(&steps, "it3/inbox").is_none(),
        "no third iteration: {steps:?}"
    );

    let agents = db.agents(&run);
    let alice = named(&agents, "alice");
    assert_eq!(
        states(&alice),
        [AgentState::Completed, AgentState::Completed],
        "alice once per iteration: {agents:?}"
    );
    assert_eq!(alice[0].id.as_str(), stored_id("it1/worker/alice"));
    assert!(alice[1].task.contains("## Your task\nPolish the API."));
    assert_eq!(workers(1), [("alice".to_owned(), alice[1].id.to_string())]);
    assert_eq!(
        states(&named(&agents, "bob")),
        [AgentState::Completed],
        "bob only in iteration 1, once: {agents:?}"
    );
    let orchestrators = named(&agents, "orchestrator");
    assert_eq!(
        states(&orchestrators),
        [
            AgentState::Completed,
            AgentState::Error,
            AgentState::Completed
        ],
        "plan 1 once; plan 2 interrupted, then again: {agents:?}"
    );
    assert_eq!(orchestrators[0].id.as_str(), stored_id("it1/plan"));
    assert_interrupted(orchestrators[1]);
    for name in ["synthesis", "evaluator"] {
        assert_eq!(
            states(&named(&agents, name)),
            [AgentState::Completed, AgentState::Completed],
            "{name} once per iteration: {agents:?}"
        );
    }
    assert_eq!(agents.len(), 10, "{agents:?}");
}

/// A slow orchestrate run in the background, once its plan is stored: the repository,
/// its store, the process and the run.
fn planned() -> (
    tempfile::TempDir,
    Db,
    std::process::Child,
    crewbox::unstable::ids::RunId,
) {
    let dir = repo();
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        &orchestrate_script(SLOW_MS, SLOW_MS, 0),
        &orchestrate_args(),
    );
    let run = wait_for(dir.path(), &db, &mut child, "plan stored", |steps, _| {
        is(steps, "plan", StepState::Done)
    });
    (dir, db, child, run)
}

/// Resume (and stop) refuse a run a live process drives and a finished one; stop and
/// steer also refuse an interrupted run, which no process would act on.
#[test]
fn resume_refuses_a_live_run_and_a_finished_one() {
    let (dir, db, mut child, run) = planned();

    // While its process lives, the run is not resumed, neither by id nor as an orphan.
    let busy = bin(dir.path(), &["resume", run.as_str(), "--json"]);
    assert_eq!(busy.status.code(), Some(2), "{}", stderr(&busy));
    assert!(
        stderr(&busy).contains(&format!("still being driven by process {}", child.id())),
        "{}",
        stderr(&busy)
    );
    let orphans = bin(dir.path(), &["resume"]);
    assert_eq!(orphans.status.code(), Some(0), "{}", stderr(&orphans));
    assert!(
        String::from_utf8_lossy(&orphans.stdout).contains("nothing to resume"),
        "{}",
        String::from_utf8_lossy(&orphans.stdout)
    );
    assert_eq!(db.unfinished(), std::slice::from_ref(&run), "still running");

    kill9(&mut child);
    // No process drives it now: a stop would wait for the next resume and cut it short
    // partway (a resume then did new work and ended `cancelled`). Refused,
    // nothing queued.
    let stop = bin(dir.path(), &["stop", run.as_str()]);
    assert_eq!(stop.status.code(), Some(1), "{}", stderr(&stop));
    assert!(
        stderr(&stop).contains("is not running: it was interrupted"),
        "{}",
        stderr(&stop)
    );
    // Nor a steer for one of its agents, which the resume replaces with another (probe
    // 16: accepted as "queued", then never delivered, and logged undelivered with a
    // false reason).
    let live = db
        .agents(&run)
        .into_iter()
        .find(|a| !a.state.is_terminal())
        .expect("an agent the kill left unfinished");
    let steer = bin(dir.path(), &["steer", live.id.as_str(), "too late"]);
    assert_eq!(steer.status.code(), Some(1), "{}", stderr(&steer));
    assert!(
        stderr(&steer).contains("nothing would act on a steer now"),
        "{}",
        stderr(&steer)
    );
    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(report["result"], "SYNTHESIS: a queue with push/pop, tested");
    let agents = db.agents(&run).len();
    let stop = bin(dir.path(), &["stop", run.as_str()]);
    assert_eq!(stop.status.code(), Some(1), "{}", stderr(&stop));
    assert!(
        stderr(&stop).contains("has already finished (completed)"),
        "{}",
        stderr(&stop)
    );

    let again = bin(dir.path(), &["resume", run.as_str(), "--json"]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already finished"),
        "{}",
        stderr(&again)
    );
    assert_eq!(db.agents(&run).len(), agents, "nothing ran again");
    assert!(db.unfinished().is_empty());
}

#[test]
fn resume_without_a_run_and_nothing_unfinished_says_so() {
    let dir = repo();
    let (out, report) = crewbox(
        dir.path(),
        &orchestrate_script(0, 0, 0),
        &orchestrate_args(),
    );
    assert!(out.status.success(), "{report}");
    assert_eq!(report["result"], "SYNTHESIS: a queue with push/pop, tested");

    let text = bin(dir.path(), &["resume"]);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("nothing to resume"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
    let json = bin(dir.path(), &["resume", "--json"]);
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let reports: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(reports, serde_json::json!([]));
}

/// A run whose driver died, when the kernel gave its pid to another live process (as
/// after a reboot), is interrupted and resumes: the run records who its driver was
/// beyond the pid (boot and start time). Shown failing without that record: "still
/// being driven by process N" for as long as the other process lived.
#[test]
fn a_dead_drivers_pid_taken_by_another_process_does_not_hold_the_run() {
    let (dir, _db, mut child, run) = planned();
    kill9(&mut child);
    // Another process now has the pid the run names.
    let _other = crate::support::procs::StandIn::taking_over(
        dir.path(),
        &format!("UPDATE runs SET pid = {{pid}} WHERE id = '{run}';"),
    );
    let status = bin(dir.path(), &["status", "--state", "interrupted", "--json"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains(run.as_str()),
        "not listed as interrupted: {}",
        String::from_utf8_lossy(&status.stdout)
    );
    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report:#}");
}

/// `crewbox resume` without a run resumes the orphaned runs side by side (a few at a
/// time): one that waits long (on a slow model, or a worker) does not hold back the
/// others. They were resumed one after another, oldest first, so a run that never
/// ended kept every later one unfinished. Shown failing without the fix.
#[test]
fn resume_without_a_run_does_not_hold_the_others_behind_a_slow_one() {
    let dir = repo();
    let d = dir.path();
    let db = Db::create(d);
    let script = "[[reply]]\nwhen = \"SLOWJOB\"\nrepeat = true\ndelay_ms = 60000\ntext = \"slow done\"\n\n\
                  [[reply]]\nrepeat = true\ndelay_ms = 1500\ntext = \"quick done\"\n";
    let running = |prompt: &'static str| {
        move |_: &[StepRecord], agents: &[AgentRecord]| {
            agents
                .iter()
                .any(|a| a.task.contains(prompt) && a.state == AgentState::Running)
        }
    };
    // The slow run is the older one: resumed first when runs went one by one.
    let mut slow = spawn_run(d, script, &["run", "SLOWJOB", "--mode", "single"]);
    let slow_run = wait_for(
        d,
        &db,
        &mut slow,
        "the slow agent running",
        running("SLOWJOB"),
    );
    kill9(&mut slow);
    let mut quick = spawn_run(d, script, &["run", "QUICKJOB", "--mode", "single"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let quick_run = loop {
        let found = db.unfinished().into_iter().find(|r| {
            *r != slow_run && db.agents(r).iter().any(|a| a.state == AgentState::Running)
        });
        if let Some(run) = found {
            break run;
        }
        assert!(Instant::now() < deadline, "the quick run never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    kill9(&mut quick);

    let mut resume = spawn(d, &["resume", "--json"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.unfinished().contains(&quick_run) {
        assert!(
            Instant::now() < deadline,
            "the quick run waited behind the slow one: {}",
            std::fs::read_to_string(d.join("run.stderr")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        db.unfinished().contains(&slow_run),
        "the slow run still waits on its model"
    );
    let quick_agents = db.agents(&quick_run);
    assert!(
        quick_agents
            .iter()
            .any(|a| a.state == AgentState::Completed && a.result.as_deref() == Some("quick done")),
        "{quick_agents:?}"
    );
    kill9(&mut resume);
}

//! Reflect mode end to end through the real binary: a team in a temp git repository,
//! the scripted model answering the orchestrator, the workers, the synthesis and the
//! evaluator by agent name and by what their prompts contain.

use crate::support::repo::{bin, command, crewbox, git_repo};

use std::process::Stdio;
use std::time::{Duration, Instant};

pub(crate) const WITH_EVALUATOR: &str = r#"
mode = "reflect"

[evaluator]
threshold = 0.9

[[members]]
name = "alice"
role = "architect"

[[members]]
name = "bob"
role = "tester"
"#;

pub(crate) const SELF_JUDGING: &str = r#"
mode = "reflect"

[[members]]
name = "alice"
role = "architect"

[[members]]
name = "bob"
role = "tester"
"#;

pub(crate) fn repo(team: &str) -> tempfile::TempDir {
    git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/duo.toml"), team).unwrap();
    })
}

/// Workers that answer any task, echoing nothing in particular.
pub(crate) const WORKERS: &str = r#"
[[reply]]
agent = "alice"
repeat = true
text = "alice: designed it"

[[reply]]
agent = "bob"
repeat = true
text = "bob: tested it"
"#;

pub(crate) fn plan(iteration: u32, blocks: &str) -> String {
    let when = if iteration == 1 {
        "(?s)Split the request below into tasks".to_owned()
    } else {
        format!(r"(?s)## Previous iteration \({}\)", iteration - 1)
    };
    format!(
        "\n[[reply]]\nagent = \"orchestrator\"\nwhen = '''{when}'''\ntext = \"\"\"\n{blocks}\n\"\"\"\n"
    )
}

pub(crate) fn synthesis(text: &str) -> String {
    format!("\n[[reply]]\nagent = \"synthesis\"\ntext = \"{text}\"\n")
}

pub(crate) fn evaluation(text: &str) -> String {
    format!("\n[[reply]]\nagent = \"evaluator\"\ntext = \"\"\"\n{text}\n\"\"\"\n")
}

pub(crate) const BOTH: &str =
    "@worker:alice\ndesign the cache\n@end\n@worker:bob\ntest the cache\n@end";

pub(crate) fn iterations(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    report["iterations"]
        .as_array()
        .unwrap_or_else(|| panic!("no iterations: {report}"))
}

#[test]
fn goal_waits_for_every_worker_then_is_met_by_score() {
    let dir = repo(WITH_EVALUATOR);
    // Synthesis entries first: the synthesis agent's role is `orchestrator` too.
    let script = [
        synthesis("draft one"),
        synthesis("draft two, with tests"),
        plan(1, "@worker:alice\ndesign the cache\n@end"),
        plan(2, BOTH),
        // A high score, but bob has not worked yet: the loop must go on.
        evaluation("SCORE: 95%\nRATIONALE: good design\nbut untested"),
        evaluation("**Score:** 9/10\nRATIONALE: designed and tested"),
        WORKERS.to_owned(),
    ]
    .concat();
    let (out, report) = crewbox(
        dir.path(),
        &script,
        &["run", "build a cache", "--team", "duo"],
    );
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["mode"], "reflect", "the team's mode is the default");
    assert_eq!(report["exit_reason"], "goal-met", "{report}");
    assert_eq!(report["status"], "completed");
    assert_eq!(report["result"], "draft two, with tests");
    let its = iterations(&report);
    assert_eq!(its.len(), 2, "{report}");
    assert_eq!(its[0]["score"], 0.95);
    assert_eq!(its[0]["rationale"], "good design\nbut untested");
    assert!(
        its[0]["trend"].is_null(),
        "no trend without a previous score"
    );
    assert_eq!(its[1]["score"], 0.9);
    assert_eq!(its[1]["trend"], "stable", "0.95 → 0.90 is within 0.1");
    let w1 = its[0]["workers"].as_array().unwrap();
    assert_eq!(w1.len(), 1);
    assert_eq!(w1[0]["worker"], "alice");
    assert_eq!(w1[0]["task"], "design the cache");
    assert_eq!(w1[0]["status"], "completed");
    let w2 = its[1]["workers"].as_array().unwrap();
    let tasks: Vec<(&str, &str)> = w2
        .iter()
        .map(|w| (w["worker"].as_str().unwrap(), w["task"].as_str().unwrap()))
        .collect();
    assert_eq!(
        tasks,
        [("alice", "design the cache"), ("bob", "test the cache")]
    );
    // Each worker agent in the report is the one the iteration lists, with its task.
    for w in w2 {
        let agent = report["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == w["agent_id"])
            .unwrap_or_else(|| panic!("worker agent missing: {report}"));
        assert!(
            agent["task"]
                .as_str()
                .unwrap()
                .contains(w["task"].as_str().unwrap()),
            "{agent}"
        );
        assert_eq!(agent["assigned_task"], w["task"], "{agent}");
    }
}

#[test]
fn the_orchestrator_judges_itself_by_sentinels_on_their_own_line() {
    let dir = repo(SELF_JUDGING);
    let script = [
        synthesis("first answer"),
        synthesis("second answer"),
        plan(1, BOTH),
        plan(2, BOTH),
        // Quoted in a sentence the sentinel means nothing; the lone line does.
        evaluation(
            "I would not write [[GROUP_REFLECT_COMPLETE]] yet.\n[[NEEDS_ITERATION]]\nRATIONALE: bob found a bug",
        ),
        evaluation("[[GROUP_REFLECT_COMPLETE]]"),
        WORKERS.to_owned(),
    ]
    .concat();
    let (out, report) = crewbox(
        dir.path(),
        &script,
        &["run", "build a cache", "--team", "duo"],
    );
    assert!(out.status.success(), "{report}");
    assert_eq!(report["exit_reason"], "goal-met");
    assert_eq!(report["evaluator"], "orchestrator");
    assert_eq!(report["result"], "second answer");
    let its = iterations(&report);
    assert_eq!(its.len(), 2, "{report}");
    assert_eq!(its[0]["rationale"], "bob found a bug");
    assert_eq!(its[1]["complete"], true);
}

#[test]
fn max_iterations_ends_the_loop_as_a_failure_with_the_best_answer() {
    let dir = repo(WITH_EVALUATOR);
    let script = [
        synthesis("weak answer"),
        synthesis("better answer"),
        plan(1, BOTH),
        plan(2, BOTH),
        evaluation("SCORE: 0.3\nRATIONALE: thin"),
        evaluation("SCORE: .5\nRATIONALE: closer"),
        WORKERS.to_owned(),
    ]
    .concat();
    let (out, report) = crewbox(
        dir.path(),
        &script,
        &[
            "run",
            "build a cache",
            "--team",
            "duo",
            "--max-iterations",
            "2",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(report["exit_reason"], "max-iterations");
    assert_eq!(report["status"], "failed", "a non-success exit is marked");
    assert_eq!(report["result"], "better answer");
    assert_eq!(report["best_iteration"], 2);
    let its = iterations(&report);
    assert_eq!(its.len(), 2);
    assert_eq!(its[1]["trend"], "improving", "0.3 → 0.5");
}

#[test]
fn a_repeated_synthesis_warns_then_stalls() {
    let dir = repo(WITH_EVALUATOR);
    let script = [
        "\n[[reply]]\nagent = \"synthesis\"\nrepeat = true\ntext = \"the same answer\"\n"
            .to_owned(),
        plan(1, BOTH),
        plan(2, BOTH),
        plan(3, BOTH),
        "\n[[reply]]\nagent = \"evaluator\"\nrepeat = true\ntext = \"SCORE: 0.5\"\n".to_owned(),
        WORKERS.to_owned(),
    ]
    .concat();
    let (out, report) = crewbox(
        dir.path(),
        &script,
        &["run", "build a cache", "--team", "duo"],
    );
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(report["exit_reason"], "stalled", "{report}");
    let its = iterations(&report);
    assert_eq!(its.len(), 3, "fresh, warned, stopped: {report}");
    assert!(its[0].get("stall_warning").is_none());
    assert_eq!(its[1]["stall_warning"], true);
}

#[test]
fn three_failed_iterations_spend_the_error_budget() {
    let dir = repo(WITH_EVALUATOR);
    // The orchestrator never assigns anything, not even after the nudge.
    let script =
        "\n[[reply]]\nagent = \"orchestrator\"\nrepeat = true\ntext = \"I will do it myself.\"\n";
    let started = Instant::now();
    let (out, report) = crewbox(
        dir.path(),
        script,
        &[
            "run",
            "build a cache",
            "--team",
            "duo",
            "--max-iterations",
            "10",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(report["exit_reason"], "error-budget", "{report}");
    let its = iterations(&report);
    assert_eq!(its.len(), 3, "{report}");
    assert!(
        its.iter()
            .all(|i| i["error"].as_str().unwrap().contains("no worker")),
        "{report}"
    );
    // Backoff before the 2nd and 3rd tries: 2 s + 4 s.
    assert!(started.elapsed() >= Duration::from_secs(6));
}

pub(crate) fn spawn_run(dir: &std::path::Path, script: &str) -> std::process::Child {
    let path = dir.join("script.toml");
    std::fs::write(&path, script).unwrap();
    let args = [
        "run",
        "build a cache",
        "--team",
        "duo",
        "--json",
        "--script",
        path.to_str().unwrap(),
    ];
    command(dir, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_message_sent_to_the_team_reaches_the_next_iteration_and_a_second_loop_is_refused() {
    let dir = repo(WITH_EVALUATOR);
    let nobody = bin(dir.path(), &["send", "--team", "duo", "hello?"]);
    assert_eq!(nobody.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&nobody.stderr).contains("no reflect loop running"),
        "{}",
        String::from_utf8_lossy(&nobody.stderr)
    );
    // Iteration 1's synthesis is slow, leaving time to send; iteration 2's plan only
    // answers if its prompt carries the message.
    let script = [
        "\n[[reply]]\nagent = \"synthesis\"\ndelay_ms = 6000\ntext = \"v1\"\n".to_owned(),
        synthesis("v2 on postgres"),
        plan(1, BOTH),
        format!(
            "\n[[reply]]\nagent = \"orchestrator\"\nwhen = '''(?s)Previous iteration \\(1\\).*- use postgres, not sqlite'''\ntext = \"\"\"\n{BOTH}\n\"\"\"\n"
        ),
        evaluation("SCORE: 0.4\nRATIONALE: wrong database"),
        evaluation("SCORE: 1"),
        WORKERS.to_owned(),
    ]
    .concat();
    let child = spawn_run(dir.path(), &script);
    // Wait until iteration 1 took its messages (its plan's agent exists): a message sent
    // earlier, as soon as the loop held the team, went to iteration 1 instead (seen once
    // under `.ci/run`'s load).
    let run = running_run(dir.path());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = bin(dir.path(), &["status", &run, "--json"]);
        let planning = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|r| r["agents"].as_array().cloned())
            .is_some_and(|a| a.iter().any(|a| a["name"] == "orchestrator"));
        if planning {
            break;
        }
        assert!(Instant::now() < deadline, "iteration 1 never planned");
        std::thread::sleep(Duration::from_millis(50));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = bin(
            dir.path(),
            &["send", "--team", "DUO", "use postgres, not sqlite"],
        );
        if out.status.success() {
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("next iteration"),
                "{}",
                String::from_utf8_lossy(&out.stdout)
            );
            break;
        }
        assert!(Instant::now() < deadline, "the loop never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let script_path = dir.path().join("script.toml");
    let second = bin(
        dir.path(),
        &[
            "run",
            "another",
            "--team",
            "duo",
            "--script",
            script_path.to_str().unwrap(),
        ],
    );
    assert_eq!(second.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("already has a reflect loop running"),
        "{stderr}"
    );
    let out = child.wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["exit_reason"], "goal-met", "{report}");
    let its = iterations(&report);
    assert_eq!(its.len(), 2, "{report}");
    assert!(its[0].get("messages").is_none(), "{report}");
    assert_eq!(its[1]["messages"][0], "use postgres, not sqlite");
    assert_eq!(report["result"], "v2 on postgres");
    // The loop has ended: the team is free again, and messages are refused.
    let late = bin(dir.path(), &["send", "--team", "duo", "too late"]);
    assert_eq!(late.status.code(), Some(2));
}

/// Waits until the store lists a running run and returns its id.
pub(crate) fn running_run(dir: &std::path::Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = bin(dir, &["status", "--json"]);
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            && let Some(run) = v["runs"]
                .as_array()
                .and_then(|r| r.iter().find(|r| r["status"] == "running"))
        {
            return run["run_id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "no run started");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One iteration whose synthesis takes `delay_ms`, met by its evaluation.
fn slow_single_iteration(delay_ms: u32) -> String {
    [
        format!(
            "\n[[reply]]\nagent = \"synthesis\"\ndelay_ms = {delay_ms}\ntext = \"done slowly\"\n"
        ),
        plan(1, BOTH),
        evaluation("SCORE: 1"),
        WORKERS.to_owned(),
    ]
    .concat()
}

#[test]
fn ctrl_c_leaves_the_run_resumable_and_resume_finishes_it() {
    let dir = repo(WITH_EVALUATOR);
    let child = spawn_run(dir.path(), &slow_single_iteration(1500));
    let run = running_run(dir.path());
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child by its pid.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains(&format!("crewbox resume {run}")),
        "{stderr}"
    );
    let status: serde_json::Value =
        serde_json::from_slice(&bin(dir.path(), &["status", "--json"]).stdout).unwrap();
    assert_eq!(status["runs"][0]["status"], "running");
    assert_eq!(status["runs"][0]["interrupted"], true, "{status}");

    let out = bin(dir.path(), &["resume", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = &reports[0];
    assert_eq!(report["run_id"], run.as_str());
    assert_eq!(report["exit_reason"], "goal-met", "{report}");
    assert_eq!(report["result"], "done slowly");
    // Finished now: a second resume has nothing to do, and a named one is refused.
    let again = bin(dir.path(), &["resume"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to resume"));
    let named = bin(dir.path(), &["resume", &run]);
    assert_eq!(named.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&named.stderr).contains("already finished"));
}

#[test]
fn stop_ends_a_reflect_loop_as_cancelled() {
    let dir = repo(WITH_EVALUATOR);
    let child = spawn_run(dir.path(), &slow_single_iteration(5000));
    let run = running_run(dir.path());
    let stop = bin(dir.path(), &["stop", &run]);
    assert!(stop.status.success());
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the stop waited for the slow synthesis"
    );
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["status"], "cancelled", "{report}");
    assert_eq!(report["exit_reason"], "cancelled");
}

/// A reflect loop's process killed with -9 whose pid the kernel gave another process
/// does not hold the team: the lock is judged by the identity its run recorded (boot
/// and start time), not by the pid alone, so the next loop on the team starts. Shown
/// failing (exit 2, "already has a reflect loop running") with the pid alone.
#[test]
fn a_dead_loops_pid_taken_by_another_process_does_not_hold_the_team() {
    let dir = repo(WITH_EVALUATOR);
    let script = [
        "\n[[reply]]\nagent = \"synthesis\"\ndelay_ms = 30000\ntext = \"v1\"\n".to_owned(),
        plan(1, BOTH),
        evaluation("SCORE: 1"),
        WORKERS.to_owned(),
    ]
    .concat();
    let mut child = spawn_run(dir.path(), &script);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !bin(dir.path(), &["send", "--team", "duo", "hello"])
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "the loop never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let other = crate::support::procs::StandIn::taking_over(
        dir.path(),
        "UPDATE runs SET pid = {pid}; UPDATE team_locks SET pid = {pid};",
    );
    let second = [
        synthesis("v2"),
        plan(1, BOTH),
        evaluation("SCORE: 1"),
        WORKERS.to_owned(),
    ]
    .concat();
    let path = dir.path().join("second.toml");
    std::fs::write(&path, second).unwrap();
    let out = bin(
        dir.path(),
        &[
            "run",
            "again",
            "--team",
            "duo",
            "--json",
            "--script",
            path.to_str().unwrap(),
        ],
    );
    drop(other);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["result"], "v2", "{report}");
}

//! Dead letters and retry, end to end with the real binary: a team member whose
//! provider keeps failing (the scripted provider's injected connection faults, retried
//! and then given up on like a real server that is down) ends `error`; its run ends
//! `failed`; `crewbox dead` lists it as transient; `crewbox retry` runs it again with
//! another provider, from its stored conversation or afresh, and the run completes with
//! the later stages run on the new result. `dead drop` forgets letters; a retry of an
//! agent that is not dead is refused; the daemon's `retry_transient` retries on its own.

use crate::support::repo::{bin, command, git_repo};

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

const SEQUENTIAL: &str = r#"
mode = "sequential"

[[members]]
name = "alice"

[[members]]
name = "bob"
"#;

const BROADCAST: &str = r#"
mode = "broadcast"

[[members]]
name = "alice"

[[members]]
name = "bob"
"#;

/// The provider that is down for alice: her first turn reads a file (so her stored
/// conversation holds a tool call), every later call fails to connect. Bob answers;
/// what he says shows whether he saw alice's reply.
const DOWN: &str = r#"
[[reply]]
agent = "alice"
turn = 1
text = "Reading the notes first."
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }

[[reply]]
agent = "alice"
error = "connection"
repeat = true

[[reply]]
agent = "bob"
when = "ALICE-OK"
text = "BOB saw alice's work"
repeat = true

[[reply]]
agent = "bob"
text = "BOB alone"
repeat = true
"#;

/// The provider a retry switches to: it tells a continued conversation (one that
/// carries alice's `read_file` call) from a fresh start.
const OK: &str = r#"
[[reply]]
agent = "alice"
conversation = "call read_file"
text = "ALICE-OK continued from her conversation"
repeat = true

[[reply]]
agent = "alice"
text = "ALICE-OK from a fresh start"
repeat = true
"#;

const ORCHESTRATE: &str = r#"
mode = "orchestrate"

[[members]]
name = "alice"

[[members]]
name = "bob"
"#;

/// An orchestrate run on `down`: the orchestrator plans alice and bob, alice's
/// provider goes down after her first turn, bob answers, and the synthesis tells
/// whether it saw alice's work. (A rule for `orchestrator` also matches the synthesis
/// by its role, so the synthesis' rules come first.)
const ORCH_WORKER_DOWN: &str = r#"
[[reply]]
agent = "synthesis"
when = "ALICE-OK"
text = "SYNTHESIS with alice's work"
repeat = true

[[reply]]
agent = "synthesis"
text = "SYNTHESIS without alice"
repeat = true

[[reply]]
agent = "orchestrator"
text = "@worker:alice\nDo the alice part.\n@end\n@worker:bob\nDo the bob part.\n@end"
repeat = true
"#;

/// An orchestrate run whose orchestrator's provider is down: planning fails. Its
/// workers and synthesis (on the same provider) would answer.
const ORCH_PLANNER_DOWN: &str = r#"
[[reply]]
agent = "synthesis"
when = "ALICE-OK"
text = "SYNTHESIS with alice's work"
repeat = true

[[reply]]
agent = "alice"
text = "ALICE-OK worked"
repeat = true

[[reply]]
agent = "orchestrator"
error = "connection"
repeat = true
"#;

/// The provider a retry of the orchestrator switches to: it plans alice only.
const ORCH_PLANNER_OK: &str = r#"
[[reply]]
agent = "orchestrator"
text = "@worker:alice\nDo the alice part.\n@end"
repeat = true
"#;

/// A repository with team `pair` (`team`), and the user's two scripted providers:
/// `down` (the default) and `ok`, plus `extra` config.
fn setup(team: &str, extra: &str) -> tempfile::TempDir {
    setup_with(team, extra, DOWN, OK)
}

/// As [`setup`], with the scripts of `down` and `ok` given.
fn setup_with(team: &str, extra: &str, down: &str, ok: &str) -> tempfile::TempDir {
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/pair.toml"), team).unwrap();
    });
    let config = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("down.toml"), down).unwrap();
    std::fs::write(config.join("ok.toml"), ok).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "{extra}default_provider = \"down\"\n\
             [providers.down]\nkind = \"scripted\"\nscript = \"down.toml\"\n\
             [providers.ok]\nkind = \"scripted\"\nscript = \"ok.toml\"\n"
        ),
    )
    .unwrap();
    dir
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Runs the team and returns its (failed) report.
fn failed_run(dir: &Path) -> serde_json::Value {
    let out = bin(dir, &["run", "do it", "--team", "pair", "--json"]);
    let report = json(&out);
    assert_eq!(report["status"], "failed", "{report:#}");
    assert_eq!(out.status.code(), Some(1), "{report:#}");
    report
}

fn dead(dir: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let mut all = vec!["dead"];
    all.extend(args);
    all.push("--json");
    let out = bin(dir, &all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out).as_array().unwrap().clone()
}

/// The agents of `report` named `name`, with their states.
fn states(report: &serde_json::Value, name: &str) -> Vec<String> {
    report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["name"] == name)
        .map(|a| a["state"].as_str().unwrap().to_owned())
        .collect()
}

fn audit_kinds(dir: &Path, run: &str) -> Vec<String> {
    let out = bin(dir, &["audit", run, "--json"]);
    json(&out)
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn retry_completes_a_sequential_run_that_failed_on_a_down_provider() {
    let dir = setup(SEQUENTIAL, "");
    let report = failed_run(dir.path());
    let run = report["run_id"].as_str().unwrap().to_owned();
    assert_eq!(states(&report, "alice"), ["error"]);
    // Bob ran after alice failed, without her work.
    assert!(
        report["result"].as_str().unwrap().contains("BOB alone"),
        "{report:#}"
    );

    let letters = dead(dir.path(), &[]);
    assert_eq!(letters.len(), 1, "{letters:#?}");
    let letter = &letters[0];
    assert_eq!(letter["name"], "alice");
    assert_eq!(letter["run_id"], run.as_str());
    assert_eq!(letter["class"], "transient");
    assert_eq!(letter["reason"], "model-unavailable");
    assert_eq!(letter["state"], "error");
    assert_eq!(letter["step"], "member/alice");
    assert_eq!(letter["conversation"], true);
    assert_eq!(letter["retries"], 0);
    assert!(
        letter["error"]
            .as_str()
            .unwrap()
            .contains("connection to the model server failed"),
        "{letter:#}"
    );
    // The JSON shape: every field a consumer reads.
    let keys: Vec<&str> = letter
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "agent_id",
        "run_id",
        "name",
        "role",
        "state",
        "reason",
        "class",
        "error",
        "step",
        "base",
        "conversation",
        "retries",
        "finished_at",
    ] {
        assert!(keys.contains(&key), "no `{key}` in {letter:#}");
    }
    // `--run` narrows to the run; the text listing names the class.
    assert_eq!(dead(dir.path(), &["--run", &run]).len(), 1);
    let text = bin(dir.path(), &["dead"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("transient") && text.contains("member/alice"),
        "{text}"
    );

    let agent = letter["agent_id"].as_str().unwrap().to_owned();
    let out = bin(dir.path(), &["retry", &agent, "--provider", "ok", "--json"]);
    let retried = json(&out);
    assert!(out.status.success(), "{retried:#}");
    assert_eq!(retried["run_id"], run.as_str());
    assert_eq!(retried["status"], "completed", "{retried:#}");
    let result = retried["result"].as_str().unwrap();
    // Alice continued her stored conversation (it held her read_file call) ...
    assert!(
        result.contains("ALICE-OK continued from her conversation"),
        "{result}"
    );
    // ... and the later stage ran again on her new reply.
    assert!(result.contains("BOB saw alice's work"), "{result}");
    // The failed attempt is kept in history; the member completed once.
    assert_eq!(states(&retried, "alice"), ["error", "completed"]);
    assert_eq!(
        states(&retried, "bob")
            .iter()
            .filter(|s| *s == "completed")
            .count(),
        2,
        "bob's first run saw the failure; the second saw alice's work"
    );
    assert!(dead(dir.path(), &[]).is_empty(), "the letter was retried");
    assert!(audit_kinds(dir.path(), &run).contains(&"retry".to_owned()));

    // The letter is gone: retrying it again is a clear error, not a second run.
    let again = bin(dir.path(), &["retry", &agent]);
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("is not a dead letter"), "{stderr}");
}

#[test]
fn fresh_retry_of_a_broadcast_member_leaves_its_sibling_alone() {
    let dir = setup(BROADCAST, "");
    let report = failed_run(dir.path());
    let run = report["run_id"].as_str().unwrap().to_owned();
    let letters = dead(dir.path(), &["--run", &run]);
    assert_eq!(letters.len(), 1, "{letters:#?}");
    let agent = letters[0]["agent_id"].as_str().unwrap().to_owned();
    let out = bin(
        dir.path(),
        &["retry", &agent, "--provider", "ok", "--fresh", "--json"],
    );
    let retried = json(&out);
    assert_eq!(retried["status"], "completed", "{retried:#}");
    let result = retried["result"].as_str().unwrap();
    assert!(result.contains("ALICE-OK from a fresh start"), "{result}");
    // Bob's part stood: he is not run again.
    assert_eq!(states(&retried, "bob"), ["completed"]);
    assert_eq!(states(&retried, "alice"), ["error", "completed"]);
}

/// The agent id of `name`'s dead letter in `run`.
fn letter_of(dir: &Path, run: &str, name: &str) -> String {
    let letters = dead(dir, &["--run", run]);
    let letter = letters
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no dead letter for {name}: {letters:#?}"));
    letter["agent_id"].as_str().unwrap().to_owned()
}

#[test]
fn retry_of_an_orchestrate_worker_takes_its_overrides_and_redoes_the_synthesis() {
    let dir = setup_with(ORCHESTRATE, "", &format!("{ORCH_WORKER_DOWN}{DOWN}"), OK);
    let out = bin(dir.path(), &["run", "do it", "--team", "pair", "--json"]);
    let report = json(&out);
    let run = report["run_id"].as_str().unwrap().to_owned();
    assert_eq!(states(&report, "alice"), ["error"], "{report:#}");
    assert!(
        report["result"]
            .as_str()
            .unwrap()
            .contains("SYNTHESIS without alice"),
        "{report:#}"
    );
    let agent = letter_of(dir.path(), &run, "alice");
    let out = bin(
        dir.path(),
        &[
            "retry",
            &agent,
            "--provider",
            "ok",
            "--max-turns",
            "3",
            "--json",
        ],
    );
    let retried = json(&out);
    assert!(out.status.success(), "{retried:#}");
    assert_eq!(retried["status"], "completed", "{retried:#}");
    let result = retried["result"].as_str().unwrap();
    // Alice ran on the retry's provider, continuing her conversation, and the
    // synthesis ran again on her new reply.
    assert!(result.contains("SYNTHESIS with alice's work"), "{result}");
    assert_eq!(states(&retried, "alice"), ["error", "completed"]);
    assert_eq!(states(&retried, "bob"), ["completed"], "bob's part stood");
    assert!(dead(dir.path(), &["--run", &run]).is_empty());
}

#[test]
fn retry_of_a_failed_orchestrator_plans_on_the_retry_provider() {
    let dir = setup_with(ORCHESTRATE, "", ORCH_PLANNER_DOWN, ORCH_PLANNER_OK);
    let report = failed_run(dir.path());
    let run = report["run_id"].as_str().unwrap().to_owned();
    let agent = letter_of(dir.path(), &run, "orchestrator");
    let out = bin(dir.path(), &["retry", &agent, "--provider", "ok", "--json"]);
    let retried = json(&out);
    // Without the override the plan would be asked of `down` again and fail again.
    assert_eq!(retried["status"], "completed", "{retried:#}");
    assert!(out.status.success(), "{retried:#}");
    let result = retried["result"].as_str().unwrap();
    assert!(result.contains("SYNTHESIS with alice's work"), "{result}");
    assert_eq!(states(&retried, "alice"), ["completed"]);
    assert!(dead(dir.path(), &["--run", &run]).is_empty());
}

const SEQUENTIAL_WRITERS: &str = r#"
mode = "sequential"

[[members]]
name = "alice"
access = "full"

[[members]]
name = "bob"
access = "full"
"#;

/// Alice as in [`DOWN`]; bob writes `saw.txt` when alice's work reached him, else
/// `alone.txt`: the file on the integration branch shows which bob's work is merged.
const DOWN_BOB_WRITES: &str = r#"
[[reply]]
agent = "alice"
turn = 1
text = "Reading the notes first."
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }

[[reply]]
agent = "alice"
error = "connection"
repeat = true

[[reply]]
agent = "bob"
turn = 1
conversation = "ALICE-OK"
[[reply.tool_calls]]
name = "write_file"
args = { path = "saw.txt", content = "bob saw alice\n" }

[[reply]]
agent = "bob"
turn = 2
conversation = "ALICE-OK"
text = "BOB saw alice's work"

[[reply]]
agent = "bob"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "alone.txt", content = "bob alone\n" }

[[reply]]
agent = "bob"
turn = 2
text = "BOB alone"
"#;

/// The files at the tip of `branch` in the test repository, and its first-parent
/// history's subjects.
fn branch_files(dir: &Path, branch: &str) -> (Vec<String>, Vec<String>) {
    let repo = git2::Repository::open(dir.join("repo")).unwrap();
    let tip = repo
        .find_branch(branch, git2::BranchType::Local)
        .unwrap_or_else(|e| panic!("no branch {branch}: {e}"))
        .get()
        .peel_to_commit()
        .unwrap();
    let mut files = Vec::new();
    tip.tree()
        .unwrap()
        .walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            files.push(format!("{root}{}", entry.name().unwrap()));
            git2::TreeWalkResult::Ok
        })
        .unwrap();
    files.sort();
    let mut subjects = Vec::new();
    let mut at = Some(tip);
    while let Some(c) = at {
        subjects.push(String::from_utf8_lossy(c.summary_bytes().unwrap_or_default()).into_owned());
        at = c.parent(0).ok();
    }
    (files, subjects)
}

#[test]
fn retry_drops_the_merges_later_stages_made_on_the_failed_result() {
    let dir = setup_with(SEQUENTIAL_WRITERS, "", DOWN_BOB_WRITES, OK);
    assert!(bin(dir.path(), &["trust"]).status.success());
    let report = failed_run(dir.path());
    let run = report["run_id"].as_str().unwrap().to_owned();
    let branch = format!("crewbox/run/{run}");
    // Bob worked on the failure and his work was merged.
    let (files, _) = branch_files(dir.path(), &branch);
    assert_eq!(files, ["alone.txt", "notes.txt"], "{report:#}");

    let agent = letter_of(dir.path(), &run, "alice");
    let out = bin(dir.path(), &["retry", &agent, "--provider", "ok", "--json"]);
    let retried = json(&out);
    assert_eq!(retried["status"], "completed", "{retried:#}");
    assert!(
        retried["result"]
            .as_str()
            .unwrap()
            .contains("BOB saw alice's work"),
        "{retried:#}"
    );
    // The branch is as if alice had succeeded the first time: bob's merge made on her
    // failure is gone from it (files and first-parent history), his new work is in.
    let (files, subjects) = branch_files(dir.path(), &branch);
    assert_eq!(files, ["notes.txt", "saw.txt"], "{subjects:#?}");
    let bob_merges = subjects.iter().filter(|s| s.contains("merge bob")).count();
    assert!(bob_merges <= 1, "{subjects:#?}");
}

#[test]
fn dead_drop_forgets_letters_and_keeps_their_history() {
    let dir = setup(BROADCAST, "");
    let first = failed_run(dir.path());
    let second = failed_run(dir.path());
    assert_eq!(dead(dir.path(), &[]).len(), 2);

    // One by agent.
    let letter = dead(dir.path(), &["--run", first["run_id"].as_str().unwrap()]).remove(0);
    let agent = letter["agent_id"].as_str().unwrap();
    let out = bin(dir.path(), &["dead", "drop", agent, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out)["dropped"][0], agent);
    let left = dead(dir.path(), &[]);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["run_id"], second["run_id"]);
    // Still in history.
    let status = json(&bin(
        dir.path(),
        &["status", first["run_id"].as_str().unwrap(), "--json"],
    ));
    assert_eq!(states(&status, "alice"), ["error"]);
    let run = first["run_id"].as_str().unwrap();
    assert!(audit_kinds(dir.path(), run).contains(&"dead.drop".to_owned()));
    // A dropped letter is not retried.
    let out = bin(dir.path(), &["retry", agent]);
    assert_eq!(out.status.code(), Some(2));

    // The rest by run.
    let out = bin(
        dir.path(),
        &["dead", "drop", "--run", second["run_id"].as_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dead(dir.path(), &[]).is_empty());
}

#[test]
fn retry_refuses_agents_that_are_not_dead_letters() {
    let dir = setup(BROADCAST, "");
    let report = failed_run(dir.path());
    let bob = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "bob")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = bin(dir.path(), &["retry", &bob]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is not a dead letter") && stderr.contains("ended completed"),
        "{stderr}"
    );
    let out = bin(dir.path(), &["retry", "a-nosuchagent"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no agent matches"));
    // A provider that does not exist is refused before anything is recorded.
    let alice = dead(dir.path(), &[]).remove(0);
    let alice = alice["agent_id"].as_str().unwrap();
    let out = bin(dir.path(), &["retry", alice, "--provider", "nope"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(dead(dir.path(), &[]).len(), 1, "still a dead letter");
    let run = report["run_id"].as_str().unwrap();
    let status = json(&bin(dir.path(), &["status", run, "--json"]));
    assert_eq!(status["status"], "failed", "the run was not reopened");
}

#[test]
fn the_daemon_retries_transient_dead_letters() {
    let dir = setup(BROADCAST, "retry_transient = 2\n");
    let report = failed_run(dir.path());
    let run = report["run_id"].as_str().unwrap().to_owned();
    // The provider comes back: alice answers from now on.
    std::fs::write(
        dir.path().join("config/crewbox/down.toml"),
        format!("{OK}\n{DOWN}"),
    )
    .unwrap();
    let daemon = command(dir.path(), &["daemon"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let status = json(&bin(dir.path(), &["status", &run, "--json"]));
        if status["status"] == "completed" || Instant::now() > deadline {
            break status;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // SIGTERM: the daemon stops and exits.
    // SAFETY: kill(2) on the child this test spawned and has not waited for.
    let rc = unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let out = daemon.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert_eq!(status["status"], "completed", "{status:#}\n{log}");
    assert!(
        log.contains("retry agent=") && log.contains("status=completed"),
        "{log}"
    );
    assert_eq!(states(&status, "alice"), ["error", "completed"]);
    assert!(dead(dir.path(), &[]).is_empty());
}

#[test]
fn an_agent_whose_validator_faulted_is_a_plugin_dead_letter() {
    let dir = git_repo(|_| {});
    let trap = format!("{}=panic", crate::support::guest_path("hostile-trap.wasm"));
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        "[[reply]]\nagent = \"agent\"\nrepeat = true\ntext = \"done\"\n",
    )
    .unwrap();
    let script = script.to_str().unwrap();
    let args = [
        "run",
        "do it",
        "--mode",
        "single",
        "--validator",
        &trap,
        "--script",
        script,
        "--json",
    ];
    let out = bin(dir.path(), &args);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let letters = dead(dir.path(), &[]);
    assert_eq!(letters.len(), 1, "{letters:#?}");
    let letter = &letters[0];
    assert_eq!(letter["class"], "plugin");
    assert_eq!(letter["state"], "completed");
    assert_eq!(letter["step"], "agent/agent");
    // Retried, the validator faults again: the new attempt is the dead letter now, and
    // it counts the retry before it.
    let agent = letter["agent_id"].as_str().unwrap();
    let out = bin(dir.path(), &["retry", agent, "--json"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let retried = json(&out);
    assert_eq!(states(&retried, "agent"), ["completed", "completed"]);
    let letters = dead(dir.path(), &[]);
    assert_eq!(letters.len(), 1, "{letters:#?}");
    assert_ne!(letters[0]["agent_id"], agent);
    assert_eq!(letters[0]["retries"], 1);
    assert_eq!(letters[0]["class"], "plugin");
}

/// Alice and bob's provider is down; carol answers.
const TWO_DOWN: &str = r#"
[[reply]]
agent = "synthesis"
when = "BOB-OK"
text = "SYNTHESIS with both"
repeat = true

[[reply]]
agent = "synthesis"
text = "SYNTHESIS so far"
repeat = true

[[reply]]
agent = "orchestrator"
text = "@worker:alice\nDo the alice part.\n@end\n@worker:bob\nDo the bob part.\n@end"
repeat = true

[[reply]]
agent = "alice"
error = "connection"
repeat = true

[[reply]]
agent = "bob"
error = "connection"
repeat = true

[[reply]]
agent = "carol"
text = "CAROL done"
repeat = true
"#;

/// The provider both retries switch to (and carol's).
const TWO_OK: &str = r#"
[[reply]]
agent = "carol"
text = "CAROL done"
repeat = true

[[reply]]
agent = "alice"
text = "ALICE-OK"
repeat = true

[[reply]]
agent = "bob"
text = "BOB-OK"
repeat = true
"#;

/// `crewbox retry AGENT --provider ok`: the run's report (it may end failed while
/// another letter waits).
fn retry_ok(dir: &Path, agent: &str) -> serde_json::Value {
    json(&bin(dir, &["retry", agent, "--provider", "ok", "--json"]))
}

/// Regression: a second retry in one run ran again a member of the failed one's group
/// that an earlier retry had completed: its step's start was taken as when the retry
/// ran it, after the second letter ended, so it counted as a later step that had seen
/// the failure. It ran twice: two conversations, two branches, the first result thrown
/// away. Shown failing without the fix (bob completed twice). A member that waited for
/// the one slot (carol) stands too: her step began with the others'.
#[test]
fn a_second_retry_never_runs_a_completed_member_of_its_group_again() {
    const THREE: &str = "mode = \"broadcast\"\n[[members]]\nname = \"alice\"\n\
                         [[members]]\nname = \"bob\"\n[[members]]\nname = \"carol\"\n\
                         provider = \"ok\"\n";
    // One slot: carol begins after alice and bob ended, or between them. She answers
    // on the provider that stays up: on the down one, alice's and bob's failed attempts
    // opened its circuit breaker before her turn whenever she went last, and she
    // failed too. A team file's provider choice counts only in a trusted repository
    // (an untrusted one's is dropped, and she was on the down provider after all).
    let dir = setup_with(THREE, "max_concurrent = 1\n", TWO_DOWN, TWO_OK);
    let trusted = bin(dir.path(), &["trust"]);
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let report = failed_run(dir.path());
    let run = report["run_id"].as_str().unwrap().to_owned();
    assert_eq!(states(&report, "carol"), ["completed"], "{report:#}");
    let bob = letter_of(dir.path(), &run, "bob");
    let after_bob = retry_ok(dir.path(), &bob);
    assert_eq!(
        states(&after_bob, "bob"),
        ["error", "completed"],
        "{after_bob:#}"
    );
    let alice = letter_of(dir.path(), &run, "alice");
    let done = retry_ok(dir.path(), &alice);
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(states(&done, "alice"), ["error", "completed"]);
    assert_eq!(
        states(&done, "bob"),
        ["error", "completed"],
        "bob ran again"
    );
    assert_eq!(states(&done, "carol"), ["completed"], "carol ran again");

    // Orchestrated workers run side by side too; the synthesis, which read both, runs
    // again after each retry.
    let dir = setup_with(ORCHESTRATE, "", TWO_DOWN, TWO_OK);
    let report = failed_run(dir.path());
    let run = report["run_id"].as_str().unwrap().to_owned();
    let alice = letter_of(dir.path(), &run, "alice");
    let after_alice = retry_ok(dir.path(), &alice);
    assert_eq!(states(&after_alice, "alice"), ["error", "completed"]);
    let bob = letter_of(dir.path(), &run, "bob");
    let done = retry_ok(dir.path(), &bob);
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(
        states(&done, "alice"),
        ["error", "completed"],
        "alice ran again"
    );
    assert_eq!(states(&done, "bob"), ["error", "completed"]);
    let result = done["result"].as_str().unwrap();
    assert!(result.contains("SYNTHESIS with both"), "{result}");
}

/// The daemon never retries a dead letter of a run it still drives: alice's transient
/// failure comes due while bob still works. The retry is refused before anything is
/// recorded and held back (not tried again at once, which spun the loop), then runs
/// once the run has ended: alice is tried 1 + 2 times, the run ends, and no retry was
/// lost. Shown failing without the fix: the retry was recorded, then refused — its
/// letter used up, the run left `interrupted` while the daemon drove it.
#[test]
fn the_daemon_never_retries_a_run_it_still_drives() {
    let slow_bob = DOWN.replace(
        "agent = \"bob\"\ntext = \"BOB alone\"",
        "agent = \"bob\"\ndelay_ms = 5000\ntext = \"BOB alone\"",
    );
    assert_ne!(slow_bob, DOWN);
    let dir = setup_with(BROADCAST, "retry_transient = 2\n", &slow_bob, OK);
    let add = bin(
        dir.path(),
        &["schedule", "add", "--in", "1s", "--team", "pair", "do it"],
    );
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );
    let daemon = command(dir.path(), &["daemon"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let alice_tries = |status: &serde_json::Value| states(status, "alice").len();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut seen_interrupted = false;
    let mut last = serde_json::Value::Null;
    let status = loop {
        let runs = json(&bin(dir.path(), &["status", "--json"]));
        let run = runs["runs"]
            .as_array()
            .and_then(|r| r.first())
            .and_then(|r| r["run_id"].as_str())
            .map(str::to_owned);
        if let Some(run) = run {
            let status = json(&bin(dir.path(), &["status", &run, "--json"]));
            seen_interrupted |= status["status"] == "interrupted" || status["interrupted"] == true;
            if status["status"] != "running" && alice_tries(&status) == 3 {
                break status;
            }
            last = status;
        }
        if Instant::now() > deadline {
            break last;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // SAFETY: kill(2) on the child this test spawned and has not waited for.
    let rc = unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let out = daemon.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(!status.is_null(), "no run\n{log}");
    assert_eq!(alice_tries(&status), 3, "{status:#}\n{log}");
    assert!(!seen_interrupted, "shown interrupted while driven\n{log}");
    assert!(
        log.matches("status=error").count() < 10,
        "refused retries were tried again at once:\n{log}"
    );
}

/// A retry killed before its run ended leaves the run to `crewbox resume`: a second
/// `retry` of the letter says so, naming the command (it said only "dropped or retried
/// already"), and the resume finishes the run.
#[test]
fn a_second_retry_after_a_killed_one_points_to_resume() {
    const SLOW_OK: &str =
        "[[reply]]\nagent = \"alice\"\ndelay_ms = 30000\ntext = \"ALICE-OK late\"\nrepeat = true\n";
    let dir = setup_with(BROADCAST, "", DOWN, SLOW_OK);
    let d = dir.path();
    let report = failed_run(d);
    let run = report["run_id"].as_str().unwrap().to_owned();
    let alice = dead(d, &[]).remove(0)["agent_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut retry = command(d, &["retry", &alice, "--provider", "ok", "--json"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the retry was recorded (the letter is used) and its agent waits.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !dead(d, &[]).is_empty()
        || json(&bin(d, &["status", &run, "--json"]))["status"] != "running"
    {
        assert!(Instant::now() < deadline, "the retry never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    retry.kill().unwrap();
    retry.wait().unwrap();
    let again = bin(d, &["retry", &alice, "--provider", "ok"]);
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains(&format!("`crewbox resume {run}` finishes it")),
        "{stderr}"
    );
}

/// A writing agent whose retry continues its dead attempt's conversation is told its
/// workspace is fresh at the run's base (probe 17: the conversation said `b.txt` was
/// written, the retried agent took it for done, changed nothing, and the run completed
/// with the work on no branch of its result).
#[test]
fn a_retry_that_continues_a_conversation_is_told_its_workspace_is_fresh() {
    let down = r#"
[[reply]]
agent = "agent"
turn = 1
text = "writing b.txt"
[[reply.tool_calls]]
name = "write_file"
args = { path = "b.txt", content = "important\n" }

[[reply]]
agent = "agent"
error = "connection"
repeat = true
"#;
    // Writes b.txt again only when told the earlier edits are gone.
    let ok = r#"
[[reply]]
agent = "agent"
when = "fresh checkout"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "b.txt", content = "important\n" }

[[reply]]
agent = "agent"
repeat = true
text = "b.txt is written, done"
"#;
    let dir = setup_with(
        "mode = \"sequential\"\n[[members]]\nname = \"x\"\n",
        "",
        down,
        ok,
    );
    let report = json(&bin(
        dir.path(),
        &["run", "write b.txt", "--mode", "single", "--json"],
    ));
    assert_eq!(report["status"], "failed", "{report:#}");
    let agent = report["agents"][0]["id"].as_str().unwrap().to_owned();
    let report = retry_ok(dir.path(), &agent);
    assert_eq!(report["status"], "completed", "{report:#}");
    let branch = report["branch"]["branch"]
        .as_str()
        .unwrap_or_else(|| panic!("no branch: {report:#}"));
    let show = std::process::Command::new("git")
        .args(["show", &format!("{branch}:b.txt")])
        .current_dir(dir.path().join("repo"))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&show.stdout),
        "important\n",
        "{report:#}"
    );
}

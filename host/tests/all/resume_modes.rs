//! `single`, `swarm` and `crew` resume step by step, end to end: the real binary is
//! killed with SIGKILL at a chosen step (found by watching the run's journal) and
//! `crewbox resume` finishes the run. Agent rows are counted per name and ids compared
//! with the journal, so an agent with a stored result that ran again fails the test.

use crate::support::kill::{
    Db, SLOW_MS, assert_interrupted, is, kill9, named, resume, spawn_run, states, step, wait_for,
};
use crate::support::repo::git_repo;
use crate::support::script::writes_then;

use std::path::Path;

use crewbox::unstable::agent::AgentState;
use crewbox::unstable::store::{AgentRecord, StepRecord, StepState};

/// The file `path` in the tree of `branch`, if it is there.
fn file_at(dir: &Path, branch: &str, path: &str) -> Option<String> {
    let git = git2::Repository::open(dir.join("repo")).unwrap();
    let tree = git
        .find_branch(branch, git2::BranchType::Local)
        .ok()?
        .get()
        .peel_to_tree()
        .unwrap();
    let entry = tree.get_path(Path::new(path)).ok()?;
    let blob = git.find_blob(entry.id()).unwrap();
    Some(String::from_utf8_lossy(blob.content()).into_owned())
}

/// Whether the (only) agent named `name` of a given row count is running.
fn running(agents: &[AgentRecord], name: &str, rows: usize) -> bool {
    let rows_now = named(agents, name);
    rows_now.len() == rows
        && rows_now
            .last()
            .is_some_and(|a| a.state == AgentState::Running)
}

fn stored(steps: &[StepRecord], key: &str) -> StepRecord {
    step(steps, key)
        .unwrap_or_else(|| panic!("no step {key}: {steps:?}"))
        .clone()
}

fn agent_of(steps: &[StepRecord], key: &str) -> String {
    stored(steps, key).agent_id.unwrap()
}

// ---- single ----------------------------------------------------------------------

/// The agent writes `one.txt`, then (after `delay_ms`) finishes; with `chain`, its
/// handoff asks for a follow-up that writes `two.txt` and finishes after `follow_ms`.
fn single_script(delay_ms: u64, follow_ms: u64) -> String {
    let handoff = r#"{"status": "partial", "summary": "one.txt written", "findings": ["one.txt"], "next_steps": ["write two.txt"]}"#;
    writes_then(
        "agent-2",
        "two.txt",
        "two\n",
        follow_ms,
        "AGENT-2: wrote two.txt",
    ) + &writes_then(
        "agent",
        "one.txt",
        "one\n",
        delay_ms,
        &format!("AGENT: wrote one.txt\n```json\n{handoff}\n```"),
    )
}

#[test]
fn single_killed_mid_turn_runs_its_agent_again_in_a_fresh_worktree() {
    let dir = git_repo(|_| {});
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        &single_script(SLOW_MS, 0),
        &["run", "write one", "--mode", "single"],
    );
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "the agent in its second turn",
        |steps, agents| is(steps, "agent/agent", StepState::Started) && running(agents, "agent", 1),
    );
    kill9(&mut child);
    let interrupted = agent_of(&db.steps(&run), "agent/agent");

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert!(
        report["result"]
            .as_str()
            .unwrap()
            .starts_with("AGENT: wrote one.txt"),
        "{report}"
    );
    assert_eq!(report["resumed_steps"], 1, "only the decision: {report}");
    let agents = db.agents(&run);
    let rows = named(&agents, "agent");
    assert_eq!(states(&rows), [AgentState::Error, AgentState::Completed]);
    assert_eq!(rows[0].id.as_str(), interrupted);
    assert_interrupted(rows[0]);
    let steps = db.steps(&run);
    assert!(is(&steps, "agent/agent", StepState::Done), "{steps:?}");
    assert_eq!(agent_of(&steps, "agent/agent"), rows[1].id.as_str());
    assert_eq!(agents.len(), 2, "{agents:?}");
    let branch = report["branch"]["branch"].as_str().unwrap();
    assert_eq!(
        file_at(dir.path(), branch, "one.txt").as_deref(),
        Some("one\n")
    );
}

#[test]
fn single_chain_killed_after_the_first_result_never_runs_it_again() {
    let dir = git_repo(|_| {});
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        &single_script(0, SLOW_MS),
        &["run", "write one then two", "--mode", "single", "--chain"],
    );
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "agent stored, its follow-up running",
        |steps, agents| {
            is(steps, "agent/agent", StepState::Done)
                && is(steps, "agent/agent-2", StepState::Started)
                && running(agents, "agent-2", 1)
        },
    );
    kill9(&mut child);
    let before = db.steps(&run);
    let first = stored(&before, "agent/agent");

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "AGENT-2: wrote two.txt");
    assert_eq!(report["resumed_steps"], 2, "decision and agent: {report}");
    let steps = db.steps(&run);
    assert_eq!(
        stored(&steps, "agent/agent"),
        first,
        "the stored result is untouched"
    );
    let agents = db.agents(&run);
    let rows = named(&agents, "agent");
    assert_eq!(
        states(&rows),
        [AgentState::Completed],
        "ran once: {agents:?}"
    );
    assert_eq!(Some(rows[0].id.as_str()), first.agent_id.as_deref());
    let follow = named(&agents, "agent-2");
    assert_eq!(states(&follow), [AgentState::Error, AgentState::Completed]);
    assert_interrupted(follow[0]);
    assert_eq!(agent_of(&steps, "agent/agent-2"), follow[1].id.as_str());
    assert_eq!(
        follow[1].parent.as_ref().map(|p| p.as_str()),
        Some(rows[0].id.as_str()),
        "the follow-up still continues the stored agent"
    );
    let chain = report["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 1, "{report}");
    assert_eq!(chain[0]["agent"], follow[1].id.as_str());
    // The follow-up started from the stored agent's branch.
    let branch = report["branch"]["branch"].as_str().unwrap();
    assert_eq!(
        file_at(dir.path(), branch, "one.txt").as_deref(),
        Some("one\n")
    );
    assert_eq!(
        file_at(dir.path(), branch, "two.txt").as_deref(),
        Some("two\n")
    );
}

// ---- swarm -----------------------------------------------------------------------

const SWARM_SCRIPT: &str = r#"
[[reply]]
agent = "swarm-1"
text = "SWARM-1 answer"

[[reply]]
agent = "swarm-2"
text = "SWARM-2 answer"

[[reply]]
agent = "swarm-3"
delay_ms = 3000
text = "SWARM-3 answer"
"#;

#[test]
fn swarm_killed_with_two_members_done_runs_only_the_third() {
    let dir = git_repo(|_| {});
    let db = Db::create(dir.path());
    let mut child = spawn_run(
        dir.path(),
        SWARM_SCRIPT,
        &[
            "run",
            "answer",
            "--mode",
            "swarm",
            "--swarm-size",
            "3",
            "--strategy",
            "merge",
        ],
    );
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "two members stored, the third running",
        |steps, agents| {
            is(steps, "agent/swarm-1", StepState::Done)
                && is(steps, "agent/swarm-2", StepState::Done)
                && running(agents, "swarm-3", 1)
        },
    );
    kill9(&mut child);
    let before = db.steps(&run);

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(
        report["resumed_steps"], 3,
        "decision, two members: {report}"
    );
    let steps = db.steps(&run);
    let agents = db.agents(&run);
    let mut ids = Vec::new();
    for name in ["swarm-1", "swarm-2"] {
        let key = format!("agent/{name}");
        assert_eq!(
            stored(&steps, &key),
            stored(&before, &key),
            "{name} untouched"
        );
        let rows = named(&agents, name);
        assert_eq!(states(&rows), [AgentState::Completed], "{name} ran once");
        assert_eq!(rows[0].id.as_str(), agent_of(&steps, &key));
        ids.push(rows[0].id.to_string());
    }
    let third = named(&agents, "swarm-3");
    assert_eq!(states(&third), [AgentState::Error, AgentState::Completed]);
    assert_interrupted(third[0]);
    assert_eq!(agent_of(&steps, "agent/swarm-3"), third[1].id.as_str());
    ids.push(third[1].id.to_string());
    assert_eq!(agents.len(), 4, "{agents:?}");
    // Every member's answer is in the merged result, each under its stored agent.
    let result = report["result"].as_str().unwrap();
    for (i, id) in ids.iter().enumerate() {
        let n = i + 1;
        assert!(
            result.contains(&format!("## swarm-{n} ({id}, completed)\nSWARM-{n} answer")),
            "{result}"
        );
    }
    let delivered: std::collections::BTreeSet<&str> = report["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|w| w.as_array().unwrap())
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(delivered, ids.iter().map(String::as_str).collect());
}

// ---- crew ------------------------------------------------------------------------

/// One revision that passes: the executor writes `notes.txt`, the reviewer passes it.
fn crew_pass(exec_ms: u64, review_ms: u64) -> String {
    let executor = writes_then("executor", "notes.txt", "gamma\n", exec_ms, "wrote it");
    format!(
        r#"
[[reply]]
agent = "planner"
text = "1. Write gamma into notes.txt"
{executor}
[[reply]]
agent = "reviewer"
when = "(?m)^\\+gamma$"
delay_ms = {review_ms}
text = "Correct.\nVERDICT: PASS"
"#
    )
}

fn crew_args() -> [&'static str; 4] {
    ["run", "write gamma", "--mode", "crew"]
}

fn checkpoint_gone(dir: &Path, run: &str) {
    let git = git2::Repository::open(dir.join("repo")).unwrap();
    let name = format!(
        "refs/crewbox/checkpoints/{}",
        crewbox::unstable::worktree::sanitize_branch_component(run)
    );
    assert!(
        git.find_reference(&name).is_err(),
        "{name} outlives its crew"
    );
}

#[test]
fn crew_killed_after_planning_executes_the_stored_plan() {
    let dir = git_repo(|_| {});
    let db = Db::create(dir.path());
    let mut child = spawn_run(dir.path(), &crew_pass(SLOW_MS, 0), &crew_args());
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "plan stored, executor running",
        |steps, agents| is(steps, "crew/plan", StepState::Done) && running(agents, "executor", 1),
    );
    kill9(&mut child);
    let before = db.steps(&run);

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "wrote it");
    assert_eq!(report["verdict"]["verdict"], "PASS");
    assert_eq!(report["plan"], "1. Write gamma into notes.txt");
    // The decision and the plan (the planner's own step is not even looked at).
    assert_eq!(report["resumed_steps"], 2, "{report}");
    let steps = db.steps(&run);
    for key in ["agent/planner", "crew/plan", "crew/worktree"] {
        assert_eq!(stored(&steps, key), stored(&before, key), "{key} untouched");
    }
    let agents = db.agents(&run);
    let planner = named(&agents, "planner");
    assert_eq!(states(&planner), [AgentState::Completed], "planned once");
    assert_eq!(planner[0].id.as_str(), agent_of(&steps, "agent/planner"));
    let executor = named(&agents, "executor");
    assert_eq!(
        states(&executor),
        [AgentState::Error, AgentState::Completed]
    );
    assert_interrupted(executor[0]);
    assert_eq!(
        agent_of(&steps, "crew/r0/executor"),
        executor[1].id.as_str()
    );
    assert_eq!(states(&named(&agents, "reviewer")), [AgentState::Completed]);
    // The branch keeps the name the crew's worktree had before the kill.
    let branch = report["branch"]["branch"].as_str().unwrap();
    assert_eq!(branch, format!("crewbox/{}", executor[0].id));
    assert_eq!(
        file_at(dir.path(), branch, "notes.txt").as_deref(),
        Some("gamma\n")
    );
    checkpoint_gone(dir.path(), run.as_str());
}

#[test]
fn crew_killed_during_review_reviews_the_stored_work_again() {
    let dir = git_repo(|_| {});
    let db = Db::create(dir.path());
    let mut child = spawn_run(dir.path(), &crew_pass(0, SLOW_MS), &crew_args());
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "executor stored, reviewer running",
        |steps, agents| {
            is(steps, "crew/r0/executor", StepState::Done)
                && is(steps, "crew/r0/review", StepState::Started)
                && running(agents, "reviewer", 1)
        },
    );
    kill9(&mut child);
    let before = db.steps(&run);

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "wrote it");
    assert_eq!(report["verdict"]["verdict"], "PASS");
    assert_eq!(
        report["resumed_steps"], 3,
        "decision, plan, executor: {report}"
    );
    let steps = db.steps(&run);
    assert_eq!(
        stored(&steps, "crew/r0/executor"),
        stored(&before, "crew/r0/executor")
    );
    let agents = db.agents(&run);
    let executor = named(&agents, "executor");
    assert_eq!(states(&executor), [AgentState::Completed], "executed once");
    let reviewer = named(&agents, "reviewer");
    assert_eq!(
        states(&reviewer),
        [AgentState::Error, AgentState::Completed]
    );
    assert_interrupted(reviewer[0]);
    // The executor did not run again: its file reached the branch (and the reviewer's
    // diff) only through the worktree rebuilt from the stored checkpoint.
    let branch = report["branch"]["branch"].as_str().unwrap();
    assert_eq!(branch, format!("crewbox/{}", executor[0].id));
    assert_eq!(
        file_at(dir.path(), branch, "notes.txt").as_deref(),
        Some("gamma\n")
    );
    assert_eq!(
        report["changed"],
        serde_json::json!(["notes.txt"]),
        "{report}"
    );
    checkpoint_gone(dir.path(), run.as_str());
}

/// Revision 0 writes `keep.txt` and a typo in `notes.txt`; the review fails; revision 1
/// (which only answers when its conversation holds revision 0's calls) fixes the typo.
const CREW_REVISE: &str = r#"
[[reply]]
agent = "planner"
text = "1. Write gamma into notes.txt, and keep.txt"

[[reply]]
agent = "executor-r1"
turn = 1
conversation = "call write_file .*keep\\.txt"
[[reply.tool_calls]]
name = "write_file"
args = { path = "notes.txt", content = "gamma\n" }

[[reply]]
agent = "executor-r1"
turn = 2
delay_ms = 3000
text = "fixed the typo"

[[reply]]
agent = "executor"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "keep.txt", content = "kept\n" }
[[reply.tool_calls]]
name = "write_file"
args = { path = "notes.txt", content = "gama\n" }

[[reply]]
agent = "executor"
turn = 2
text = "wrote it"

[[reply]]
agent = "reviewer"
when = "(?m)^\\+gama$"
text = "Typo.\n- notes.txt says gama, not gamma\nVERDICT: FAIL"

[[reply]]
agent = "reviewer"
when = "(?ms)^\\+kept$.*^\\+gamma$"
text = "Correct now.\nVERDICT: PASS"
"#;

#[test]
fn crew_killed_in_a_revision_goes_on_with_its_worktree_and_conversation() {
    let dir = git_repo(|_| {});
    let db = Db::create(dir.path());
    let mut child = spawn_run(dir.path(), CREW_REVISE, &crew_args());
    let run = wait_for(
        dir.path(),
        &db,
        &mut child,
        "revision 0 reviewed, revision 1 running",
        |steps, agents| {
            is(steps, "crew/r0/review", StepState::Done)
                && is(steps, "crew/r1/executor", StepState::Started)
                && running(agents, "executor-r1", 1)
        },
    );
    kill9(&mut child);
    let before = db.steps(&run);
    let kept = [
        "agent/planner",
        "crew/plan",
        "crew/worktree",
        "crew/r0/executor",
        "crew/r0/review",
    ];

    let report = resume(dir.path(), &run);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "fixed the typo");
    assert_eq!(report["verdict"]["verdict"], "PASS");
    assert_eq!(report["revisions"], 1);
    // The decision, the plan, revision 0 and its review.
    assert_eq!(report["resumed_steps"], 4, "{report}");
    let steps = db.steps(&run);
    for key in kept {
        assert_eq!(stored(&steps, key), stored(&before, key), "{key} untouched");
    }
    let agents = db.agents(&run);
    for name in ["planner", "executor"] {
        assert_eq!(
            states(&named(&agents, name)),
            [AgentState::Completed],
            "{name}"
        );
    }
    let r1 = named(&agents, "executor-r1");
    assert_eq!(states(&r1), [AgentState::Error, AgentState::Completed]);
    assert_interrupted(r1[0]);
    assert_eq!(
        states(&named(&agents, "reviewer")),
        [AgentState::Completed, AgentState::Completed],
        "one review per revision"
    );
    // Revision 0's `keep.txt` came back from the checkpoint; revision 1 fixed the typo.
    let executor = named(&agents, "executor");
    let branch = report["branch"]["branch"].as_str().unwrap();
    assert_eq!(branch, format!("crewbox/{}", executor[0].id));
    assert_eq!(
        file_at(dir.path(), branch, "keep.txt").as_deref(),
        Some("kept\n")
    );
    assert_eq!(
        file_at(dir.path(), branch, "notes.txt").as_deref(),
        Some("gamma\n")
    );
    checkpoint_gone(dir.path(), run.as_str());
}

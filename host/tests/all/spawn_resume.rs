//! `spawn_agent` children are journal steps keyed by their parent's attempt
//! (`child/<parent-agent-id>/<n>`). A `single` agent killed mid-turn, after its child
//! finished, runs again as a new agent in a fresh worktree: the child's work was in
//! the discarded worktree, so the new parent's child runs again, and the run ends with
//! the child's work on the branch. Through the real binary, killed with SIGKILL.

use crate::support::kill::{Db, SLOW_MS, kill9, resume, spawn_run, wait_for};

use crewbox::unstable::agent::AgentState;
use crewbox::unstable::store::StepState;

/// The parent asks for one child on its first turn and finishes, slowly, on its
/// second; the child writes `kid.txt` in the parent's workspace.
fn script() -> String {
    crate::support::script::delegates(SLOW_MS)
}

#[test]
fn a_parent_restarted_fresh_runs_its_finished_child_again() {
    let dir = crate::support::repo::git_repo(|_| {});
    let d = dir.path();
    let db = Db::create(d);
    let mut child = spawn_run(d, &script(), &["run", "go", "--mode", "single"]);
    let run = wait_for(d, &db, &mut child, "the child's step done", |steps, _| {
        steps
            .iter()
            .any(|s| s.key.starts_with("child/") && s.state == StepState::Done)
    });
    kill9(&mut child);

    let before = db.steps(&run);
    let first: Vec<_> = before
        .iter()
        .filter(|s| s.key.starts_with("child/"))
        .collect();
    assert_eq!(first.len(), 1, "{before:?}");
    let parents: Vec<_> = db
        .agents(&run)
        .into_iter()
        .filter(|a| a.name == "agent")
        .collect();
    assert_eq!(parents.len(), 1);
    assert_eq!(
        first[0].key,
        format!("child/{}/1", parents[0].id),
        "keyed by the parent agent's id"
    );

    let report = resume(d, &run);
    assert_eq!(report["status"], "completed", "{report}");

    let agents = db.agents(&run);
    let parents: Vec<_> = agents.iter().filter(|a| a.name == "agent").collect();
    let kids: Vec<_> = agents.iter().filter(|a| a.role == "kid").collect();
    assert_eq!(parents.len(), 2, "the parent ran again as a new agent");
    assert_eq!(kids.len(), 2, "its child ran again: {agents:?}");
    assert!(
        kids.iter().all(|k| k.state == AgentState::Completed),
        "{kids:?}"
    );
    assert_eq!(kids[1].parent.as_ref(), Some(&parents[1].id));

    // Each attempt's child is its own step; both are done, with the agent that did it.
    let steps = db.steps(&run);
    for (parent, kid) in parents.iter().zip(&kids) {
        let key = format!("child/{}/1", parent.id);
        let step = steps
            .iter()
            .find(|s| s.key == key)
            .unwrap_or_else(|| panic!("{key}: {steps:?}"));
        assert_eq!(step.state, StepState::Done);
        assert_eq!(step.agent_id.as_deref(), Some(kid.id.as_str()));
    }

    // The child's work is on the resumed parent's branch.
    let branch = report["branch"]["branch"]
        .as_str()
        .unwrap_or_else(|| panic!("no branch: {report}"));
    let repo = d.join("repo");
    let show = std::process::Command::new("git")
        .args(["show", &format!("{branch}:kid.txt")])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert!(show.status.success(), "{show:?}");
    assert_eq!(String::from_utf8_lossy(&show.stdout), "kid\n");
}

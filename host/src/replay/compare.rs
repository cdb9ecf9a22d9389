//! Comparing a replay with its recording, and removing what the replay left in the
//! repository (its branches, its worktrees' registrations).

use std::path::Path;

use serde::Serialize;

use super::ReplayError;
use crate::engine::RunReport;
use crate::event::Artifact;
use crate::ids::RunId;
use crate::provider::replay::Divergence;
use crate::vocab::{AgentState, RunStatus};
use crate::worktree::BranchArtifact;

/// Whether every model call of the replay matched the recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplayOutcome {
    /// Every request matched a recorded one.
    Matched,
    /// A request differed (see the divergence).
    Diverged,
}

impl ReplayOutcome {
    /// The name printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Matched => "matched",
            Self::Diverged => "diverged",
        }
    }
}

/// One agent of the recorded run beside the replay's agent in the same place.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentMatch {
    /// The recorded agent's name (or the replay's, for an agent only it has).
    pub name: String,
    /// The recorded agent's end.
    pub recorded: Option<AgentState>,
    /// The replayed agent's end.
    pub replayed: Option<AgentState>,
    /// Both ended with the same result text.
    pub same_result: bool,
    /// Both left the same tree on their branch (`None`: neither made a branch).
    pub same_tree: Option<bool>,
}

/// What `crewbox replay` reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The recorded run.
    pub recorded_run: RunId,
    /// The replay's run (in the scratch state, gone once reported).
    pub replay_run: RunId,
    /// matched or diverged.
    pub outcome: ReplayOutcome,
    /// Model calls in the recording.
    pub recorded_calls: usize,
    /// Calls answered from it.
    pub answered_calls: usize,
    /// The first request that differed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub divergence: Option<Divergence>,
    /// The recorded run's status.
    pub recorded_status: RunStatus,
    /// Both runs ended with the same status, result text, agents and trees.
    pub identical: bool,
    /// Both team runs left the same tree on their integration branch (`None`: no
    /// integration branch).
    pub same_integration_tree: Option<bool>,
    /// Agent by agent, in creation order.
    pub agents: Vec<AgentMatch>,
    /// The replay's own report.
    pub report: RunReport,
}

/// An agent's branch, when it made one.
fn branch_of(artifact: Option<&Artifact>) -> Option<&BranchArtifact> {
    match artifact? {
        Artifact::Branch(b) => Some(b),
    }
}

/// The tree of an artifact's tip, when its commit is still in the repository.
fn tree_of(repo: Option<&git2::Repository>, artifact: Option<&BranchArtifact>) -> Option<String> {
    let (repo, artifact) = (repo?, artifact?);
    let tip = artifact.commits.last().unwrap_or(&artifact.base);
    let oid = git2::Oid::from_str(tip).ok()?;
    let commit = repo.find_commit(oid).ok()?;
    Some(commit.tree_id().to_string())
}

fn same_tree(a: Option<String>, b: Option<String>) -> Option<bool> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a == b),
    }
}

/// Compares the recorded run's `original` report with the replay's `report`.
pub(super) fn compare(
    repo: &Path,
    original: RunReport,
    report: RunReport,
    recorded: usize,
) -> ReplayReport {
    let git = git2::Repository::open(repo).ok();
    let git = git.as_ref();
    let agents: Vec<AgentMatch> = pairs(&original.agents, &report.agents)
        .into_iter()
        .map(|(a, b)| AgentMatch {
            name: a.or(b).map(|x| x.name.clone()).unwrap_or_default(),
            recorded: a.map(|x| x.state),
            replayed: b.map(|x| x.state),
            same_result: a.map(|x| &x.result) == b.map(|x| &x.result),
            same_tree: same_tree(
                tree_of(git, branch_of(a.and_then(|x| x.branch.as_ref()))),
                tree_of(git, branch_of(b.and_then(|x| x.branch.as_ref()))),
            ),
        })
        .collect();
    let integration = |r: &RunReport| {
        r.details
            .integration
            .as_ref()
            .and_then(|i| i.branch.clone())
    };
    let same_integration_tree = same_tree(
        tree_of(git, integration(&original).as_ref()),
        tree_of(git, integration(&report).as_ref()),
    );
    let status = report.details.replay.clone();
    let divergence = status.as_ref().and_then(|s| s.divergence.clone());
    let outcome = match divergence {
        Some(_) => ReplayOutcome::Diverged,
        None => ReplayOutcome::Matched,
    };
    let identical = outcome == ReplayOutcome::Matched
        && original.status == report.status
        && same_run_result(&original, &report)
        && same_integration_tree != Some(false)
        && agents
            .iter()
            .all(|a| a.recorded == a.replayed && a.same_result && a.same_tree != Some(false));
    ReplayReport {
        recorded_run: original.run_id.clone(),
        replay_run: report.run_id.clone(),
        outcome,
        recorded_calls: recorded,
        answered_calls: status.map_or(0, |s| s.answered),
        divergence,
        recorded_status: original.status,
        identical,
        same_integration_tree,
        agents,
        report,
    }
}

/// The recorded run's agents each with the replay's agent of the same name (the first
/// of a name with the first, and so on), in the recorded order, then the replay's
/// agents that have no counterpart. By name, not position: a resumed run creates the
/// agents it ran again after those it kept, a replay in the steps' order.
fn pairs<'a, T: Named>(original: &'a [T], replay: &'a [T]) -> Vec<(Option<&'a T>, Option<&'a T>)> {
    let mut taken = vec![false; replay.len()];
    let mut out: Vec<(Option<&T>, Option<&T>)> = original
        .iter()
        .map(|a| {
            let b = replay
                .iter()
                .enumerate()
                .find(|(j, b)| !taken[*j] && b.name() == a.name())
                .map(|(j, b)| {
                    taken[j] = true;
                    b
                });
            (Some(a), b)
        })
        .collect();
    out.extend(
        replay
            .iter()
            .zip(&taken)
            .filter(|(_, t)| !**t)
            .map(|(b, _)| (None, Some(b))),
    );
    out
}

/// What [`pairs`] pairs by.
trait Named {
    fn name(&self) -> &str;
}

impl Named for crate::engine::AgentReport {
    fn name(&self) -> &str {
        &self.name
    }
}

/// Whether the two runs' results say the same, but for what a replay cannot keep: the
/// ids of the run and its agents (and the branch names made of them), each read as its
/// counterpart's (agents pair by name); and the order of the
/// `## ` sections a swarm's merged report lists its members in as they were delivered
/// (one after the other as they finished).
fn same_run_result(original: &RunReport, report: &RunReport) -> bool {
    let neutral = |r: &RunReport| {
        let mut text = r.result.clone().unwrap_or_default();
        // By name (and how many of that name came before): agents created in the same
        // millisecond are not always listed in the same order.
        for (i, a) in r.agents.iter().enumerate() {
            let before = r.agents[..i].iter().filter(|b| b.name == a.name).count();
            text = text.replace(a.id.as_str(), &format!("<agent {} {before}>", a.name));
        }
        text.replace(r.run_id.as_str(), "<run>")
    };
    if original.result.is_some() != report.result.is_some() {
        return false;
    }
    let (a, b) = (neutral(original), neutral(report));
    if a == b {
        return true;
    }
    let sections = |t: &str| {
        let mut parts: Vec<String> = Vec::new();
        for line in t.split_inclusive('\n') {
            match parts.last_mut() {
                Some(part) if !line.starts_with("## ") && !line.starts_with("conflicts (") => {
                    part.push_str(line)
                }
                _ => parts.push(line.to_owned()),
            }
        }
        // Blank lines part sections, and the last one ends the text without one.
        for part in &mut parts {
            while part.ends_with('\n') {
                part.pop();
            }
        }
        parts.sort();
        parts
    };
    original.mode == crate::vocab::Mode::Swarm && sections(&a) == sections(&b)
}

/// Removes the replay's worktree registrations (those under `scratch`) and its
/// branches from the repository at `repo`.
pub(super) fn clean_up(repo: &Path, scratch: &Path, report: &RunReport) -> Result<(), ReplayError> {
    let Ok(git) = git2::Repository::open(repo) else {
        // Not a git repository: the replay made no branch.
        return Ok(());
    };
    prune_worktrees(&git, scratch)?;
    let branches = report
        .agents
        .iter()
        .filter_map(|a| branch_of(a.branch.as_ref()))
        .chain(
            report
                .details
                .integration
                .as_ref()
                .and_then(|i| i.branch.as_ref()),
        )
        .map(|b| b.branch.clone())
        .chain(
            report
                .details
                .integration
                .is_some()
                .then(|| crate::engine::workspace::integration_branch(&report.run_id)),
        );
    delete_branches(&git, branches)
}

fn git_err(e: git2::Error) -> ReplayError {
    ReplayError::Git(e.message().to_owned())
}

/// Prunes the worktrees registered in `git` whose directories are under `scratch`.
pub(super) fn prune_worktrees(git: &git2::Repository, scratch: &Path) -> Result<(), ReplayError> {
    let names = git.worktrees().map_err(git_err)?;
    for name in names.iter().flatten().flatten() {
        let Ok(wt) = git.find_worktree(name) else {
            continue;
        };
        if wt.path().starts_with(scratch) {
            let mut opts = git2::WorktreePruneOptions::new();
            opts.valid(true).locked(true).working_tree(true);
            wt.prune(Some(&mut opts)).map_err(git_err)?;
        }
    }
    Ok(())
}

/// Deletes the local branches `names` that exist.
pub(super) fn delete_branches(
    git: &git2::Repository,
    names: impl IntoIterator<Item = String>,
) -> Result<(), ReplayError> {
    for name in names {
        if let Ok(mut b) = git.find_branch(&name, git2::BranchType::Local) {
            b.delete().map_err(git_err)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Named for &str {
        fn name(&self) -> &str {
            self
        }
    }

    /// Agents pair by name in order of occurrence, whatever order each run lists them
    /// in; the ones without a counterpart stand alone.
    #[test]
    fn agents_pair_by_name_not_position() {
        let original = ["bob", "alice", "alice", "carol"];
        let replay = ["alice", "bob", "alice", "dave"];
        let got: Vec<(Option<&str>, Option<&str>)> = pairs(&original, &replay)
            .into_iter()
            .map(|(a, b)| (a.copied(), b.copied()))
            .collect();
        assert_eq!(
            got,
            [
                (Some("bob"), Some("bob")),
                (Some("alice"), Some("alice")),
                (Some("alice"), Some("alice")),
                (Some("carol"), None),
                (None, Some("dave")),
            ]
        );
    }
}

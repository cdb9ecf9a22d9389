//! A run's integration branch (`crewbox/run/<run-id>`): members' branches merged into
//! it one after another, so later members, the synthesis and the evaluator see the work
//! done so far. Merges happen in the object database only (no checkout); the branch
//! ref is written only when its tip moves, so a run that changed nothing leaves no
//! branch. Everything here is blocking libgit2 work; the manager runs it on
//! `spawn_blocking` threads.

use std::path::Path;

use git2::{Oid, Repository, Signature, Sort};
use serde::{Deserialize, Serialize};

use super::Identity;
use super::error::WorktreeError;
use super::git::open;

/// What merging one member's branch into the integration head did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum MergeOutcome {
    /// The member's tip already was in the head (nothing new).
    UpToDate,
    /// The head moved forward to the member's tip.
    FastForward,
    /// A merge commit joins the head and the member's tip.
    Merged {
        /// The merge commit (hex id).
        commit: String,
    },
    /// Both sides changed the same lines; the head is unchanged and the member's branch
    /// is kept as it is.
    Conflict {
        /// Conflicting paths (relative, `/`-separated), sorted.
        files: Vec<String>,
    },
}

/// The integration head after one merge, and how it got there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    /// The head now (hex id); unchanged on a conflict.
    pub head: String,
    /// What happened.
    pub outcome: MergeOutcome,
}

fn parse(repo_root: &Path, hex: &str) -> Result<Oid, WorktreeError> {
    Oid::from_str(hex).map_err(WorktreeError::git("parse commit id", repo_root))
}

/// The tip of local branch `branch` (hex id), if it exists.
pub(crate) fn tip(repo_root: &Path, branch: &str) -> Result<Option<String>, WorktreeError> {
    let repo = open(repo_root)?;
    match repo.find_reference(&format!("refs/heads/{branch}")) {
        Ok(r) => r
            .peel_to_commit()
            .map(|c| Some(c.id().to_string()))
            .map_err(WorktreeError::git("resolve branch", repo_root)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(WorktreeError::git("find branch", repo_root)(e)),
    }
}

/// Most first-parent steps [`rewind`] walks back from a branch tip.
const REWIND_LIMIT: usize = 10_000;

/// Walks `branch` back along first parents from its tip to the newest commit that is
/// `base` or one of `known`, and points the branch there (deletes it at `base`).
/// Returns the head the branch ends at: `None` when it is absent or was deleted, its
/// tip unchanged when no such commit is found. Caller holds the repository lock.
pub(crate) fn rewind(
    repo_root: &Path,
    branch: &str,
    base: &str,
    known: &[String],
) -> Result<Option<String>, WorktreeError> {
    let repo = open(repo_root)?;
    let name = format!("refs/heads/{branch}");
    let mut reference = match repo.find_reference(&name) {
        Ok(r) => r,
        Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
        Err(e) => return Err(WorktreeError::git("find branch", repo_root)(e)),
    };
    let tip = reference
        .peel_to_commit()
        .map_err(WorktreeError::git("resolve branch", repo_root))?;
    let mut at = tip.clone();
    for _ in 0..REWIND_LIMIT {
        let id = at.id().to_string();
        if id == base {
            reference
                .delete()
                .map_err(WorktreeError::git("delete branch", repo_root))?;
            return Ok(None);
        }
        if known.contains(&id) {
            if at.id() != tip.id() {
                reference
                    .set_target(at.id(), "crewbox: rewind to the last journaled merge")
                    .map_err(WorktreeError::git("rewind branch", repo_root))?;
            }
            return Ok(Some(id));
        }
        match at.parent(0) {
            Ok(parent) => at = parent,
            Err(_) => break,
        }
    }
    Ok(Some(tip.id().to_string()))
}

/// Merges commit `theirs` into `head` and, when the head moves, points `branch` at the
/// new head. Caller holds the repository lock (the ref update must not race another).
pub(crate) fn merge(
    repo_root: &Path,
    branch: &str,
    head: &str,
    theirs: &str,
    message: &str,
    identity: &Identity,
) -> Result<Merged, WorktreeError> {
    let repo = open(repo_root)?;
    let (ours, theirs) = (parse(repo_root, head)?, parse(repo_root, theirs)?);
    let git = |op| WorktreeError::git(op, repo_root);
    let outcome = if ours == theirs
        || repo
            .graph_descendant_of(ours, theirs)
            .map_err(git("merge-base"))?
    {
        MergeOutcome::UpToDate
    } else if repo
        .graph_descendant_of(theirs, ours)
        .map_err(git("merge-base"))?
    {
        MergeOutcome::FastForward
    } else {
        let (our_c, their_c) = (
            repo.find_commit(ours).map_err(git("find commit"))?,
            repo.find_commit(theirs).map_err(git("find commit"))?,
        );
        let mut index = repo
            .merge_commits(&our_c, &their_c, None)
            .map_err(git("merge"))?;
        if index.has_conflicts() {
            return Ok(Merged {
                head: head.to_owned(),
                outcome: MergeOutcome::Conflict {
                    files: conflict_paths(&index, repo_root)?,
                },
            });
        }
        let tree = index
            .write_tree_to(&repo)
            .map_err(git("write merged tree"))?;
        let tree = repo.find_tree(tree).map_err(git("find tree"))?;
        let sig = Signature::now(&identity.name, &identity.email).map_err(git("make signature"))?;
        let commit = repo
            .commit(None, &sig, &sig, message, &tree, &[&our_c, &their_c])
            .map_err(git("commit merge"))?;
        MergeOutcome::Merged {
            commit: commit.to_string(),
        }
    };
    let new_head = match &outcome {
        MergeOutcome::UpToDate | MergeOutcome::Conflict { .. } => {
            return Ok(Merged {
                head: head.to_owned(),
                outcome,
            });
        }
        MergeOutcome::FastForward => theirs,
        MergeOutcome::Merged { commit } => parse(repo_root, commit)?,
    };
    repo.reference(&format!("refs/heads/{branch}"), new_head, true, message)
        .map_err(git("update integration branch"))?;
    Ok(Merged {
        head: new_head.to_string(),
        outcome,
    })
}

fn conflict_paths(index: &git2::Index, repo_root: &Path) -> Result<Vec<String>, WorktreeError> {
    let mut files = Vec::new();
    for c in index
        .conflicts()
        .map_err(WorktreeError::git("read conflicts", repo_root))?
    {
        let c = c.map_err(WorktreeError::git("read conflicts", repo_root))?;
        if let Some(entry) = c.our.or(c.their).or(c.ancestor) {
            files.push(String::from_utf8_lossy(&entry.path).into_owned());
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// Commits from `base` (exclusive) to `head`, oldest first (hex ids).
pub(crate) fn commits(
    repo_root: &Path,
    base: &str,
    head: &str,
) -> Result<Vec<String>, WorktreeError> {
    let repo = open(repo_root)?;
    let (base, head) = (parse(repo_root, base)?, parse(repo_root, head)?);
    let git = |op| WorktreeError::git(op, repo_root);
    let mut walk = repo.revwalk().map_err(git("log"))?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)
        .and_then(|()| walk.push(head))
        .and_then(|()| walk.hide(base))
        .map_err(git("log"))?;
    walk.map(|o| o.map(|o| o.to_string()).map_err(git("log")))
        .collect()
}

/// The unified diff between two commits' trees, at most `max_bytes` long.
pub(crate) fn diff_commits(
    repo_root: &Path,
    base: &str,
    head: &str,
    max_bytes: usize,
) -> Result<String, WorktreeError> {
    let repo: Repository = open(repo_root)?;
    let git = |op| WorktreeError::git(op, repo_root);
    let tree = |hex: &str| -> Result<git2::Tree<'_>, WorktreeError> {
        repo.find_commit(parse(repo_root, hex)?)
            .and_then(|c| c.tree())
            .map_err(git("find tree"))
    };
    let (old, new) = (tree(base)?, tree(head)?);
    let diff = repo
        .diff_tree_to_tree(Some(&old), Some(&new), None)
        .map_err(git("diff"))?;
    super::git::print_capped(&diff, max_bytes, repo_root)
}

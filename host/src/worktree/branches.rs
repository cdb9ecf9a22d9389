//! crewbox's branches in the main repository (`crewbox/…`: agents' branches and team
//! runs' integration branches `crewbox/run/<run-id>`): which there are, whether their
//! work is already in the checked-out branch, and removing them. A branch whose work is
//! not merged is only removed when forced, and one checked out anywhere never is.

use std::path::Path;

use git2::{BranchType, Repository};
use serde::Serialize;

use super::WorktreeError;
use super::git::open;

/// The prefix of every branch crewbox makes.
pub const PREFIX: &str = "crewbox/";

/// One of crewbox's branches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BranchInfo {
    /// The branch name (`crewbox/…`).
    pub name: String,
    /// Its tip commit.
    pub tip: String,
    /// The tip's subject line.
    pub subject: String,
    /// When the tip was committed (seconds since the epoch).
    pub time: i64,
    /// Its work is in HEAD (the tip is HEAD or an ancestor of it).
    pub merged: bool,
    /// Checked out in the main work tree or in a linked worktree (never removed).
    pub checked_out: bool,
}

/// The unified diff of `branch` (its current tip, else its last recorded commit)
/// against the commit it started from, at most `max_bytes` long (the cut marked).
pub fn diff(
    repo_root: &Path,
    branch: &super::BranchArtifact,
    max_bytes: usize,
) -> Result<String, WorktreeError> {
    let tip = match super::integration::tip(repo_root, &branch.branch)? {
        Some(tip) => tip,
        None => match branch.commits.last() {
            Some(last) => last.clone(),
            None => return Ok(String::new()),
        },
    };
    super::integration::diff_commits(repo_root, &branch.base, &tip, max_bytes)
}

/// crewbox's branches, oldest tip first.
pub fn list(repo_root: &Path) -> Result<Vec<BranchInfo>, WorktreeError> {
    let repo = open(repo_root)?;
    let git = |op| WorktreeError::git(op, repo_root);
    let head = repo.head().ok().and_then(|h| h.target());
    let mut out = Vec::new();
    for branch in repo
        .branches(Some(BranchType::Local))
        .map_err(git("branches"))?
    {
        let (branch, _) = branch.map_err(git("branches"))?;
        let Ok(Some(name)) = branch.name() else {
            continue;
        };
        // Only the names crewbox gives: a user's own `crewbox/mywork` is not listed,
        // so never pruned (`branches --prune --force` deleted it, unmerged work and all).
        if !made_by_crewbox(name) {
            continue;
        }
        let name = name.to_owned();
        let Ok(commit) = branch.get().peel_to_commit() else {
            continue;
        };
        let tip = commit.id();
        let merged =
            head.is_some_and(|h| h == tip || repo.graph_descendant_of(h, tip).unwrap_or(false));
        out.push(BranchInfo {
            checked_out: branch.is_head() || checked_out_elsewhere(&repo, &name),
            subject: commit.summary().ok().flatten().unwrap_or("").to_owned(),
            time: commit.time().seconds(),
            tip: tip.to_string(),
            merged,
            name,
        });
    }
    out.sort_by(|a, b| (a.time, &a.name).cmp(&(b.time, &b.name)));
    Ok(out)
}

/// Whether `name` is a name crewbox gives a branch: an agent's `crewbox/a-<32 hex>`
/// (with the `-<UTC stamp>` and `-<n>` it adds when the plain name is taken) or a team
/// run's integration branch `crewbox/run/r-<32 hex>`.
pub fn made_by_crewbox(name: &str) -> bool {
    fn id(s: &str, prefix: &str) -> bool {
        s.strip_prefix(prefix).is_some_and(|hex| {
            hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
    }
    // Every name crewbox gives is ASCII (and the byte splits below need it).
    let Some(rest) = name.strip_prefix(PREFIX).filter(|r| r.is_ascii()) else {
        return false;
    };
    if let Some(run) = rest.strip_prefix("run/") {
        return id(run, "r-");
    }
    let (agent, suffix) = rest.split_at(rest.len().min(34));
    if !id(agent, "a-") {
        return false;
    }
    // `-20250101T000000Z`, then maybe `-<n>`.
    let Some(suffix) = (!suffix.is_empty()).then_some(suffix) else {
        return true;
    };
    let Some(stamp) = suffix.strip_prefix('-') else {
        return false;
    };
    let (stamp, count) = stamp.split_at(stamp.len().min(16));
    let stamp_ok = stamp.len() == 16
        && stamp.bytes().enumerate().all(|(i, b)| match i {
            8 => b == b'T',
            15 => b == b'Z',
            _ => b.is_ascii_digit(),
        });
    stamp_ok
        && (count.is_empty()
            || count
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())))
}

/// Whether a linked worktree has `name` checked out.
fn checked_out_elsewhere(repo: &Repository, name: &str) -> bool {
    let Ok(names) = repo.worktrees() else {
        return false;
    };
    names.iter().filter_map(|n| n.ok().flatten()).any(|wt| {
        repo.find_worktree(wt)
            .ok()
            .and_then(|wt| Repository::open_from_worktree(&wt).ok())
            .and_then(|r| Some(r.head().ok()?.shorthand().ok()? == name))
            .unwrap_or(false)
    })
}

/// Removes a branch `list` returned; the caller decided it may go.
pub fn delete(repo_root: &Path, info: &BranchInfo) -> Result<(), WorktreeError> {
    let repo = open(repo_root)?;
    let git = |op| WorktreeError::git(op, repo_root);
    let mut branch = repo
        .find_branch(&info.name, BranchType::Local)
        .map_err(git("find branch"))?;
    // Moved since it was listed: what was judged is not what would be deleted.
    let now = branch.get().target().map(|t| t.to_string());
    if now.as_deref() != Some(info.tip.as_str()) {
        return Err(git("delete branch")(git2::Error::from_str(&format!(
            "branch {} moved since it was listed",
            info.name
        ))));
    }
    branch.delete().map_err(git("delete branch"))
}

#[cfg(test)]
mod names {
    use super::made_by_crewbox;

    /// Probe 18: every `crewbox/…` branch counted as crewbox's, so `branches --prune
    /// --force` deleted a user's `crewbox/mywork`.
    #[test]
    fn only_the_names_crewbox_gives_are_its_branches() {
        let hex = "0123456789abcdef0123456789abcdef";
        for ok in [
            format!("crewbox/a-{hex}"),
            format!("crewbox/a-{hex}-20250101T000000Z"),
            format!("crewbox/a-{hex}-20250101T000000Z-7"),
            format!("crewbox/run/r-{hex}"),
        ] {
            assert!(made_by_crewbox(&ok), "{ok}");
        }
        for not in [
            "crewbox/mywork".to_owned(),
            "main".to_owned(),
            format!("crewbox/a-{}", &hex[1..]),
            format!("crewbox/a-{hex}x"),
            format!("crewbox/a-{hex}-mine"),
            format!("crewbox/a-{hex}-20250101T000000Z-"),
            format!("crewbox/run/r-{hex}/x"),
            format!("crewbox/A-{}", hex.to_uppercase()),
            format!("other/a-{hex}"),
            format!("crewbox/a-{}é{}", &hex[..31], "-20250101T000000Z"),
        ] {
            assert!(!made_by_crewbox(&not), "{not}");
        }
    }
}

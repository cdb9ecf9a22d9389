//! Blocking libgit2 operations. Everything here runs on `spawn_blocking` threads; each
//! call opens its own `Repository` because the handle is not `Sync`. The main
//! repository is opened by its root; an agent's worktree only ever through it, checked
//! ([`super::integrity`]).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use git2::build::CheckoutBuilder;
use git2::{
    BranchType, Delta, DiffFormat, DiffOptions, ErrorCode, IndexAddOption, Oid, Repository,
    Signature, Sort, WorktreeAddOptions, WorktreePruneOptions,
};
use serde::Serialize;

use super::Identity;
use super::error::WorktreeError;
use super::integrity::{self, Checked};
use super::limits::{CommitRules, Filter, LeftOut};

/// How a path differs between the base commit and the working tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// New (tracked or untracked, not ignored).
    Added,
    /// Content, mode or type changed.
    Modified,
    /// Gone from the working tree.
    Deleted,
}

/// One changed path, relative to the worktree root, `/`-separated.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ChangedPath {
    /// The path (lossily decoded if it is not UTF-8).
    pub path: String,
    /// How it changed.
    pub kind: ChangeKind,
}

/// Opens the main repository whose root is `path` (never an agent's worktree: those
/// are opened through it, see [`integrity::open_checked`]).
pub(crate) fn open(path: &Path) -> Result<Repository, WorktreeError> {
    Repository::open(path).map_err(WorktreeError::git("open", path))
}

/// The commit HEAD points to, or `NoCommits` for an unborn HEAD.
pub(crate) fn head_commit(repo: &Repository, root: &Path) -> Result<Oid, WorktreeError> {
    match repo.head() {
        Ok(head) => head
            .peel_to_commit()
            .map(|c| c.id())
            .map_err(WorktreeError::git("resolve HEAD", root)),
        Err(e) if matches!(e.code(), ErrorCode::UnbornBranch | ErrorCode::NotFound) => {
            Err(WorktreeError::NoCommits {
                path: root.to_owned(),
            })
        }
        Err(e) => Err(WorktreeError::git("resolve HEAD", root)(e)),
    }
}

/// Registers and checks out a new worktree at `path`, detached at `commit`.
///
/// libgit2 always creates a branch named after the worktree; it only lives until HEAD is
/// detached a few lines below. Caller holds the repository lock.
pub(crate) fn add_worktree(
    repo_root: &Path,
    name: &str,
    path: &Path,
    commit: Oid,
) -> Result<(), WorktreeError> {
    let repo = open(repo_root)?;
    repo.worktree(name, path, Some(&WorktreeAddOptions::new()))
        .map_err(WorktreeError::git("worktree add", path))?;
    let wt = integrity::open_checked(repo_root, name, path)?;
    let checked_out = head_commit(&wt.repo, path)?;
    wt.repo
        .set_head_detached(checked_out)
        .map_err(WorktreeError::git("detach HEAD", path))?;
    repo.find_branch(name, BranchType::Local)
        .and_then(|mut b| b.delete())
        .map_err(WorktreeError::git("delete temporary branch", path))?;
    if checked_out != commit {
        // HEAD moved between our read and libgit2's; land on the commit we promised.
        reset_clean(&wt, commit)?;
    }
    Ok(())
}

/// `git reset --hard <commit>` plus `git clean -fdx`, detaching HEAD at `commit`.
/// Checkout compares stat data first, so only files that differ are rewritten.
///
/// Every symlink and special file in the tree goes first ([`clear_links`]):
/// the checkout writes files by path, following links, as the user.
pub(crate) fn reset_clean(wt: &Checked, commit: Oid) -> Result<(), WorktreeError> {
    let (repo, path) = (&wt.repo, wt.path.as_path());
    clear_links(path)?;
    let target = repo
        .find_commit(commit)
        .map_err(WorktreeError::git("find commit", path))?;
    let tree = target
        .tree()
        .map_err(WorktreeError::git("find tree", path))?;
    let mut co = CheckoutBuilder::new();
    co.force().remove_untracked(true).remove_ignored(true);
    repo.checkout_tree(tree.as_object(), Some(&mut co))
        .map_err(WorktreeError::git("checkout --force", path))?;
    repo.set_head_detached(commit)
        .map_err(WorktreeError::git("detach HEAD", path))?;
    // Checkout leaves index entries it did not visit (e.g. paths the agent staged);
    // reading the tree fixes them and keeps stat data of unchanged entries.
    let mut index = repo
        .index()
        .map_err(WorktreeError::git("read index", path))?;
    index
        .read_tree(&tree)
        .and_then(|()| index.write())
        .map_err(WorktreeError::git("reset index", path))?;
    repo.cleanup_state()
        .map_err(WorktreeError::git("clean up merge state", path))?;
    Ok(())
}

/// Removes every symlink, FIFO, socket and device, and every repository of its own, in
/// the worktree at `path` (not following any link; its `.git` pointer is left to the
/// integrity check), so that a
/// checkout, which opens each file it rewrites by path with `O_TRUNC` and follows
/// links, cannot be sent outside the worktree or made to wait on a FIFO. A tracked
/// symlink is written back by the checkout that follows. An agent that replaced a
/// tracked file with a link to `~/.bashrc`, or a tracked directory with one to
/// `~/.ssh`, made crewbox's reset of its worktree write repository content there.
pub(crate) fn clear_links(path: &Path) -> Result<(), WorktreeError> {
    let swept = crate::fs::Root::open(path)
        .and_then(|root| root.sweep())
        .map_err(|e| WorktreeError::Io {
            op: "clear links",
            path: path.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?;
    if swept.total() > 0 {
        tracing::debug!(worktree = %path.display(), ?swept, "cleared links before a checkout");
    }
    Ok(())
}

/// The working tree as a tree object, as an agent's commit takes it: every change
/// staged (new files, deletions) within the limits of `rules`, ignored files and
/// `.crewbox/` (unless granted) left out, and the root's `.crewbox` put back as it was
/// at `base` whatever HEAD says. The index is changed in memory only, so this is also
/// safe before the agent is done.
pub(crate) struct Snapshot {
    /// The worktree's HEAD commit.
    pub head: Oid,
    /// The tree.
    pub tree: Oid,
    /// What was left out, and why.
    pub left_out: Vec<LeftOut>,
}

/// The deepest directory nesting a snapshot walks (libgit2 stops at 100).
const DEEPEST_DIR: usize = 90;

pub(crate) fn snapshot(
    wt: &Checked,
    base: Oid,
    rules: CommitRules,
) -> Result<Snapshot, WorktreeError> {
    let (repo, path) = (&wt.repo, wt.path.as_path());
    let head = head_commit(repo, path)?;
    let mut filter = Filter::new(path, rules);
    let tree = {
        let mut index = repo
            .index()
            .map_err(WorktreeError::git("read index", path))?;
        // The callbacks run before libgit2 reads a file, so a file left out is never
        // read or hashed.
        let add = |index: &mut git2::Index, filter: &mut Filter<'_>| {
            let mut offer = |p: &Path, _: &[u8]| filter.offer(p);
            index
                .add_all(["*"], IndexAddOption::DEFAULT, Some(&mut offer))
                .and_then(|()| index.update_all(["*"], Some(&mut offer)))
        };
        let added = match add(&mut index, &mut filter) {
            // libgit2 walks at most 100 directories deep and refused the whole commit
            // (and with it, in one mode, the run): the deeper directories are left out.
            Err(e) if e.message().contains("nesting too deep") => {
                for dir in super::limits::dirs_at_depth(path, DEEPEST_DIR) {
                    repo.add_ignore_rule(&super::limits::ignore_exactly(&dir))
                        .map_err(WorktreeError::git("leave out a deep directory", path))?;
                    filter.too_deep(&dir, DEEPEST_DIR as u32);
                }
                let again = add(&mut index, &mut filter);
                let _ = repo.clear_ignore_rules();
                again
            }
            other => other,
        };
        added.map_err(WorktreeError::git("add --all", path))?;
        index
            .write_tree()
            .map_err(WorktreeError::git("write-tree", path))?
    };
    let tree = if rules.crewbox_writable {
        tree
    } else {
        restore_crewbox(repo, base, tree, &mut filter)
            .map_err(WorktreeError::git("keep .crewbox as it was", path))?
    };
    Ok(Snapshot {
        head,
        tree,
        left_out: filter.into_left_out(),
    })
}

/// `tree` with every root entry named like `.crewbox` as it is in `base`'s tree (or
/// without it, where `base` has none): changes to it that reached HEAD some other way
/// (an agent's own commit) never reach the branch.
fn restore_crewbox(
    repo: &Repository,
    base: Oid,
    tree: Oid,
    filter: &mut Filter<'_>,
) -> Result<Oid, git2::Error> {
    let before = repo.find_commit(base)?.tree()?;
    let after = repo.find_tree(tree)?;
    let names: BTreeSet<String> = before
        .iter()
        .chain(after.iter())
        .filter_map(|e| e.name().ok().map(str::to_owned))
        .filter(|n| crate::fs::name::is_crewbox(std::ffi::OsStr::new(n)))
        .collect();
    let mut builder = repo.treebuilder(Some(&after))?;
    let mut changed = false;
    for name in names {
        let was = before.get_name(&name).map(|e| (e.id(), e.filemode()));
        let is = after.get_name(&name).map(|e| (e.id(), e.filemode()));
        if was == is {
            continue;
        }
        changed = true;
        filter.restored_crewbox(&name);
        match was {
            Some((id, mode)) => {
                builder.insert(&name, id, mode)?;
            }
            None => builder.remove(&name)?,
        }
    }
    if changed { builder.write() } else { Ok(tree) }
}

/// The diff between the base commit's tree and a snapshot tree.
fn diff_from_base<'r>(
    repo: &'r Repository,
    path: &Path,
    base: Oid,
    tree: Oid,
) -> Result<git2::Diff<'r>, WorktreeError> {
    let base_tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(WorktreeError::git("find base tree", path))?;
    let new_tree = repo
        .find_tree(tree)
        .map_err(WorktreeError::git("find tree", path))?;
    let mut opts = DiffOptions::new();
    opts.show_binary(false);
    repo.diff_tree_to_tree(Some(&base_tree), Some(&new_tree), Some(&mut opts))
        .map_err(WorktreeError::git("diff", path))
}

/// The paths a diff changes, as [`ChangedPath`]s.
fn paths_of(diff: &git2::Diff<'_>) -> Vec<ChangedPath> {
    let mut out = Vec::with_capacity(diff.deltas().len());
    for delta in diff.deltas() {
        let (file, kind) = match delta.status() {
            Delta::Added | Delta::Untracked | Delta::Copied => {
                (delta.new_file(), ChangeKind::Added)
            }
            Delta::Deleted => (delta.old_file(), ChangeKind::Deleted),
            Delta::Modified | Delta::Typechange | Delta::Renamed | Delta::Conflicted => {
                (delta.new_file(), ChangeKind::Modified)
            }
            Delta::Unmodified | Delta::Ignored | Delta::Unreadable => continue,
        };
        out.push(ChangedPath {
            path: String::from_utf8_lossy(file.path_bytes().unwrap_or_default()).into_owned(),
            kind,
        });
    }
    out
}

/// The uncommitted changes of a checkout crewbox does not own (the user's, where an
/// agent works in place with `--isolation none`): its index and working tree against
/// HEAD, untracked files included (ignored ones not), and their unified diff cut at
/// `max_bytes`. Read only: the index is not written. Changes that were there before
/// the agent ran are in it too — a validator sees more, never less.
pub fn checkout_changes(
    root: &Path,
    max_bytes: usize,
) -> Result<(Vec<ChangedPath>, String), WorktreeError> {
    let repo = open(root)?;
    // An unborn HEAD (no commit yet): everything is new.
    let head = match repo.head() {
        Ok(h) => Some(
            h.peel_to_tree()
                .map_err(WorktreeError::git("read HEAD's tree", root))?,
        ),
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => None,
        Err(e) => return Err(WorktreeError::git("read HEAD", root)(e)),
    };
    let mut opts = DiffOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true)
        .show_binary(false);
    let diff = repo
        .diff_tree_to_workdir_with_index(head.as_ref(), Some(&mut opts))
        .map_err(WorktreeError::git("diff the checkout", root))?;
    let text = print_capped(&diff, max_bytes, root)?;
    Ok((paths_of(&diff), text))
}

/// Paths changed in the working tree relative to `base` (agent commits included), as
/// the commit would take them, and what it would leave out.
pub(crate) fn changed_paths(
    wt: &Checked,
    base: Oid,
    rules: CommitRules,
) -> Result<(Vec<ChangedPath>, Vec<LeftOut>), WorktreeError> {
    let snap = snapshot(wt, base, rules)?;
    let (repo, path) = (&wt.repo, wt.path.as_path());
    let diff = diff_from_base(repo, path, base, snap.tree)?;
    Ok((paths_of(&diff), snap.left_out))
}

/// Marker appended when the diff is cut at `max_bytes`.
const TRUNCATED: &str = "\n[diff truncated]\n";

/// The unified diff of the working tree against `base` as the commit would take it, at
/// most `max_bytes` long.
pub(crate) fn diff(
    wt: &Checked,
    base: Oid,
    max_bytes: usize,
    rules: CommitRules,
) -> Result<String, WorktreeError> {
    let snap = snapshot(wt, base, rules)?;
    let diff = diff_from_base(&wt.repo, &wt.path, base, snap.tree)?;
    print_capped(&diff, max_bytes, &wt.path)
}

/// `diff` as a unified patch, cut at `max_bytes` with a `[diff truncated]` line (the
/// line alone when `max_bytes` cannot hold it: an empty diff would read as "no
/// changes").
pub(crate) fn print_capped(
    diff: &git2::Diff<'_>,
    max_bytes: usize,
    path: &Path,
) -> Result<String, WorktreeError> {
    let mut out = String::new();
    let mut truncated = false;
    let printed = diff.print(DiffFormat::Patch, |_, _, line| {
        let origin = line.origin();
        let text = String::from_utf8_lossy(line.content());
        let extra = usize::from(matches!(origin, '+' | '-' | ' ')) + text.len();
        if out.len() + extra > max_bytes {
            truncated = true;
            return false;
        }
        if matches!(origin, '+' | '-' | ' ') {
            out.push(origin);
        }
        out.push_str(&text);
        true
    });
    if truncated {
        let keep = max_bytes.saturating_sub(TRUNCATED.len());
        out.truncate(out.floor_char_boundary(keep));
        out.push_str(if out.is_empty() {
            TRUNCATED.trim_start()
        } else {
            TRUNCATED
        });
    } else {
        printed.map_err(WorktreeError::git("diff --patch", path))?;
    }
    Ok(out)
}

/// The result of committing a worktree.
pub(crate) struct Committed {
    /// The branch created (short name).
    pub branch: String,
    /// New commits from the base to the branch tip, oldest first.
    pub commits: Vec<Oid>,
}

/// Commits whatever differs from `base` (within `rules`) and points a new
/// `crewbox/<component>` branch at it. Agent-made commits are kept and the uncommitted
/// rest goes on top. `None` when nothing changed; what was left out either way. Only
/// the branch step takes the repository lock.
#[allow(clippy::too_many_arguments)]
pub(crate) fn commit_changes(
    repo_root: &Path,
    wt: &Checked,
    base: Oid,
    message: &str,
    identity: &Identity,
    component: &str,
    refs_lock: &Mutex<()>,
    rules: CommitRules,
) -> Result<(Option<Committed>, Vec<LeftOut>), WorktreeError> {
    let snap = snapshot(wt, base, rules)?;
    let (repo, path) = (&wt.repo, wt.path.as_path());
    let (head, tree) = (snap.head, snap.tree);
    let head_commit = repo
        .find_commit(head)
        .map_err(WorktreeError::git("find HEAD commit", path))?;
    if head == base && head_commit.tree_id() == tree {
        return Ok((None, snap.left_out));
    }
    let tip = if head_commit.tree_id() == tree {
        head
    } else {
        let sig = Signature::now(&identity.name, &identity.email)
            .map_err(WorktreeError::git("make signature", path))?;
        let tree = repo
            .find_tree(tree)
            .map_err(WorktreeError::git("find tree", path))?;
        repo.commit(None, &sig, &sig, message, &tree, &[&head_commit])
            .map_err(WorktreeError::git("commit", path))?
    };
    let branch = {
        let _guard = refs_lock.lock().unwrap_or_else(PoisonError::into_inner);
        create_branch(repo_root, component, tip)?
    };
    // On the main repository: it knows a shallow clone's grafts (`.git/shallow`), which
    // a linked worktree's repository does not read, so walking past `base` there asked
    // for the missing parents and failed.
    let main = open(repo_root)?;
    let mut walk = main
        .revwalk()
        .map_err(WorktreeError::git("log", repo_root))?;
    walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)
        .and_then(|()| walk.push(tip))
        .and_then(|()| walk.hide(base))
        .map_err(WorktreeError::git("log", repo_root))?;
    let commits = walk
        .collect::<Result<Vec<_>, _>>()
        .map_err(WorktreeError::git("log", repo_root))?;
    Ok((Some(Committed { branch, commits }), snap.left_out))
}

/// Creates `crewbox/<component>`, or with a UTC timestamp suffix (and a counter, if even
/// that is taken) when the name exists. Runs on the main repository: libgit2 1.9 does not
/// notice an existing shared branch when asked through a linked worktree, and would
/// silently move it. Caller holds the repository lock, so check-then-create is atomic
/// within the process; `force = false` still guards against other processes.
fn create_branch(repo_root: &Path, component: &str, tip: Oid) -> Result<String, WorktreeError> {
    let repo = open(repo_root)?;
    let tip = repo
        .find_commit(tip)
        .map_err(WorktreeError::git("find commit", repo_root))?;
    let plain = format!("crewbox/{component}");
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string();
    let candidates = std::iter::once(plain.clone())
        .chain(std::iter::once(format!("{plain}-{stamp}")))
        .chain((2..=100).map(|n| format!("{plain}-{stamp}-{n}")));
    for name in candidates {
        if repo.find_reference(&format!("refs/heads/{name}")).is_ok() {
            continue;
        }
        match repo.branch(&name, &tip, false) {
            Ok(_) => return Ok(name),
            Err(e) if e.code() == ErrorCode::Exists => continue,
            Err(e) => return Err(WorktreeError::git("branch", repo_root)(e)),
        }
    }
    Err(WorktreeError::git("branch", repo_root)(
        git2::Error::from_str("no free branch name after 100 tries"),
    ))
}

/// Forgets a worktree registration (`.git/worktrees/<name>`); missing is fine.
/// Caller holds the repository lock.
pub(crate) fn unregister(repo_root: &Path, name: &str) -> Result<(), WorktreeError> {
    let repo = open(repo_root)?;
    let wt = match repo.find_worktree(name) {
        Ok(wt) => wt,
        Err(e) if e.code() == ErrorCode::NotFound => return Ok(()),
        Err(e) => return Err(WorktreeError::git("worktree find", repo_root)(e)),
    };
    let mut opts = WorktreePruneOptions::new();
    opts.valid(true).locked(false).working_tree(false);
    wt.prune(Some(&mut opts))
        .map_err(WorktreeError::git("worktree prune", wt.path()))
}

/// Deletes a leftover temporary branch of an interrupted `worktree add`.
pub(crate) fn delete_branch_if_present(
    repo: &Repository,
    name: &str,
) -> Result<bool, WorktreeError> {
    match repo.find_branch(name, BranchType::Local) {
        Ok(mut b) => b
            .delete()
            .map(|()| true)
            .map_err(WorktreeError::git("branch --delete", name)),
        Err(e) if e.code() == ErrorCode::NotFound => Ok(false),
        Err(e) => Err(WorktreeError::git("branch --list", name)(e)),
    }
}

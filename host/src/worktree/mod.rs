//! Git worktree isolation for agents.
//!
//! Each isolated agent gets its own worktree at the repository's HEAD, in a directory the
//! caller owns (`<state>/worktrees/`, never inside the repository). When the agent is done,
//! [`WorktreeManager::finish`] commits whatever changed to `crewbox/<agent-id>` and returns
//! the branch as a [`BranchArtifact`]; the worktree goes back to a small pool, where the
//! next agent's [`WorktreeManager::acquire`] resets it to HEAD instead of checking out the
//! whole tree again.
//!
//! A worktree is opened only through the main repository and checked first
//! ([`integrity`]): a slot whose `.git` file, admin directory or config points git
//! elsewhere is never snapshotted, committed or reset, and is retired. What a commit
//! takes is bounded ([`CommitRules`]: file size, file count, total size, and `.crewbox/`
//! only with the user's grant); what it leaves out is named ([`LeftOut`]).
//!
//! Every slot has an owner marker (pid + state, under an advisory lock) next to its
//! directory, so [`WorktreeManager::prune`] can tell a killed process's leftovers from a
//! running one's. All libgit2 work runs on `spawn_blocking` threads; operations touching
//! shared repository state (worktree registration, refs) are serialised per repository,
//! checkouts and commits run in parallel.
//!
//! ```no_run
//! # async fn demo(repo: &std::path::Path, state: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
//! use crewbox::unstable::worktree::{FinishOutcome, WorktreeManager, WorktreeOptions};
//! let manager = WorktreeManager::open(repo, &state.join("worktrees"), WorktreeOptions::default()).await?;
//! manager.prune().await?;
//! let wt = manager.acquire("a-42").await?;
//! std::fs::write(wt.path().join("notes.md"), "hello")?;
//! if let FinishOutcome::Committed(artifact) = manager.finish(wt, "Add notes").await? {
//!     println!("{} has {} commit(s)", artifact.branch, artifact.commits.len());
//! }
//! # Ok(()) }
//! ```

pub mod branches;
mod checkpoint;
mod error;
mod git;
mod integration;
mod integrity;
mod limits;
mod maintenance;
mod marker;
pub mod sanitize;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use git2::Oid;
use serde::{Deserialize, Serialize};

pub use checkpoint::checkpoint_ref;
pub use error::WorktreeError;
pub use git::{ChangeKind, ChangedPath, checkout_changes};
pub use integration::{MergeOutcome, Merged};
pub use limits::{CommitLimits, CommitRules, LeftOut};
pub use maintenance::{PruneReason, PruneReport, WorktreeInfo, WorktreeState};
pub use sanitize::{sanitize_branch_component, sanitize_message};

use marker::{Marker, MarkerData, SlotState};

/// Name prefix of every slot (directory, registration and marker); nothing else is touched.
pub(crate) const SLOT_PREFIX: &str = "crewbox-wt-";

/// Author and committer of agent commits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// `user.name`.
    pub name: String,
    /// `user.email`.
    pub email: String,
}

impl Default for Identity {
    fn default() -> Self {
        Self {
            name: "crewbox".to_owned(),
            email: "crewbox@localhost".to_owned(),
        }
    }
}

/// Settings of a [`WorktreeManager`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorktreeOptions {
    /// Prepared worktrees kept for reuse (0 disables the pool).
    pub pool_size: usize,
    /// Identity of agent commits.
    pub identity: Identity,
    /// What an agent's commit may take.
    pub commit: CommitRules,
}

impl Default for WorktreeOptions {
    fn default() -> Self {
        Self {
            pool_size: 2,
            identity: Identity::default(),
            commit: CommitRules::default(),
        }
    }
}

/// One agent's isolated checkout; give it back with `finish` or `discard`.
#[derive(Debug)]
pub struct Worktree {
    path: PathBuf,
    base_commit: Oid,
    agent_id: String,
    slot: String,
}

impl Worktree {
    /// The worktree's root directory (the agent's working directory).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The commit the worktree was checked out at (hex id).
    pub fn base_commit(&self) -> String {
        self.base_commit.to_string()
    }

    /// The agent id as given to `acquire` (unsanitised).
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }
}

pub use crate::vocab::BranchArtifact;

/// What `finish` did with a worktree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FinishOutcome {
    /// Nothing changed; no branch was made.
    Unchanged,
    /// Changes were committed to a new branch.
    Committed(BranchArtifact),
}

/// A worktree directory this process owns, with its locked marker.
struct Slot {
    name: String,
    path: PathBuf,
    marker: Marker,
    /// The commit this process last reset and cleaned the slot to while no agent had it;
    /// `None` once an agent had it or when adopted from a dead process.
    clean_at: Option<Oid>,
}

/// Slots this manager owns, by role.
#[derive(Default)]
struct Slots {
    pool: Vec<Slot>,
    active: HashMap<String, Slot>,
}

/// Shared state behind the cheap-to-clone manager.
struct Inner {
    repo_root: PathBuf,
    worktrees_dir: PathBuf,
    opts: WorktreeOptions,
    repo_lock: Arc<Mutex<()>>,
    slots: Mutex<Slots>,
    /// The repository opened once for reading its HEAD (every agent without a base of
    /// its own reads it): opening it reads its config files each time. `head()` reads
    /// the HEAD file and the ref it names afresh on every call.
    head_repo: Mutex<Option<git2::Repository>>,
}

/// Hands out, commits, recycles and prunes agent worktrees of one repository.
#[derive(Clone)]
pub struct WorktreeManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WorktreeManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorktreeManager")
            .field("repo_root", &self.inner.repo_root)
            .field("worktrees_dir", &self.inner.worktrees_dir)
            .field("opts", &self.inner.opts)
            .finish_non_exhaustive()
    }
}

/// One lock per repository (by git common dir) for the whole process, so two managers on
/// the same repository still serialise ref and registration updates.
fn repo_lock_for(common_dir: &Path) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    Arc::clone(locks.entry(common_dir.to_owned()).or_default())
}

impl WorktreeManager {
    /// Opens the repository containing `repo_root` and prepares `worktrees_dir` (created if
    /// missing). Fails with `NotARepository`, `BareRepository` or `NoCommits` when there is
    /// nothing to isolate, and with `InsideRepository` for a directory inside the repo.
    /// Does not prune: call [`WorktreeManager::prune`] once at start.
    pub async fn open(
        repo_root: &Path,
        worktrees_dir: &Path,
        opts: WorktreeOptions,
    ) -> Result<Self, WorktreeError> {
        let repo_root = repo_root.to_owned();
        let worktrees_dir = worktrees_dir.to_owned();
        tokio::task::spawn_blocking(move || Self::open_blocking(&repo_root, &worktrees_dir, opts))
            .await?
    }

    fn open_blocking(
        repo_root: &Path,
        worktrees_dir: &Path,
        opts: WorktreeOptions,
    ) -> Result<Self, WorktreeError> {
        let repo = git2::Repository::open_ext(
            repo_root,
            git2::RepositoryOpenFlags::empty(),
            std::iter::empty::<&std::ffi::OsStr>(),
        )
        .map_err(|source| match source.code() {
            git2::ErrorCode::NotFound => WorktreeError::NotARepository {
                path: repo_root.to_owned(),
                source,
            },
            _ => WorktreeError::git("open", repo_root)(source),
        })?;
        let Some(workdir) = repo.workdir() else {
            return Err(WorktreeError::BareRepository {
                path: repo.path().to_owned(),
            });
        };
        let root = workdir
            .canonicalize()
            .map_err(WorktreeError::io("resolve repository root", workdir))?;
        git::head_commit(&repo, &root)?;
        let common_dir = repo
            .commondir()
            .canonicalize()
            .map_err(WorktreeError::io("resolve git directory", repo.commondir()))?;

        let inside = |dir: &Path| dir.starts_with(&root) || dir.starts_with(&common_dir);
        let absolute = std::path::absolute(worktrees_dir).map_err(WorktreeError::io(
            "resolve worktree directory",
            worktrees_dir,
        ))?;
        let inside_err = || WorktreeError::InsideRepository {
            worktrees_dir: worktrees_dir.to_owned(),
            repo_root: root.clone(),
        };
        if inside(&absolute) {
            return Err(inside_err());
        }
        std::fs::create_dir_all(&absolute)
            .map_err(WorktreeError::io("create worktree directory", &absolute))?;
        let dir = absolute
            .canonicalize()
            .map_err(WorktreeError::io("resolve worktree directory", &absolute))?;
        if inside(&dir) {
            return Err(inside_err());
        }
        Ok(Self {
            inner: Arc::new(Inner {
                repo_root: root,
                worktrees_dir: dir,
                opts,
                repo_lock: repo_lock_for(&common_dir),
                slots: Mutex::default(),
                head_repo: Mutex::default(),
            }),
        })
    }

    /// The repository's working-tree root (canonical).
    pub fn repo_root(&self) -> &Path {
        &self.inner.repo_root
    }

    /// The directory holding the worktrees and their markers (canonical).
    pub fn worktrees_dir(&self) -> &Path {
        &self.inner.worktrees_dir
    }

    /// Runs `f` on a blocking thread with the shared state.
    async fn blocking<T, F>(&self, f: F) -> Result<T, WorktreeError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, WorktreeError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&inner)).await?
    }

    /// A worktree at the current HEAD for `agent_id`: a pooled one reset and cleaned, or a
    /// fresh checkout when the pool is empty. Fails with `NoCommits` if HEAD is unborn.
    pub async fn acquire(&self, agent_id: &str) -> Result<Worktree, WorktreeError> {
        let agent_id = agent_id.to_owned();
        self.blocking(move |inner| inner.acquire(agent_id)).await
    }

    /// Like [`WorktreeManager::acquire`], but at `commit` (a hex id) instead of HEAD: a
    /// follow-up agent continues from its predecessor's branch.
    pub async fn acquire_at(
        &self,
        agent_id: &str,
        commit: &str,
    ) -> Result<Worktree, WorktreeError> {
        let agent_id = agent_id.to_owned();
        let oid = Oid::from_str(commit).map_err(WorktreeError::git(
            "parse base commit",
            &self.inner.repo_root,
        ))?;
        self.blocking(move |inner| inner.acquire_from(agent_id, Some(oid)))
            .await
    }

    /// Fills the pool up to `pool_size` with prepared worktrees at HEAD, ahead of demand;
    /// returns how many were added.
    pub async fn warm(&self) -> Result<usize, WorktreeError> {
        self.blocking(Inner::warm).await
    }

    /// Paths that differ between the agent's base commit and its working tree (untracked,
    /// non-ignored files count as added; the agent's own commits are included), as its
    /// commit would take them.
    pub async fn changed_paths(&self, wt: &Worktree) -> Result<Vec<ChangedPath>, WorktreeError> {
        self.changes(wt).await.map(|(paths, _)| paths)
    }

    /// [`WorktreeManager::changed_paths`], and what the commit would leave out (over the
    /// limits, or in `.crewbox/` without the user's grant). A worktree that fails the
    /// integrity check is retired ([`WorktreeError::Tampered`]).
    pub async fn changes(
        &self,
        wt: &Worktree,
    ) -> Result<(Vec<ChangedPath>, Vec<LeftOut>), WorktreeError> {
        let wt = self.inner.handle(wt)?;
        self.blocking(move |inner| {
            let checked = inner.checked_active(&wt)?;
            git::changed_paths(&checked, wt.base_commit, inner.opts.commit)
        })
        .await
    }

    /// The unified diff of the working tree against the base commit (untracked files
    /// included, as the commit would take them), cut to at most `max_bytes` with a
    /// `[diff truncated]` line.
    pub async fn diff(&self, wt: &Worktree, max_bytes: usize) -> Result<String, WorktreeError> {
        let wt = self.inner.handle(wt)?;
        self.blocking(move |inner| {
            let checked = inner.checked_active(&wt)?;
            git::diff(&checked, wt.base_commit, max_bytes, inner.opts.commit)
        })
        .await
    }

    /// Commits the agent's changes (if any) to a new `crewbox/<agent-id>` branch with the
    /// sanitised `message`, then recycles or removes the worktree. On error the worktree
    /// stays on disk, untouched, until the process exits — except one that fails the
    /// integrity check, which is retired at once.
    pub async fn finish(
        &self,
        wt: Worktree,
        message: &str,
    ) -> Result<FinishOutcome, WorktreeError> {
        let message = message.to_owned();
        self.blocking(move |inner| inner.finish(wt, &message)).await
    }

    /// Throws the agent's changes away and recycles or removes the worktree.
    pub async fn discard(&self, wt: Worktree) -> Result<(), WorktreeError> {
        self.blocking(move |inner| {
            let slot = inner.take_active(&wt)?;
            inner.release(slot);
            Ok(())
        })
        .await
    }

    /// The commit HEAD of the repository points to now (hex id).
    pub async fn head(&self) -> Result<String, WorktreeError> {
        self.blocking(|inner| inner.head().map(|o| o.to_string()))
            .await
    }

    /// The tip of local branch `branch` (hex id), if it exists.
    pub async fn branch_tip(&self, branch: &str) -> Result<Option<String>, WorktreeError> {
        let branch = branch.to_owned();
        self.blocking(move |inner| integration::tip(&inner.repo_root, &branch))
            .await
    }

    /// Points `branch` back at the newest commit of its first-parent history that is
    /// `base` or in `known` (deleting it at `base`): work merged after the last merge a
    /// journal knows of is dropped. Returns the branch's head afterwards (`None`:
    /// absent); a history holding none of them is left as it is.
    pub async fn rewind_branch(
        &self,
        branch: &str,
        base: &str,
        known: Vec<String>,
    ) -> Result<Option<String>, WorktreeError> {
        let (branch, base) = (branch.to_owned(), base.to_owned());
        self.blocking(move |inner| {
            let _guard = inner.lock_repo();
            integration::rewind(&inner.repo_root, &branch, &base, &known)
        })
        .await
    }

    /// Merges commit `theirs` into the integration head `head` (in the object
    /// database, no checkout) and points `branch` at the result when the head moves.
    /// A conflict leaves the head and every branch as they were and names the files.
    pub async fn merge_into(
        &self,
        branch: &str,
        head: &str,
        theirs: &str,
        message: &str,
    ) -> Result<Merged, WorktreeError> {
        let (branch, head, theirs) = (branch.to_owned(), head.to_owned(), theirs.to_owned());
        let message = sanitize_message(message);
        self.blocking(move |inner| {
            let _guard = inner.lock_repo();
            integration::merge(
                &inner.repo_root,
                &branch,
                &head,
                &theirs,
                &message,
                &inner.opts.identity,
            )
        })
        .await
    }

    /// Commits from `base` (exclusive) to `head`, oldest first.
    pub async fn commits_between(
        &self,
        base: &str,
        head: &str,
    ) -> Result<Vec<String>, WorktreeError> {
        let (base, head) = (base.to_owned(), head.to_owned());
        self.blocking(move |inner| integration::commits(&inner.repo_root, &base, &head))
            .await
    }

    /// The unified diff from commit `base` to commit `head`, at most `max_bytes`.
    pub async fn diff_commits(
        &self,
        base: &str,
        head: &str,
        max_bytes: usize,
    ) -> Result<String, WorktreeError> {
        let (base, head) = (base.to_owned(), head.to_owned());
        self.blocking(move |inner| {
            integration::diff_commits(&inner.repo_root, &base, &head, max_bytes)
        })
        .await
    }

    /// Every crewbox worktree of this repository in the worktree directory, with owner
    /// and state, for `crewbox worktree list`.
    pub async fn list(&self) -> Result<Vec<WorktreeInfo>, WorktreeError> {
        self.blocking(Inner::list).await
    }

    /// Cleans up after killed processes: removes worktrees whose owner is dead (adopting
    /// clean pooled ones into this manager's pool while it has room), directories without
    /// a marker, registrations whose directory is gone and leftover temporary branches.
    /// Worktrees of live processes are never touched.
    pub async fn prune(&self) -> Result<PruneReport, WorktreeError> {
        self.blocking(Inner::prune).await
    }
}

impl Inner {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_repo(&self) -> MutexGuard<'_, ()> {
        self.repo_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn head(&self) -> Result<Oid, WorktreeError> {
        let mut repo = self
            .head_repo
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let repo = match &mut *repo {
            Some(r) => r,
            none => none.insert(git::open(&self.repo_root)?),
        };
        git::head_commit(repo, &self.repo_root)
    }

    /// A slot's worktree, opened through the main repository and checked.
    fn checked(&self, slot: &str, path: &Path) -> Result<integrity::Checked, WorktreeError> {
        integrity::open_checked(&self.repo_root, slot, path)
    }

    /// The active worktree `wt`, checked; one that fails the check is taken back and
    /// retired, so no later step (commit, reset, the pool) ever works on it.
    fn checked_active(&self, wt: &Worktree) -> Result<integrity::Checked, WorktreeError> {
        match self.checked(&wt.slot, &wt.path) {
            Err(e @ WorktreeError::Tampered { .. }) => {
                tracing::warn!(path = %wt.path.display(), error = %e, "retiring a tampered worktree");
                if let Ok(slot) = self.take_active(wt) {
                    self.remove_slot(slot);
                }
                Err(e)
            }
            other => other,
        }
    }

    /// A copy of the handle of an active worktree, for a blocking task.
    fn handle(&self, wt: &Worktree) -> Result<Worktree, WorktreeError> {
        let (path, base_commit) = self.check_active(wt)?;
        Ok(Worktree {
            path,
            base_commit,
            agent_id: wt.agent_id.clone(),
            slot: wt.slot.clone(),
        })
    }

    fn acquire(&self, agent_id: String) -> Result<Worktree, WorktreeError> {
        self.acquire_from(agent_id, None)
    }

    fn acquire_from(&self, agent_id: String, base: Option<Oid>) -> Result<Worktree, WorktreeError> {
        let head = match base {
            Some(oid) => oid,
            None => self.head()?,
        };
        let slot = loop {
            let pooled = self.slots().pool.pop();
            let Some(mut slot) = pooled else {
                break self.create_slot(head, Some(&agent_id))?;
            };
            match self.reuse(&mut slot, head, &agent_id) {
                Ok(()) => break slot,
                Err(e) => {
                    tracing::warn!(path = %slot.path.display(), error = %e, "pooled worktree unusable; removing it");
                    self.remove_slot(slot);
                }
            }
        };
        let wt = Worktree {
            path: slot.path.clone(),
            base_commit: head,
            agent_id,
            slot: slot.name.clone(),
        };
        self.slots().active.insert(slot.name.clone(), slot);
        Ok(wt)
    }

    /// Hands a pooled slot to an agent: reset to `head`, cleaned, marked active.
    fn reuse(&self, slot: &mut Slot, head: Oid, agent_id: &str) -> Result<(), WorktreeError> {
        let data = MarkerData::ours(SlotState::Active, Some(agent_id), Some(head.to_string()));
        slot.marker
            .write(&data)
            .map_err(WorktreeError::io("write owner marker", &slot.path))?;
        // Released slots were cleaned on the way into the pool; only a moved HEAD (or an
        // adopted slot) needs another pass over the tree.
        if slot.clean_at.take() != Some(head) {
            git::reset_clean(&self.checked(&slot.name, &slot.path)?, head)?;
        }
        Ok(())
    }

    /// Checks out a brand-new slot at `head`, active for `agent_id` or pooled if `None`.
    fn create_slot(&self, head: Oid, agent_id: Option<&str>) -> Result<Slot, WorktreeError> {
        let name = format!("{SLOT_PREFIX}{}", uuid::Uuid::now_v7().simple());
        let path = self.worktrees_dir.join(&name);
        let creating = MarkerData::ours(SlotState::Creating, agent_id, Some(head.to_string()));
        let marker = Marker::create(&self.worktrees_dir, &name, &creating)
            .map_err(WorktreeError::io("create owner marker", &path))?;
        let mut slot = Slot {
            name,
            path,
            marker,
            clean_at: agent_id.is_none().then_some(head),
        };
        let added = {
            let _guard = self.lock_repo();
            git::add_worktree(&self.repo_root, &slot.name, &slot.path, head)
        };
        let state = if agent_id.is_some() {
            SlotState::Active
        } else {
            SlotState::Pooled
        };
        let marked = added.and_then(|()| {
            slot.marker
                .write(&MarkerData::ours(state, agent_id, Some(head.to_string())))
                .map_err(WorktreeError::io("write owner marker", &slot.path))
        });
        match marked {
            Ok(()) => Ok(slot),
            Err(e) => {
                self.remove_slot(slot);
                Err(e)
            }
        }
    }

    fn warm(&self) -> Result<usize, WorktreeError> {
        let head = self.head()?;
        let mut added = 0;
        while self.slots().pool.len() < self.opts.pool_size {
            let slot = self.create_slot(head, None)?;
            self.slots().pool.push(slot);
            added += 1;
        }
        Ok(added)
    }

    /// The path and base of a worktree this manager handed out and has not taken back.
    fn check_active(&self, wt: &Worktree) -> Result<(PathBuf, Oid), WorktreeError> {
        if self.slots().active.contains_key(&wt.slot) {
            Ok((wt.path.clone(), wt.base_commit))
        } else {
            Err(WorktreeError::UnknownWorktree {
                path: wt.path.clone(),
            })
        }
    }

    fn take_active(&self, wt: &Worktree) -> Result<Slot, WorktreeError> {
        self.slots()
            .active
            .remove(&wt.slot)
            .ok_or_else(|| WorktreeError::UnknownWorktree {
                path: wt.path.clone(),
            })
    }

    fn finish(&self, wt: Worktree, message: &str) -> Result<FinishOutcome, WorktreeError> {
        self.check_active(&wt)?;
        let component = sanitize_branch_component(&wt.agent_id);
        let mut message = sanitize_message(message);
        if message.is_empty() {
            message = format!("crewbox: changes by agent {component}");
        }
        let checked = self.checked_active(&wt)?;
        let (committed, _left_out) = git::commit_changes(
            &self.repo_root,
            &checked,
            wt.base_commit,
            &message,
            &self.opts.identity,
            &component,
            &self.repo_lock,
            self.opts.commit,
        )?;
        drop(checked);
        let slot = self.take_active(&wt)?;
        self.release(slot);
        Ok(match committed {
            None => FinishOutcome::Unchanged,
            Some(c) => FinishOutcome::Committed(BranchArtifact {
                branch: c.branch,
                base: wt.base_commit.to_string(),
                commits: c.commits.iter().map(Oid::to_string).collect(),
            }),
        })
    }

    /// Returns a slot to the pool (reset to HEAD and cleaned, so no agent's files linger)
    /// or removes it when the pool is full. Never fails: whatever cannot be cleaned now
    /// is logged and left to `prune`.
    fn release(&self, mut slot: Slot) {
        if self.slots().pool.len() < self.opts.pool_size {
            let recycled = self.head().and_then(|head| {
                git::reset_clean(&self.checked(&slot.name, &slot.path)?, head)?;
                slot.clean_at = Some(head);
                slot.marker
                    .write(&MarkerData::ours(
                        SlotState::Pooled,
                        None,
                        Some(head.to_string()),
                    ))
                    .map_err(WorktreeError::io("write owner marker", &slot.path))
            });
            match recycled {
                Ok(()) => {
                    let mut slots = self.slots();
                    if slots.pool.len() < self.opts.pool_size {
                        slots.pool.push(slot);
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(path = %slot.path.display(), error = %e, "could not recycle worktree; removing it");
                }
            }
        }
        self.remove_slot(slot);
    }

    /// Deletes a slot: directory, registration, then marker (the marker goes last so a
    /// crash part-way leaves something for `prune` to find).
    fn remove_slot(&self, mut slot: Slot) {
        let _ = slot
            .marker
            .write(&MarkerData::ours(SlotState::Removing, None, None));
        if let Err(e) = self.remove_files(&slot.name, &slot.path) {
            tracing::warn!(path = %slot.path.display(), error = %e, "could not remove worktree; prune will retry");
            return;
        }
        if let Err(e) = slot.marker.remove() {
            tracing::warn!(error = %e, "could not remove worktree marker");
        }
    }

    /// Removes a slot's directory and registration (both may already be gone).
    fn remove_files(&self, name: &str, path: &Path) -> Result<(), WorktreeError> {
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(WorktreeError::io("remove worktree directory", path)(e));
            }
            _ => {}
        }
        let _guard = self.lock_repo();
        git::unregister(&self.repo_root, name)
    }
}

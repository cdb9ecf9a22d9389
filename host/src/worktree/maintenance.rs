//! Listing and pruning worktree slots, including other processes' and dead processes'.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::marker::{self, MARKER_SUFFIX, Marker, MarkerData, SlotState};
use super::{Inner, SLOT_PREFIX, Slot, WorktreeError, git};

/// A worktree's state as seen from outside its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeState {
    /// Being checked out.
    Creating,
    /// In use by an agent.
    Active,
    /// Clean and waiting for the next agent.
    Pooled,
    /// Being deleted.
    Removing,
    /// Its owner is gone (or it has no marker); `prune` will remove it.
    Orphaned,
}

impl From<SlotState> for WorktreeState {
    fn from(s: SlotState) -> Self {
        match s {
            SlotState::Creating => Self::Creating,
            SlotState::Active => Self::Active,
            SlotState::Pooled => Self::Pooled,
            SlotState::Removing => Self::Removing,
        }
    }
}

/// One row of `crewbox worktree list`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorktreeInfo {
    /// Slot name (directory and git registration name).
    pub name: String,
    /// Worktree directory.
    pub path: PathBuf,
    /// The agent using it; `None` when pooled or unknown.
    pub agent_id: Option<String>,
    /// Commit checked out (hex), if the directory is a readable worktree.
    pub head: Option<String>,
    /// Branch checked out, if HEAD is not detached (agents may switch branches).
    pub branch: Option<String>,
    /// Pid of the owning process, from its marker.
    pub owner_pid: Option<u32>,
    /// Lifecycle state.
    pub state: WorktreeState,
    /// Whether git still has the worktree registered.
    pub registered: bool,
}

/// Why `prune` removed something.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PruneReason {
    /// Its owner process is dead.
    OwnerDead {
        /// The owner's pid, if the marker was readable.
        pid: Option<u32>,
    },
    /// A directory with no owner marker (a crash before the marker, or after it went).
    NoMarker,
    /// A git registration whose directory is gone.
    DirectoryMissing,
}

/// One worktree removed by `prune`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PrunedWorktree {
    /// Slot name.
    pub name: String,
    /// Its directory (may already have been gone).
    pub path: PathBuf,
    /// Why it was removed.
    pub reason: PruneReason,
}

/// What `prune` did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Worktrees removed.
    pub removed: Vec<PrunedWorktree>,
    /// Clean pooled worktrees of dead processes taken into this manager's pool.
    pub adopted: Vec<String>,
    /// Slots left alone because their owner is alive.
    pub kept_live: Vec<String>,
    /// Temporary branches of interrupted `worktree add`s deleted.
    pub branches_deleted: Vec<String>,
}

/// The slot names found in the worktree directory: directories and markers (including
/// half-written hidden ones, returned as their slot name).
fn scan(dir: &Path) -> Result<(BTreeSet<String>, BTreeSet<String>), WorktreeError> {
    let mut dirs = BTreeSet::new();
    let mut markers = BTreeSet::new();
    let entries =
        std::fs::read_dir(dir).map_err(WorktreeError::io("read worktree directory", dir))?;
    for entry in entries {
        let entry = entry.map_err(WorktreeError::io("read worktree directory", dir))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if let Some(slot) = name.strip_suffix(MARKER_SUFFIX) {
            if slot.starts_with(SLOT_PREFIX) {
                markers.insert(slot.to_owned());
            }
        } else if name.starts_with(SLOT_PREFIX) && entry.path().is_dir() {
            dirs.insert(name);
        }
    }
    Ok((dirs, markers))
}

/// Hidden temporary markers (`.<slot>.owner.tmp`) left by a crash inside `Marker::create`.
fn stale_temp_markers(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.starts_with(&format!(".{SLOT_PREFIX}"))
                    && n.ends_with(&format!("{MARKER_SUFFIX}.tmp"))
            })
        })
        .map(|e| e.path())
        .collect()
}

/// HEAD commit and branch of a worktree directory, when it passes the integrity check
/// (a tampered one is shown with neither).
fn head_of(repo_root: &Path, name: &str, path: &Path) -> (Option<String>, Option<String>) {
    let Ok(super::integrity::Checked { repo, .. }) =
        super::integrity::open_checked(repo_root, name, path)
    else {
        return (None, None);
    };
    let Ok(head) = repo.head() else {
        return (None, None);
    };
    let commit = head.peel_to_commit().ok().map(|c| c.id().to_string());
    let branch = head
        .is_branch()
        .then(|| head.shorthand().unwrap_or_default().to_owned());
    (commit, branch)
}

/// The owner of a marker that nobody holds locked: `true` if its pid still runs (a pid
/// reused by an unrelated process keeps the slot until that process ends; being careful
/// costs disk, being careless costs work).
fn pid_says_alive(data: Option<&MarkerData>) -> bool {
    data.is_some_and(|d| d.pid != std::process::id() && marker::pid_alive(d.pid))
}

impl Inner {
    /// Names of slots this manager owns, with the agent when active.
    fn own_slots(&self) -> Vec<(String, Option<String>, SlotState)> {
        let slots = self.slots();
        let pooled = slots
            .pool
            .iter()
            .map(|s| (s.name.clone(), None, SlotState::Pooled));
        let active = slots.active.values().map(|s| {
            let agent = marker::peek(&marker::marker_path(&self.worktrees_dir, &s.name))
                .and_then(|d| d.agent_id);
            (s.name.clone(), agent, SlotState::Active)
        });
        pooled.chain(active).collect()
    }

    /// Names registered in git under our prefix whose path is in our directory.
    fn registered_slots(&self, repo: &git2::Repository) -> Result<BTreeSet<String>, WorktreeError> {
        let names = repo
            .worktrees()
            .map_err(WorktreeError::git("worktree list", &self.repo_root))?;
        Ok(names
            .iter()
            .flatten()
            .flatten()
            .filter(|n| n.starts_with(SLOT_PREFIX))
            .filter(|n| {
                repo.find_worktree(n)
                    .is_ok_and(|wt| wt.path().parent() == Some(self.worktrees_dir.as_path()))
            })
            .map(str::to_owned)
            .collect())
    }

    pub(super) fn list(&self) -> Result<Vec<WorktreeInfo>, WorktreeError> {
        let repo = git::open(&self.repo_root)?;
        let registered = self.registered_slots(&repo)?;
        let (dirs, markers) = scan(&self.worktrees_dir)?;
        let own = self.own_slots();
        let names: BTreeSet<&String> = dirs.iter().chain(&markers).chain(&registered).collect();
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let path = self.worktrees_dir.join(name);
            let (agent_id, owner_pid, state) =
                if let Some((_, agent, state)) = own.iter().find(|(n, _, _)| n == name) {
                    (
                        agent.clone(),
                        Some(std::process::id()),
                        WorktreeState::from(*state),
                    )
                } else if markers.contains(name) {
                    let mpath = marker::marker_path(&self.worktrees_dir, name);
                    let data = marker::peek(&mpath);
                    let live = match Marker::try_claim(&mpath) {
                        Ok(None) => true,
                        Ok(Some(_released_on_drop)) => pid_says_alive(data.as_ref()),
                        Err(_) => false,
                    };
                    let state = match (&data, live) {
                        (Some(d), true) => d.state.into(),
                        (None, true) => WorktreeState::Creating,
                        (_, false) => WorktreeState::Orphaned,
                    };
                    let agent = data.as_ref().and_then(|d| d.agent_id.clone());
                    (agent, data.map(|d| d.pid), state)
                } else {
                    (None, None, WorktreeState::Orphaned)
                };
            let (head, branch) = head_of(&self.repo_root, name, &path);
            out.push(WorktreeInfo {
                name: name.clone(),
                path,
                agent_id,
                head,
                branch,
                owner_pid,
                state,
                registered: registered.contains(name),
            });
        }
        Ok(out)
    }

    pub(super) fn prune(&self) -> Result<PruneReport, WorktreeError> {
        let mut report = PruneReport::default();
        let own: BTreeSet<String> = self.own_slots().into_iter().map(|(n, _, _)| n).collect();
        let (dirs, markers) = scan(&self.worktrees_dir)?;
        // Slots whose owner is alive (ours or another process's), kept whatever else says.
        let mut live: BTreeSet<String> = own.clone();

        for name in &markers {
            if own.contains(name) {
                continue;
            }
            let mpath = marker::marker_path(&self.worktrees_dir, name);
            let path = self.worktrees_dir.join(name);
            let mut claimed = match Marker::try_claim(&mpath) {
                Ok(Some(m)) => m,
                Ok(None) => {
                    live.insert(name.clone());
                    report.kept_live.push(name.clone());
                    continue;
                }
                // Removed by its owner between our scan and now.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(WorktreeError::io("lock owner marker", mpath)(e)),
            };
            let data = claimed.read();
            if pid_says_alive(data.as_ref()) {
                live.insert(name.clone());
                report.kept_live.push(name.clone());
                continue;
            }
            if self.try_adopt(name, &path, data.as_ref(), &mut claimed) {
                live.insert(name.clone());
                report.adopted.push(name.clone());
                self.slots().pool.push(Slot {
                    name: name.clone(),
                    path,
                    marker: claimed,
                    clean_at: None,
                });
                continue;
            }
            self.remove_files(name, &path)?;
            claimed
                .remove()
                .map_err(WorktreeError::io("remove owner marker", &mpath))?;
            report.removed.push(PrunedWorktree {
                name: name.clone(),
                path,
                reason: PruneReason::OwnerDead {
                    pid: data.map(|d| d.pid),
                },
            });
        }

        // A directory is created only after its marker and deleted before it, so one
        // without a marker has no owner.
        for name in dirs.difference(&markers) {
            let path = self.worktrees_dir.join(name);
            self.remove_files(name, &path)?;
            report.removed.push(PrunedWorktree {
                name: name.clone(),
                path,
                reason: PruneReason::NoMarker,
            });
        }

        for tmp in stale_temp_markers(&self.worktrees_dir) {
            if let Ok(Some(m)) = Marker::try_claim(&tmp) {
                let _ = std::fs::remove_file(&tmp);
                drop(m);
            }
        }

        let _guard = self.lock_repo();
        let repo = git::open(&self.repo_root)?;
        let names = repo
            .worktrees()
            .map_err(WorktreeError::git("worktree list", &self.repo_root))?;
        for name in names
            .iter()
            .flatten()
            .flatten()
            .filter(|n| n.starts_with(SLOT_PREFIX))
        {
            if live.contains(name) || report.removed.iter().any(|r| r.name == name) {
                continue;
            }
            let Ok(wt) = repo.find_worktree(name) else {
                continue;
            };
            if wt.path().exists() {
                continue;
            }
            let path = wt.path().to_owned();
            git::unregister(&self.repo_root, name)?;
            report.removed.push(PrunedWorktree {
                name: name.to_owned(),
                path,
                reason: PruneReason::DirectoryMissing,
            });
        }
        let branches = repo
            .branches(Some(git2::BranchType::Local))
            .map_err(WorktreeError::git("branch --list", &self.repo_root))?;
        let stale: Vec<String> = branches
            .flatten()
            .filter_map(|(b, _)| b.name().ok().flatten().map(str::to_owned))
            .filter(|n| n.starts_with(SLOT_PREFIX) && !live.contains(n))
            .collect();
        for name in stale {
            // Still checked out by a registered worktree: an `add` in progress elsewhere.
            if repo.find_worktree(&name).is_ok() {
                continue;
            }
            match git::delete_branch_if_present(&repo, &name) {
                Ok(true) => report.branches_deleted.push(name),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(branch = %name, error = %e, "could not delete temporary branch")
                }
            }
        }
        Ok(report)
    }

    /// Takes a dead process's clean pooled slot into our pool if there is room.
    fn try_adopt(
        &self,
        name: &str,
        path: &Path,
        data: Option<&MarkerData>,
        claimed: &mut Marker,
    ) -> bool {
        let Some(data) = data else { return false };
        if data.state != SlotState::Pooled || !path.is_dir() {
            return false;
        }
        if self.slots().pool.len() >= self.opts.pool_size {
            return false;
        }
        let registered = git::open(&self.repo_root).is_ok_and(|repo| {
            repo.find_worktree(name)
                .is_ok_and(|wt| wt.validate().is_ok())
        });
        registered
            && claimed
                .write(&MarkerData::ours(
                    SlotState::Pooled,
                    None,
                    data.base.clone(),
                ))
                .is_ok()
    }
}

//! Checkouts that a worker's readers share: one worktree per base commit, checked out
//! once and read by every read-only agent at that base, at the same time — as a local
//! run's readers read the repository in place. A private checkout per reader cost two
//! git steps (a checkout, then a reset and clean), each behind the repository's one
//! lock, so a worker's slots waited on each other and a trivial agent took tens of
//! milliseconds.
//!
//! Only an agent that cannot change files gets a shared view: no `write`, no `exec`
//! (its children get at most what it has; a worker reaches no MCP server). Anything
//! else works in a checkout of its own. Views no agent uses are kept warm for the next
//! readers of their base, at most [`WARM`] of them; older ones go back to the worktree
//! pool.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::vocab::{CapSet, Capability};
use crate::worktree::{Worktree, WorktreeError, WorktreeManager};

/// Views kept while no agent reads them.
const WARM: usize = 4;

/// Whether an agent holding `caps` may read a view other agents read too: it can
/// change no file.
pub(super) fn shares_a_view(caps: &CapSet) -> bool {
    !caps.contains(Capability::Write) && !caps.contains(Capability::Exec)
}

/// One shared checkout, given back to its manager when the view is evicted.
pub(super) struct View {
    manager: WorktreeManager,
    worktree: Worktree,
}

impl View {
    /// Where its readers read.
    pub(super) fn path(&self) -> &Path {
        self.worktree.path()
    }
}

type Key = (PathBuf, String);

/// The views of one worker, by repository (a clone) and base commit.
#[derive(Default)]
pub(super) struct Readers {
    views: Mutex<HashMap<Key, Arc<OnceCell<Arc<View>>>>>,
    /// Keys oldest first, for eviction.
    order: Mutex<VecDeque<Key>>,
}

impl Readers {
    /// The view of `base` in the repository of `manager`, checked out on first use
    /// (readers that come meanwhile wait for that one checkout). Hold the view while
    /// reading it.
    pub(super) async fn view(
        &self,
        manager: &WorktreeManager,
        base: &str,
    ) -> Result<Arc<View>, WorktreeError> {
        let key = (manager.repo_root().to_path_buf(), base.to_owned());
        let cell = {
            let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
            let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
            order.retain(|k| *k != key);
            order.push_back(key.clone());
            views.entry(key.clone()).or_default().clone()
        };
        let view = cell
            .get_or_try_init(|| async {
                let name = format!("readers-{}", &base[..base.len().min(12)]);
                let worktree = manager.acquire_at(&name, base).await?;
                Ok::<_, WorktreeError>(Arc::new(View {
                    manager: manager.clone(),
                    worktree,
                }))
            })
            .await?
            .clone();
        self.evict().await;
        Ok(view)
    }

    /// Gives back the oldest views no agent reads while more than [`WARM`] are kept.
    async fn evict(&self) {
        let idle = {
            let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
            let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
            let mut idle = Vec::new();
            let mut i = 0;
            while order.len() > WARM && i < order.len() {
                let unused = views
                    .get(&order[i])
                    .and_then(|c| c.get())
                    .is_some_and(|v| Arc::strong_count(v) == 1);
                if unused && let Some(key) = order.remove(i) {
                    if let Some(cell) = views.remove(&key) {
                        idle.push(cell);
                    }
                    continue;
                }
                i += 1;
            }
            idle
        };
        for cell in idle {
            Self::give_back(cell).await;
        }
    }

    /// Gives every view back (the worker stops); views still read are left to the next
    /// start's clean-up.
    pub(super) async fn close(&self) {
        let all: Vec<_> = {
            let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
            self.order.lock().unwrap_or_else(|p| p.into_inner()).clear();
            views.drain().map(|(_, cell)| cell).collect()
        };
        for cell in all {
            Self::give_back(cell).await;
        }
    }

    async fn give_back(cell: Arc<OnceCell<Arc<View>>>) {
        let Some(view) = Arc::into_inner(cell).and_then(OnceCell::into_inner) else {
            return;
        };
        let Some(View { manager, worktree }) = Arc::into_inner(view) else {
            return;
        };
        if let Err(e) = manager.discard(worktree).await {
            tracing::warn!(error = %e, "a readers' checkout could not be given back");
        }
    }
}

//! What the read-side commands ask a repository: a run as the user names it, its agent
//! tree, the dispatch history, crewbox's branches (and removing one). Typed answers, typed errors; the
//! binary only renders them.

use crate::ids::RunId;
use crate::observe::history::{DispatchHistogram, histogram};
use crate::observe::tree::AgentTree;
use std::path::PathBuf;

use crate::engine::RunReport;
use crate::store::{AgentCounts, AgentWorker, Lookup, RunRecord, Store, StoreError};
use crate::vocab::RunStatus;
use crate::worktree::WorktreeError;
use crate::worktree::branches::{self, BranchInfo};

use super::Repository;

/// What a lookup was for, as its messages name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    /// A run.
    Run,
    /// An agent.
    Agent,
}

impl RecordKind {
    /// The word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Agent => "agent",
        }
    }
}

/// Why a read found nothing to show, or failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Nothing has run in this state directory: there is no store.
    #[error("no runs recorded yet")]
    NoRuns,
    /// A run was named, but nothing has run here yet.
    #[error("no run matches `{0}` (nothing has run here yet)")]
    NothingRan(String),
    /// No record has this id, prefix or tail.
    #[error("no {} matches `{text}`", .kind.as_str())]
    NoMatch {
        /// What was looked up.
        kind: RecordKind,
        /// The id as typed.
        text: String,
    },
    /// Several records match.
    #[error(
        "`{text}` matches several {}s; give more of the id:\n  {}",
        .kind.as_str(),
        .ids.join("\n  ")
    )]
    Ambiguous {
        /// What was looked up.
        kind: RecordKind,
        /// The id as typed.
        text: String,
        /// The full ids of the candidates (at most ten), oldest first.
        ids: Vec<String>,
    },
    /// The store cannot be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The repository's branches cannot be read or removed.
    #[error(transparent)]
    Branches(#[from] WorktreeError),
    /// A blocking read was cancelled or panicked.
    #[error("reading the repository was interrupted: {0}")]
    Interrupted(#[from] tokio::task::JoinError),
}

impl ReadError {
    /// True when the user named nothing there is (exit code 2), not a failure.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::NoRuns | Self::NothingRan(_) | Self::NoMatch { .. } | Self::Ambiguous { .. }
        )
    }

    pub(super) fn settle<T>(kind: RecordKind, text: &str, found: Lookup<T>) -> Result<T, Self> {
        match found {
            Lookup::One(t) => Ok(t),
            Lookup::None => Err(Self::NoMatch {
                kind,
                text: text.to_owned(),
            }),
            Lookup::Ambiguous(ids) => Err(Self::Ambiguous {
                kind,
                text: text.to_owned(),
                ids,
            }),
        }
    }
}

/// Recent runs, with the agent counts of the store they were read from
/// ([`Repository::runs`]).
#[derive(Clone, Debug, Default)]
pub struct RunList {
    /// Newest first.
    pub runs: Vec<RunRecord>,
    /// Agents queued and running, in every process.
    pub agents: AgentCounts,
    /// The database file; None when nothing has run here.
    pub store: Option<PathBuf>,
}

/// A run's agents arranged by parent ([`Repository::tree`]).
#[derive(Debug)]
pub struct RunTree {
    /// The run.
    pub run: RunRecord,
    /// Its agents.
    pub tree: AgentTree,
}

impl Repository {
    /// The run `text` names (a full id, a unique prefix or tail), or the newest run
    /// when `text` is None.
    pub async fn run_record(&self, text: Option<&str>) -> Result<RunRecord, ReadError> {
        Ok(self.run_in(text).await?.1)
    }

    /// The store with the run `text` names (the newest when None).
    async fn run_in(&self, text: Option<&str>) -> Result<(Store, RunRecord), ReadError> {
        let Some(store) = self.store_if_exists()? else {
            return Err(match text {
                Some(t) => ReadError::NothingRan(t.to_owned()),
                None => ReadError::NoRuns,
            });
        };
        let run = match text {
            Some(t) => ReadError::settle(RecordKind::Run, t, store.lookup_run(t).await?)?,
            None => store
                .recent_runs(1)
                .await?
                .into_iter()
                .next()
                .ok_or(ReadError::NoRuns)?,
        };
        Ok((store, run))
    }

    /// The report of the run `text` names (a full id, a unique prefix or tail).
    pub async fn run_report(&self, text: &str) -> Result<RunReport, ReadError> {
        let (store, run) = self.run_in(Some(text)).await?;
        Ok(RunReport::load(&store, run).await?)
    }

    /// The newest runs (at most `limit`, all when None), only those stored with
    /// `status` when given, and the agent counts. Empty when nothing has run here.
    pub async fn runs(
        &self,
        status: Option<RunStatus>,
        limit: Option<u32>,
    ) -> Result<RunList, ReadError> {
        let Some(store) = self.store_if_exists()? else {
            return Ok(RunList::default());
        };
        Ok(RunList {
            runs: store
                .recent_runs_in(status, limit.unwrap_or(u32::MAX))
                .await?,
            agents: store.agent_counts().await?,
            store: Some(store.path().to_path_buf()),
        })
    }

    /// The agent tree of the run `run` names (the newest when None).
    pub async fn tree(&self, run: Option<&str>) -> Result<RunTree, ReadError> {
        let (store, run) = self.run_in(run).await?;
        let agents = store.agent_nodes(&run.id).await?;
        Ok(RunTree {
            run,
            tree: AgentTree::build(agents),
        })
    }

    /// The workers (scale-out) that ran agents of `run`; empty for a local run.
    pub async fn agent_workers(&self, run: &RunId) -> Result<Vec<AgentWorker>, ReadError> {
        Ok(self.existing_store()?.agent_workers(run).await?)
    }

    /// How often each mode was chosen, explicitly or by the dispatcher (empty when
    /// nothing has run here).
    pub async fn history(&self) -> Result<DispatchHistogram, ReadError> {
        let records = match self.store_if_exists()? {
            Some(store) => store.dispatch_history().await?,
            None => Vec::new(),
        };
        Ok(histogram(&records))
    }

    /// The branches crewbox made (`crewbox/…`), by name.
    pub async fn branches(&self) -> Result<Vec<BranchInfo>, ReadError> {
        let root = self.root().to_path_buf();
        Ok(tokio::task::spawn_blocking(move || branches::list(&root)).await??)
    }

    /// Removes one of crewbox's branches (never one checked out).
    pub async fn remove_branch(&self, branch: &BranchInfo) -> Result<(), ReadError> {
        let (root, info) = (self.root().to_path_buf(), branch.clone());
        Ok(tokio::task::spawn_blocking(move || branches::delete(&root, &info)).await??)
    }
}

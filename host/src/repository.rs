//! Opening a repository: where it is (the git work tree around a directory), its
//! merged configuration, and the state directory its store and worktrees live in.
//! Everything that reads or runs starts here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ConfigError};
use crate::engine::{Engine, EngineError, RunReport};
use crate::event::EventRecord;
use crate::ids::RunId;
use crate::store::{AgentCounts, RunRecord, Store, StoreError};

/// Why a repository could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The current directory cannot be read.
    #[error("cannot read the current directory: {0}")]
    CurrentDir(std::io::Error),
    /// The directory given does not exist.
    #[error("repository directory {} does not exist: {source}", path.display())]
    Missing {
        /// The directory.
        path: PathBuf,
        /// Why it cannot be resolved.
        source: std::io::Error,
    },
    /// A configuration file is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No state directory was given and none can be derived.
    #[error("neither XDG_STATE_HOME nor HOME is set; pass --state-dir")]
    NoStateHome,
}

/// A repository with its configuration and state directory, resolved.
#[derive(Debug, Clone)]
pub struct Repository {
    repo: PathBuf,
    state_dir: PathBuf,
    config: Arc<Config>,
}

/// What [`Repository::status`] reports: recent runs and agent counts.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Status {
    /// The newest runs, newest first.
    pub runs: Vec<RunRecord>,
    /// Agents queued and running, in every process.
    pub agents: AgentCounts,
    /// The database file.
    pub store: PathBuf,
}

impl Repository {
    /// Opens the git repository around `dir` (default: the current directory; a
    /// directory outside git is used as it is) with its configuration. The state
    /// directory is `state_dir`, else the configured one, else
    /// `$XDG_STATE_HOME/crewbox/<repo-id>`.
    pub fn open(dir: Option<&Path>, state_dir: Option<&Path>) -> Result<Self, OpenError> {
        let start = match dir {
            Some(p) => p.to_path_buf(),
            None => std::env::current_dir().map_err(OpenError::CurrentDir)?,
        };
        let start = start.canonicalize().map_err(|source| OpenError::Missing {
            path: start.clone(),
            source,
        })?;
        let repo = git_toplevel(&start).unwrap_or(start);
        let config = Config::load(&repo)?;
        let state_dir = match (state_dir, &config.state_dir) {
            (Some(d), _) => d.to_path_buf(),
            (None, Some(d)) => d.clone(),
            (None, None) => default_state_dir(&repo).ok_or(OpenError::NoStateHome)?,
        };
        Ok(Self::with_config(repo, state_dir, config))
    }

    /// A repository at `repo` (used as given) with `config` and its state in `state_dir`.
    #[doc(hidden)]
    pub fn with_config(repo: PathBuf, state_dir: PathBuf, config: Config) -> Self {
        Self {
            repo,
            state_dir,
            config: Arc::new(config),
        }
    }

    /// The repository root (or the directory given).
    pub fn root(&self) -> &Path {
        &self.repo
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// Where agent worktrees live.
    pub fn worktrees_dir(&self) -> PathBuf {
        self.state_dir.join("worktrees")
    }

    /// The merged configuration (unstable: its shape changes with the config files).
    #[doc(hidden)]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Opens the engine that runs requests here (creating the store). Orphaned
    /// worktrees of killed processes are pruned first. Runs in flight are left
    /// resumable when `shutdown` is cancelled.
    pub async fn engine(&self, shutdown: CancellationToken) -> Result<Engine, EngineError> {
        Engine::open(
            self.repo.clone(),
            &self.state_dir,
            self.config.clone(),
            shutdown,
        )
        .await
    }

    /// The `limit` newest runs and the agent counts. Works while another process runs.
    pub async fn status(&self, limit: u32) -> Result<Status, StoreError> {
        let store = self.existing_store()?;
        Ok(Status {
            runs: store.recent_runs(limit).await?,
            agents: store.agent_counts().await?,
            store: store.path().to_path_buf(),
        })
    }

    /// The report of the run with this id (or unique id prefix), if there is one.
    pub async fn report(&self, id_or_prefix: &str) -> Result<Option<RunReport>, StoreError> {
        let store = self.existing_store()?;
        match store.find_run(id_or_prefix).await? {
            Some(run) => Ok(Some(RunReport::load(&store, run).await?)),
            None => Ok(None),
        }
    }

    /// The event log, for reading events by sequence number.
    pub fn events(&self) -> Result<EventLog, StoreError> {
        Ok(EventLog(self.existing_store()?))
    }

    /// Opens (creating) the store (unstable: for crewbox's own commands).
    #[doc(hidden)]
    pub fn open_store(&self) -> Result<Store, StoreError> {
        Store::open(&self.state_dir)
    }

    /// Opens an existing store; read-side commands never create one (unstable).
    #[doc(hidden)]
    pub fn existing_store(&self) -> Result<Store, StoreError> {
        Store::open_existing(&self.state_dir)
    }

    /// The store, or None when nothing has run in this state directory yet (unstable).
    #[doc(hidden)]
    pub fn store_if_exists(&self) -> Result<Option<Store>, StoreError> {
        match Store::open_existing(&self.state_dir) {
            Ok(store) => Ok(Some(store)),
            Err(StoreError::Missing(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The append-only event log of a repository, read by sequence number (what
/// `crewbox events` prints; the same JSON a subscriber of [`Engine::subscribe`] sees).
pub struct EventLog(Store);

impl EventLog {
    /// Up to `limit` events after sequence number `after`, oldest first; only `run`'s
    /// when given.
    pub async fn after(
        &self,
        run: Option<&RunId>,
        after: i64,
        limit: u32,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.0.events(run, after, limit).await
    }

    /// The run with this id or unique id prefix, if any.
    pub async fn find_run(&self, id_or_prefix: &str) -> Result<Option<RunId>, StoreError> {
        Ok(self.0.find_run(id_or_prefix).await?.map(|r| r.id))
    }
}

/// The work tree root of the git repository containing `dir`, if any.
pub(crate) fn git_toplevel(dir: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::discover(dir).ok()?;
    repo.workdir()
        .map(|w| w.canonicalize().unwrap_or_else(|_| w.to_path_buf()))
}

/// `$XDG_STATE_HOME/crewbox/<repo-id>` where repo-id is the directory name plus a hash
/// of its canonical path (so two clones never share state).
pub(crate) fn default_state_dir(repo: &Path) -> Option<PathBuf> {
    let base = crate::config::xdg_dir("XDG_STATE_HOME", ".local/state")?;
    Some(base.join("crewbox").join(repo_id(repo)))
}

/// A stable, readable id for a repository path.
pub(crate) fn repo_id(repo: &Path) -> String {
    let name: String = repo
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        })
        .unwrap_or_else(|| "root".into());
    let hash = Sha256::digest(repo.as_os_str().as_encoded_bytes());
    let hex: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
    format!("{name}-{hex}")
}

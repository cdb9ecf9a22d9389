//! Opening a repository: where it is (the git work tree around a directory), whether
//! the user trusts it, the configuration in force (the user's, and what a trusted
//! repository may set), and the state directory its store and worktrees live in —
//! never chosen by a repository file. Everything that reads or runs starts here.

pub(crate) mod authoring;
mod facts;
mod mcp_use;
pub(crate) mod plugins;
mod probe;
mod reads;
mod records;
mod schedules;
mod settings;
pub(crate) mod trusting;
mod watch;

pub use facts::HealthFacts;
pub use mcp_use::{McpCall, McpConnection, McpUseError};
pub use probe::{ProbeOutcome, ProviderProbe};
pub use reads::{ReadError, RecordKind, RunList, RunTree};
pub use records::{ControlError, DeadTarget, DropError, Queued};
pub use schedules::{AddJobError, AddedJob, JobTiming, NewJob, Scheduler};
pub use settings::{
    ConfigInForce, Exported, McpServerInForce, McpTransport, RecordingError, RunProvider,
    TeamExport, TeamExportError, Worktrees,
};
pub use watch::Watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{Config, ConfigError, Source};
use crate::engine::{Engine, EngineError, RunReport};
use crate::sandbox::layout::HostPaths;
use crate::sandbox::{Helper, Sandbox, SandboxError, SandboxMode, SandboxOptions};
use crate::store::{AgentCounts, RunRecord, Store, StoreError};
use crate::trust::{RepoRoot, Trust};

use crate::config::ExecutorKind;
use crate::engine::executor::{ExecutorFactory, InProcess};
use crate::paths::STATE_DIR_ENV;

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
    /// No state base was given and none can be derived.
    #[error("neither XDG_STATE_HOME nor HOME is set; pass --state-dir")]
    NoStateHome,
    /// The state base cannot be made absolute.
    #[error("state directory base {}: {source}", path.display())]
    StateBase {
        /// The base given.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A repository with its trust, configuration and state directory, resolved.
#[derive(Debug, Clone)]
pub struct Repository {
    repo: PathBuf,
    state_dir: PathBuf,
    config: Arc<Config>,
    trust_error: Option<String>,
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
    /// directory outside git is used as it is) with its trust and configuration. Its
    /// state lives in its own directory under the state base: `state_base` (the
    /// command line or `CREWBOX_STATE_DIR`), else the user's configured one, else
    /// `$XDG_STATE_HOME/crewbox`. Every configured API key is registered with the
    /// redactor, so no sink ever shows it.
    pub fn open(dir: Option<&Path>, state_base: Option<&Path>) -> Result<Self, OpenError> {
        let start = match dir {
            Some(p) => p.to_path_buf(),
            None => std::env::current_dir().map_err(OpenError::CurrentDir)?,
        };
        let root = RepoRoot::discover(&start).map_err(|source| OpenError::Missing {
            path: start.clone(),
            source,
        })?;
        let (trust, trust_error) = Trust::of(&root);
        let mut config = Config::load(root.path(), trust)?;
        config.pack_grant = crate::trust::pack_grant(&root);
        // A repository's `.mcp.json`: nothing of it unless trusted, then only the
        // servers the user approved, as they were approved.
        config.repo_mcp = crate::mcp::project::apply(
            root.path(),
            trust.is_trusted(),
            &crate::trust::mcp_approvals(&root),
            &provider_keys(&config.providers),
            &mut config.mcp,
        );
        crate::provider::config::register_secrets(&config.providers, &|v| std::env::var(v).ok());
        let base = match (state_base, &config.state_dir) {
            (Some(d), _) => {
                let by_env = std::env::var_os(STATE_DIR_ENV).is_some_and(|v| d.as_os_str() == v);
                let source = if by_env {
                    Source::Env {
                        var: STATE_DIR_ENV.into(),
                    }
                } else {
                    Source::Cli {
                        flag: "--state-dir".into(),
                    }
                };
                config.origins.insert("state_dir".into(), source);
                d.to_path_buf()
            }
            (None, Some(d)) => d.clone(),
            (None, None) => crate::paths::user_state_dir().ok_or(OpenError::NoStateHome)?,
        };
        config.check_state_base(&base)?;
        config.state_dir = Some(base.clone());
        let state_dir = std::path::absolute(&base)
            .map(|b| crate::paths::repo_state_dir(&b, root.path()))
            .map_err(|source| OpenError::StateBase { path: base, source })?;
        Ok(Self {
            repo: root.path().to_path_buf(),
            state_dir,
            config: Arc::new(config),
            trust_error: trust_error.map(|e| e.to_string()),
        })
    }

    /// A repository at `repo` (canonical, used as given) with `config` and its state in
    /// `state_dir` itself (no per-repository directory under it).
    #[doc(hidden)]
    pub fn with_config(repo: PathBuf, state_dir: PathBuf, config: Config) -> Self {
        Self {
            repo,
            state_dir,
            config: Arc::new(config),
            trust_error: None,
        }
    }

    /// The one line telling the user that this untrusted repository's files are
    /// ignored or limited, and how to trust it: once per repository and set of affected
    /// files (remembered in the user's trust store, outside the repository), None after
    /// that, for a trusted repository, or when nothing here is affected. Blocking.
    pub fn untrusted_notice(&self) -> Option<String> {
        if self.config.trust.is_trusted() {
            return None;
        }
        let effects = crate::trust::untrusted_effects(self.root());
        if effects.is_empty() {
            return None;
        }
        let fingerprint = effects.join("\n");
        let store = crate::trust::TrustStore::user().ok()?;
        if store.noticed(self.root(), &fingerprint) {
            return None;
        }
        if let Err(e) = store.mark_noticed(self.root(), &fingerprint) {
            tracing::debug!(error = %e, "could not remember the trust notice");
        }
        Some(crate::trust::notice_line(&effects))
    }

    /// The demo's repository (`crewbox demo`): `repo` (canonical) with its state
    /// directory under `state_base`, and a configuration of its own whose provider is
    /// the scripted one answering with [`DEMO_SCRIPT`](crate::DEMO_SCRIPT), in `crew`
    /// mode. Nothing of the user's configuration applies, so the demo runs the same on
    /// every machine and never calls a real model.
    pub fn demo(repo: PathBuf, state_base: &Path) -> std::io::Result<Self> {
        use crate::config::provider::SCRIPTED;
        let state_dir = crate::paths::repo_state_dir(&std::path::absolute(state_base)?, &repo);
        let mut config = Config {
            default_mode: crate::vocab::ModeChoice::Mode(crate::vocab::Mode::Crew),
            default_provider: Some(SCRIPTED.into()),
            ..Config::default()
        };
        config.providers.insert(
            SCRIPTED.into(),
            crate::provider::config::ProviderConfig::demo_scripted(),
        );
        Ok(Self::with_config(repo, state_dir, config))
    }

    /// The same repository with its agents executed by `executor` (`--executor`, which
    /// wins over the user's `executor`).
    pub fn with_executor(mut self, executor: crate::config::ExecutorKind) -> Self {
        Arc::make_mut(&mut self.config).executor = executor;
        self
    }

    /// The same repository with its state (store, worktrees) in `state_dir` itself: a
    /// scratch state sharing nothing with its own (`crewbox replay`).
    #[doc(hidden)]
    pub fn with_state_dir(mut self, state_dir: PathBuf) -> Self {
        self.state_dir = state_dir;
        self
    }

    /// The same repository with provider `name` defined as `config`, in this process
    /// only (`crewbox replay`'s recording).
    #[doc(hidden)]
    pub fn with_provider(mut self, name: &str, config: crate::provider::ProviderConfig) -> Self {
        Arc::make_mut(&mut self.config)
            .providers
            .insert(name.to_owned(), config);
        self
    }

    /// The same repository asking `dispatcher` (a built-in or plugin name, or a
    /// component path) for `auto` runs.
    #[doc(hidden)]
    pub fn with_dispatcher(mut self, dispatcher: String) -> Self {
        Arc::make_mut(&mut self.config).dispatcher = Some(dispatcher);
        self
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

    /// Whether the user trusts this repository.
    pub fn trust(&self) -> Trust {
        self.config.trust
    }

    /// Why the user's trust store could not be read (the repository then counts as
    /// untrusted), for a warning.
    pub fn trust_error(&self) -> Option<&str> {
        self.trust_error.as_deref()
    }

    /// Opens the engine that runs requests here (creating the store, which must belong
    /// to this repository). Orphaned worktrees of killed processes are pruned first.
    /// Runs in flight are left resumable when `shutdown` is cancelled. Agents' commands
    /// run in the process sandbox the user's config describes; a program whose `main`
    /// does not start crewbox's sandbox helper gets every command refused instead.
    pub async fn engine(&self, shutdown: CancellationToken) -> Result<Engine, EngineError> {
        let store = self.open_store().map_err(EngineError::Store)?;
        let sandbox = self.sandbox()?;
        // The composition root: which executor runs the agents.
        let executor: &dyn ExecutorFactory = match self.config.executor {
            ExecutorKind::Local => &InProcess,
            ExecutorKind::Nats => &crate::remote::OverNats,
        };
        Engine::open(
            self.repo.clone(),
            store,
            sandbox,
            &self.worktrees_dir(),
            self.config.clone(),
            executor,
            shutdown,
        )
        .await
    }

    /// The process sandbox for agents' commands, from the user's config (unstable: for
    /// crewbox's own commands). Where this process cannot be the sandbox helper (its
    /// `main` does not call it) and the sandbox is on, commands are refused: fail
    /// closed.
    #[doc(hidden)]
    pub fn sandbox(&self) -> Result<Sandbox, SandboxError> {
        let config = self.config.sandbox.clone();
        if config.mode == SandboxMode::On && !sandbox_helper_installed() {
            tracing::warn!(
                "this process cannot run the sandbox helper: agent commands are refused"
            );
            return Ok(Sandbox::missing());
        }
        let user_config = crate::config::user_config_path();
        Sandbox::new(SandboxOptions {
            config,
            helper: Helper::CurrentExe,
            paths: HostPaths {
                // Every repository's state, not only this one's, stays hidden.
                state_base: self
                    .config
                    .state_dir
                    .as_deref()
                    .and_then(|b| std::path::absolute(b).ok()),
                ..HostPaths::from_env(
                    &self.state_dir,
                    user_config
                        .as_ref()
                        .and_then(|p| p.parent())
                        .map(Path::to_owned),
                )
            },
            key_vars: key_vars(&self.config.providers),
            user_config,
        })
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

    fn identity(&self) -> RepoRoot {
        RepoRoot::from_canonical(self.repo.clone())
    }

    /// Opens (creating) the store; it must belong to this repository (unstable: for
    /// crewbox's own commands).
    #[doc(hidden)]
    pub fn open_store(&self) -> Result<Store, StoreError> {
        Store::open_for(&self.state_dir, true, &self.identity())
    }

    /// Opens an existing store, which must belong to this repository; read-side
    /// commands never create one (unstable).
    #[doc(hidden)]
    pub fn existing_store(&self) -> Result<Store, StoreError> {
        Store::open_for(&self.state_dir, false, &self.identity())
    }

    /// The store, or None when nothing has run in this state directory yet (unstable).
    #[doc(hidden)]
    pub fn store_if_exists(&self) -> Result<Option<Store>, StoreError> {
        match self.existing_store() {
            Ok(store) => Ok(Some(store)),
            Err(StoreError::Missing(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Whether this process's `main` starts crewbox's sandbox helper.
/// The variables the providers read their keys from (and a `command` provider passes).
fn key_vars(
    providers: &std::collections::BTreeMap<String, crate::provider::config::ProviderConfig>,
) -> Vec<String> {
    providers
        .values()
        .flat_map(|p| p.secret_vars())
        .map(str::to_owned)
        .collect()
}

/// The providers' keys as they are set now: what no repository file may hand on.
pub(crate) fn provider_keys(
    providers: &std::collections::BTreeMap<String, crate::provider::config::ProviderConfig>,
) -> crate::sandbox::env::Secrets {
    let vars = key_vars(providers);
    crate::sandbox::env::Secrets::new(vars.iter().map(String::as_str), |n| std::env::var(n).ok())
}

fn sandbox_helper_installed() -> bool {
    #[cfg(target_os = "linux")]
    {
        crate::sandbox::helper::entry_installed()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// A scale-out worker's clones, opened as repositories (the worker's composition root).
struct WorkerClones;

impl crate::remote::worker::CloneOpener for WorkerClones {
    fn open(
        &self,
        dir: &Path,
        state_base: &Path,
    ) -> Result<crate::remote::worker::OpenedClone, Box<dyn std::error::Error + Send + Sync>> {
        let repo = Repository::open(Some(dir), Some(state_base))?;
        Ok(crate::remote::worker::OpenedClone {
            sandbox: repo.sandbox()?,
            worktrees_dir: repo.worktrees_dir(),
            config: repo.config().clone(),
            root: repo.root().to_path_buf(),
        })
    }
}

/// Serves as a scale-out worker until `shutdown` (`crewbox worker`): every clone of a
/// remote it takes tasks for is opened as a [`Repository`], under the CLI's rules.
#[doc(hidden)]
pub async fn serve_worker(
    opts: crate::remote::worker::WorkerOptions,
    shutdown: CancellationToken,
) -> Result<crate::remote::worker::WorkerStats, crate::remote::WorkerError> {
    crate::remote::worker::serve(opts, Arc::new(WorkerClones), shutdown).await
}

//! Turning global arguments into paths, configuration and the store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::agent::manager::Manager;
use crate::config::Config;
use crate::engine::plugins::PluginSet;
use crate::engine::run::Engine;
use crate::provider::breaker::Breakers;
use crate::store::Store;
use crate::tool::registry::ToolRegistry;
use crate::worktree::{WorktreeManager, WorktreeOptions};

/// Options every subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalArgs {
    /// The repository to work on (default: the git repository containing the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Where crewbox keeps its database and worktrees [default: $XDG_STATE_HOME/crewbox/<repo-id>].
    #[arg(long, global = true, env = "CREWBOX_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Log as JSON lines on stderr (filter with RUST_LOG).
    #[arg(long, global = true)]
    pub log_json: bool,
}

/// Resolved paths and configuration for one command.
#[derive(Debug, Clone)]
pub struct Context {
    /// The repository root (or the directory given).
    pub repo: PathBuf,
    /// The state directory.
    pub state_dir: PathBuf,
    /// The merged configuration.
    pub config: Arc<Config>,
}

impl Context {
    /// Resolves the repository, loads configuration and picks the state directory.
    pub fn resolve(g: &GlobalArgs) -> anyhow::Result<Self> {
        let start = match &g.repo {
            Some(p) => p.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let start = start
            .canonicalize()
            .with_context(|| format!("repository directory {} does not exist", start.display()))?;
        let repo = git_toplevel(&start).unwrap_or(start);
        let config = Config::load(&repo)?;
        let state_dir = match (&g.state_dir, &config.state_dir) {
            (Some(d), _) => d.clone(),
            (None, Some(d)) => d.clone(),
            (None, None) => default_state_dir(&repo)?,
        };
        Ok(Self {
            repo,
            state_dir,
            config: Arc::new(config),
        })
    }

    /// Where agent worktrees live.
    pub fn worktrees_dir(&self) -> PathBuf {
        self.state_dir.join("worktrees")
    }

    /// Opens (creating) the store.
    pub fn open_store(&self) -> anyhow::Result<Store> {
        Store::open(&self.state_dir)
            .with_context(|| format!("state directory {}", self.state_dir.display()))
    }

    /// Opens an existing store (read-side commands never create one).
    pub fn existing_store(&self) -> anyhow::Result<Store> {
        Ok(Store::open_existing(&self.state_dir)?)
    }

    /// The store, or None when nothing has run in this state directory yet.
    pub fn store_if_exists(&self) -> anyhow::Result<Option<Store>> {
        match Store::open_existing(&self.state_dir) {
            Ok(store) => Ok(Some(store)),
            Err(crate::store::StoreError::Missing(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Builds the engine for commands that run agents. Orphaned worktrees of killed
    /// processes are pruned first.
    pub async fn engine(&self, shutdown: CancellationToken) -> anyhow::Result<Engine> {
        let store = self.open_store()?;
        let manager = Manager::new(
            store.clone(),
            Arc::new(ToolRegistry::builtin()),
            self.config.max_concurrent,
        );
        let worktrees = match WorktreeManager::open(
            &self.repo,
            &self.worktrees_dir(),
            WorktreeOptions::default(),
        )
        .await
        {
            Ok(w) => {
                match w.prune().await {
                    Ok(report) if !report.removed.is_empty() => {
                        tracing::info!(pruned = report.removed.len(), "pruned orphaned worktrees")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "could not prune orphaned worktrees"),
                }
                Some(w)
            }
            Err(e) => {
                tracing::debug!(error = %e, "no worktree isolation for this directory");
                None
            }
        };
        let runtime = super::plugin::runtime()?;
        Ok(Engine {
            store,
            manager,
            config: self.config.clone(),
            repo: self.repo.clone(),
            breakers: Breakers::default(),
            plugins: PluginSet::new(runtime, self.repo.clone())
                .with_user_grants(self.config.plugin_grants.clone()),
            worktrees,
            shutdown,
            spawns: None,
        }
        .with_spawn_queue())
    }
}

/// The work tree root of the git repository containing `dir`, if any.
pub fn git_toplevel(dir: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::discover(dir).ok()?;
    repo.workdir()
        .map(|w| w.canonicalize().unwrap_or_else(|_| w.to_path_buf()))
}

/// `$XDG_STATE_HOME/crewbox/<repo-id>` where repo-id is the directory name plus a hash
/// of its canonical path (so two clones never share state).
pub fn default_state_dir(repo: &Path) -> anyhow::Result<PathBuf> {
    let base = crate::config::xdg_dir("XDG_STATE_HOME", ".local/state")
        .context("neither XDG_STATE_HOME nor HOME is set; pass --state-dir")?;
    Ok(base.join("crewbox").join(repo_id(repo)))
}

/// A stable, readable id for a repository path.
pub fn repo_id(repo: &Path) -> String {
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

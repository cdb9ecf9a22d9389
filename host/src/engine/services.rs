//! What runs need from the process: the store, the agent manager, the configuration,
//! the repository, circuit breakers, loaded plugins and worktrees. Built once per
//! engine; fields are private, so each part of the engine reaches only what it asks for.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::{EngineError, PluginLoadError};
use super::plugins::PluginSet;
use crate::agent::manager::Manager;
use crate::config::Config;
use crate::plugin::{Compiler, PluginRuntime, RuntimeConfig};
use crate::provider::breaker::Breakers;
use crate::sandbox::Sandbox;
use crate::store::Store;
use crate::tool::registry::ToolRegistry;
use crate::worktree::{WorktreeManager, WorktreeOptions};

/// The engine's services.
pub(crate) struct Services {
    store: Store,
    manager: Manager,
    config: Arc<Config>,
    repo: PathBuf,
    breakers: Breakers,
    http: crate::provider::http::HttpClients,
    plugins: PluginSet,
    worktrees: Option<WorktreeManager>,
}

/// The fewest prepared worktrees kept (the pool's default).
const POOL_MIN: usize = 2;
/// The most prepared worktrees kept, however many agents run at once (each is a whole
/// checkout on disk).
const POOL_MAX: usize = 16;

impl Services {
    /// The services over `store`, with the repository's worktrees in `worktrees_dir`;
    /// orphaned worktrees of killed processes are pruned first. `concurrency` is how many
    /// agents run at once here: the worktree pool keeps that many prepared worktrees
    /// (within [`POOL_MIN`]..=[`POOL_MAX`]), so agents running side by side recycle
    /// worktrees instead of checking out a new one each and removing it after.
    pub(crate) async fn open(
        repo: PathBuf,
        store: Store,
        sandbox: Sandbox,
        worktrees_dir: &Path,
        config: Arc<Config>,
        concurrency: usize,
    ) -> Result<Self, EngineError> {
        let opts = WorktreeOptions {
            commit: config.workspace.commit_rules(),
            pool_size: concurrency.clamp(POOL_MIN, POOL_MAX),
            ..WorktreeOptions::default()
        };
        let worktrees = match WorktreeManager::open(&repo, worktrees_dir, opts).await {
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
        // Untrusted components compile in a limited child process where this process
        // can be one (the crewbox binary).
        let compiler = Compiler::for_this_process().map_err(|e| {
            EngineError::Internal(format!("cannot find this program to compile plugins: {e}"))
        })?;
        let runtime = PluginRuntime::new(RuntimeConfig {
            compiler,
            ..RuntimeConfig::default()
        })
        .map_err(|e| EngineError::PluginLoad(PluginLoadError::Runtime(e)))?;
        Ok(Self {
            manager: Manager::with_mcp(
                store.clone(),
                Arc::new(ToolRegistry::builtin_with(config.workspace.file_access())),
                config.max_concurrent,
                sandbox.clone(),
                crate::mcp::Pool::new(Arc::new(config.mcp.clone()), sandbox),
            ),
            store,
            plugins: PluginSet::new(runtime, repo.clone())
                .with_user_grants(config.plugin_grants.clone())
                .with_repo_plugins(config.trust.is_trusted()),
            breakers: Breakers::default(),
            http: Default::default(),
            config,
            repo,
            worktrees,
        })
    }

    /// The store.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// The agent manager.
    pub(crate) fn manager(&self) -> &Manager {
        &self.manager
    }

    /// The merged configuration.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The directory agents work in.
    pub(crate) fn repo(&self) -> &Path {
        &self.repo
    }

    /// Circuit breakers shared by every provider built here.
    pub(crate) fn breakers(&self) -> &Breakers {
        &self.breakers
    }

    /// HTTP clients shared by every provider built here.
    pub(crate) fn http_clients(&self) -> &crate::provider::http::HttpClients {
        &self.http
    }

    /// Loaded plugins.
    pub(crate) fn plugins(&self) -> &PluginSet {
        &self.plugins
    }

    /// The repository's worktrees (None when it is not a git repository with a commit).
    pub(crate) fn worktrees(&self) -> Option<&WorktreeManager> {
        self.worktrees.as_ref()
    }
}

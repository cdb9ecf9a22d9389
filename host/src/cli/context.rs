//! Turning global arguments into paths, configuration and the store.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::agent::manager::Manager;
use crate::config::{Config, Source};
use crate::engine::plugins::PluginSet;
use crate::engine::run::Engine;
use crate::provider::breaker::Breakers;
use crate::store::Store;
use crate::tool::registry::ToolRegistry;
use crate::trust::{RepoRoot, Trust, TrustStore};
use crate::worktree::{WorktreeManager, WorktreeOptions};

/// Options every subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalArgs {
    /// The repository to work on (default: the git repository containing the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// The state base: each repository keeps its database and worktrees in its own
    /// directory under it [default: $XDG_STATE_HOME/crewbox].
    #[arg(long, global = true, env = "CREWBOX_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Log as JSON lines on stderr (filter with RUST_LOG).
    #[arg(long, global = true)]
    pub log_json: bool,
}

impl GlobalArgs {
    /// The repository the command works on (`--repo`, else the current directory's).
    pub fn repo_root(&self) -> anyhow::Result<RepoRoot> {
        let start = match &self.repo {
            Some(p) => p.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        RepoRoot::discover(&start)
            .with_context(|| format!("repository directory {} does not exist", start.display()))
    }
}

/// Resolved paths and configuration for one command.
#[derive(Debug, Clone)]
pub struct Context {
    /// The repository root (canonical; or the directory given when it is no repository).
    pub repo: PathBuf,
    /// This repository's state directory (`<state base>/<repo-id>`).
    pub state_dir: PathBuf,
    /// The configuration in force.
    pub config: Arc<Config>,
    /// Why the trust store could not be read (the repository then counts as untrusted).
    pub trust_error: Option<String>,
}

impl Context {
    /// Resolves the repository, its trust, the configuration in force and its state
    /// directory. The state directory never comes from a repository file.
    pub fn resolve(g: &GlobalArgs) -> anyhow::Result<Self> {
        let root = g.repo_root()?;
        let (trust, trust_error) = Trust::of(&root);
        let mut config = Config::load(root.path(), trust)?;
        config.pack_grant = crate::trust::pack_grant(&root);
        // Every configured key is masked at every sink, used by this command or not.
        crate::provider::config::register_secrets(&config.providers, &|v| std::env::var(v).ok());
        let base = match (&g.state_dir, &config.state_dir) {
            (Some(d), _) => {
                let by_env =
                    std::env::var_os("CREWBOX_STATE_DIR").is_some_and(|v| d.as_os_str() == v);
                let source = if by_env {
                    Source::Env {
                        var: "CREWBOX_STATE_DIR".into(),
                    }
                } else {
                    Source::Cli {
                        flag: "--state-dir".into(),
                    }
                };
                config.origins.insert("state_dir".into(), source);
                d.clone()
            }
            (None, Some(d)) => d.clone(),
            (None, None) => crate::paths::user_state_dir()
                .context("neither XDG_STATE_HOME nor HOME is set; pass --state-dir")?,
        };
        config.state_dir = Some(base.clone());
        let state_dir = std::path::absolute(&base)
            .map(|b| crate::paths::repo_state_dir(&b, root.path()))
            .with_context(|| format!("state directory base {}", base.display()))?;
        Ok(Self {
            repo: root.path().to_path_buf(),
            state_dir,
            config: Arc::new(config),
            trust_error: trust_error.map(|e| e.to_string()),
        })
    }

    /// Tells the user, on stderr, what of the repository's was not applied: each
    /// ignored or clamped setting of a trusted repository (one line each), and — only
    /// on a terminal, not for machine-readable output, once per repository and set of
    /// affected files — one line saying an untrusted repository's files are limited and
    /// how to trust it. Never a prompt.
    pub fn announce(&self, machine_output: bool) {
        if let Some(e) = &self.trust_error {
            eprintln!("crewbox: warning: {e}; the repository is treated as untrusted");
        }
        for ignored in self.config.ignored.iter().filter(|i| i.key != "*") {
            eprintln!("crewbox: warning: {ignored}");
        }
        if self.config.trust.is_trusted() || machine_output || !std::io::stderr().is_terminal() {
            return;
        }
        let effects = crate::trust::untrusted_effects(&self.repo);
        if effects.is_empty() {
            return;
        }
        let fingerprint = effects.join("\n");
        let Ok(store) = TrustStore::user() else {
            return;
        };
        if store.noticed(&self.repo, &fingerprint) {
            return;
        }
        eprintln!("{}", crate::trust::notice_line(&effects));
        if let Err(e) = store.mark_noticed(&self.repo, &fingerprint) {
            tracing::debug!(error = %e, "could not remember the trust notice");
        }
    }

    /// Where agent worktrees live.
    pub fn worktrees_dir(&self) -> PathBuf {
        self.state_dir.join("worktrees")
    }

    fn identity(&self) -> RepoRoot {
        RepoRoot::from_canonical(self.repo.clone())
    }

    /// Opens (creating) the store; it must belong to this repository.
    pub fn open_store(&self) -> anyhow::Result<Store> {
        Store::open_for(&self.state_dir, true, &self.identity())
            .with_context(|| format!("state directory {}", self.state_dir.display()))
    }

    /// Opens an existing store (read-side commands never create one); it must belong
    /// to this repository.
    pub fn existing_store(&self) -> anyhow::Result<Store> {
        Ok(Store::open_for(&self.state_dir, false, &self.identity())?)
    }

    /// The store, or None when nothing has run in this state directory yet.
    pub fn store_if_exists(&self) -> anyhow::Result<Option<Store>> {
        match Store::open_for(&self.state_dir, false, &self.identity()) {
            Ok(store) => Ok(Some(store)),
            Err(crate::store::StoreError::Missing(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The process sandbox for agents' commands, from the user's config.
    pub fn sandbox(&self) -> anyhow::Result<crate::sandbox::Sandbox> {
        let user_config = crate::config::user_config_path();
        Ok(crate::sandbox::Sandbox::new(
            crate::sandbox::SandboxOptions {
                config: self.config.sandbox.clone(),
                helper: crate::sandbox::Helper::CurrentExe,
                paths: crate::sandbox::layout::HostPaths {
                    // Every repository's state, not only this one's, stays hidden.
                    state_base: self
                        .config
                        .state_dir
                        .as_deref()
                        .and_then(|b| std::path::absolute(b).ok()),
                    ..crate::sandbox::layout::HostPaths::from_env(
                        &self.state_dir,
                        user_config
                            .as_ref()
                            .and_then(|p| p.parent())
                            .map(Path::to_owned),
                    )
                },
                key_vars: self
                    .config
                    .providers
                    .values()
                    .flat_map(|p| p.secret_vars())
                    .map(str::to_owned)
                    .collect(),
                user_config,
            },
        )?)
    }

    /// Builds the engine for commands that run agents. Orphaned worktrees of killed
    /// processes are pruned first.
    pub async fn engine(&self, shutdown: CancellationToken) -> anyhow::Result<Engine> {
        let store = self.open_store()?;
        let sandbox = self.sandbox()?;
        if sandbox.is_off() {
            eprintln!("crewbox: {}", sandbox.off_warning());
        }
        let manager = Manager::new(
            store.clone(),
            Arc::new(ToolRegistry::builtin()),
            self.config.max_concurrent,
        )
        .with_sandbox(sandbox);
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
                .with_user_grants(self.config.plugin_grants.clone())
                .with_repo_plugins(self.config.trust.is_trusted()),
            worktrees,
            shutdown,
            spawns: None,
        }
        .with_spawn_queue())
    }
}

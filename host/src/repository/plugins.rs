//! What `crewbox plugin list` asks: the plugins a place sees (the built-ins, a trusted
//! repository's `.crewbox/plugins/`, the user's), each read (bounded) and checked on its
//! own, with its kind, imports, the grants a run would give it and whether it loads.
//! Typed answers, typed errors; the binary only renders them.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::{Config, ConfigError};
use crate::plugin::discover::{self, Candidate};
use crate::plugin::file::FileError;
use crate::plugin::{
    CacheOutcome, Compiler, Grants, PluginError, PluginKind, PluginRuntime, PluginSource,
    RuntimeConfig, UserGrant, Violation,
};

use super::Repository;

/// Why the plugins cannot be looked at.
#[derive(Debug, thiserror::Error)]
pub enum PluginsError {
    /// This program cannot name itself as the limited compiler child.
    #[error(transparent)]
    Compiler(std::io::Error),
    /// The plugin runtime (the wasmtime engine) cannot start.
    #[error(transparent)]
    Runtime(#[from] PluginError),
    /// The user's config file, which holds the plugin grants, does not load.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A blocking read was cancelled or panicked.
    #[error("reading the plugins was interrupted: {0}")]
    Interrupted(#[from] tokio::task::JoinError),
}

/// Why one listed plugin could not be looked at (its entry says so; the list goes on).
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    /// The file could not be read (not a regular file, over the size cap, leads out of
    /// the repository).
    #[error(transparent)]
    Unreadable(#[from] FileError),
    /// It is not a component that compiles (or it was refused by a compile limit).
    #[error(transparent)]
    NotAComponent(#[from] PluginError),
}

/// One plugin seen here ([`Plugins::list`], [`Repository::plugins`]).
#[derive(Debug)]
pub struct PluginEntry {
    /// Its name: a built-in's, or the file stem.
    pub name: String,
    /// Where it comes from (a repository's only when the user trusts it).
    pub source: PluginSource,
    /// The kind its exports say; None when it exports no single kind or was not read.
    pub kind: Option<PluginKind>,
    /// Its imports, versioned.
    pub imports: Vec<String>,
    /// What a run would grant it as that kind (its kind's defaults, the user's grants).
    pub grants: Option<Grants>,
    /// Every rule it breaks under those grants; empty means it loads.
    pub violations: Vec<Violation>,
    /// Whether its compiled code was already in the plugin cache (`Hit`), was compiled
    /// and stored there by this look (`Stored`), or could not be kept (`Compiled`).
    pub cache: Option<CacheOutcome>,
    /// Why it could not be read or compiled, if so.
    pub error: Option<EntryError>,
}

/// Where repository plugins are looked for.
#[derive(Clone, Debug)]
enum Scope {
    /// The repository around the current directory, if the user trusts it (decided
    /// when the list is made).
    CurrentDir,
    /// Decided by an open repository: its root when trusted, else none.
    Decided(Option<PathBuf>),
}

/// The plugins seen from one place, with the runtime a run compiles them with (its
/// compile limits and on-disk cache; untrusted components compiled in a limited child of
/// this program) and the user's grants (`[plugins.grants.NAME]`).
#[derive(Clone)]
pub struct Plugins {
    pub(super) runtime: PluginRuntime,
    pub(super) user_grants: Arc<[UserGrant]>,
    scope: Scope,
}

/// A runtime with the default on-disk cache, compiling untrusted components in a
/// limited child process (this program).
pub(super) fn runtime() -> Result<PluginRuntime, PluginsError> {
    let compiler = Compiler::this_program().map_err(PluginsError::Compiler)?;
    Ok(PluginRuntime::new(RuntimeConfig {
        compiler,
        ..RuntimeConfig::default()
    })?)
}

/// The root of the repository around the current directory, if the user trusts it.
fn trusted_root_here() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    let root = crate::trust::RepoRoot::discover(&cwd).ok()?;
    crate::trust::Trust::of(&root)
        .0
        .is_trusted()
        .then(|| root.path().to_owned())
}

impl Plugins {
    /// The plugins seen from the current directory without opening a repository (no
    /// state directory, no repository config): the built-ins, the user's, and the
    /// repository's around it when the user trusts it; with the grants of the user's
    /// own config. Blocking (reads the user's config file).
    pub fn here() -> Result<Self, PluginsError> {
        let runtime = runtime()?;
        let user_grants = Config::load_user()?.plugin_grants.into();
        Ok(Self {
            runtime,
            user_grants,
            scope: Scope::CurrentDir,
        })
    }

    /// Every plugin seen here: built-ins, then the trusted repository's, then the
    /// user's. Each is read (bounded) and checked on its own, so an unreadable file is
    /// an entry with an error, not a failed list; an untrusted repository's plugins are
    /// never opened, nor listed. Blocking (compiles, or loads from the cache).
    pub fn list(&self) -> Vec<PluginEntry> {
        discover::candidates(self.repo_root().as_deref())
            .into_iter()
            .map(|c| self.entry(c))
            .collect()
    }

    /// The repository whose plugins are looked at: a trusted one's root, else none.
    fn repo_root(&self) -> Option<PathBuf> {
        match &self.scope {
            Scope::CurrentDir => trusted_root_here(),
            Scope::Decided(root) => root.clone(),
        }
    }

    fn entry(&self, c: Candidate) -> PluginEntry {
        let rt = &self.runtime;
        let failed = |c: &Candidate, error: EntryError| PluginEntry {
            name: c.name.clone(),
            source: c.source.clone(),
            kind: None,
            imports: Vec::new(),
            grants: None,
            violations: Vec::new(),
            cache: None,
            error: Some(error),
        };
        let found = match c.clone().read(rt.compile_limits().max_component_bytes) {
            Ok(f) => f,
            Err(e) => return failed(&c, e.into()),
        };
        let (info, cache) = match rt.inspect_cached(&found.name, &found.bytes) {
            Ok(read) => read,
            Err(e) => return failed(&c, e.into()),
        };
        let grants = info.kind.map(|k| {
            crate::engine::plugins::grants_for(
                &found.name,
                &found.source,
                k,
                &found.bytes,
                &self.user_grants,
            )
        });
        let violations = rt.check(
            &found.name,
            &found.bytes,
            info.kind,
            grants.as_ref().unwrap_or(&Grants::none()),
        );
        PluginEntry {
            name: found.name,
            source: found.source,
            kind: info.kind,
            imports: info.imports,
            grants,
            violations,
            cache: Some(cache),
            error: None,
        }
    }
}

impl Repository {
    /// The plugins a run here may name: the built-ins, this repository's
    /// `.crewbox/plugins/` only when the user trusts it, the user's; each with its kind,
    /// imports, the grants a run gives it, whether it loads and its cache state (see
    /// [`Plugins::list`]). Compiles off the async runtime.
    pub async fn plugins(&self) -> Result<Vec<PluginEntry>, PluginsError> {
        let trusted = self.trust().is_trusted();
        let plugins = Plugins {
            runtime: runtime()?,
            user_grants: self.config.plugin_grants.clone().into(),
            scope: Scope::Decided(trusted.then(|| self.root().to_path_buf())),
        };
        Ok(tokio::task::spawn_blocking(move || plugins.list()).await?)
    }
}

/// Why [`Repository::explain_dispatch`] has no decision to show.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The plugin runtime cannot start.
    #[error(transparent)]
    Plugins(#[from] PluginsError),
    /// The dispatcher does not load or failed to answer (its class says whose fault).
    #[error(transparent)]
    Dispatch(#[from] crate::engine::EngineError),
}

impl Repository {
    /// Asks the dispatcher a run here would ask — `dispatcher` when given (a built-in,
    /// the user's or a trusted repository's plugin name, or a component file's path),
    /// else the configured one, else `heuristic` — which mode `prompt` runs in: the
    /// dispatcher loaded as a run loads it (the same grants and trust), offered the same
    /// modes.
    pub async fn explain_dispatch(
        &self,
        prompt: &str,
        dispatcher: Option<String>,
    ) -> Result<crate::engine::dispatch::AutoDecision, ExplainError> {
        let mut config = (*self.config).clone();
        if dispatcher.is_some() {
            config.dispatcher = dispatcher;
        }
        let plugins = crate::engine::plugins::PluginSet::new(runtime()?, self.root().to_path_buf())
            .with_user_grants(config.plugin_grants.clone())
            .with_repo_plugins(config.trust.is_trusted());
        Ok(crate::engine::dispatch::auto(&plugins, &config, prompt).await?)
    }
}

/// Why [`Plugins::validate`] has no verdict to show (each a usage error: the plugin
/// named cannot serve as a validator).
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    /// Nothing of that name or path.
    #[error("no validator `{0}`: not a file, a built-in or a discovered plugin")]
    NotFound(String),
    /// The file cannot be read (not a regular file, over the size cap).
    #[error(transparent)]
    Unreadable(#[from] FileError),
    /// It does not compile or load (a compile limit, a denied import).
    #[error(transparent)]
    Load(#[from] PluginError),
    /// It is a plugin of another kind.
    #[error("`{name}` is a {kind}, not a validator")]
    NotAValidator {
        /// Its name.
        name: String,
        /// What it is.
        kind: PluginKind,
    },
    /// A blocking read was cancelled or panicked.
    #[error("reading the plugin was interrupted: {0}")]
    Interrupted(#[from] tokio::task::JoinError),
}

/// What one validator said of one agent output ([`Plugins::validate`]).
#[derive(Debug)]
pub struct Validated {
    /// The validator's name.
    pub name: String,
    /// Where it comes from, in words.
    pub source: String,
    /// Its verdict; or why it could not judge (its own answer); or its fault (a trap,
    /// a limit, a broken contract).
    pub outcome: Result<Result<crate::vocab::Verdict, String>, crate::plugin::PluginFault>,
}

impl Plugins {
    /// Resolves `NAME|FILE` as every plugin command does: an existing path, a
    /// built-in, or a trusted repository's or the user's plugin of that name. Only the
    /// plugin named is read (regular files only, bounded). Blocking.
    fn find(&self, spec: &str) -> Result<Option<crate::plugin::discover::Found>, FileError> {
        discover::resolve(
            spec,
            self.repo_root().as_deref(),
            self.runtime.compile_limits().max_component_bytes,
        )
    }

    /// Runs the validator `spec` names (an existing path, a built-in, or a trusted
    /// repository's or the user's plugin of that name) on `output`, loaded with the
    /// grants a run gives it: it may read `workspace` when given, nothing else.
    /// `criteria` empty means its defaults.
    pub async fn validate(
        &self,
        spec: &str,
        output: &crate::plugin::AgentOutput,
        workspace: Option<PathBuf>,
        criteria: &[String],
    ) -> Result<Validated, ValidateError> {
        let this = self.clone();
        let named = spec.to_owned();
        let found = tokio::task::spawn_blocking(move || this.find(&named))
            .await??
            .ok_or_else(|| ValidateError::NotFound(spec.to_owned()))?;
        let grants = crate::engine::plugins::grants_for(
            &found.name,
            &found.source,
            PluginKind::Validator,
            &found.bytes,
            &self.user_grants,
        );
        let crate::plugin::discover::Found {
            name,
            source,
            bytes,
        } = found;
        let plugin = self
            .runtime
            .load(&name, source, bytes, grants, None)
            .await?;
        if plugin.kind() != PluginKind::Validator {
            return Err(ValidateError::NotAValidator {
                name,
                kind: plugin.kind(),
            });
        }
        let env = crate::plugin::CallEnv {
            workspace: workspace.map(|root| crate::plugin::WorkspaceView {
                root,
                changed: Vec::new(),
                diff: String::new(),
            }),
            model: None,
        };
        let source = plugin.source().to_string();
        let outcome = plugin.validate(env, output, criteria).await;
        Ok(Validated {
            name,
            source,
            outcome,
        })
    }
}

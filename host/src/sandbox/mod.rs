//! The process sandbox for everything an agent runs: `run_command`, anything a tool
//! executes, and the `command` provider's child.
//!
//! The policy is data ([`Policy`]), decided here from the agent's capabilities, its
//! workspace and the user's config; the mechanism is small: crewbox starts itself once
//! more as a sandbox server (`server`), which for each policy clones an init process
//! ([`helper`]) into new user, mount, pid, IPC and network namespaces; it builds a view
//! of the filesystem on an empty root ([`view`]), and the command restricts itself with
//! Landlock (`rules`) and resource limits, then execs. It needs no install step and no
//! privileges, and it fails closed: where the kernel cannot provide a piece, the process
//! is refused with an error that names the missing feature and the setting that turns
//! the sandbox off (`sandbox = "off"`, user config only).
//!
//! Every agent gets an [`AgentSandbox`]: its private `$HOME` and `/tmp` (created on first
//! use, removed when the agent ends) and what it may write. Its environment is built from
//! an allowlist ([`env`]) in every mode, so provider keys never reach a command.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

pub mod child;
#[cfg(target_os = "linux")]
mod client;
pub mod config;
pub mod env;
#[cfg(target_os = "linux")]
pub mod helper;
pub mod layout;
pub mod policy;
#[cfg(target_os = "linux")]
mod rules;
#[cfg(target_os = "linux")]
mod server;
mod spawn;
#[cfg(target_os = "linux")]
mod sys;
pub mod view;

pub use child::{SandboxedChild, SetupFailure};
pub use config::{SandboxConfig, SandboxMode, SandboxSetting};
pub use env::{EnvPolicy, Secrets};
pub use policy::Program;
pub use spawn::{ProbeReport, Spawn};

/// Why a sandboxed process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel (or its configuration) lacks something the sandbox needs.
    #[error(
        "the process sandbox is not available: {message}. Agent commands are refused rather than \
         run unconfined; to run them without a sandbox, set `sandbox = \"off\"` in your user \
         config ({config}) — not recommended"
    )]
    Unavailable {
        /// What is missing (from the helper).
        message: String,
        /// The user config file to put the setting in.
        config: String,
    },
    /// The program itself could not be started inside the sandbox.
    #[error("{0}")]
    Exec(String),
    /// This process has no helper entry point and none was given.
    #[error(
        "no sandbox helper: this program does not carry crewbox's sandbox entry point \
         (crewbox::entry::run_if_sandbox_helper, first thing in main) and no helper binary was given"
    )]
    NoHelper,
    /// No sandbox was configured for the agents of this process.
    #[error("agent commands are refused: no process sandbox was configured for this agent")]
    NotConfigured,
    /// The sandbox needs Linux.
    #[error(
        "the process sandbox needs Linux; set `sandbox = \"off\"` in your user config to run \
         agent commands unconfined"
    )]
    Unsupported,
    /// A file or directory of the sandbox could not be prepared.
    #[error("sandbox: {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The helper could not be started or talked to.
    #[error("cannot start the sandbox helper {}: {source}", helper.display())]
    Helper {
        /// The helper binary.
        helper: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Which binary serves as the helper.
#[derive(Clone, Debug, Default)]
pub enum Helper {
    /// This very process (`/proc/self/exe`): right for the `crewbox` binary, whose `main`
    /// calls `crewbox::entry::run_if_sandbox_helper` ([`helper::run_if_helper`]). Refused in a process that does not.
    #[default]
    CurrentExe,
    /// Another `crewbox` binary (tests and benches, whose own binary is a harness).
    Path(PathBuf),
}

/// How to build a [`Sandbox`].
#[derive(Clone, Debug, Default)]
pub struct SandboxOptions {
    /// The user's settings.
    pub config: SandboxConfig,
    /// Which binary is the helper.
    pub helper: Helper,
    /// Where the sandbox keeps its directories (`<state>/sandbox`); and what to hide.
    pub paths: layout::HostPaths,
    /// Every variable a configured provider reads a key from.
    pub key_vars: Vec<String>,
    /// The user config file (named in errors and warnings).
    pub user_config: Option<PathBuf>,
}

struct Shared {
    mode: Mode,
    config: SandboxConfig,
    secrets: Secrets,
    user_config: String,
    live: Mutex<HashMap<String, Weak<AgentSandbox>>>,
}

enum Mode {
    /// Commands refused: nothing configured.
    Missing,
    /// No process sandbox.
    Off,
    /// Sandboxed.
    On(Box<On>),
}

struct On {
    helper: PathBuf,
    layout: view::HostLayout,
    /// `<state>/sandbox`: `mnt/` (where each new root is built) and `agents/`.
    base: PathBuf,
    /// The sandbox server, started on first use (and again if it died).
    server: Mutex<Option<Arc<client::Server>>>,
}

impl On {
    fn server(&self) -> Result<Arc<client::Server>, SandboxError> {
        let mut server = self.server.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = &*server
            && !s.is_dead()
        {
            return Ok(s.clone());
        }
        let started = Arc::new(client::Server::start(&self.helper).map_err(|source| {
            SandboxError::Helper {
                helper: self.helper.clone(),
                source,
            }
        })?);
        *server = Some(started.clone());
        Ok(started)
    }
}

/// The sandbox of one crewbox process: settings, host layout, helper. Cheap to clone.
#[derive(Clone)]
pub struct Sandbox {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("mode", &self.mode_name())
            .finish()
    }
}

/// Who an [`AgentSandbox`] is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentScope {
    /// The agent's id (names its private directories).
    pub id: String,
    /// Its workspace (`None`: it works in its private temp dir).
    pub workspace: Option<PathBuf>,
    /// Whether it may write the workspace (the `write` capability).
    pub writable: bool,
    /// Whether its commands share the host's network.
    pub network: bool,
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> SandboxError + 'a {
    move |source| SandboxError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

impl Sandbox {
    /// A sandbox that refuses every command (the default of an agent manager until one
    /// is configured: fail closed).
    pub fn missing() -> Self {
        Self::with_mode(
            Mode::Missing,
            SandboxConfig::default(),
            Secrets::default(),
            None,
        )
    }

    fn with_mode(
        mode: Mode,
        config: SandboxConfig,
        secrets: Secrets,
        user_config: Option<&Path>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                mode,
                config,
                secrets,
                user_config: user_config
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "~/.config/crewbox/config.toml".into()),
                live: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The sandbox the options describe: looks at the host once and prepares
    /// `<state>/sandbox` (removing what dead crewbox processes left there).
    pub fn new(opts: SandboxOptions) -> Result<Self, SandboxError> {
        let secrets = Secrets::new(opts.key_vars.iter().map(String::as_str), |n| {
            std::env::var(n).ok()
        });
        let mode = match opts.config.mode {
            SandboxMode::Off => Mode::Off,
            SandboxMode::On => Mode::On(Box::new(Self::prepare(&opts)?)),
        };
        Ok(Self::with_mode(
            mode,
            opts.config,
            secrets,
            opts.user_config.as_deref(),
        ))
    }

    #[cfg(target_os = "linux")]
    fn prepare(opts: &SandboxOptions) -> Result<On, SandboxError> {
        let helper = match &opts.helper {
            Helper::CurrentExe if helper::entry_installed() => {
                crate::child::own_exe().map_err(|e| SandboxError::Helper {
                    helper: PathBuf::from("/proc/self/exe"),
                    source: e,
                })?
            }
            Helper::CurrentExe => return Err(SandboxError::NoHelper),
            Helper::Path(p) => p.clone(),
        };
        let base = opts.paths.state_dir.join("sandbox");
        for dir in [base.join("mnt"), base.join("agents")] {
            std::fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
        }
        spawn::prune_agent_dirs(&base.join("agents"));
        let layout = layout::discover(&opts.paths, &opts.config);
        Ok(On {
            helper,
            layout,
            base,
            server: Mutex::new(None),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn prepare(_opts: &SandboxOptions) -> Result<On, SandboxError> {
        Err(SandboxError::Unsupported)
    }

    /// `on`, `off` or `missing`.
    pub fn mode_name(&self) -> &'static str {
        match self.shared.mode {
            Mode::Missing => "missing",
            Mode::Off => "off",
            Mode::On(_) => "on",
        }
    }

    /// Whether commands run unconfined by the user's choice (say so on every run).
    pub fn is_off(&self) -> bool {
        matches!(self.shared.mode, Mode::Off)
    }

    /// The warning printed on every run while the sandbox is off.
    pub fn off_warning(&self) -> String {
        format!(
            "warning: the process sandbox is off (sandbox = \"off\" in {}): agent commands run \
             with your full access to files, processes and the network",
            self.shared
                .config
                .origin
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| self.shared.user_config.clone())
        )
    }

    /// The error for a helper's failure report: the program's own trouble, or a
    /// sandbox that cannot be set up here (naming the setting that turns it off).
    pub fn describe_failure(&self, failure: SetupFailure) -> SandboxError {
        match failure.stage {
            Some(policy::Stage::Exec) => SandboxError::Exec(failure.message),
            Some(
                policy::Stage::Policy
                | policy::Stage::Namespaces
                | policy::Stage::Mounts
                | policy::Stage::Limits
                | policy::Stage::Network
                | policy::Stage::Landlock,
            )
            | None => SandboxError::Unavailable {
                message: failure.message,
                config: self.shared.user_config.clone(),
            },
        }
    }

    /// The user's sandbox settings.
    pub fn config(&self) -> &SandboxConfig {
        &self.shared.config
    }

    /// Whether `name=value`, set for a process explicitly, would hand it a provider's
    /// key (the variable a key is read from, or a value holding a key).
    pub fn carries_key(&self, name: &str, value: &str) -> bool {
        self.shared.secrets.is_secret(name, value)
    }

    /// The sandbox of one agent, registered under its id until it is dropped.
    pub fn agent(&self, scope: AgentScope) -> Arc<AgentSandbox> {
        let id = scope.id.clone();
        let agent = Arc::new(AgentSandbox {
            sandbox: self.clone(),
            scope,
            dirs: Mutex::new(None),
        });
        self.shared
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::downgrade(&agent));
        agent
    }

    /// The live sandbox of agent `id`, if it has one (how the `command` provider finds
    /// the agent it answers for).
    pub fn for_agent(&self, id: &str) -> Option<Arc<AgentSandbox>> {
        self.shared
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .and_then(Weak::upgrade)
    }
}

/// One agent's sandbox: what its processes may see and write, and its private dirs.
pub struct AgentSandbox {
    sandbox: Sandbox,
    scope: AgentScope,
    dirs: Mutex<Option<Arc<spawn::AgentDirs>>>,
}

impl std::fmt::Debug for AgentSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSandbox")
            .field("scope", &self.scope)
            .field("mode", &self.sandbox.mode_name())
            .finish()
    }
}

impl AgentSandbox {
    /// Who it is for.
    pub fn scope(&self) -> &AgentScope {
        &self.scope
    }

    /// The process-wide sandbox it belongs to.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Prepares running `program` for this agent (see [`Spawn`]).
    pub fn command(&self, program: Program) -> Spawn<'_> {
        Spawn::new(self, program)
    }
}

impl Drop for AgentSandbox {
    fn drop(&mut self) {
        let mut live = self
            .sandbox
            .shared
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if live
            .get(&self.scope.id)
            .is_some_and(|w| w.strong_count() == 0)
        {
            live.remove(&self.scope.id);
        }
    }
}

//! Why a run could not be carried out. Agents failing is not an error (it is a result in
//! the report); these are the cases where the engine could not do what was asked. Each
//! variant says how the CLI treats it, and [`EngineError::class`] is the one place that
//! decision is made.

use std::path::PathBuf;

use crate::config::ProviderChoiceError;
use crate::ids::{AgentId, RunId};
use crate::plugin::{PluginError, PluginFault, PluginKind};
use crate::provider::ProviderError;
use crate::sandbox::SandboxError;
use crate::store::StoreError;
use crate::team::FindTeamError;
use crate::vocab::Mode;
use crate::worktree::WorktreeError;

/// How a caller treats an [`EngineError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The request, the configuration or the environment is wrong; fix it and retry
    /// (`crewbox` exits 2).
    Usage,
    /// A plugin faulted — a trap, its deadline or a limit (`crewbox` exits 3).
    PluginFault,
    /// The process was asked to stop; the run is left resumable (`crewbox` exits 130).
    Interrupted,
}

/// Why a run could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request cannot run as asked. CLI: exit 2.
    #[error(transparent)]
    Usage(#[from] UsageError),
    /// No provider could be chosen: none is configured, the name is not one of the
    /// user's, or `scripted` without a script. CLI: exit 2.
    #[error(transparent)]
    ProviderChoice(#[from] ProviderChoiceError),
    /// A provider could not be built (bad script, missing key variable…). CLI: exit 2.
    /// (Its error names the provider already.)
    #[error("{source}")]
    Provider {
        /// The provider's name.
        name: String,
        /// Why.
        source: ProviderError,
    },
    /// No team of that name is defined, or its file could not be loaded. CLI: exit 2.
    #[error(transparent)]
    UnknownTeam(#[from] FindTeamError),
    /// A plugin could not be found or loaded (wrong kind, unreadable file, a component
    /// importing what its kind is never granted). CLI: exit 2.
    #[error(transparent)]
    PluginLoad(#[from] PluginLoadError),
    /// A plugin faulted while the run needed its answer (dispatch, a crew role). CLI:
    /// exit 3; inside a run the run is recorded as failed with its `fault`.
    #[error("{step}: {fault}")]
    PluginFault {
        /// Which call faulted.
        step: PluginStep,
        /// The fault (it names the plugin).
        fault: PluginFault,
    },
    /// A git worktree operation for an agent failed. CLI: exit 2.
    #[error("worktree of agent {agent}: {source}")]
    Worktree {
        /// The agent.
        agent: AgentId,
        /// What git said.
        source: WorktreeError,
    },
    /// The process sandbox for agents' commands could not be set up (its directories,
    /// no helper). CLI: exit 2.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The store failed; nothing already stored is lost. CLI: exit 2.
    #[error(transparent)]
    Store(StoreError),
    /// Something else holds what the run needs (its team's reflect loop, or another
    /// live process driving the run). CLI: exit 2.
    #[error(transparent)]
    Busy(StoreError),
    /// The run cannot be resumed (unknown, finished, or its stored request no longer
    /// reads). CLI: exit 2.
    #[error("run {run} cannot be resumed: {reason}")]
    NotResumable {
        /// The run.
        run: RunId,
        /// Why.
        reason: String,
    },
    /// The run was stopped on request, so no further agent starts. Modes end on it;
    /// the run is recorded as cancelled and never reaches the CLI as an error.
    #[error("run {0} was stopped")]
    Stopped(RunId),
    /// The process was asked to stop; the run is left unfinished and resumable.
    /// CLI: exit 130.
    #[error("run {0} was interrupted; finish it with `crewbox resume {0}`")]
    Interrupted(RunId),
    /// A part of this process failed under the run (the spawn queue shut down, a
    /// worktree still held after its agent ended). CLI: exit 2.
    #[error("internal error: {0}")]
    Internal(String),
    /// The executor the user chose failed around the agents (scale-out: its server,
    /// stream or git remote; the error is `remote::RemoteError`). CLI: exit 2.
    #[error(transparent)]
    Remote(Box<dyn std::error::Error + Send + Sync>),
}

impl EngineError {
    /// How the CLI treats this error.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::PluginFault { .. } => ErrorClass::PluginFault,
            Self::Interrupted(_) => ErrorClass::Interrupted,
            Self::Usage(_)
            | Self::ProviderChoice(_)
            | Self::Provider { .. }
            | Self::UnknownTeam(_)
            | Self::PluginLoad(_)
            | Self::Worktree { .. }
            | Self::Sandbox(_)
            | Self::Store(_)
            | Self::Busy(_)
            | Self::NotResumable { .. }
            | Self::Stopped(_)
            | Self::Internal(_)
            | Self::Remote(_) => ErrorClass::Usage,
        }
    }
}

/// Store refusals that mean "someone else has it" are [`EngineError::Busy`]; the rest
/// are store failures.
impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::TeamBusy { .. } | StoreError::RunBusy { .. } => Self::Busy(e),
            other => Self::Store(other),
        }
    }
}

/// A request that cannot run as asked.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// A team mode was asked for without a team.
    #[error("mode `{0}` runs a team: pass --team NAME")]
    TeamModeWithoutTeam(Mode),
    /// A team was asked to run in a mode that does not run teams.
    #[error(
        "team `{team}` cannot run in mode `{mode}` (broadcast, sequential, orchestrate or reflect)"
    )]
    NotATeamMode {
        /// The team.
        team: String,
        /// The mode asked for.
        mode: Mode,
    },
    /// Agents need worktrees but the directory has none to give.
    #[error(
        "{} is not a git repository with a commit, so agents cannot get worktrees; \
         commit something first, or pass --isolation none to work in place",
        repo.display()
    )]
    NoWorktrees {
        /// The directory.
        repo: PathBuf,
    },
    /// `crewbox retry` was given an agent that is not a dead letter.
    #[error("agent {agent} is not a dead letter ({why}); `crewbox dead` lists those there are")]
    NotDead {
        /// The agent.
        agent: AgentId,
        /// Why not.
        why: String,
    },
    /// `crewbox retry --max-turns 0`.
    #[error("--max-turns must be at least 1")]
    RetryTurns,
    /// A mode that runs writing agents side by side, asked to run them in the user's
    /// checkout: they would overwrite each other's files unseen.
    #[error(
        "mode `{mode}` runs {writers} writing agents side by side; with --isolation none they \
         would all write your checkout and overwrite each other's files. Use worktrees (the \
         default), a one-at-a-time mode (single, crew, sequential), or --read-only"
    )]
    InPlaceSideBySide {
        /// The mode.
        mode: Mode,
        /// How many of its agents may write.
        writers: usize,
    },
    /// The prompt is empty or blank.
    #[error("the prompt is empty: say what the agents should do")]
    EmptyPrompt,
    /// `--mcp NAME` names no server of the user's config.
    #[error(
        "`{name}` is not one of your MCP servers ({}); define it as [mcp.servers.{name}] in your \
         user config, or approve a repository server with `crewbox trust --mcp {name}`",
        if known.is_empty() { "none is configured".to_owned() } else { known.join(", ") }
    )]
    UnknownMcpServer {
        /// The name given.
        name: String,
        /// The servers there are.
        known: Vec<String>,
    },
}

/// Which plugin call faulted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PluginStep {
    /// The dispatcher deciding the mode of an `auto` run.
    Dispatch,
    /// A crew role.
    Role {
        /// The role's name.
        role: String,
        /// Which of its calls.
        call: RoleCall,
    },
    /// A validator judging an agent's work.
    Validate {
        /// The validator's name.
        validator: String,
    },
}

/// The calls a role plugin answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleCall {
    /// `spec()`.
    Spec,
    /// `prompt(context)`.
    Prompt,
    /// `interpret(context, output)`.
    Interpret,
}

impl std::fmt::Display for PluginStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dispatch => f.write_str("dispatcher fault"),
            Self::Role { role, call } => {
                let call = match call {
                    RoleCall::Spec => "spec",
                    RoleCall::Prompt => "prompt",
                    RoleCall::Interpret => "interpret",
                };
                write!(f, "role `{role}` faulted in {call}")
            }
            Self::Validate { validator } => write!(f, "validator `{validator}` faulted"),
        }
    }
}

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PluginLoadError {
    /// A built-in or a component of another kind than the run needs.
    #[error("{what} `{name}` is a {actual}, not a {expected}")]
    WrongKind {
        /// `built-in plugin` or `plugin`.
        what: &'static str,
        /// Its name or path.
        name: String,
        /// What it is.
        actual: PluginKind,
        /// What was needed.
        expected: PluginKind,
    },
    /// Neither a built-in, nor a `.wasm` path, nor a plugin of that name in a plugin
    /// directory.
    #[error(
        "no {kind} named `{name}`: not a built-in ({}), not in {}; a plugin file must end in .wasm",
        builtins.join(", "),
        if searched.is_empty() { "any plugin directory".to_owned() } else { searched.join(" or ") }
    )]
    NotFound {
        /// The name given (escaped).
        name: String,
        /// The kind needed.
        kind: PluginKind,
        /// The built-ins of that kind.
        builtins: Vec<&'static str>,
        /// The plugin directories searched.
        searched: Vec<String>,
    },
    /// A task from a coordinator named a plugin by path: a worker loads plugins by name
    /// only (its user's, or a clone it trusts), never a file the task points at.
    #[error("the task names {kind} `{name}` by path; a worker loads plugins by name only")]
    PathFromTask {
        /// The name given (escaped).
        name: String,
        /// The kind needed.
        kind: PluginKind,
    },
    /// The component file could not be read (missing, not a regular file, too large).
    #[error(transparent)]
    File(crate::plugin::file::FileError),
    /// The runtime refused the component (invalid, imports what it is not granted…).
    #[error(transparent)]
    Runtime(#[from] PluginError),
    /// A built-in's embedded bytes do not unpack (a damaged binary).
    #[error(transparent)]
    Damaged(#[from] crate::plugin::builtin::Damaged),
}

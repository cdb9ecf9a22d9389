//! Tools an agent can call, one file per tool, each declaring the capability it needs.
//!
//! Every path argument is resolved inside the agent's workspace root through the
//! confined filesystem (see `path`): `..` above the root, absolute paths and symlinks
//! that leave the root are refused, `.git` is never opened, and `.crewbox/` is
//! read-only unless the user's own config allows agents to change it.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use crate::provider::ToolSpec;

pub mod edit_file;
pub mod finish;
pub mod grep;
pub mod list_dir;
pub mod path;
pub mod read_file;
pub mod registry;
pub mod run_command;
pub mod spawn_agent;
pub(crate) mod support;
pub mod write_file;

pub use edit_file::EditFile;
pub use finish::Finish;
pub use grep::Grep;
pub use list_dir::ListDir;
pub use path::FileAccess;
pub use read_file::ReadFile;
pub use registry::ToolRegistry;
pub use run_command::RunCommand;
pub use spawn_agent::SpawnAgent;
pub use write_file::WriteFile;

pub use crate::vocab::Capability;

/// Starts child agents on behalf of a tool call (implemented by the agent manager).
#[async_trait]
pub trait Spawner: Send + Sync {
    /// Spawns a child of `parent` with `role` and `task` and waits for its result text.
    async fn spawn_child(
        &self,
        parent: &crate::ids::AgentId,
        role: &str,
        task: &str,
    ) -> Result<String, SpawnError>;
}

/// The quota on children a spawn ran into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildQuota {
    /// `max_children`: children of one agent.
    PerAgent,
    /// `max_children_per_run`: children of all the agents of one run.
    PerRun,
}

impl ChildQuota {
    /// The key under `[quotas]`.
    pub fn key(self) -> &'static str {
        match self {
            Self::PerAgent => "max_children",
            Self::PerRun => "max_children_per_run",
        }
    }

    fn whose(self) -> &'static str {
        match self {
            Self::PerAgent => "you have already started the",
            Self::PerRun => "this run's agents have already started the",
        }
    }
}

/// Why `spawn_agent` returned no child result. Both go back to the model as the tool's
/// error; a quota means no child started, and further calls are refused the same way.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// A quota on children is used up: the child was not started.
    #[error(
        "no child started: {} {max} child agents allowed (quota `{}`); do the rest of the \
         work yourself",
        quota.whose(),
        quota.key()
    )]
    Quota {
        /// Which quota.
        quota: ChildQuota,
        /// Its value.
        max: u32,
    },
    /// The child could not start, or ended without a usable result.
    #[error("{0}")]
    Failed(String),
}

/// What a tool call can see: the workspace, for `spawn_agent` a spawner, and for
/// tools that start processes the agent's process sandbox.
#[derive(Clone)]
pub struct ToolContext {
    /// The agent calling the tool.
    pub agent_id: crate::ids::AgentId,
    /// The root every path resolves inside (canonical).
    pub root: PathBuf,
    /// Present only when the agent holds `spawn`.
    pub spawner: Option<Arc<dyn Spawner>>,
    /// Where processes run; present only when the agent holds `exec`. Without it every
    /// process is refused.
    pub sandbox: Option<Arc<crate::sandbox::AgentSandbox>>,
}

/// A tool call's successful result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text sent back to the model.
    pub content: String,
    /// Set by `finish`: the agent is done, with this summary.
    pub finish: Option<String>,
}

impl ToolOutput {
    /// A plain text result.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            finish: None,
        }
    }
}

/// Why a tool call failed. Every variant goes back to the model as a tool error; the
/// run goes on.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The model sent arguments that do not fit the tool's schema.
    #[error("invalid arguments for `{tool}`: {message}")]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// No tool of that name is offered to this agent.
    #[error("unknown tool `{0}`")]
    UnknownTool(String),
    /// The agent lacks the capability this tool needs.
    #[error("tool `{tool}` needs the `{capability:?}` capability, which this agent does not have")]
    Denied {
        /// The tool.
        tool: String,
        /// The missing capability.
        capability: Capability,
    },
    /// The path resolves outside the workspace.
    #[error("path `{path}` is outside the workspace: {reason}")]
    OutsideWorkspace {
        /// The path as given.
        path: String,
        /// Why (`..`, absolute, symlink).
        reason: String,
    },
    /// The path is inside the workspace but off limits to the file tools (`.git`, or
    /// `.crewbox/` without the user's grant).
    #[error("`{path}` is off limits to the file tools: {reason}")]
    Refused {
        /// The path as given.
        path: String,
        /// What it names and why it is off limits.
        reason: String,
    },
    /// The tool ran and failed (file missing, no unique match, command failed to start…).
    #[error("{0}")]
    Failed(String),
}

/// One tool.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &'static str;
    /// The capability it needs.
    fn capability(&self) -> Capability;
    /// Its description and argument schema for the model.
    fn spec(&self) -> ToolSpec;
    /// Runs it.
    async fn call(
        &self,
        ctx: &ToolContext,
        args: serde_json::Value,
    ) -> Result<ToolOutput, ToolError>;
}

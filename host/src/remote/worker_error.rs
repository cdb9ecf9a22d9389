//! Why a scale-out worker stopped, or could not run a task.

use super::RemoteError;
use super::git::GitError;
use crate::config::ConfigError;
use crate::engine::EngineError;
use crate::store::StoreError;

/// Why `crewbox worker` stopped, or one task failed (the task's failure names it).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// NATS, the streams, the remote's git, or a refused message.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// A git operation against the task's remote failed.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The user's configuration is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No state base was given and none can be derived.
    #[error("neither XDG_STATE_HOME nor HOME is set; pass --state-dir")]
    NoStateHome,
    /// The state base cannot be made absolute.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The worker's own store directory cannot be created in `dir`.
    #[error("cannot create the worker's own store directory in {}: {source}", dir.display())]
    OwnDir {
        /// The worker directory of the state base.
        dir: std::path::PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The worker's own store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The agent could not be built or run.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The worker's slots were closed (it is shutting down).
    #[error(transparent)]
    Slots(#[from] tokio::sync::AcquireError),
    /// A clone of the remote could not be opened as a repository.
    #[error(transparent)]
    Open(Box<dyn std::error::Error + Send + Sync>),
}

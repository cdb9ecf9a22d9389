//! Turning global arguments into a resolved repository (paths, configuration, store).

use std::path::PathBuf;

pub use crewbox::Repository as Context;

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

impl GlobalArgs {
    /// Resolves the repository, loads configuration and picks the state directory.
    pub fn resolve(&self) -> anyhow::Result<Context> {
        Ok(Context::open(
            self.repo.as_deref(),
            self.state_dir.as_deref(),
        )?)
    }
}

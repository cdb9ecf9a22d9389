//! Teams: named groups of members with charters, run in one of the team modes.
//!
//! A team is defined in a TOML file (see [`file`] and `EXAMPLE.toml`); definitions
//! come from built-in, user and repo sources, higher ones overriding lower ones.

pub mod file;

pub use file::{
    Access, DEFAULT_WORKER_TIMEOUT, Evaluator, MAX_NAME_LEN, Member, Orchestrator, Team, TeamError,
    TeamProblem, TeamSource, load_dir, load_file, merge_layers, parse_team, valid_name,
};

use std::path::{Path, PathBuf};

/// The control-message target of team `name` (`crewbox send --team`): its running
/// reflect loop reads messages sent there at the start of its next iteration.
pub fn message_target(name: &str) -> String {
    format!("team:{}", name.to_ascii_lowercase())
}

/// The directories teams are read from, lowest precedence first: the user's
/// `$XDG_CONFIG_HOME/crewbox/teams/`, then the repository's `.crewbox/teams/`.
pub fn team_dirs(repo: &Path) -> (Option<PathBuf>, PathBuf) {
    let user = crate::config::xdg_dir("XDG_CONFIG_HOME", ".config")
        .map(|d| d.join("crewbox").join("teams"));
    (user, repo.join(".crewbox").join("teams"))
}

/// Every team visible from `repo`, user teams overridden by repo teams of the same name.
/// Blocking: call it from `spawn_blocking`.
pub fn discover(repo: &Path) -> Result<Vec<Team>, TeamError> {
    let (user, repo_dir) = team_dirs(repo);
    let user = match user {
        Some(dir) => load_dir(&dir, TeamSource::User)?,
        None => Vec::new(),
    };
    let repo = load_dir(&repo_dir, TeamSource::Repo)?;
    Ok(merge_layers([user, repo]))
}

impl TeamSource {
    /// The file the team came from (none for built-in teams).
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Builtin => None,
            Self::User(p) | Self::Repo(p) => Some(p),
        }
    }

    /// `builtin`, `user` or `repo`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Builtin => "builtin",
            Self::User(_) => "user",
            Self::Repo(_) => "repo",
        }
    }
}

//! Where a team and its members came from: the source level (built-in < user <
//! repo), the format it was read from, and what of an imported pack was left out.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The format a team was read from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TeamFormat {
    /// A `.crewbox/teams/NAME.toml` file (or the user's).
    #[default]
    Crewbox,
    /// A Squad pack in `.squad/`.
    Squad,
    /// A Squad pack in the legacy `.ai-team/`.
    SquadLegacy,
    /// Claude Code subagents (`.claude/agents/`, `~/.claude/agents/`).
    Claude,
}

impl TeamFormat {
    /// `crewbox`, `squad`, `squad-legacy` or `claude`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Crewbox => "crewbox",
            Self::Squad => "squad",
            Self::SquadLegacy => "squad-legacy",
            Self::Claude => "claude",
        }
    }

    /// Whether the team was imported from another tool's files.
    pub fn is_pack(self) -> bool {
        self != Self::Crewbox
    }

    /// Whether the format says what its members may do. Squad declares no tools:
    /// its members ask for read-only and are granted the user's pack ceiling.
    pub fn declares_access(self) -> bool {
        !matches!(self, Self::Squad | Self::SquadLegacy)
    }
}

impl std::fmt::Display for TeamFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A roster row or file that did not become a member, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The row's name, or the file.
    #[serde(flatten)]
    pub what: SkippedWhat,
    /// Why it is not a member.
    pub reason: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.what {
            SkippedWhat::Name(n) => write!(f, "{n}: {}", self.reason),
            SkippedWhat::File(p) => write!(f, "{}: {}", p.display(), self.reason),
        }
    }
}

/// What was skipped: a roster row by its name, or a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SkippedWhat {
    /// A roster row, by the name it shows.
    Name(String),
    /// A file.
    File(#[serde(serialize_with = "crate::paths::serde_path::serialize")] PathBuf),
}

/// Where a team definition came from; later sources override earlier ones by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TeamSource {
    /// Shipped with crewbox.
    Builtin,
    /// `$XDG_CONFIG_HOME/crewbox/teams/`, this file.
    User(PathBuf),
    /// The repository's `.crewbox/teams/`, this file.
    Repo(PathBuf),
}

impl TeamSource {
    /// The file or directory the team came from (none for built-in teams).
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

    /// Precedence rank: built-in < user < repo.
    pub(super) fn rank(&self) -> u8 {
        match self {
            Self::Builtin => 0,
            Self::User(_) => 1,
            Self::Repo(_) => 2,
        }
    }
}

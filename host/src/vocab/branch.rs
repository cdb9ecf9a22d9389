//! Where a finished agent's work lives, and what was left out of its commit.

use serde::{Deserialize, Serialize};

/// The `branch` artifact of a finished agent: where its work lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchArtifact {
    /// Short branch name, `crewbox/<agent-id>[-<timestamp>]`.
    pub branch: String,
    /// The commit the agent started from (hex id).
    pub base: String,
    /// Commits from `base` (exclusive) to the branch tip, oldest first (hex ids).
    pub commits: Vec<String>,
}

/// Why a path was left out of an agent's commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "kebab-case")]
pub enum LeftOutReason {
    /// The file is larger than `max_file_bytes`.
    FileTooLarge {
        /// Its size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// `max_files` files were taken already.
    TooManyFiles {
        /// The limit.
        limit: u64,
    },
    /// Taking it would pass `max_total_bytes`.
    TotalTooLarge {
        /// The limit.
        limit: u64,
    },
    /// It is in `.crewbox/`, which agents may not change.
    Crewbox,
    /// A git repository of its own inside the worktree (a `git init` or a clone the
    /// agent made): its files are not part of the agent's commit.
    NestedRepository,
    /// A name git keeps for its own directory on some file system (`.git` in a
    /// subdirectory, `git~1`, `.git.`, `.git:x`, `.git` with a character HFS+
    /// ignores): git refuses to commit it, and checked out elsewhere it would be a
    /// repository's directory.
    GitName,
    /// A directory nested deeper than git's library walks (its whole content).
    PathTooDeep {
        /// The deepest nesting taken.
        limit: u32,
    },
}

impl std::fmt::Display for LeftOutReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::FileTooLarge { bytes, limit } => {
                write!(f, "{bytes} bytes, over the {limit}-byte file limit")
            }
            Self::TooManyFiles { limit } => write!(f, "over the limit of {limit} changed files"),
            Self::TotalTooLarge { limit } => {
                write!(f, "over the {limit}-byte limit of one commit")
            }
            Self::Crewbox => write!(
                f,
                ".crewbox/ is read-only to agents (`[workspace] agents_write_crewbox`)"
            ),
            Self::NestedRepository => write!(
                f,
                "a git repository of its own inside the worktree; its files are not committed"
            ),
            Self::GitName => write!(
                f,
                "a name git keeps for its own directory on some file system; never committed"
            ),
            Self::PathTooDeep { limit } => write!(
                f,
                "nested deeper than {limit} directories, more than git's library walks; its files are not committed"
            ),
        }
    }
}

/// One path left out of an agent's commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The path, relative to the worktree root, `/`-separated.
    pub path: String,
    /// Why.
    #[serde(flatten)]
    pub reason: LeftOutReason,
}

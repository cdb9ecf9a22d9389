//! The one error type of the worktree module.

use std::path::PathBuf;

/// Why a worktree operation failed; each variant names the operation and the path.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The directory is not inside a git repository. The caller either errors out or, when
    /// the config says `isolation = "none"`, runs the agent in place.
    #[error("{path} is not inside a git repository")]
    NotARepository {
        /// The directory that was opened.
        path: PathBuf,
        /// What libgit2 said.
        #[source]
        source: git2::Error,
    },
    /// The repository has no working tree, so there is nothing to isolate.
    #[error("{path} is a bare repository; agents need a working tree")]
    BareRepository {
        /// The repository's git directory.
        path: PathBuf,
    },
    /// HEAD points to no commit yet (fresh `git init`); treated like a non-repository.
    #[error("repository {path} has no commit yet; commit once or run with isolation = \"none\"")]
    NoCommits {
        /// The repository root.
        path: PathBuf,
    },
    /// The worktree directory lies inside the repository, where agents' checkouts would
    /// show up as untracked files of the main working tree. A configuration error.
    #[error("worktree directory {worktrees_dir} is inside repository {repo_root}")]
    InsideRepository {
        /// The configured worktree directory.
        worktrees_dir: PathBuf,
        /// The repository root it is inside.
        repo_root: PathBuf,
    },
    /// The worktree was not handed out by this manager or was already finished; a bug in
    /// the caller, never retried.
    #[error("worktree {path} is not an active worktree of this manager")]
    UnknownWorktree {
        /// The worktree's path.
        path: PathBuf,
    },
    /// Something in the worktree points git elsewhere (its `.git` file, the admin
    /// directory's `gitdir` or `commondir`, `core.worktree`): nothing was snapshotted,
    /// committed or reset, and the slot is retired.
    #[error(
        "worktree {path} was tampered with: {what}; nothing in it was committed or reset, and it is not reused"
    )]
    Tampered {
        /// The worktree's path.
        path: PathBuf,
        /// What does not match.
        what: String,
    },
    /// A libgit2 operation failed; the agent's result is still on disk at `path`.
    #[error("git {op} failed on {path}: {source}")]
    Git {
        /// The git operation, e.g. `worktree add`, `reset --hard`, `commit`.
        op: &'static str,
        /// The repository or worktree path it ran on.
        path: PathBuf,
        /// What libgit2 said.
        #[source]
        source: git2::Error,
    },
    /// A filesystem operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// The filesystem operation, e.g. `remove worktree directory`.
        op: &'static str,
        /// The path it ran on.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The blocking task running a git operation panicked or was cancelled at shutdown.
    #[error("worktree task did not complete: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl WorktreeError {
    /// Wraps a libgit2 error with the operation and the path it ran on.
    pub(crate) fn git(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(git2::Error) -> Self {
        let path = path.into();
        move |source| Self::Git { op, path, source }
    }

    /// Wraps an I/O error with the operation and the path it ran on.
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { op, path, source }
    }
}

//! The file tools' view of the workspace: the confined filesystem (`crate::fs`) with
//! the tools' rules, and its refusals in words a model can act on.
//!
//! The rules:
//! - every path is relative to the workspace root and resolved from a descriptor of
//!   that root opened for the call, by the kernel (`openat2` with `RESOLVE_BENEATH`)
//!   or one component at a time with `O_NOFOLLOW`; nothing is re-resolved by name
//!   between a check and a use, so another agent swapping a directory for a symlink
//!   cannot redirect a read or a write;
//! - `.` and `..` are resolved lexically first (`link/..` is the root whatever `link`
//!   points to); a `..` above the root and absolute paths are refused;
//! - relative symlinks are followed while they stay inside the workspace; an absolute
//!   symlink or one climbing out is refused, naming the link;
//! - `.git` — git's directory, or a linked worktree's `.git` file that tells git where
//!   its repository is — is never read, listed or written, at any depth and in any
//!   spelling a file system treats as `.git` (`.GIT`, `.git.`, …), whether named or
//!   reached through a symlink;
//! - `.crewbox/` at the workspace root (the repository's crewbox configuration, teams and
//!   plugins) may be read but not created or changed, unless the user's own config
//!   allows it (`[workspace] agents_write_crewbox = true`).

use std::path::{Path, PathBuf};

use super::ToolError;
use crate::fs::{FsError, Root, Rules};

/// What the file tools may change besides the workspace's ordinary files. Only the
/// user's own config widens it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileAccess {
    /// Whether agents may create and change files in the workspace's `.crewbox/`.
    pub crewbox_writable: bool,
}

impl FileAccess {
    /// How the file tools resolve paths.
    pub(crate) fn rules(self) -> Rules {
        Rules::LINKS_BENEATH.protecting_crewbox(!self.crewbox_writable)
    }
}

/// Opens the workspace root for one call. Blocking.
pub(crate) fn open_root(root: &Path) -> Result<Root, ToolError> {
    Root::open(root).map_err(|e| {
        ToolError::Failed(format!(
            "the workspace root `{}` cannot be opened: {e}",
            root.display()
        ))
    })
}

/// `input` as shown to the model: normalised (`.` for the root), or as given when it
/// cannot be normalised.
pub(crate) fn shown(input: &str) -> String {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in Path::new(input).components() {
        match c {
            std::path::Component::Normal(p) => parts.push(p),
            std::path::Component::ParentDir => {
                if parts.pop().is_none() {
                    return input.to_owned();
                }
            }
            std::path::Component::CurDir => {}
            _ => return input.to_owned(),
        }
    }
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.iter().collect::<PathBuf>().display().to_string()
    }
}

fn outside(input: &str, reason: String) -> ToolError {
    ToolError::OutsideWorkspace {
        path: input.to_owned(),
        reason,
    }
}

fn refused(input: &str, reason: String) -> ToolError {
    ToolError::Refused {
        path: input.to_owned(),
        reason,
    }
}

/// A refusal or failure of the confined filesystem, for the model (`input` is the path
/// as the model gave it).
pub(crate) fn error(input: &str, e: FsError) -> ToolError {
    let at = shown(input);
    match e {
        FsError::Absolute { .. } => outside(
            input,
            "absolute paths are not allowed; give a path relative to the workspace root".into(),
        ),
        FsError::Climbs { .. } => outside(input, "`..` climbs above the workspace root".into()),
        FsError::LinkEscapes { link, target, .. } => outside(
            input,
            format!(
                "`{}` is a symlink to `{}`, which is outside the workspace",
                link.display(),
                target.display()
            ),
        ),
        FsError::Link { link, .. } => outside(
            input,
            format!(
                "`{}` is a symlink, which is not followed here",
                link.display()
            ),
        ),
        FsError::TooManyLinks { .. } => outside(
            input,
            format!(
                "it crosses more than {} symlinks (a loop?)",
                crate::fs::MAX_LINKS
            ),
        ),
        FsError::Git { component, .. } => refused(
            input,
            format!(
                "`{component}` is git's own directory (the repository's configuration, hooks, \
                 and the pointer telling git where its work tree is); the file tools never read \
                 or write it, at any depth"
            ),
        ),
        FsError::Protected { .. } => refused(
            input,
            "`.crewbox/` holds this repository's crewbox configuration, teams and plugins; \
             agents may read it but not change it (the user can allow it with \
             `[workspace] agents_write_crewbox = true` in their own config)"
                .into(),
        ),
        FsError::Invalid { .. } => ToolError::Failed(format!("`{at}` contains a NUL byte")),
        FsError::NotFound { .. } => ToolError::Failed(format!("`{at}` does not exist")),
        FsError::IsDirectory { .. } => ToolError::Failed(format!(
            "`{at}` is a directory; use list_dir to see its entries"
        )),
        FsError::NotDirectory { .. } => ToolError::Failed(format!(
            "`{at}` is not a directory (it is a file, or goes through one)"
        )),
        FsError::NotRegular { kind, .. } => ToolError::Failed(format!(
            "`{at}` is not a regular file (a {kind}); it is not opened"
        )),
        FsError::TooLarge { limit, .. } => ToolError::Failed(format!(
            "`{at}` is larger than {}",
            super::support::human_bytes(usize::try_from(limit).unwrap_or(usize::MAX))
        )),
        FsError::Io { op, source, .. } => {
            ToolError::Failed(format!("cannot {op} `{at}`: {source}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_shown_normalised() {
        assert_eq!(shown(""), ".");
        assert_eq!(shown("./src/../src/./a.rs"), "src/a.rs");
        assert_eq!(shown("../x"), "../x");
        assert_eq!(shown("/etc/passwd"), "/etc/passwd");
    }

    #[test]
    fn refusals_say_what_and_why() {
        let git = error(
            ".GIT/config",
            FsError::Git {
                path: ".GIT/config".into(),
                component: ".GIT".into(),
            },
        )
        .to_string();
        assert!(git.starts_with("`.GIT/config` is off limits"), "{git}");
        assert!(git.contains("`.GIT` is git's own directory"), "{git}");
        let cb = error(
            ".crewbox/config.toml",
            FsError::Protected {
                path: ".crewbox/config.toml".into(),
            },
        )
        .to_string();
        assert!(cb.contains("agents_write_crewbox"), "{cb}");
        assert_eq!(
            FileAccess::default().rules(),
            Rules::LINKS_BENEATH.protecting_crewbox(true)
        );
    }
}

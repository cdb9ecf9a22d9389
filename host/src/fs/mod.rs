//! One confined filesystem: every file crewbox opens on someone else's behalf — an
//! agent's file tools, a plugin's workspace view, a repository's charters, packs and
//! config — and every file it writes atomically (pack write-back, the trust store, the
//! plugin cache) goes through here. It imports nothing above it.
//!
//! # Rules
//! - A [`Root`] is a directory opened once; every path is resolved from its descriptor,
//!   never by re-resolving a path string, so a directory swapped for a symlink between a
//!   check and a use cannot redirect anything: there is no check apart from the use.
//! - A path is relative. It is normalised lexically first (`a/../b` is `b`, like a URL:
//!   `link/..` is the root whatever `link` points to); a `..` above the root, an
//!   absolute path or a NUL byte is refused.
//! - No component may name `.git` — git's directory, or a worktree's `.git` file —
//!   in any spelling a file system could treat as `.git` ([`name::is_git`]), at any
//!   depth: it holds remote URLs with tokens, hooks and the pointer that tells git which
//!   directory is the work tree. A symlink that leads there is refused the same way.
//! - With [`Rules::protect_crewbox`], nothing is created or replaced in the root's
//!   `.crewbox/` (any spelling), however the path gets there.
//! - Symbolic links are refused ([`Links::Refuse`]) or followed while they stay beneath
//!   the root ([`Links::Beneath`]): a relative target is resolved against the directory
//!   holding the link, from descriptors this module holds, so `..` in a target can never
//!   climb out; an absolute target leaves the root and is refused, as the kernel's
//!   `RESOLVE_BENEATH` does. Magic links (`/proc/…/fd`) are never followed.
//! - First the kernel resolves the path with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`. When that fails — a symlink on the
//!   way, something missing, or a kernel without `openat2` — the path is walked one
//!   component at a time with `O_NOFOLLOW` from the descriptor of the directory before,
//!   which gives the same guarantee and names exactly what was refused.
//! - Reads open with `O_NONBLOCK | O_NOCTTY`, check the opened descriptor is a regular
//!   file and read at most a cap, so a FIFO, a device or a growing file can neither
//!   block nor exhaust the reader ([`Bounded`]).
//! - Writes go to a new temporary file beside the target (`O_EXCL | O_NOFOLLOW`), are
//!   synced and renamed over it, keeping its permissions: a reader sees the old file or
//!   the new one, and a write never goes through or replaces a symlink.
//! - Before crewbox writes by path into a tree someone else controlled (git's checkout
//!   in an agent's worktree), [`Root::sweep`] removes every link, special file and
//!   nested repository in it, walking from descriptors without following any.

pub mod held;
pub mod name;
mod read;
mod resolve;
mod sweep;
mod write;

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

pub use read::{Bounded, read_path, read_path_all, read_path_all_no_follow};
pub use write::{WriteOptions, Written};

/// What a path may do on its way beneath a root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    /// No symbolic link is followed, inside the root or out.
    Refuse,
    /// Symbolic links are followed while they stay beneath the root.
    Beneath,
}

/// How paths beneath a root are resolved for one caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Whether symbolic links are followed.
    pub links: Links,
    /// Whether creating or replacing anything in the root's `.crewbox/` is refused.
    pub protect_crewbox: bool,
}

impl Rules {
    /// No symbolic links at all.
    pub const NO_LINKS: Rules = Rules {
        links: Links::Refuse,
        protect_crewbox: false,
    };
    /// Symbolic links followed while they stay beneath the root.
    pub const LINKS_BENEATH: Rules = Rules {
        links: Links::Beneath,
        protect_crewbox: false,
    };

    /// The same rules, with `.crewbox/` read-only when `protect` is set.
    pub const fn protecting_crewbox(self, protect: bool) -> Rules {
        Rules {
            protect_crewbox: protect,
            ..self
        }
    }
}

/// Why a path beneath a root could not be used. `path` is always the path as given.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The path is absolute.
    #[error("`{}` is an absolute path; give a path relative to the root", path.display())]
    Absolute {
        /// The path as given.
        path: PathBuf,
    },
    /// A `..` climbs above the root.
    #[error("`..` in `{}` climbs above the root", path.display())]
    Climbs {
        /// The path as given.
        path: PathBuf,
    },
    /// The path holds a NUL byte.
    #[error("`{}` contains a NUL byte", path.display())]
    Invalid {
        /// The path as given.
        path: PathBuf,
    },
    /// A symbolic link on the way, where links are not followed.
    #[error("`{}` is a symlink; symlinks are not followed here", link.display())]
    Link {
        /// The path as given.
        path: PathBuf,
        /// The link, relative to the root.
        link: PathBuf,
    },
    /// A symbolic link whose target leaves the root (absolute, or `..` above it).
    #[error("`{}` is a symlink to `{}`, which leads outside the root", link.display(), target.display())]
    LinkEscapes {
        /// The path as given.
        path: PathBuf,
        /// The link, relative to the root.
        link: PathBuf,
        /// What the link says.
        target: PathBuf,
    },
    /// More links than any sane path crosses (a loop).
    #[error("`{}` crosses more than {MAX_LINKS} symlinks (a loop?)", path.display())]
    TooManyLinks {
        /// The path as given.
        path: PathBuf,
    },
    /// A component names git's directory.
    #[error("`{}` goes through `{component}`, git's own directory, which is never opened here", path.display())]
    Git {
        /// The path as given.
        path: PathBuf,
        /// The component as spelled (or as a symlink spelled it).
        component: String,
    },
    /// The path would create or replace something in the root's `.crewbox/`.
    #[error("`{}` is inside `.crewbox/`, which is read-only here", path.display())]
    Protected {
        /// The path as given.
        path: PathBuf,
    },
    /// Nothing is there.
    #[error("`{}` does not exist", path.display())]
    NotFound {
        /// The path as given.
        path: PathBuf,
    },
    /// A directory where a file was asked for.
    #[error("`{}` is a directory", path.display())]
    IsDirectory {
        /// The path as given.
        path: PathBuf,
    },
    /// A file where a directory was asked for (the target or a component on the way).
    #[error("`{}` is not a directory", path.display())]
    NotDirectory {
        /// The path as given.
        path: PathBuf,
    },
    /// A FIFO, socket, device or other special file.
    #[error("`{}` is a {kind}, not a regular file", path.display())]
    NotRegular {
        /// The path as given.
        path: PathBuf,
        /// What it is (`FIFO`, `socket`, `device`, `symlink`, …).
        kind: &'static str,
    },
    /// Larger than the caller accepts.
    #[error("`{}` is larger than the {limit}-byte limit", path.display())]
    TooLarge {
        /// The path as given.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// Any other error from the kernel.
    #[error("cannot {op} `{}`: {source}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// What was being done (`open`, `read`, `rename`, …).
        op: &'static str,
        /// The error.
        source: io::Error,
    },
}

/// The most symbolic links one resolution crosses (the kernel's own limit).
pub const MAX_LINKS: usize = 40;

impl FsError {
    /// Whether nothing is there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
            || matches!(self, Self::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// Whether the path was refused for where it leads (outside the root, through a
    /// link, into `.git` or a protected `.crewbox/`), not for what is there.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::Absolute { .. }
                | Self::Climbs { .. }
                | Self::Invalid { .. }
                | Self::Link { .. }
                | Self::LinkEscapes { .. }
                | Self::TooManyLinks { .. }
                | Self::Git { .. }
                | Self::Protected { .. }
        )
    }

    fn io(path: &Path, op: &'static str, e: Errno) -> Self {
        Self::Io {
            path: path.to_owned(),
            op,
            source: e.into(),
        }
    }
}

/// What one directory entry is, from `fstatat` on the entry itself (never its target).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl Kind {
    fn of(ft: FileType) -> Self {
        match ft {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Directory,
            FileType::Symlink => Self::Symlink,
            _ => Self::Other,
        }
    }
}

/// What a special file is, for messages.
fn kind_name(ft: FileType) -> &'static str {
    match ft {
        FileType::Fifo => "FIFO",
        FileType::Socket => "socket",
        FileType::CharacterDevice | FileType::BlockDevice => "device",
        FileType::Symlink => "symlink",
        FileType::Directory => "directory",
        _ => "special file",
    }
}

/// One entry of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its name.
    pub name: OsString,
    /// What it is (a symlink is a symlink, never its target).
    pub kind: Kind,
    /// Its size in bytes for a regular file, else 0.
    pub size: u64,
}

/// A directory every path is resolved beneath.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    path: PathBuf,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl Root {
    /// Opens the directory at `path` (canonicalised here; the caller chose it, so a
    /// symlink naming it is followed).
    pub fn open(path: &Path) -> Result<Self, FsError> {
        let canonical = path.canonicalize().map_err(|source| FsError::Io {
            path: path.to_owned(),
            op: "open",
            source,
        })?;
        let fd = rustix::fs::open(
            &canonical,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::NOTDIR => FsError::NotDirectory {
                path: path.to_owned(),
            },
            e => FsError::io(path, "open", e),
        })?;
        Ok(Self {
            fd,
            path: canonical,
        })
    }

    /// Creates the directory at `path` (and its parents) with `mode` where missing,
    /// then opens it.
    pub fn create(path: &Path, mode: u32) -> Result<Self, FsError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(path)
            .map_err(|source| FsError::Io {
                path: path.to_owned(),
                op: "create",
                source,
            })?;
        Self::open(path)
    }

    /// The root's canonical path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The canonical path of what `rel` resolves to (links followed as `rules` allow),
    /// whether or not it exists; for handing to code that opens paths itself.
    pub fn resolve(&self, rel: &Path, rules: Rules) -> Result<PathBuf, FsError> {
        let found = resolve::locate(self, rel, rules, resolve::Want::READ)?;
        Ok(self.path.join(found.rel))
    }

    /// What `rel` is, after following links as `rules` allow; `None` when nothing is
    /// there.
    pub fn kind(&self, rel: &Path, rules: Rules) -> Result<Option<Kind>, FsError> {
        let found = match resolve::locate(self, rel, rules, resolve::Want::READ) {
            Ok(found) => found,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some(name) = &found.name else {
            return Ok(Some(Kind::Directory));
        };
        match rustix::fs::statat(&found.dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(Kind::of(FileType::from_raw_mode(st.st_mode)))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(FsError::io(rel, "inspect", e)),
        }
    }

    /// The directory `rel` as a root of its own (links followed as `rules` allow).
    pub fn open_dir(&self, rel: &Path, rules: Rules) -> Result<Root, FsError> {
        for _ in 0..RACE_RETRIES {
            let found = resolve::locate(self, rel, rules, resolve::Want::READ)?;
            let fd = match &found.name {
                None => found.dir,
                Some(name) => {
                    match rustix::fs::openat(&found.dir, name, DIR_FLAGS, Mode::empty()) {
                        Ok(fd) => fd,
                        // Swapped for a link since it was resolved (`O_DIRECTORY |
                        // O_NOFOLLOW` on a link says ENOTDIR or ELOOP): resolve again.
                        Err(e @ (Errno::LOOP | Errno::NOTDIR)) => {
                            let now =
                                rustix::fs::statat(&found.dir, name, AtFlags::SYMLINK_NOFOLLOW)
                                    .map(|st| FileType::from_raw_mode(st.st_mode));
                            match now {
                                Ok(FileType::Symlink | FileType::Directory) => continue,
                                _ => return Err(open_error(rel, e)),
                            }
                        }
                        Err(e) => return Err(open_error(rel, e)),
                    }
                }
            };
            return Ok(Root {
                fd,
                path: self.path.join(found.rel),
            });
        }
        Err(FsError::Link {
            path: rel.to_owned(),
            link: rel.to_owned(),
        })
    }

    /// The entries of directory `rel` (links followed as `rules` allow to reach it, never
    /// inside it), without `.`, `..` and anything named like `.git`; at most `scan`
    /// entries are read, and the second value says whether there were more.
    pub fn list(
        &self,
        rel: &Path,
        rules: Rules,
        scan: usize,
    ) -> Result<(Vec<Entry>, bool), FsError> {
        self.open_dir(rel, rules)?.entries(scan)
    }

    /// This directory's entries, as [`Root::list`] gives them.
    pub fn entries(&self, scan: usize) -> Result<(Vec<Entry>, bool), FsError> {
        let shown = Path::new(".");
        let mut dir =
            rustix::fs::Dir::read_from(&self.fd).map_err(|e| FsError::io(shown, "list", e))?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| FsError::io(shown, "list", e))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." || name::is_git(name) {
                continue;
            }
            if out.len() >= scan {
                return Ok((out, true));
            }
            let stat = match rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                // Removed since the directory was read: it is not there any more.
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(FsError::io(Path::new(name), "inspect", e)),
            };
            let kind = Kind::of(FileType::from_raw_mode(stat.st_mode));
            let size = match kind {
                Kind::File => u64::try_from(stat.st_size).unwrap_or(0),
                _ => 0,
            };
            out.push(Entry {
                name: name.to_owned(),
                kind,
                size,
            });
        }
        Ok((out, false))
    }

    /// The subdirectory `name` (one component, never a link) as a root of its own.
    pub fn child_dir(&self, name: &OsStr) -> Result<Root, FsError> {
        let shown = Path::new(name);
        check_child(name)?;
        let fd = rustix::fs::openat(&self.fd, name, DIR_FLAGS, Mode::empty())
            .map_err(|e| open_error(shown, e))?;
        Ok(Root {
            fd,
            path: self.path.join(name),
        })
    }

    /// What the symlink `name` (one component) says.
    pub fn read_link(&self, name: &OsStr) -> Result<PathBuf, FsError> {
        check_child(name)?;
        let target = rustix::fs::readlinkat(&self.fd, name, Vec::new())
            .map_err(|e| FsError::io(Path::new(name), "read the symlink", e))?;
        Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
    }

    /// The regular file `name` (one component, never a link), open for reading.
    pub fn child_file(&self, name: &OsStr) -> Result<(File, u64), FsError> {
        check_child(name)?;
        read::open_regular_at(self.fd.as_fd(), name, Path::new(name))
    }
}

/// How often a resolution is repeated when what it found was swapped while it was
/// being opened (a benign race with a process renaming files; an attack only loops).
const RACE_RETRIES: usize = 4;

fn check_child(name: &OsStr) -> Result<(), FsError> {
    let shown = Path::new(name);
    if name.is_empty() || name == "." || name == ".." || name.as_bytes().contains(&b'/') {
        return Err(FsError::Invalid {
            path: shown.to_owned(),
        });
    }
    if name::is_git(name) {
        return Err(FsError::Git {
            path: shown.to_owned(),
            component: name.to_string_lossy().into_owned(),
        });
    }
    Ok(())
}

/// The error of opening the final component.
fn open_error(path: &Path, e: Errno) -> FsError {
    let path = path.to_owned();
    match e {
        Errno::NOENT => FsError::NotFound { path },
        Errno::NOTDIR => FsError::NotDirectory { path },
        Errno::ISDIR => FsError::IsDirectory { path },
        Errno::LOOP | Errno::MLINK => FsError::Link {
            link: path.clone(),
            path,
        },
        // Opening a socket fails this way; a device without a driver too.
        Errno::NXIO | Errno::NODEV => FsError::NotRegular {
            path,
            kind: "socket or device",
        },
        e => FsError::Io {
            path,
            op: "open",
            source: e.into(),
        },
    }
}

/// Makes a FIFO at `path`, for tests of what must never be waited on.
#[cfg(test)]
pub(crate) fn make_fifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        FileType::Fifo,
        Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
}

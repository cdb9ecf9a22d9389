//! Bounded reads, and reads confined to a repository: the one place crewbox reads a
//! file that a repository's own files name (charters, team files, plugin paths, the
//! repository config).
//!
//! # Rules
//! - A path a repository names is relative: absolute paths are refused.
//! - It is resolved beneath the repository root by the confined filesystem
//!   (`crate::fs`): from the root's descriptor, `..` normalised lexically (and
//!   refused above the root), symlinks followed only while they stay beneath it.
//! - Nothing in `.git` is ever read, however the path is spelled or a symlink leads
//!   there: `charter_file = "../../.git/config"` would hand the remote's token to the
//!   model.
//! - Only regular files are read. The file is opened with `O_NONBLOCK` and checked with
//!   `fstat` before any read, so a FIFO, a device or a socket is refused without ever
//!   blocking on it.
//! - Every read is bounded: at most `cap` bytes are read, and the caller learns whether
//!   the file had more (`Bounded::truncated`).

use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::fs::{FsError, Kind, Root, Rules};

/// The most bytes read from any one file a repository names (256 KiB).
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The path is absolute.
    #[error("`{}` is an absolute path; paths in repository files must be relative", path.display())]
    Absolute {
        /// The path as written.
        path: PathBuf,
    },
    /// The path resolves outside the root (through `..` or a symlink).
    #[error("`{}` leads outside the repository (through `..` or a symlink); refused", path.display())]
    Escapes {
        /// The path as written.
        path: PathBuf,
    },
    /// The path names something other than a regular file.
    #[error("`{}` is a {kind}, not a regular file; refused", path.display())]
    NotRegular {
        /// The path as written.
        path: PathBuf,
        /// What it is (`directory`, `FIFO`, `socket`, `device`, …).
        kind: &'static str,
    },
    /// The path goes through the repository's `.git` (directly or by a symlink).
    #[error("`{}` is inside the repository's `.git`, which holds its remotes' credentials and hooks; repository files may not name it", path.display())]
    Git {
        /// The path as written.
        path: PathBuf,
    },
    /// The file is larger than the caller accepts.
    #[error("`{}` is larger than the {limit}-byte limit", path.display())]
    TooLarge {
        /// The path as written.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// The file is not UTF-8 text.
    #[error("`{}` is not UTF-8 text", path.display())]
    NotText {
        /// The path as written.
        path: PathBuf,
    },
    /// Any other I/O error (not found, permission denied, …).
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        /// The path as written.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
}

impl ReadError {
    /// The path the error is about, as written.
    pub fn path(&self) -> &Path {
        match self {
            Self::Absolute { path }
            | Self::Escapes { path }
            | Self::NotRegular { path, .. }
            | Self::Git { path }
            | Self::TooLarge { path, .. }
            | Self::NotText { path }
            | Self::Io { path, .. } => path,
        }
    }

    /// Whether the file does not exist (callers often treat that as "not configured").
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// What a bounded read returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounded {
    /// At most `cap` bytes of the file.
    pub bytes: Vec<u8>,
    /// Whether the file held more than `cap` bytes.
    pub truncated: bool,
}

impl Bounded {
    /// The whole file as text: an error if it was cut or is not UTF-8.
    pub fn into_text(self, path: &Path, cap: u64) -> Result<String, ReadError> {
        if self.truncated {
            return Err(ReadError::TooLarge {
                path: path.to_owned(),
                limit: cap,
            });
        }
        String::from_utf8(self.bytes).map_err(|_| ReadError::NotText {
            path: path.to_owned(),
        })
    }

    /// The text, cut at the last whole character when the read was truncated.
    pub fn into_text_cut(self, path: &Path) -> Result<(String, bool), ReadError> {
        let truncated = self.truncated;
        match String::from_utf8(self.bytes) {
            Ok(text) => Ok((text, truncated)),
            // A cut read may end inside a character; anything else invalid is not text.
            Err(e) if truncated && e.utf8_error().error_len().is_none() => {
                let valid = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                Ok((String::from_utf8(bytes).unwrap_or_default(), true))
            }
            Err(_) => Err(ReadError::NotText {
                path: path.to_owned(),
            }),
        }
    }
}

/// A directory (usually a repository root) that paths are resolved beneath, by the
/// confined filesystem (`crate::fs`): symlinks followed only while they stay beneath
/// it, `.git` refused at every depth.
#[derive(Clone, Debug)]
pub struct Confined {
    root: Arc<Root>,
}

/// Symlinks inside a repository are followed (a charter may be a link to shared docs),
/// never out of it.
const RULES: Rules = Rules::LINKS_BENEATH;

impl Confined {
    /// Confines paths to `root` (canonicalised here).
    pub fn new(root: &Path) -> io::Result<Self> {
        let root = Root::open(root).map_err(|e| match e {
            FsError::Io { source, .. } => source,
            FsError::NotDirectory { .. } => {
                io::Error::new(io::ErrorKind::NotADirectory, e.to_string())
            }
            e => io::Error::other(e.to_string()),
        })?;
        Ok(Self {
            root: Arc::new(root),
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Checks `rel` lexically: relative.
    fn check_relative(rel: &Path) -> Result<(), ReadError> {
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| matches!(c, Component::RootDir | Component::Prefix(_)))
        {
            return Err(ReadError::Absolute {
                path: rel.to_owned(),
            });
        }
        Ok(())
    }

    /// Opens `rel` (relative to the root) for reading, beneath the root, without
    /// blocking, and checks it is a regular file.
    pub fn open(&self, rel: &Path) -> Result<File, ReadError> {
        Self::check_relative(rel)?;
        let (file, _) = self
            .root
            .open_file(rel, RULES)
            .map_err(|e| from_fs(e, rel))?;
        Ok(file)
    }

    /// Reads at most `cap` bytes of `rel` (relative to the root).
    pub fn read(&self, rel: &Path, cap: u64) -> Result<Bounded, ReadError> {
        Self::check_relative(rel)?;
        self.root
            .read(rel, cap, RULES)
            .map(Bounded::from)
            .map_err(|e| from_fs(e, rel))
    }

    /// Reads `rel` as UTF-8 text of at most `cap` bytes (larger files are an error).
    pub fn read_text(&self, rel: &Path, cap: u64) -> Result<String, ReadError> {
        self.read(rel, cap)?.into_text(rel, cap)
    }

    /// The canonical path of `rel` if it is a regular file inside the root (after
    /// following symlinks), for paths handed to code that opens them itself (plugin
    /// components, which are read beneath the root again when they are loaded).
    pub fn resolve_file(&self, rel: &Path) -> Result<PathBuf, ReadError> {
        drop(self.open(rel)?);
        self.root.resolve(rel, RULES).map_err(|e| from_fs(e, rel))
    }

    /// The canonical path of directory `rel` when it exists inside the root;
    /// `Ok(None)` when it does not exist. Files in it are then opened with
    /// [`Confined::read`].
    pub fn dir(&self, rel: &Path) -> Result<Option<PathBuf>, ReadError> {
        Self::check_relative(rel)?;
        match self.root.kind(rel, RULES).map_err(|e| from_fs(e, rel))? {
            None => Ok(None),
            Some(Kind::Directory) => self
                .root
                .resolve(rel, RULES)
                .map(Some)
                .map_err(|e| from_fs(e, rel)),
            Some(_) => Err(ReadError::NotRegular {
                path: rel.to_owned(),
                kind: "file where a directory was expected",
            }),
        }
    }
}

/// Reads at most `cap` bytes of `path`, anywhere (the user's own files): still only a
/// regular file, opened without blocking.
pub fn read_bounded(path: &Path, cap: u64) -> Result<Bounded, ReadError> {
    crate::fs::read_path(path, cap)
        .map(Bounded::from)
        .map_err(|e| from_fs(e, path))
}

impl From<crate::fs::Bounded> for Bounded {
    fn from(b: crate::fs::Bounded) -> Self {
        Self {
            bytes: b.bytes,
            truncated: b.truncated,
        }
    }
}

/// The confined filesystem's refusal in the terms of a repository file.
fn from_fs(e: FsError, rel: &Path) -> ReadError {
    let path = rel.to_owned();
    match e {
        FsError::Absolute { .. } => ReadError::Absolute { path },
        FsError::Climbs { .. }
        | FsError::Link { .. }
        | FsError::LinkEscapes { .. }
        | FsError::TooManyLinks { .. }
        | FsError::Protected { .. } => ReadError::Escapes { path },
        FsError::Git { .. } => ReadError::Git { path },
        FsError::IsDirectory { .. } => ReadError::NotRegular {
            path,
            kind: "directory",
        },
        FsError::NotRegular { kind, .. } => ReadError::NotRegular { path, kind },
        FsError::TooLarge { limit, .. } => ReadError::TooLarge { path, limit },
        FsError::NotFound { .. } => ReadError::Io {
            path,
            source: io::ErrorKind::NotFound.into(),
        },
        FsError::NotDirectory { .. } => ReadError::Io {
            path,
            source: io::ErrorKind::NotADirectory.into(),
        },
        FsError::Invalid { .. } => ReadError::Io {
            path,
            source: io::ErrorKind::InvalidInput.into(),
        },
        FsError::Io { source, .. } => ReadError::Io { path, source },
    }
}

/// Cuts `text` to at most `max_chars` characters; when it cuts, it appends a visible
/// `[truncated]` marker and returns true.
pub fn cap_chars(text: &mut String, max_chars: usize) -> bool {
    match text.char_indices().nth(max_chars) {
        None => false,
        Some((at, _)) => {
            text.truncate(at);
            text.push_str("\n[truncated]");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn root() -> (tempfile::TempDir, Confined) {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("repo/sub")).unwrap();
        fs::write(dir.path().join("repo/sub/a.md"), "inside").unwrap();
        fs::write(dir.path().join("secret"), "CANARY").unwrap();
        let c = Confined::new(&dir.path().join("repo")).unwrap();
        (dir, c)
    }

    #[test]
    fn reads_inside_and_moves_with_dotdot_inside() {
        let (_d, c) = root();
        assert_eq!(c.read_text(Path::new("sub/a.md"), 100).unwrap(), "inside");
        assert_eq!(
            c.read_text(Path::new("sub/../sub/a.md"), 100).unwrap(),
            "inside"
        );
    }

    #[test]
    fn refuses_absolute_dotdot_and_symlink_escapes() {
        let (d, c) = root();
        let abs = d.path().join("secret");
        assert!(matches!(c.read(&abs, 100), Err(ReadError::Absolute { .. })));
        assert!(matches!(
            c.read(Path::new("../secret"), 100),
            Err(ReadError::Escapes { .. })
        ));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&abs, d.path().join("repo/abs-link")).unwrap();
            std::os::unix::fs::symlink("../../secret", d.path().join("repo/sub/rel-link")).unwrap();
            std::os::unix::fs::symlink("a.md", d.path().join("repo/sub/ok-link")).unwrap();
            for link in ["abs-link", "sub/rel-link"] {
                let err = c.read(Path::new(link), 100).unwrap_err();
                assert!(matches!(err, ReadError::Escapes { .. }), "{link}: {err}");
                assert!(!err.to_string().contains("CANARY"));
            }
            assert_eq!(
                c.read_text(Path::new("sub/ok-link"), 100).unwrap(),
                "inside"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn refuses_a_fifo_without_blocking_and_directories() {
        let (d, c) = root();
        let fifo = d.path().join("repo/pipe");
        crate::fs::make_fifo(&fifo);
        let err = c.read(Path::new("pipe"), 100).unwrap_err();
        assert!(
            matches!(err, ReadError::NotRegular { kind: "FIFO", .. }),
            "{err}"
        );
        let err = read_bounded(&fifo, 100).unwrap_err();
        assert!(matches!(err, ReadError::NotRegular { .. }), "{err}");
        assert!(matches!(
            c.read(Path::new("sub"), 100),
            Err(ReadError::NotRegular {
                kind: "directory",
                ..
            })
        ));
        assert!(matches!(
            read_bounded(Path::new("/dev/zero"), 100),
            Err(ReadError::NotRegular { kind: "device", .. })
        ));
    }

    #[test]
    fn git_is_never_read_by_name_or_through_a_link() {
        let (d, c) = root();
        fs::create_dir_all(d.path().join("repo/.git")).unwrap();
        fs::write(
            d.path().join("repo/.git/config"),
            "url = https://TOKEN@host/r",
        )
        .unwrap();
        std::os::unix::fs::symlink("../.git/config", d.path().join("repo/sub/cfg-link")).unwrap();
        for rel in [
            ".git/config",
            "sub/../.git/config",
            ".GIT/config",
            "sub/cfg-link",
        ] {
            let err = c.read(Path::new(rel), 100).unwrap_err();
            assert!(matches!(err, ReadError::Git { .. }), "{rel}: {err}");
            assert!(!err.to_string().contains("TOKEN"));
        }
        assert!(matches!(
            c.dir(Path::new(".git")),
            Err(ReadError::Git { .. })
        ));
    }

    #[test]
    fn reads_are_bounded() {
        let (d, c) = root();
        fs::write(d.path().join("repo/big"), "é".repeat(100)).unwrap();
        let b = c.read(Path::new("big"), 11).unwrap();
        assert!(b.truncated);
        assert_eq!(b.bytes.len(), 11);
        let (text, cut) = b.clone().into_text_cut(Path::new("big")).unwrap();
        assert!(cut);
        assert_eq!(text, "é".repeat(5));
        assert!(matches!(
            b.into_text(Path::new("big"), 11),
            Err(ReadError::TooLarge { limit: 11, .. })
        ));
        assert!(!c.read(Path::new("big"), 200).unwrap().truncated);
        assert!(c.read(Path::new("missing"), 1).unwrap_err().is_not_found());
    }

    #[test]
    fn cap_chars_cuts_on_a_char_boundary_with_a_marker() {
        let mut s = "aé".repeat(3);
        assert!(!cap_chars(&mut s, 6));
        assert!(cap_chars(&mut s, 3));
        assert_eq!(s, "aéa\n[truncated]");
    }

    #[test]
    fn resolve_file_and_dir_stay_inside() {
        let (d, c) = root();
        assert_eq!(
            c.resolve_file(Path::new("sub/a.md")).unwrap(),
            c.root().join("sub/a.md")
        );
        assert_eq!(c.dir(Path::new("sub")).unwrap(), Some(c.root().join("sub")));
        assert_eq!(c.dir(Path::new("none")).unwrap(), None);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(d.path(), d.path().join("repo/out")).unwrap();
            assert!(matches!(
                c.dir(Path::new("out")),
                Err(ReadError::Escapes { .. })
            ));
        }
    }
}

//! Bounded reads, and reads confined to a repository: the one place crewbox reads a
//! file that a repository's own files name (charters, team files, plugin paths, the
//! repository config).
//!
//! # Rules
//! - A path a repository names is relative: absolute paths are refused.
//! - It is resolved beneath the repository root by the kernel (`openat2` with
//!   `RESOLVE_BENEATH` on Linux): `..` may move around inside the root, but a `..`, an
//!   absolute symlink or a relative symlink that leaves the root is refused. Where
//!   `openat2` is unavailable the path is canonicalised and checked to lie inside the
//!   root, then opened without following a final symlink (race-tolerant, not
//!   race-proof).
//! - Only regular files are read. The file is opened with `O_NONBLOCK` and checked with
//!   `fstat` before any read, so a FIFO, a device or a socket is refused without ever
//!   blocking on it.
//! - Every read is bounded: at most `cap` bytes are read, and the caller learns whether
//!   the file had more (`Bounded::truncated`).

use std::fs::File;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

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

/// A directory (usually a repository root) that paths are resolved beneath.
#[derive(Clone, Debug)]
pub struct Confined {
    root: PathBuf,
}

impl Confined {
    /// Confines paths to `root` (canonicalised here).
    pub fn new(root: &Path) -> io::Result<Self> {
        Ok(Self {
            root: root.canonicalize()?,
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Checks `rel` lexically: relative, not empty.
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
        let file = open_beneath(&self.root, rel)?;
        check_regular(&file, rel)?;
        Ok(file)
    }

    /// Reads at most `cap` bytes of `rel` (relative to the root).
    pub fn read(&self, rel: &Path, cap: u64) -> Result<Bounded, ReadError> {
        let file = self.open(rel)?;
        read_capped(file, rel, cap)
    }

    /// Reads `rel` as UTF-8 text of at most `cap` bytes (larger files are an error).
    pub fn read_text(&self, rel: &Path, cap: u64) -> Result<String, ReadError> {
        self.read(rel, cap)?.into_text(rel, cap)
    }

    /// The canonical path of `rel` if it exists and lies inside the root (after
    /// following symlinks). For paths handed to code that opens them itself (plugin
    /// components): the file is checked to be a regular file too.
    pub fn resolve_file(&self, rel: &Path) -> Result<PathBuf, ReadError> {
        let file = self.open(rel)?;
        drop(file);
        let full = self
            .root
            .join(rel)
            .canonicalize()
            .map_err(|source| ReadError::Io {
                path: rel.to_owned(),
                source,
            })?;
        if !full.starts_with(&self.root) {
            return Err(ReadError::Escapes {
                path: rel.to_owned(),
            });
        }
        Ok(full)
    }

    /// The canonical path of directory `rel` when it exists inside the root (checked on
    /// the canonical path; files in it are then opened with [`Confined::read`]);
    /// `Ok(None)` when it does not exist.
    pub fn dir(&self, rel: &Path) -> Result<Option<PathBuf>, ReadError> {
        Self::check_relative(rel)?;
        let full = match self.root.join(rel).canonicalize() {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ReadError::Io {
                    path: rel.to_owned(),
                    source,
                });
            }
        };
        if !full.starts_with(&self.root) {
            return Err(ReadError::Escapes {
                path: rel.to_owned(),
            });
        }
        if !full.is_dir() {
            return Err(ReadError::NotRegular {
                path: rel.to_owned(),
                kind: "file where a directory was expected",
            });
        }
        Ok(Some(full))
    }
}

/// Reads at most `cap` bytes of `path`, anywhere (the user's own files): still only a
/// regular file, opened without blocking.
pub fn read_bounded(path: &Path, cap: u64) -> Result<Bounded, ReadError> {
    let file = open_nonblocking(path, false).map_err(|source| ReadError::Io {
        path: path.to_owned(),
        source,
    })?;
    check_regular(&file, path)?;
    read_capped(file, path, cap)
}

fn read_capped(file: File, shown: &Path, cap: u64) -> Result<Bounded, ReadError> {
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| ReadError::Io {
            path: shown.to_owned(),
            source,
        })?;
    let truncated = bytes.len() as u64 > cap;
    if truncated {
        bytes.truncate(cap as usize);
    }
    Ok(Bounded { bytes, truncated })
}

fn check_regular(file: &File, shown: &Path) -> Result<(), ReadError> {
    let meta = file.metadata().map_err(|source| ReadError::Io {
        path: shown.to_owned(),
        source,
    })?;
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(());
    }
    let kind = if ft.is_dir() {
        "directory"
    } else {
        file_kind(&ft)
    };
    Err(ReadError::NotRegular {
        path: shown.to_owned(),
        kind,
    })
}

#[cfg(unix)]
fn file_kind(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "device"
    } else if ft.is_symlink() {
        "symlink"
    } else {
        "special file"
    }
}

#[cfg(not(unix))]
fn file_kind(_ft: &std::fs::FileType) -> &'static str {
    "special file"
}

/// Opens `path` read-only without blocking (a FIFO opens at once), not as a
/// controlling terminal, optionally refusing a final symlink.
fn open_nonblocking(path: &Path, no_follow: bool) -> io::Result<File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
        if no_follow {
            flags |= libc::O_NOFOLLOW;
        }
        opts.custom_flags(flags);
    }
    #[cfg(not(unix))]
    let _ = no_follow;
    opts.open(path)
}

fn io_err(rel: &Path) -> impl FnOnce(io::Error) -> ReadError + '_ {
    move |source| ReadError::Io {
        path: rel.to_owned(),
        source,
    }
}

/// Opens `rel` beneath `root`: by the kernel where it can, else by checking the
/// canonical path.
fn open_beneath(root: &Path, rel: &Path) -> Result<File, ReadError> {
    #[cfg(target_os = "linux")]
    match linux::openat2_beneath(root, rel) {
        Ok(file) => return Ok(file),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
            return Err(ReadError::Escapes {
                path: rel.to_owned(),
            });
        }
        // No openat2 (old kernel, or a seccomp filter refusing it): check by path.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {}
        Err(e) => return Err(io_err(rel)(e)),
    }
    let full = root.join(rel).canonicalize().map_err(io_err(rel))?;
    if !full.starts_with(root) {
        return Err(ReadError::Escapes {
            path: rel.to_owned(),
        });
    }
    open_nonblocking(&full, true).map_err(io_err(rel))
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;
    use std::fs::File;
    use std::io;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    /// `openat2(root, rel, O_RDONLY|O_NONBLOCK|O_NOCTTY|O_CLOEXEC, RESOLVE_BENEATH |
    /// RESOLVE_NO_MAGICLINKS)`: the kernel refuses (EXDEV) any resolution that leaves
    /// `root`, through `..` or through a symlink.
    pub(super) fn openat2_beneath(root: &Path, rel: &Path) -> io::Result<File> {
        let root_c = CString::new(root.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a valid NUL-terminated path; the returned fd is checked and owned.
        let dir = unsafe {
            libc::open(
                root_c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if dir < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `dir` is a fresh descriptor nobody else owns.
        let dir = unsafe { OwnedFd::from_raw_fd(dir) };
        let rel_c = CString::new(rel.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let fd = super::openat2(
            &dir,
            &rel_c,
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS,
        )?;
        Ok(File::from(fd))
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

/// `openat2(dir, rel, flags)` with `resolve` (`RESOLVE_*`): the one raw call behind every
/// read or write confined beneath a repository directory. Linux only.
#[cfg(target_os = "linux")]
pub(crate) fn openat2(
    dir: &impl std::os::fd::AsRawFd,
    rel: &std::ffi::CStr,
    flags: libc::c_int,
    resolve: u64,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: `open_how` is plain data; all-zero is its documented default.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = resolve;
    // SAFETY: a valid fd, a NUL-terminated path, a live `open_how` and its exact size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            rel.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a fresh descriptor we now own.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
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
        let cpath = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path; mkfifo creates a FIFO node.
        assert_eq!(unsafe { libc::mkfifo(cpath.as_ptr(), 0o600) }, 0);
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

//! Opening paths beneath a directory descriptor, never by re-resolving a path.
//!
//! The workspace root is opened once per call; every guest path is then opened relative
//! to that descriptor by the kernel with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)`, so nothing a process in the workspace renames or swaps
//! between a check and a use can redirect the open: there is no check separate from the
//! use. Where `openat2` is unavailable (old kernels, other Unixes, seccomp filters), the
//! path is walked one component at a time with `O_NOFOLLOW` from the same descriptor,
//! which gives the same guarantee.
//!
//! Symbolic links are never followed, inside the workspace or out: a link can point
//! anywhere (into `.git`, at `/dev/zero`), and refusing it is the only answer that does
//! not depend on what it points at when. `.git` (a directory or a worktree's `.git`
//! file) is hidden at every depth: it holds remote URLs with tokens and hook scripts.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// Why an operation beneath the root failed, before it is put in WIT terms.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `..`, an absolute path, or a symbolic link on the way.
    Outside,
    /// Nothing there (or hidden, like `.git`).
    NotFound,
    /// A directory where a file was asked for.
    IsDirectory,
    /// A file where a directory was asked for.
    NotDirectory,
    /// A FIFO, socket or device.
    NotRegular,
    /// Larger than the cap (bytes).
    TooLarge(u64),
    /// Any other error from the kernel.
    Io(Errno),
}

/// What one directory entry is, from `fstatat` on the entry itself (never its target).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// Anything else.
    Other,
}

/// Whether a path component names `.git` (case-insensitively: some file systems fold case).
fn is_git(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b".git")
}

/// The path relative to the root, or why it cannot be one. Purely lexical.
pub(crate) fn relative(path: &str) -> Result<&str, Refusal> {
    if path.starts_with('/') || path.starts_with('\\') || path.contains('\0') {
        return Err(Refusal::Outside);
    }
    for c in Path::new(path).components() {
        match c {
            Component::Normal(name) if is_git(name.as_bytes()) => return Err(Refusal::NotFound),
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Refusal::Outside);
            }
        }
    }
    Ok(if path.is_empty() { "." } else { path })
}

/// Opens the root of a view (the host chose this path; it may itself be a link).
pub(crate) fn open_root(root: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn refusal(e: Errno) -> Refusal {
    match e {
        // EXDEV: RESOLVE_BENEATH refused an escape; ELOOP (EMLINK on some BSDs): a link.
        Errno::XDEV | Errno::LOOP | Errno::MLINK => Refusal::Outside,
        Errno::NOENT => Refusal::NotFound,
        Errno::NOTDIR => Refusal::NotDirectory,
        Errno::ISDIR => Refusal::IsDirectory,
        // Opening a socket fails this way; a device could too.
        Errno::NXIO | Errno::NODEV => Refusal::NotRegular,
        e => Refusal::Io(e),
    }
}

/// Opens `rel` (from [`relative`]) beneath `root`; `O_NONBLOCK` always, so a FIFO never
/// blocks the open.
pub(crate) fn open(root: BorrowedFd<'_>, rel: &str, flags: OFlags) -> Result<OwnedFd, Refusal> {
    let flags = flags | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::ResolveFlags;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        // EAGAIN: a rename raced the lookup and the kernel could not prove it stayed
        // beneath; a retry is safe. ENOSYS (or EPERM from a seccomp filter): no openat2.
        for _ in 0..8 {
            match rustix::fs::openat2(root, rel, flags, Mode::empty(), resolve) {
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS | Errno::PERM) => break,
                other => return other.map_err(refusal),
            }
        }
    }
    walk(root, rel, flags).map_err(refusal)
}

/// The `openat2` guarantee without `openat2`: one component at a time, each opened with
/// `O_NOFOLLOW` from the descriptor of the one before, none of them `..` (checked by
/// [`relative`]).
pub(crate) fn walk(root: BorrowedFd<'_>, rel: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
    let parts: Vec<&str> = rel
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let Some((last, parents)) = parts.split_last() else {
        return rustix::fs::openat(root, ".", flags, Mode::empty());
    };
    let mut dir: Option<OwnedFd> = None;
    for part in parents {
        let at = dir.as_ref().map_or(root, |d| d.as_fd());
        let step = OFlags::RDONLY
            | OFlags::DIRECTORY
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::CLOEXEC;
        let next = rustix::fs::openat(at, *part, step, Mode::empty()).map_err(|e| {
            // `O_DIRECTORY | O_NOFOLLOW` on a link says ENOTDIR; report it as a link.
            let link = rustix::fs::statat(at, *part, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink);
            if e == Errno::NOTDIR && link {
                Errno::LOOP
            } else {
                e
            }
        })?;
        dir = Some(next);
    }
    let at = dir.as_ref().map_or(root, |d| d.as_fd());
    rustix::fs::openat(at, *last, flags | OFlags::NOFOLLOW, Mode::empty())
}

/// Reads a regular file beneath `root`, at most `max` bytes: the size is taken from the
/// opened file and the read itself is bounded, so a file that grows while it is read
/// (or anything that is not a regular file) can never make the host read without end.
pub(crate) fn read(root: BorrowedFd<'_>, rel: &str, max: u64) -> Result<Vec<u8>, Refusal> {
    let fd = open(root, rel, OFlags::RDONLY)?;
    let stat = rustix::fs::fstat(&fd).map_err(Refusal::Io)?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Directory => return Err(Refusal::IsDirectory),
        _ => return Err(Refusal::NotRegular),
    }
    let size = u64::try_from(stat.st_size).unwrap_or(0);
    if size > max {
        return Err(Refusal::TooLarge(max));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    File::from(fd)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Refusal::Io(Errno::from_io_error(&e).unwrap_or(Errno::IO)))?;
    if bytes.len() as u64 > max {
        return Err(Refusal::TooLarge(max));
    }
    Ok(bytes)
}

/// Lists a directory beneath `root` through its descriptor, without `.`, `..` and
/// `.git`; each entry is described by `fstatat` on the entry itself. At most `scan`
/// entries are read.
pub(crate) fn list(
    root: BorrowedFd<'_>,
    rel: &str,
    scan: usize,
) -> Result<Vec<(String, Kind, u64)>, Refusal> {
    let fd = open(root, rel, OFlags::RDONLY | OFlags::DIRECTORY)?;
    let mut dir = rustix::fs::Dir::read_from(&fd).map_err(Refusal::Io)?;
    let mut out = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(Refusal::Io)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." || is_git(name) {
            continue;
        }
        if out.len() >= scan {
            break;
        }
        let stat = match rustix::fs::statat(&fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            // Removed since the directory was read: it is not there any more.
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(Refusal::Io(e)),
        };
        let (kind, size) = match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => (Kind::File, u64::try_from(stat.st_size).unwrap_or(0)),
            FileType::Directory => (Kind::Directory, 0),
            FileType::Symlink => (Kind::Symlink, 0),
            _ => (Kind::Other, 0),
        };
        let name = OsStr::from_bytes(name).to_string_lossy().into_owned();
        out.push((name, kind, size));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> (tempfile::TempDir, OwnedFd) {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        std::fs::create_dir_all(ws.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "url = https://token@host/r").unwrap();
        std::fs::write(ws.join("sub/deeper/a.txt"), "hello").unwrap();
        std::fs::write(base.path().join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink("deeper/a.txt", ws.join("sub/inside-link")).unwrap();
        std::os::unix::fs::symlink("../secret.txt", ws.join("out-link")).unwrap();
        std::os::unix::fs::symlink("sub", ws.join("dir-link")).unwrap();
        std::os::unix::fs::symlink(".git/config", ws.join("git-link")).unwrap();
        let fd = open_root(&ws).unwrap();
        (base, fd)
    }

    #[test]
    fn lexical_checks_refuse_escapes_and_hide_git() {
        for bad in ["..", "../x", "a/../../x", "/etc/passwd", "\\x", "a\0b"] {
            assert_eq!(relative(bad), Err(Refusal::Outside), "{bad}");
        }
        for hidden in [".git", ".git/config", "sub/.GIT/HEAD", "./.git"] {
            assert_eq!(relative(hidden), Err(Refusal::NotFound), "{hidden}");
        }
        assert_eq!(relative(""), Ok("."));
        assert_eq!(relative("./a/b"), Ok("./a/b"));
        assert_eq!(relative(".github/x"), Ok(".github/x"));
    }

    /// The fallback walk and `openat2` agree on every case.
    #[test]
    fn openat2_and_the_walk_agree() {
        let (_base, root) = world();
        let cases: [(&str, Result<Vec<u8>, Refusal>); 7] = [
            ("sub/deeper/a.txt", Ok(b"hello".to_vec())),
            ("./sub//deeper/./a.txt", Ok(b"hello".to_vec())),
            ("sub/inside-link", Err(Refusal::Outside)),
            ("out-link", Err(Refusal::Outside)),
            ("dir-link/deeper/a.txt", Err(Refusal::Outside)),
            ("git-link", Err(Refusal::Outside)),
            ("missing", Err(Refusal::NotFound)),
        ];
        for (path, want) in cases {
            assert_eq!(read(root.as_fd(), path, 100), want, "{path}");
            let walked = walk(root.as_fd(), path, OFlags::RDONLY | OFlags::NONBLOCK)
                .map_err(refusal)
                .map(|fd| {
                    let mut s = Vec::new();
                    File::from(fd).read_to_end(&mut s).unwrap();
                    s
                });
            assert_eq!(walked, want, "walk {path}");
        }
    }

    #[test]
    fn reads_are_bounded_and_regular_only() {
        let (base, root) = world();
        let ws = base.path().join("ws");
        std::fs::write(ws.join("big"), vec![b'x'; 101]).unwrap();
        assert_eq!(read(root.as_fd(), "big", 100), Err(Refusal::TooLarge(100)));
        assert_eq!(read(root.as_fd(), "sub", 100), Err(Refusal::IsDirectory));
        crate::plugin::file::make_fifo(&ws.join("pipe"));
        assert_eq!(read(root.as_fd(), "pipe", 100), Err(Refusal::NotRegular));
    }

    #[test]
    fn listings_hide_git_and_never_follow_links() {
        let (_base, root) = world();
        let mut got = list(root.as_fd(), ".", 100).unwrap();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<(&str, Kind)> = got.iter().map(|(n, k, _)| (n.as_str(), *k)).collect();
        assert_eq!(
            names,
            [
                ("dir-link", Kind::Symlink),
                ("git-link", Kind::Symlink),
                ("out-link", Kind::Symlink),
                ("sub", Kind::Directory)
            ]
        );
        assert_eq!(list(root.as_fd(), "dir-link", 100), Err(Refusal::Outside));
        assert_eq!(
            list(root.as_fd(), "sub/deeper/a.txt", 100),
            Err(Refusal::NotDirectory)
        );
        assert_eq!(
            list(root.as_fd(), "sub/deeper", 100).unwrap(),
            [("a.txt".to_owned(), Kind::File, 5)]
        );
    }
}

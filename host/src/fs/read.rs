//! Bounded reads of regular files: opened without blocking, checked on the opened
//! descriptor, read to a cap.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use super::resolve::{self, Want};
use super::{FsError, RACE_RETRIES, Root, Rules, kind_name, open_error};

/// What a bounded read returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounded {
    /// At most the cap's bytes of the file.
    pub bytes: Vec<u8>,
    /// Whether the file held more than the cap.
    pub truncated: bool,
}

const READ_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::NOCTTY)
    .union(OFlags::CLOEXEC);

/// Refuses anything but a regular file; returns its size.
fn check_regular(file: &File, shown: &Path) -> Result<u64, FsError> {
    let stat = rustix::fs::fstat(file).map_err(|e| FsError::io(shown, "inspect", e))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(u64::try_from(stat.st_size).unwrap_or(0)),
        FileType::Directory => Err(FsError::IsDirectory {
            path: shown.to_owned(),
        }),
        ft => Err(FsError::NotRegular {
            path: shown.to_owned(),
            kind: kind_name(ft),
        }),
    }
}

/// Opens the regular file `name` in `dir` without following a link; returns it and
/// its size.
pub(super) fn open_regular_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    shown: &Path,
) -> Result<(File, u64), FsError> {
    let fd = rustix::fs::openat(dir, name, READ_FLAGS | OFlags::NOFOLLOW, Mode::empty())
        .map_err(|e| open_error(shown, e))?;
    let file = File::from(fd);
    let size = check_regular(&file, shown)?;
    Ok((file, size))
}

/// Reads at most `cap` bytes of `file`; whether there was more.
fn read_capped(file: File, shown: &Path, cap: u64) -> Result<Bounded, FsError> {
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| FsError::Io {
            path: shown.to_owned(),
            op: "read",
            source,
        })?;
    let truncated = bytes.len() as u64 > cap;
    if truncated {
        bytes.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
    }
    Ok(Bounded { bytes, truncated })
}

/// Reads at most `cap` bytes of the user's own file at `path`, wherever it is (links
/// followed: the user chose the path): still only a regular file, opened without
/// blocking.
pub fn read_path(path: &Path, cap: u64) -> Result<Bounded, FsError> {
    let (file, _) = open_path(path)?;
    read_capped(file, path, cap)
}

/// Reads the whole of the user's own file at `path`, which must be at most `max` bytes
/// (refused by its size before anything is read).
pub fn read_path_all(path: &Path, max: u64) -> Result<Vec<u8>, FsError> {
    let (file, size) = open_path(path)?;
    read_whole(file, size, path, max)
}

/// Like [`read_path_all`], but `path` itself must not be a symlink (the file crewbox
/// chose the place of, such as a worktree's `.git`, which whoever could write there
/// might have swapped for a link).
pub fn read_path_all_no_follow(path: &Path, max: u64) -> Result<Vec<u8>, FsError> {
    let (file, size) = open_path_with(path, READ_FLAGS | OFlags::NOFOLLOW)?;
    read_whole(file, size, path, max)
}

fn open_path(path: &Path) -> Result<(File, u64), FsError> {
    open_path_with(path, READ_FLAGS)
}

fn open_path_with(path: &Path, flags: OFlags) -> Result<(File, u64), FsError> {
    let fd = rustix::fs::open(path, flags, Mode::empty()).map_err(|e| match e {
        Errno::NOENT => FsError::NotFound {
            path: path.to_owned(),
        },
        e => open_error(path, e),
    })?;
    let file = File::from(fd);
    let size = check_regular(&file, path)?;
    Ok((file, size))
}

/// The whole of `file` (of `size` bytes when opened) if it is at most `max` bytes; the
/// read is bounded too, so a file growing meanwhile is refused, not read without end.
fn read_whole(file: File, size: u64, shown: &Path, max: u64) -> Result<Vec<u8>, FsError> {
    let too_large = || FsError::TooLarge {
        path: shown.to_owned(),
        limit: max,
    };
    if size > max {
        return Err(too_large());
    }
    let read = read_capped(file, shown, max)?;
    if read.truncated {
        return Err(too_large());
    }
    Ok(read.bytes)
}

impl Root {
    /// Opens the regular file `rel` for reading (links followed as `rules` allow);
    /// returns it and its size at opening.
    pub fn open_file(&self, rel: &Path, rules: Rules) -> Result<(File, u64), FsError> {
        for _ in 0..RACE_RETRIES {
            let found = resolve::locate(self, rel, rules, Want::READ)?;
            let Some(name) = &found.name else {
                return Err(FsError::IsDirectory {
                    path: rel.to_owned(),
                });
            };
            match open_regular_at(std::os::fd::AsFd::as_fd(&found.dir), name, rel) {
                // Swapped for a link since it was resolved: resolve it again.
                Err(FsError::Link { .. }) => continue,
                other => return other,
            }
        }
        Err(FsError::Link {
            path: rel.to_owned(),
            link: rel.to_owned(),
        })
    }

    /// Reads at most `cap` bytes of the regular file `rel`.
    pub fn read(&self, rel: &Path, cap: u64, rules: Rules) -> Result<Bounded, FsError> {
        let (file, _) = self.open_file(rel, rules)?;
        read_capped(file, rel, cap)
    }

    /// Reads the whole regular file `rel`, which must be at most `max` bytes.
    pub fn read_all(&self, rel: &Path, max: u64, rules: Rules) -> Result<Vec<u8>, FsError> {
        let (file, size) = self.open_file(rel, rules)?;
        read_whole(file, size, rel, max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Kind, make_fifo};

    fn world() -> (tempfile::TempDir, Root) {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/a.txt"), "hello").unwrap();
        std::fs::write(ws.join("big"), vec![b'x'; 101]).unwrap();
        make_fifo(&ws.join("pipe"));
        std::os::unix::fs::symlink("/dev/zero", ws.join("zero")).unwrap();
        let root = Root::open(&ws).unwrap();
        (base, root)
    }

    #[test]
    fn reads_are_bounded_and_regular_only() {
        let (_base, root) = world();
        let rules = Rules::LINKS_BENEATH;
        assert_eq!(
            root.read_all(Path::new("sub/a.txt"), 5, rules).unwrap(),
            b"hello"
        );
        let cut = root.read(Path::new("big"), 100, rules).unwrap();
        assert!(cut.truncated && cut.bytes.len() == 100);
        assert!(matches!(
            root.read_all(Path::new("big"), 100, rules),
            Err(FsError::TooLarge { limit: 100, .. })
        ));
        assert!(matches!(
            root.read(Path::new("pipe"), 100, rules),
            Err(FsError::NotRegular { kind: "FIFO", .. })
        ));
        assert!(matches!(
            root.read(Path::new("sub"), 100, rules),
            Err(FsError::IsDirectory { .. })
        ));
        assert!(matches!(
            root.read(Path::new("zero"), 100, rules),
            Err(FsError::LinkEscapes { .. })
        ));
        assert!(
            root.read(Path::new("none"), 1, rules)
                .unwrap_err()
                .is_not_found()
        );
        assert_eq!(
            root.kind(Path::new("sub"), rules).unwrap(),
            Some(Kind::Directory)
        );
        assert_eq!(root.kind(Path::new("none"), rules).unwrap(), None);
    }

    #[test]
    fn the_users_own_files_are_bounded_too() {
        let (base, _root) = world();
        let ws = base.path().join("ws");
        assert_eq!(
            read_path(&ws.join("sub/a.txt"), 10).unwrap().bytes,
            b"hello"
        );
        assert!(matches!(
            read_path(&ws.join("pipe"), 10),
            Err(FsError::NotRegular { kind: "FIFO", .. })
        ));
        assert!(matches!(
            read_path(&ws.join("zero"), 10),
            Err(FsError::NotRegular { kind: "device", .. })
        ));
        assert!(read_path(&ws.join("none"), 10).unwrap_err().is_not_found());
    }
}

//! Writing files inside one directory, atomically and without ever leaving it: the
//! only way an export touches a pack or a team directory.
//!
//! # Rules
//! - A target is a relative path without `..`; its directories are opened beneath
//!   the root by the kernel (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`
//!   on Linux), so no symlink anywhere on the way is followed; missing directories
//!   are created (`mkdirat`) only when asked.
//! - A target that is a symlink, a directory or a special file is refused: a write
//!   never goes through a link nor replaces one.
//! - The bytes go to a new temporary file beside the target (`O_EXCL|O_NOFOLLOW`),
//!   are synced, and the file is renamed over the target, keeping its permissions; a
//!   reader sees the old file or the new one, never half of one.
//!
//! Where `openat2` is missing the directory is checked on its canonical path instead
//! (race-tolerant, not race-proof).

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The target leaves the root (`..`, an absolute path or a symlink on the way).
    #[error("`{}` leads outside {} (through `..`, an absolute path or a symlink); refused", path.display(), root.display())]
    Escapes {
        /// The target as given.
        path: PathBuf,
        /// The root.
        root: PathBuf,
    },
    /// The target exists and is not a regular file.
    #[error("`{}` is a {kind}, not a regular file; refused", path.display())]
    NotRegular {
        /// The target.
        path: PathBuf,
        /// What it is.
        kind: &'static str,
    },
    /// Any other I/O error.
    #[error("cannot write `{}`: {source}", path.display())]
    Io {
        /// The target.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// A directory every write is confined to.
#[derive(Debug)]
pub struct WriteRoot {
    root: PathBuf,
}

impl WriteRoot {
    /// Confines writes to `root` (created when missing and `create` is set).
    pub fn new(root: &Path, create: bool) -> Result<Self, WriteError> {
        let io = |source| WriteError::Io {
            path: root.to_owned(),
            source,
        };
        if create {
            std::fs::create_dir_all(root).map_err(io)?;
        }
        let root = root.canonicalize().map_err(io)?;
        Ok(Self { root })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn check(&self, rel: &Path) -> Result<(PathBuf, String), WriteError> {
        let escapes = || WriteError::Escapes {
            path: rel.to_owned(),
            root: self.root.clone(),
        };
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(escapes());
        }
        let name = rel
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(escapes)?
            .to_owned();
        Ok((rel.parent().unwrap_or(Path::new("")).to_owned(), name))
    }

    /// Writes `bytes` to `rel` atomically (see the module rules); missing
    /// directories on the way are created when `create_dirs` is set.
    pub fn write(&self, rel: &Path, bytes: &[u8], create_dirs: bool) -> Result<(), WriteError> {
        let (parent, name) = self.check(rel)?;
        imp::write(self, &parent, &name, rel, bytes, create_dirs)
    }
}

fn io_at(rel: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: rel.to_owned(),
        source,
    }
}

fn temp_name(name: &str) -> String {
    format!(".{name}.{}.tmp", uuid::Uuid::now_v7().simple())
}

#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::CString;
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    use super::{WriteError, WriteRoot, io_at, temp_name};

    fn cstr(p: &[u8]) -> io::Result<CString> {
        CString::new(p).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
    }

    fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(ret)
        }
    }

    /// `openat2(dir, rel, O_DIRECTORY, RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)`.
    fn open_dir_beneath(dir: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
        let rel_c = cstr(if rel.as_os_str().is_empty() {
            b"."
        } else {
            rel.as_os_str().as_bytes()
        })?;
        crate::trust::read::openat2(
            dir,
            &rel_c,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
        )
    }

    /// The parent directory, opened beneath the root, created component by
    /// component when asked.
    fn parent(root: &OwnedFd, parent: &Path, create: bool) -> io::Result<OwnedFd> {
        match open_dir_beneath(root, parent) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && create => {}
            other => return other,
        }
        let mut dir = open_dir_beneath(root, Path::new(""))?;
        for comp in parent.components() {
            let name = cstr(comp.as_os_str().as_bytes())?;
            // SAFETY: a valid directory fd and a NUL-terminated name.
            let made = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o755) };
            if made < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(e);
                }
            }
            dir = open_dir_beneath(&dir, Path::new(comp.as_os_str()))?;
        }
        Ok(dir)
    }

    pub(super) fn write(
        root: &WriteRoot,
        parent_rel: &Path,
        name: &str,
        rel: &Path,
        bytes: &[u8],
        create_dirs: bool,
    ) -> Result<(), WriteError> {
        let io = io_at(rel);
        let root_c = cstr(root.root.as_os_str().as_bytes()).map_err(io_at(rel))?;
        // SAFETY: a valid NUL-terminated path; the returned fd is checked and owned.
        let root_fd = check(unsafe {
            libc::open(
                root_c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        })
        .map_err(io_at(rel))?;
        // SAFETY: a fresh descriptor nobody else owns.
        let root_fd = unsafe { OwnedFd::from_raw_fd(root_fd) };
        let dir = match parent(&root_fd, parent_rel, create_dirs) {
            Ok(d) => d,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EXDEV | libc::ELOOP)) => {
                return Err(WriteError::Escapes {
                    path: rel.to_owned(),
                    root: root.root.clone(),
                });
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) => {
                return super::fallback::write(root, parent_rel, name, rel, bytes, create_dirs);
            }
            Err(e) => return Err(io(e)),
        };
        let name_c = cstr(name.as_bytes()).map_err(io_at(rel))?;
        // SAFETY: `stat` is plain data filled by the kernel.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid directory fd, a NUL-terminated name and a live `stat`.
        let exists = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                name_c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        } == 0;
        let mode = if exists {
            match st.st_mode & libc::S_IFMT {
                libc::S_IFREG => st.st_mode & 0o7777,
                libc::S_IFLNK => return Err(not_regular(rel, "symlink")),
                libc::S_IFDIR => return Err(not_regular(rel, "directory")),
                _ => return Err(not_regular(rel, "special file")),
            }
        } else {
            0o644
        };
        let tmp = cstr(temp_name(name).as_bytes()).map_err(io_at(rel))?;
        // SAFETY: a valid directory fd and a NUL-terminated name; O_EXCL|O_NOFOLLOW
        // make a fresh file, never an existing one or a link.
        let fd = check(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        })
        .map_err(io_at(rel))?;
        // SAFETY: a fresh descriptor nobody else owns.
        let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let result = (|| {
            use std::io::Write;
            // The umask may have narrowed the mode; the replaced file's is kept exactly.
            // SAFETY: a valid fd.
            check(unsafe { libc::fchmod(file.as_raw_fd(), mode as libc::mode_t) })?;
            file.write_all(bytes)?;
            file.sync_all()?;
            // SAFETY: valid directory fds and NUL-terminated names.
            check(unsafe {
                libc::renameat(
                    dir.as_raw_fd(),
                    tmp.as_ptr(),
                    dir.as_raw_fd(),
                    name_c.as_ptr(),
                )
            })?;
            // SAFETY: a valid fd.
            unsafe { libc::fsync(dir.as_raw_fd()) };
            Ok(())
        })();
        if result.is_err() {
            // SAFETY: a valid directory fd and a NUL-terminated name.
            unsafe { libc::unlinkat(dir.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        result.map_err(io)
    }

    fn not_regular(rel: &Path, kind: &'static str) -> WriteError {
        WriteError::NotRegular {
            path: rel.to_owned(),
            kind,
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    pub(super) use super::fallback::write;
}

/// Checking canonical paths, for systems without `openat2`.
mod fallback {
    use std::io::Write;
    use std::path::Path;

    use super::{WriteError, WriteRoot, io_at, temp_name};

    pub(super) fn write(
        root: &WriteRoot,
        parent_rel: &Path,
        name: &str,
        rel: &Path,
        bytes: &[u8],
        create_dirs: bool,
    ) -> Result<(), WriteError> {
        let escapes = || WriteError::Escapes {
            path: rel.to_owned(),
            root: root.root.clone(),
        };
        let mut dir = root.root.clone();
        for comp in parent_rel.components() {
            dir.push(comp);
            match dir.symlink_metadata() {
                Ok(m) if m.file_type().is_symlink() => return Err(escapes()),
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(WriteError::NotRegular {
                        path: rel.to_owned(),
                        kind: "file where a directory was expected",
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && create_dirs => {
                    std::fs::create_dir(&dir).map_err(io_at(rel))?;
                }
                Err(e) => return Err(io_at(rel)(e)),
            }
        }
        let canonical = dir.canonicalize().map_err(io_at(rel))?;
        if !canonical.starts_with(&root.root) {
            return Err(escapes());
        }
        let target = canonical.join(name);
        let mode = match target.symlink_metadata() {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(WriteError::NotRegular {
                    path: rel.to_owned(),
                    kind: "symlink",
                });
            }
            Ok(m) if !m.is_file() => {
                return Err(WriteError::NotRegular {
                    path: rel.to_owned(),
                    kind: "directory or special file",
                });
            }
            Ok(m) => Some(m.permissions()),
            Err(_) => None,
        };
        let tmp = canonical.join(temp_name(name));
        let result = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            if let Some(p) = mode {
                std::fs::set_permissions(&tmp, p)?;
            }
            std::fs::rename(&tmp, &target)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(io_at(rel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn writes_atomically_inside_and_creates_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let root = WriteRoot::new(&tmp.path().join("pack"), true).unwrap();
        root.write(Path::new("agents/new/charter.md"), b"hi", true)
            .unwrap();
        assert_eq!(
            fs::read(tmp.path().join("pack/agents/new/charter.md")).unwrap(),
            b"hi"
        );
        root.write(Path::new("agents/new/charter.md"), b"again", false)
            .unwrap();
        assert_eq!(
            fs::read(tmp.path().join("pack/agents/new/charter.md")).unwrap(),
            b"again"
        );
        let names: Vec<_> = fs::read_dir(tmp.path().join("pack/agents/new"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary file is left: {names:?}");
        let err = root
            .write(Path::new("missing/x.md"), b"x", false)
            .unwrap_err();
        assert!(matches!(err, WriteError::Io { .. }), "{err}");
    }

    #[cfg(unix)]
    #[test]
    fn never_writes_through_or_over_a_link_nor_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("victim.md"), "KEEP").unwrap();
        let pack = tmp.path().join("pack");
        fs::create_dir_all(pack.join("agents")).unwrap();
        std::os::unix::fs::symlink(&outside, pack.join("agents/evil")).unwrap();
        std::os::unix::fs::symlink(outside.join("victim.md"), pack.join("link.md")).unwrap();
        let root = WriteRoot::new(&pack, false).unwrap();
        for rel in ["agents/evil/victim.md", "../outside/victim.md", "/etc/x"] {
            let err = root.write(Path::new(rel), b"PWNED", true).unwrap_err();
            assert!(matches!(err, WriteError::Escapes { .. }), "{rel}: {err}");
        }
        let err = root
            .write(Path::new("link.md"), b"PWNED", false)
            .unwrap_err();
        assert!(
            matches!(
                err,
                WriteError::NotRegular {
                    kind: "symlink",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(
            fs::read_to_string(outside.join("victim.md")).unwrap(),
            "KEEP"
        );
        assert!(
            pack.join("link.md")
                .symlink_metadata()
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[cfg(unix)]
    #[test]
    fn keeps_the_permissions_of_the_file_it_replaces() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("a.md"), "x").unwrap();
        fs::set_permissions(tmp.path().join("a.md"), fs::Permissions::from_mode(0o600)).unwrap();
        let root = WriteRoot::new(tmp.path(), false).unwrap();
        root.write(Path::new("a.md"), b"y", false).unwrap();
        let mode = fs::metadata(tmp.path().join("a.md"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

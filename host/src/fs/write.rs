//! Atomic writes beneath a root: a temporary file beside the target, synced, renamed
//! over it.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::resolve::{self, Want};
use super::{FsError, Root, Rules, kind_name};

/// How a write treats what is missing and what it makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOptions {
    /// How the path is resolved.
    pub rules: Rules,
    /// Creates missing directories on the way (with `dir_mode`).
    pub create_dirs: bool,
    /// The permissions of a new file (a replaced file keeps its own).
    pub file_mode: u32,
    /// The permissions of a new directory.
    pub dir_mode: u32,
}

impl WriteOptions {
    /// A file readable by all, in directories that must exist.
    pub const fn new(rules: Rules) -> Self {
        Self {
            rules,
            create_dirs: false,
            file_mode: 0o644,
            dir_mode: 0o755,
        }
    }

    /// Missing directories on the way are created.
    pub const fn creating_dirs(self) -> Self {
        Self {
            create_dirs: true,
            ..self
        }
    }

    /// New files and directories are the owner's only (`0600`, `0700`).
    pub const fn private(self) -> Self {
        Self {
            file_mode: 0o600,
            dir_mode: 0o700,
            ..self
        }
    }
}

/// What a write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// The file is new.
    Created,
    /// An existing file was replaced.
    Replaced,
}

impl Root {
    /// Writes `bytes` to `rel` atomically (see the module rules).
    pub fn write(&self, rel: &Path, bytes: &[u8], opts: WriteOptions) -> Result<Written, FsError> {
        let want = Want {
            write: true,
            create_dirs: opts.create_dirs.then_some(opts.dir_mode),
        };
        let found = resolve::locate(self, rel, opts.rules, want)?;
        let Some(name) = &found.name else {
            return Err(FsError::IsDirectory {
                path: rel.to_owned(),
            });
        };
        let existing = match rustix::fs::statat(&found.dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => Some(st.st_mode & 0o7777),
                FileType::Directory => {
                    return Err(FsError::IsDirectory {
                        path: rel.to_owned(),
                    });
                }
                ft => {
                    return Err(FsError::NotRegular {
                        path: rel.to_owned(),
                        kind: kind_name(ft),
                    });
                }
            },
            Err(Errno::NOENT) => None,
            Err(e) => return Err(FsError::io(rel, "inspect", e)),
        };
        let mode = existing.unwrap_or(opts.file_mode);
        replace(found.dir.as_fd(), name, rel, bytes, mode)?;
        Ok(match existing {
            Some(_) => Written::Replaced,
            None => Written::Created,
        })
    }
}

/// Writes a temporary file in `dir` and renames it over `name`. A symlink or file that
/// appeared at `name` meanwhile is replaced, never written through: the rename swaps
/// directory entries inside `dir`.
fn replace(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &OsStr,
    shown: &Path,
    bytes: &[u8],
    mode: u32,
) -> Result<(), FsError> {
    let tmp = format!(".crewbox-{}.tmp", uuid::Uuid::now_v7().simple());
    let fd = rustix::fs::openat(
        dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )
    .map_err(|e| FsError::io(shown, "create a temporary file beside", e))?;
    let mut file = File::from(fd);
    let written = (|| -> Result<(), (&'static str, std::io::Error)> {
        // The umask may have narrowed the mode; a replaced file's is kept exactly.
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(|e| ("chmod", e.into()))?;
        file.write_all(bytes).map_err(|e| ("write", e))?;
        file.sync_all().map_err(|e| ("sync", e))?;
        rustix::fs::renameat(dir, tmp.as_str(), dir, name).map_err(|e| ("rename", e.into()))?;
        Ok(())
    })();
    match written {
        Ok(()) => {
            // The rename is durable once the directory is synced.
            let _ = rustix::fs::fsync(dir);
            Ok(())
        }
        Err((op, source)) => {
            let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
            Err(FsError::Io {
                path: shown.to_owned(),
                op,
                source,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    #[test]
    fn writes_atomically_inside_and_creates_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Root::create(&tmp.path().join("pack"), 0o755).unwrap();
        let opts = WriteOptions::new(Rules::NO_LINKS);
        let rel = Path::new("agents/new/charter.md");
        assert_eq!(
            root.write(rel, b"hi", opts.creating_dirs()).unwrap(),
            Written::Created
        );
        assert_eq!(root.write(rel, b"again", opts).unwrap(), Written::Replaced);
        let dir = tmp.path().join("pack/agents/new");
        assert_eq!(fs::read(dir.join("charter.md")).unwrap(), b"again");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file is left"
        );
        assert!(matches!(
            root.write(Path::new("missing/x.md"), b"x", opts),
            Err(FsError::NotFound { .. })
        ));
        assert!(matches!(
            root.write(Path::new("agents"), b"x", opts),
            Err(FsError::IsDirectory { .. })
        ));
    }

    #[test]
    fn never_writes_through_or_over_a_link_nor_outside() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("victim.md"), "KEEP").unwrap();
        let pack = tmp.path().join("pack");
        fs::create_dir_all(pack.join("agents")).unwrap();
        symlink(&outside, pack.join("agents/evil")).unwrap();
        symlink("../../outside", pack.join("agents/rel-evil")).unwrap();
        symlink(outside.join("victim.md"), pack.join("link.md")).unwrap();
        let root = Root::open(&pack).unwrap();
        for rules in [Rules::NO_LINKS, Rules::LINKS_BENEATH] {
            let opts = WriteOptions::new(rules).creating_dirs();
            for rel in [
                "agents/evil/victim.md",
                "agents/rel-evil/victim.md",
                "../outside/victim.md",
                "/etc/x",
                "link.md",
            ] {
                let err = root.write(Path::new(rel), b"PWNED", opts).unwrap_err();
                assert!(err.is_refusal(), "{rel}: {err}");
            }
        }
        assert_eq!(
            fs::read_to_string(outside.join("victim.md")).unwrap(),
            "KEEP"
        );
        assert!(
            pack.join("link.md")
                .symlink_metadata()
                .unwrap()
                .is_symlink()
        );
    }

    #[test]
    fn keeps_the_permissions_of_the_file_it_replaces() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("a.md"), "x").unwrap();
        fs::set_permissions(tmp.path().join("a.md"), fs::Permissions::from_mode(0o600)).unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let opts = WriteOptions::new(Rules::NO_LINKS);
        root.write(Path::new("a.md"), b"y", opts).unwrap();
        root.write(Path::new("new.md"), b"y", opts.private())
            .unwrap();
        let mode = |n: &str| {
            fs::metadata(tmp.path().join(n))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode("a.md"), 0o600);
        assert_eq!(mode("new.md"), 0o600);
    }

    #[test]
    fn git_and_protected_crewbox_are_never_written() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join(".git")).unwrap();
        let root = Root::open(tmp.path()).unwrap();
        let opts = WriteOptions::new(Rules::LINKS_BENEATH.protecting_crewbox(true)).creating_dirs();
        for rel in [
            ".git/config",
            "sub/.Git/hooks/pre-commit",
            ".git",
            ".crewbox/config.toml",
        ] {
            let err = root.write(Path::new(rel), b"x", opts).unwrap_err();
            assert!(
                matches!(err, FsError::Git { .. } | FsError::Protected { .. }),
                "{rel}: {err}"
            );
        }
        assert!(!tmp.path().join(".crewbox").exists());
        assert!(!tmp.path().join("sub").exists());
        assert_eq!(fs::read_dir(tmp.path().join(".git")).unwrap().count(), 0);
    }
}

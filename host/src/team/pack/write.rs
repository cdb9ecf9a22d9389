//! Writing files inside one directory, atomically and without ever leaving it: the
//! only way an export touches a pack or a team directory.
//!
//! # Rules
//! - A target is a relative path without `..`, resolved beneath the root by the confined
//!   filesystem (`crate::fs`): no symlink anywhere on the way is followed, nothing in
//!   `.git` is written; missing directories are created only when asked.
//! - A target that is a symlink, a directory or a special file is refused: a write
//!   never goes through a link nor replaces one.
//! - The bytes go to a new temporary file beside the target (`O_EXCL|O_NOFOLLOW`), are
//!   synced, and the file is renamed over the target, keeping its permissions; a
//!   reader sees the old file or the new one, never half of one.

use std::path::{Component, Path, PathBuf};

use crate::fs::{FsError, Root, Rules, WriteOptions};

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
    /// Any other refusal or I/O error (`.git` on the way, a missing directory, …).
    #[error("cannot write `{}`: {source}", path.display())]
    Io {
        /// The target.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A directory every write is confined to.
#[derive(Debug)]
pub struct WriteRoot {
    root: Root,
}

/// Packs are written where they are, never through a link.
const OPTIONS: WriteOptions = WriteOptions::new(Rules::NO_LINKS);

impl WriteRoot {
    /// Confines writes to `root` (created when missing and `create` is set).
    pub fn new(root: &Path, create: bool) -> Result<Self, WriteError> {
        let opened = if create {
            Root::create(root, 0o755)
        } else {
            Root::open(root)
        };
        let root = opened.map_err(|e| WriteError::Io {
            path: root.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?;
        Ok(Self { root })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Writes `bytes` to `rel` atomically (see the module rules); missing
    /// directories on the way are created when `create_dirs` is set.
    pub fn write(&self, rel: &Path, bytes: &[u8], create_dirs: bool) -> Result<(), WriteError> {
        let escapes = || WriteError::Escapes {
            path: rel.to_owned(),
            root: self.root.path().to_owned(),
        };
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(escapes());
        }
        let opts = if create_dirs {
            OPTIONS.creating_dirs()
        } else {
            OPTIONS
        };
        match self.root.write(rel, bytes, opts) {
            Ok(_) => Ok(()),
            // The target itself is a link: it is neither followed nor replaced.
            Err(FsError::Link { link, .. }) if link == rel => Err(WriteError::NotRegular {
                path: rel.to_owned(),
                kind: "symlink",
            }),
            Err(FsError::Link { .. } | FsError::LinkEscapes { .. }) => Err(escapes()),
            Err(e) if e.is_refusal() && !matches!(e, FsError::Git { .. }) => Err(escapes()),
            Err(FsError::NotRegular { kind, .. }) => Err(WriteError::NotRegular {
                path: rel.to_owned(),
                kind,
            }),
            Err(FsError::IsDirectory { .. }) => Err(WriteError::NotRegular {
                path: rel.to_owned(),
                kind: "directory",
            }),
            Err(FsError::Io { source, .. }) => Err(WriteError::Io {
                path: rel.to_owned(),
                source,
            }),
            Err(e) => Err(WriteError::Io {
                path: rel.to_owned(),
                source: std::io::Error::other(e.to_string()),
            }),
        }
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

//! Reading a component file a repository or a config names, without trusting it: a FIFO
//! would block a plain read forever and a link to `/dev/zero` would never end. The file
//! is opened non-blocking, checked on the opened descriptor to be a regular file, and
//! read with a hard bound (its size on disk is not trusted either).

use std::path::{Path, PathBuf};

/// Why a component file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// It cannot be opened.
    #[error("cannot open plugin file {}: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It is a FIFO, socket, device or directory.
    #[error("plugin file {} is {what}, not a regular file", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// It is larger than the component size cap.
    #[error("plugin file {} is over the {limit}-byte cap for a component", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        limit: u64,
    },
    /// Reading it failed.
    #[error("cannot read plugin file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A repository's plugin file was refused by the confined read (it leaves the
    /// repository, is no regular file, or is over the cap).
    #[error("repository plugin refused: {0}")]
    Repo(#[from] crate::trust::read::ReadError),
    /// A built-in's embedded bytes do not unpack (a damaged binary).
    #[error(transparent)]
    Damaged(#[from] super::builtin::Damaged),
}

/// Reads the component at `path` (links are followed: the file is checked once open), at
/// most `max` bytes. Blocking, but never for long: it does not wait on a FIFO.
pub fn read_component(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    use crate::fs::FsError;
    crate::fs::read_path_all(path, max).map_err(|e| {
        let path = path.to_owned();
        match e {
            FsError::TooLarge { limit, .. } => FileError::TooLarge { path, limit },
            FsError::IsDirectory { .. } => FileError::NotRegular {
                path,
                what: "a directory",
            },
            FsError::NotRegular { kind, .. } => FileError::NotRegular {
                path,
                what: match kind {
                    "FIFO" => "a FIFO",
                    "socket" => "a socket",
                    "device" | "socket or device" => "a device",
                    _ => "not a file",
                },
            },
            FsError::Io {
                op: "read", source, ..
            } => FileError::Read { path, source },
            FsError::Io { source, .. } => FileError::Open { path, source },
            FsError::NotFound { .. } => FileError::Open {
                path,
                source: std::io::ErrorKind::NotFound.into(),
            },
            other => FileError::Open {
                path,
                source: std::io::Error::other(other.to_string()),
            },
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_the_cap_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.wasm");
        std::fs::write(&ok, b"\0asm").unwrap();
        assert_eq!(read_component(&ok, 4).unwrap(), b"\0asm");
        assert!(matches!(
            read_component(&ok, 3),
            Err(FileError::TooLarge { limit: 3, .. })
        ));
        let zero = dir.path().join("zero.wasm");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(matches!(
            read_component(&zero, 1 << 20),
            Err(FileError::NotRegular {
                what: "a device",
                ..
            })
        ));
        let fifo = dir.path().join("fifo.wasm");
        crate::fs::make_fifo(&fifo);
        let e = read_component(&fifo, 1 << 20).unwrap_err();
        assert!(
            e.to_string().ends_with("is a FIFO, not a regular file"),
            "{e}"
        );
        assert!(matches!(
            read_component(dir.path(), 1 << 20),
            Err(FileError::NotRegular {
                what: "a directory",
                ..
            })
        ));
    }
}

//! Reading a component file a repository or a config names, without trusting it: a FIFO
//! would block a plain read forever and a link to `/dev/zero` would never end. The file
//! is opened non-blocking, checked on the opened descriptor to be a regular file, and
//! read with a hard bound (its size on disk is not trusted either).

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
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
}

/// Reads the component at `path` (links are followed: the file is checked once open), at
/// most `max` bytes. Blocking, but never for long: it does not wait on a FIFO.
pub fn read_component(path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| FileError::Open {
            path: path.to_owned(),
            source,
        })?;
    let meta = file.metadata().map_err(|source| FileError::Read {
        path: path.to_owned(),
        source,
    })?;
    let ft = meta.file_type();
    let what = if ft.is_file() {
        None
    } else if ft.is_dir() {
        Some("a directory")
    } else if ft.is_fifo() {
        Some("a FIFO")
    } else if ft.is_socket() {
        Some("a socket")
    } else if ft.is_char_device() || ft.is_block_device() {
        Some("a device")
    } else {
        Some("not a file")
    };
    if let Some(what) = what {
        return Err(FileError::NotRegular {
            path: path.to_owned(),
            what,
        });
    }
    let too_large = || FileError::TooLarge {
        path: path.to_owned(),
        limit: max,
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| FileError::Read {
            path: path.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Makes a FIFO at `path`, for tests of what must never be waited on.
#[cfg(test)]
pub(crate) fn make_fifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
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
        make_fifo(&fifo);
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

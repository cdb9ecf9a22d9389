//! One daemon per state directory: `crewbox daemon` holds an exclusive lock on
//! `daemon.lock` there for its whole life, with its pid written inside so a second one
//! can say who holds it. The lock is the kernel's (released when the process dies,
//! however it dies), so a crash never leaves a stale lock behind.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};

/// The lock file's name in the state directory.
pub const LOCK_FILE: &str = "daemon.lock";

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another daemon holds it.
    #[error(
        "another crewbox daemon already runs for this repository ({}; lock {})",
        match pid { Some(pid) => format!("pid {pid}"), None => "pid unknown".to_owned() },
        path.display()
    )]
    Held {
        /// The lock file.
        path: PathBuf,
        /// The holder's pid, as it wrote it.
        pid: Option<u32>,
    },
    /// The lock file could not be opened, locked or written.
    #[error("cannot use the daemon lock {}: {source}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
}

/// The held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct DaemonLock {
    _file: File,
    path: PathBuf,
}

impl DaemonLock {
    /// Takes the lock of `state_dir` (creating the directory), or says who holds it.
    pub fn acquire(state_dir: &Path) -> Result<Self, LockError> {
        let path = state_dir.join(LOCK_FILE);
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(state_dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                // Capped: the pid is a few digits, whatever else the file holds.
                let _ = (&mut file).take(64).read_to_string(&mut text);
                return Err(LockError::Held {
                    path,
                    pid: text.trim().parse().ok(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        file.sync_data().map_err(io)?;
        Ok(Self { _file: file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_a_dropped_one_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let held = DaemonLock::acquire(dir.path()).unwrap();
        match DaemonLock::acquire(dir.path()) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(held);
        DaemonLock::acquire(dir.path()).unwrap();
    }
}

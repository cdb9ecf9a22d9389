//! A directory one process holds for its whole life: an exclusive lock (`flock`) on a
//! lock file inside it, taken when it is made and dropped however the process ends.
//! Whoever finds such a directory with its lock free knows its owner is gone (`kill
//! -9`, a crash, a lost machine) and may clean it up. The lock, not a pid, says whether
//! the owner lives: the kernel drops it however the owner dies, and it holds across pid
//! namespaces. A directory is made under another name, locked, then renamed into
//! place, so no one ever sees one whose lock is not taken yet.
//!
//! Used by a worker's own store directory and by a replay's scratch state.

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};

/// The prefix a directory is made under before it is renamed into place.
const STAGING: &str = "new-";

/// A directory this process holds, for as long as this value lives.
#[derive(Debug)]
pub struct HeldDir {
    path: PathBuf,
    _lock: File,
}

impl HeldDir {
    /// Makes `parent/name` (and `parent` where missing) with its lock file `lock`
    /// held.
    pub fn create(parent: &Path, name: &str, lock: &str) -> io::Result<Self> {
        std::fs::create_dir_all(parent)?;
        let staging = parent.join(format!("{STAGING}{name}"));
        std::fs::create_dir(&staging)?;
        let path = parent.join(name);
        let locked = || -> io::Result<File> {
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(staging.join(lock))?;
            file.try_lock().map_err(|e| match e {
                TryLockError::Error(e) => e,
                TryLockError::WouldBlock => io::Error::other("a new lock file is held already"),
            })?;
            std::fs::rename(&staging, &path)?;
            Ok(file)
        };
        match locked() {
            Ok(file) => Ok(Self { path, _lock: file }),
            Err(e) => {
                // Nothing is left under a name no sweep looks at.
                let _ = std::fs::remove_dir_all(&staging);
                Err(e)
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The directories in `parent` whose names start with `prefix` and that no live
/// process holds, each with its lock now held by the caller (so two sweeping at once
/// never take the same one; `None` for one without a lock file that `unlocked` judged
/// abandoned). Entries that are not directories (files, symbolic links) are never
/// returned, and neither is anything that cannot be told for sure.
pub fn abandoned(
    parent: &Path,
    prefix: &str,
    lock: &str,
    unlocked: impl Fn(&str) -> bool,
) -> Vec<(PathBuf, Option<File>)> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // `file_type` does not follow a symbolic link.
        if !name.starts_with(prefix) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = entry.path();
        match File::open(dir.join(lock)) {
            Ok(f) => {
                if f.try_lock().is_ok() {
                    found.push((dir, Some(f)));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && unlocked(name) => {
                found.push((dir, None));
            }
            Err(_) => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_no_live_owner_holds_are_abandoned() {
        let base = tempfile::tempdir().unwrap();
        let parent = base.path().join("p");
        let live = HeldDir::create(&parent, "x-live", "own.lock").unwrap();
        assert!(live.path().join("own.lock").is_file());
        let dead = HeldDir::create(&parent, "x-dead", "own.lock")
            .unwrap()
            .path()
            .to_path_buf();
        std::fs::create_dir(parent.join("x-nolock")).unwrap();
        std::fs::create_dir(parent.join("y-other")).unwrap();
        std::fs::write(parent.join("x-file"), "").unwrap();
        std::os::unix::fs::symlink(&dead, parent.join("x-link")).unwrap();
        let names = |found: Vec<(PathBuf, Option<File>)>| -> Vec<String> {
            let mut n: Vec<String> = found
                .iter()
                .map(|(d, _)| d.file_name().unwrap().to_string_lossy().into_owned())
                .collect();
            n.sort();
            n
        };
        assert_eq!(
            names(abandoned(&parent, "x-", "own.lock", |_| false)),
            ["x-dead"]
        );
        assert_eq!(
            names(abandoned(&parent, "x-", "own.lock", |n| n == "x-nolock")),
            ["x-dead", "x-nolock"]
        );
        // One taken by a sweeper is not taken by another meanwhile.
        let taken = abandoned(&parent, "x-", "own.lock", |_| false);
        assert!(abandoned(&parent, "x-", "own.lock", |_| false).is_empty());
        drop(taken);
        drop(live);
        assert_eq!(
            names(abandoned(&parent, "x-", "own.lock", |_| false)),
            ["x-dead", "x-live"]
        );
    }
}

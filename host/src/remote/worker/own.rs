//! The worker's own store directory: one per process, `run-<pid>-<uuid>` in the
//! worker directory of its state base, with an exclusive lock (`flock`) on its
//! `worker.lock` for the process's whole life. The worker deletes it when it stops; one
//! that died (`kill -9`, a crash, a lost machine) leaves it behind with its lock free,
//! and the next worker that starts with the same state base deletes it.
//!
//! The lock, not the pid, says whether its owner lives: the kernel drops it however the
//! owner dies, and it holds across pid namespaces (two containers sharing a state
//! volume see each other's locks but not each other's pids). A directory is created
//! under another name, locked, then renamed into place, so no worker ever sees a
//! `run-` directory whose lock is not taken yet.

use std::path::Path;

use crate::fs::held::{self, HeldDir};

/// The lock file in each directory.
const LOCK: &str = "worker.lock";
/// The prefix of the directories this module creates and sweeps.
const PREFIX: &str = "run-";

/// This process's directory, locked for as long as this value lives.
pub(super) type OwnDir = HeldDir;

/// Creates and locks a new directory in `worker_dir` (created if missing).
pub(super) fn create(worker_dir: &Path) -> std::io::Result<OwnDir> {
    let name = format!(
        "{PREFIX}{}-{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    );
    HeldDir::create(worker_dir, &name, LOCK)
}

/// Deletes the directories in `worker_dir` that no live worker holds; returns how many.
/// Entries that are not such directories (other names, files, symbolic links) are left
/// alone, and so is anything that cannot be told for sure.
pub(super) fn sweep(worker_dir: &Path) -> usize {
    let mut removed = 0;
    // Each is held while it goes, so a worker sweeping at the same time skips it.
    for (dir, _held) in held::abandoned(worker_dir, PREFIX, LOCK, from_before_locks) {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => removed += 1,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot delete a dead worker's store")
            }
        }
    }
    removed
}

/// Whether the directory `name`, without a lock file (a worker of an earlier version),
/// is abandoned: by the pid in its name, which must be gone.
fn from_before_locks(name: &str) -> bool {
    name.strip_prefix(PREFIX)
        .and_then(|rest| rest.split('-').next()?.parse().ok())
        .is_some_and(|pid| !crate::process::pid_alive(pid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_workers_directory_goes_and_a_held_one_or_anything_else_stays() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("worker");
        let live = create(&dir).unwrap();
        assert!(live.path().join(LOCK).is_file());
        // A worker that died: its directory, its lock free.
        let dead = {
            let d = create(&dir).unwrap();
            std::fs::write(d.path().join("crewbox.db"), "x").unwrap();
            d.path().to_path_buf()
        };
        // One without a lock file whose pid is gone (no pid reaches u32::MAX - 1).
        let old = dir.join(format!("{PREFIX}{}-abc", u32::MAX - 1));
        std::fs::create_dir(&old).unwrap();
        // One without a lock file whose pid lives (this process).
        let old_live = dir.join(format!("{PREFIX}{}-abc", std::process::id()));
        std::fs::create_dir(&old_live).unwrap();
        // Not ours to delete: another name, a file, a link to a dead directory.
        let other = dir.join("clones");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(dir.join(format!("{PREFIX}file")), "x").unwrap();
        let target = base.path().join("elsewhere");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join(LOCK), "").unwrap();
        std::os::unix::fs::symlink(&target, dir.join(format!("{PREFIX}link"))).unwrap();

        assert_eq!(sweep(&dir), 2);
        assert!(!dead.exists() && !old.exists());
        assert!(live.path().is_dir() && old_live.is_dir() && other.is_dir());
        assert!(dir.join(format!("{PREFIX}file")).is_file());
        assert!(target.join(LOCK).is_file(), "a link is not followed");
        // Once its owner is gone, the live one goes too.
        let path = live.path().to_path_buf();
        drop(live);
        assert_eq!(sweep(&dir), 1);
        assert!(!path.exists());
    }
}

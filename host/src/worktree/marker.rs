//! Owner markers: one small JSON file per worktree slot, next to the slot's directory,
//! holding the owner's pid and the slot's state, and kept under an exclusive advisory lock
//! (`flock`) for as long as the owning process has the slot.
//!
//! The lock is the authority on liveness: the kernel drops it when the owner dies, however
//! it dies, so an unlockable marker always means a live owner. The pid is recorded for
//! people (`crewbox worktree list`) and as a second, conservative check: a marker whose
//! lock is free but whose pid is still running is left alone.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File name suffix of a marker (`<slot>.owner`).
pub(crate) const MARKER_SUFFIX: &str = ".owner";

/// Where a slot is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotState {
    /// Being checked out for the first time.
    Creating,
    /// Handed to an agent.
    Active,
    /// Clean, waiting in the pool for the next agent.
    Pooled,
    /// Being deleted.
    Removing,
}

/// What a marker file says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MarkerData {
    /// The owning process.
    pub pid: u32,
    /// The slot's state as last written by its owner.
    pub state: SlotState,
    /// The agent holding the slot, when active.
    pub agent_id: Option<String>,
    /// The commit the slot was last reset to.
    pub base: Option<String>,
}

impl MarkerData {
    /// A marker for this process.
    pub fn ours(state: SlotState, agent_id: Option<&str>, base: Option<String>) -> Self {
        Self {
            pid: std::process::id(),
            state,
            agent_id: agent_id.map(str::to_owned),
            base,
        }
    }
}

/// A marker this process holds locked.
#[derive(Debug)]
pub(crate) struct Marker {
    file: File,
    path: PathBuf,
}

/// The marker path for a slot directory name.
pub(crate) fn marker_path(dir: &Path, slot: &str) -> PathBuf {
    dir.join(format!("{slot}{MARKER_SUFFIX}"))
}

impl Marker {
    /// Creates and locks a new marker. It is written under a hidden temporary name and
    /// renamed into place already locked, so no other process can see it unlocked.
    pub fn create(dir: &Path, slot: &str, data: &MarkerData) -> io::Result<Self> {
        let tmp = dir.join(format!(".{slot}{MARKER_SUFFIX}.tmp"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        file.lock()?;
        let mut marker = Marker { file, path: tmp };
        marker.write(data)?;
        let path = marker_path(dir, slot);
        std::fs::rename(&marker.path, &path)?;
        marker.path = path;
        Ok(marker)
    }

    /// Takes over an existing marker if its owner is gone; `None` when it is still held.
    pub fn try_claim(path: &Path) -> io::Result<Option<Self>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Marker {
                file,
                path: path.to_owned(),
            })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// Reads the marker's current contents; `None` if it is empty or not ours to parse.
    pub fn read(&mut self) -> Option<MarkerData> {
        let mut buf = String::new();
        self.file.seek(SeekFrom::Start(0)).ok()?;
        self.file.read_to_string(&mut buf).ok()?;
        serde_json::from_str(&buf).ok()
    }

    /// Replaces the contents in place: a rename would swap the inode and drop the lock.
    pub fn write(&mut self, data: &MarkerData) -> io::Result<()> {
        let json = serde_json::to_vec(data).map_err(io::Error::other)?;
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file.write_all(&json)
    }

    /// Deletes the marker file; the lock goes with the handle right after.
    pub fn remove(self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Reads a marker without locking it (for listing).
pub(crate) fn peek(path: &Path) -> Option<MarkerData> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

pub(crate) use crate::process::pid_alive;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_marker_cannot_be_claimed_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let data = MarkerData::ours(SlotState::Active, Some("a1"), None);
        let marker = Marker::create(dir.path(), "s1", &data).unwrap();
        let path = marker_path(dir.path(), "s1");
        assert!(Marker::try_claim(&path).unwrap().is_none());
        assert_eq!(peek(&path), Some(data.clone()));
        drop(marker);
        let mut claimed = Marker::try_claim(&path).unwrap().expect("owner gone");
        assert_eq!(claimed.read(), Some(data));
        claimed.remove().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn own_pid_is_alive_and_reaped_child_is_not() {
        assert!(pid_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!pid_alive(pid));
    }
}

//! A read-only view of the agent's workspace (validators and roles only).
//!
//! Calling these from a dispatcher makes the component import
//! `crewbox:plugin/workspace`, and the host refuses to load it.

use crate::__bindings::validator::crewbox::plugin::workspace as raw;

pub use raw::{ChangeKind, ChangedPath, DirEntry, EntryKind, FsError};

/// Reads a UTF-8 text file; `path` is relative to the workspace root.
pub fn read_file(path: &str) -> Result<String, FsError> {
    raw::read_file(path)
}

/// Lists a directory; `path` is relative to the workspace root (`""` or `"."` is the root).
pub fn list_dir(path: &str) -> Result<Vec<DirEntry>, FsError> {
    raw::list_dir(path)
}

/// The paths the agent changed relative to its starting point.
pub fn changed_paths() -> Vec<ChangedPath> {
    raw::changed_paths()
}

/// The agent's changes as a unified diff (the host may truncate it).
pub fn diff() -> String {
    raw::diff()
}

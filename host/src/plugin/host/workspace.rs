//! `crewbox:plugin/workspace`: a read-only view of an agent's workspace.
//!
//! Paths are relative to the root. The root is opened once per call and every path is
//! opened beneath that descriptor ([`super::beneath`]): `..`, absolute paths and every
//! symbolic link are refused as `outside-workspace`, `.git` is hidden, only regular
//! files are read and every read is bounded. File system work runs on the blocking
//! pool, never on the async runtime's threads.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use super::beneath::{self, Kind, Refusal};
use crate::fs::Root;
use crate::plugin::bindings::workspace::{
    ChangeKind, ChangedPath, DirEntry, EntryKind, FsError, Host,
};

/// Longest directory listing returned; more entries are cut (sorted by name first).
const MAX_DIR_ENTRIES: usize = 4096;

/// Most entries read from one directory before sorting and cutting.
const MAX_DIR_SCAN: usize = 16 * MAX_DIR_ENTRIES;

/// What a plugin may see of a workspace during one call.
#[derive(Clone, Debug, Default)]
pub struct WorkspaceView {
    /// The workspace root on the host.
    pub root: PathBuf,
    /// The paths the agent changed, `/`-separated and relative to `root`.
    pub changed: Vec<(String, ChangeKind)>,
    /// The agent's changes as a unified diff.
    pub diff: String,
}

/// Per-call workspace state.
#[derive(Default)]
pub(crate) struct WorkspaceState {
    pub(crate) view: Option<Arc<WorkspaceView>>,
    /// The root, opened on first use and kept for the rest of the call.
    pub(crate) root: Arc<OnceLock<Result<Root, String>>>,
    pub(crate) max_read: u64,
    pub(crate) max_diff: usize,
}

/// Puts a refusal in WIT terms, naming the guest's path.
fn fs_error(path: &str, r: Refusal) -> FsError {
    match r {
        Refusal::Outside => FsError::OutsideWorkspace(path.to_owned()),
        Refusal::NotFound => FsError::NotFound(path.to_owned()),
        Refusal::IsDirectory => FsError::Io(format!("`{path}` is a directory")),
        Refusal::NotDirectory => FsError::Io(format!("`{path}` is not a directory")),
        Refusal::NotRegular => FsError::Io(format!("`{path}` is not a regular file")),
        Refusal::TooLarge(max) => FsError::TooLarge(max),
        Refusal::Io(e) => FsError::Io(format!("`{path}`: {e}")),
    }
}

fn read_file(root: &Root, path: &str, max: u64) -> Result<String, FsError> {
    let rel = beneath::relative(path).map_err(|r| fs_error(path, r))?;
    let bytes = beneath::read(root, rel, max).map_err(|r| fs_error(path, r))?;
    String::from_utf8(bytes).map_err(|_| FsError::NotText(path.to_owned()))
}

fn list_dir(root: &Root, path: &str) -> Result<Vec<DirEntry>, FsError> {
    let rel = beneath::relative(path).map_err(|r| fs_error(path, r))?;
    let entries = beneath::list(root, rel, MAX_DIR_SCAN).map_err(|r| fs_error(path, r))?;
    let mut out: Vec<DirEntry> = entries
        .into_iter()
        .map(|(name, kind, size)| DirEntry {
            name,
            kind: match kind {
                Kind::File => EntryKind::File,
                Kind::Directory => EntryKind::Directory,
                Kind::Symlink => EntryKind::Symlink,
                Kind::Other => EntryKind::Other,
            },
            size,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.truncate(MAX_DIR_ENTRIES);
    Ok(out)
}

impl WorkspaceState {
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Root) -> Result<T, FsError> + Send + 'static,
    ) -> Result<T, FsError> {
        let Some(view) = self.view.clone() else {
            return Err(FsError::Io("no workspace is attached to this call".into()));
        };
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || {
            let root = root.get_or_init(|| {
                beneath::open_root(&view.root).map_err(|e| format!("workspace root: {e}"))
            });
            match root {
                Ok(fd) => f(fd),
                Err(e) => Err(FsError::Io(e.clone())),
            }
        })
        .await
        .unwrap_or_else(|e| Err(FsError::Io(format!("workspace task failed: {e}"))))
    }
}

impl Host for WorkspaceState {
    async fn read_file(&mut self, path: String) -> Result<String, FsError> {
        let max = self.max_read;
        self.blocking(move |root| read_file(root, &path, max)).await
    }

    async fn list_dir(&mut self, path: String) -> Result<Vec<DirEntry>, FsError> {
        self.blocking(move |root| list_dir(root, &path)).await
    }

    async fn changed_paths(&mut self) -> Vec<ChangedPath> {
        let Some(view) = &self.view else {
            return Vec::new();
        };
        view.changed
            .iter()
            .map(|(path, change)| ChangedPath {
                path: path.clone(),
                change: *change,
            })
            .collect()
    }

    async fn diff(&mut self) -> String {
        let Some(view) = &self.view else {
            return String::new();
        };
        super::log::truncate(&view.diff, self.max_diff).to_owned()
    }
}

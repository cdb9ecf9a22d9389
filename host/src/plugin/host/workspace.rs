//! `crewbox:plugin/workspace`: a read-only view of an agent's workspace.
//!
//! Paths are relative to the root; `..`, absolute paths and symlinks that resolve
//! outside the root are refused as `outside-workspace`. File system work runs on the
//! blocking pool, never on the async runtime's threads.

use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::plugin::bindings::workspace::{
    ChangeKind, ChangedPath, DirEntry, EntryKind, FsError, Host,
};

/// Longest directory listing returned; more entries are cut (sorted by name first).
const MAX_DIR_ENTRIES: usize = 4096;

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
    pub(crate) max_read: u64,
    pub(crate) max_diff: usize,
}

/// Resolves a guest path to a host path inside `root`, or says why not.
fn resolve(root: &Path, path: &str) -> Result<PathBuf, FsError> {
    let outside = || FsError::OutsideWorkspace(path.to_owned());
    let rel = Path::new(path);
    if rel.is_absolute() || path.starts_with('/') || path.starts_with('\\') {
        return Err(outside());
    }
    for c in rel.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(outside());
            }
        }
    }
    let root = root
        .canonicalize()
        .map_err(|e| FsError::Io(format!("workspace root: {e}")))?;
    let full = root.join(rel);
    match full.canonicalize() {
        Ok(real) if real.starts_with(&root) => Ok(real),
        Ok(_) => Err(outside()),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            // A dangling symlink is reported by what it is, not where it points.
            Err(FsError::NotFound(path.to_owned()))
        }
        Err(e) => Err(FsError::Io(e.to_string())),
    }
}

fn read_file(root: &Path, path: &str, max: u64) -> Result<String, FsError> {
    let full = resolve(root, path)?;
    let meta = std::fs::metadata(&full).map_err(|e| FsError::Io(e.to_string()))?;
    if meta.is_dir() {
        return Err(FsError::Io(format!("`{path}` is a directory")));
    }
    // FIFOs, sockets and devices could block the read or never end: regular files only.
    if !meta.is_file() {
        return Err(FsError::Io(format!("`{path}` is not a regular file")));
    }
    if meta.len() > max {
        return Err(FsError::TooLarge(max));
    }
    let bytes = std::fs::read(&full).map_err(|e| FsError::Io(e.to_string()))?;
    if bytes.len() as u64 > max {
        return Err(FsError::TooLarge(max));
    }
    String::from_utf8(bytes).map_err(|_| FsError::NotText(path.to_owned()))
}

fn list_dir(root: &Path, path: &str) -> Result<Vec<DirEntry>, FsError> {
    let path = if path.is_empty() { "." } else { path };
    let full = resolve(root, path)?;
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&full).map_err(|e| FsError::Io(e.to_string()))? {
        let entry = entry.map_err(|e| FsError::Io(e.to_string()))?;
        let meta = entry
            .path()
            .symlink_metadata()
            .map_err(|e| FsError::Io(e.to_string()))?;
        let ft = meta.file_type();
        let kind = if ft.is_symlink() {
            EntryKind::Symlink
        } else if ft.is_dir() {
            EntryKind::Directory
        } else if ft.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        };
        let size = if kind == EntryKind::File {
            meta.len()
        } else {
            0
        };
        out.push(DirEntry {
            name: entry.file_name().to_string_lossy().into_owned(),
            kind,
            size,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.truncate(MAX_DIR_ENTRIES);
    Ok(out)
}

impl WorkspaceState {
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Path) -> Result<T, FsError> + Send + 'static,
    ) -> Result<T, FsError> {
        let Some(view) = self.view.clone() else {
            return Err(FsError::Io("no workspace is attached to this call".into()));
        };
        tokio::task::spawn_blocking(move || f(&view.root))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_refuses_escapes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hi").unwrap();
        assert!(resolve(dir.path(), "a.txt").is_ok());
        assert!(resolve(dir.path(), "./a.txt").is_ok());
        for bad in ["../a.txt", "/etc/passwd", "x/../../a"] {
            assert!(
                matches!(resolve(dir.path(), bad), Err(FsError::OutsideWorkspace(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            resolve(dir.path(), "missing"),
            Err(FsError::NotFound(_))
        ));
    }
}

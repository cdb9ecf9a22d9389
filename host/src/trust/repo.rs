//! Which repository a command works on: its canonical root, found from a directory.

use std::path::{Path, PathBuf};

/// A repository (or plain directory) crewbox works on, by canonical root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoRoot {
    root: PathBuf,
}

impl RepoRoot {
    /// The work tree root of the git repository containing `start` (canonical), else
    /// `start` itself (canonical) when it is in no git repository.
    pub fn discover(start: &Path) -> std::io::Result<Self> {
        let start = start.canonicalize()?;
        let root = git2::Repository::discover(&start)
            .ok()
            .and_then(|r| r.workdir().map(Path::to_path_buf))
            .and_then(|w| w.canonicalize().ok())
            .unwrap_or(start);
        Ok(Self { root })
    }

    /// A root known to be canonical (as recorded elsewhere).
    pub fn from_canonical(root: PathBuf) -> Self {
        Self { root }
    }

    /// The canonical root.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The stable id used for its state directory and trust record.
    pub fn id(&self) -> String {
        crate::paths::repo_id(&self.root)
    }
}

impl crate::store::RepoIdentity for RepoRoot {
    fn root(&self) -> &Path {
        &self.root
    }

    fn root_commit(&self) -> Option<String> {
        // The first commit of HEAD's first-parent chain: the same for every clone.
        let repo = git2::Repository::open(&self.root).ok()?;
        let mut walk = repo.revwalk().ok()?;
        walk.push_head().ok()?;
        walk.simplify_first_parent().ok()?;
        walk.filter_map(Result::ok)
            .last()
            .map(|oid| oid.to_string())
    }

    fn has_commit(&self, id: &str) -> bool {
        let Ok(oid) = git2::Oid::from_str(id) else {
            return false;
        };
        git2::Repository::open(&self.root).is_ok_and(|r| r.find_commit(oid).is_ok())
    }
}

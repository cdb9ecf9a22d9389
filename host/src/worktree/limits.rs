//! What a snapshot of an agent's worktree takes: files within the size and count
//! limits, and `.crewbox/` only when the user lets agents change it. Everything else is
//! left out — never read, never hashed (a 3 GiB sparse file costs a `stat`) — and
//! named, so the report can say what did not reach the branch and why.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How much one commit of an agent's worktree may add.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitLimits {
    /// A new or changed file larger than this is left out.
    pub max_file_bytes: u64,
    /// At most this many new or changed files are taken (in path order).
    pub max_files: u64,
    /// At most this many bytes of new or changed files are taken together.
    pub max_total_bytes: u64,
}

impl Default for CommitLimits {
    fn default() -> Self {
        Self {
            max_file_bytes: 25 * 1024 * 1024,
            max_files: 10_000,
            max_total_bytes: 256 * 1024 * 1024,
        }
    }
}

/// What a snapshot of an agent's worktree takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitRules {
    /// The size and count limits.
    pub limits: CommitLimits,
    /// Whether changes to the repository's `.crewbox/` are taken (the user's grant).
    pub crewbox_writable: bool,
}

pub use crate::vocab::{LeftOut, LeftOutReason};

/// Whether `path` (relative, `/`-separated) lies in the root's `.crewbox/` (any
/// spelling a file system treats as it).
pub(crate) fn in_crewbox(path: &Path) -> bool {
    path.components()
        .next()
        .is_some_and(|c| crate::fs::name::is_crewbox(c.as_os_str()))
}

/// Decides path by path what a snapshot takes, as libgit2 offers them.
pub(crate) struct Filter<'a> {
    workdir: &'a Path,
    rules: CommitRules,
    files: u64,
    bytes: u64,
    taken: BTreeSet<Vec<u8>>,
    left: Vec<LeftOut>,
    seen: BTreeSet<String>,
    /// Directories looked at, and what was found in them.
    git_dirs: HashMap<PathBuf, Looked>,
}

/// What [`Filter`] found in one directory of the worktree.
#[derive(Clone, Copy)]
struct Looked {
    /// It has a git directory's layout (see [`is_git_dir`]).
    git_layout: bool,
    /// It holds a `.git` entry, which libgit2 passes over without offering it.
    dot_git: bool,
}

/// Whether `dir` has the layout by which git takes a directory for a repository of
/// its own (`HEAD`, `objects/`, `refs/`): an agent's `git init --bare`, or its files
/// written one by one. Its `config` is then read by any git run in it (`core.fsmonitor`,
/// `core.hooksPath` name programs), so such a directory is never committed.
fn is_git_dir(dir: &Path) -> bool {
    let is = |name: &str, dir_wanted: bool| {
        std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| {
            if dir_wanted {
                m.is_dir()
            } else {
                m.is_file() || m.file_type().is_symlink()
            }
        })
    };
    is("HEAD", false) && is("objects", true) && is("refs", true)
}

impl<'a> Filter<'a> {
    pub(crate) fn new(workdir: &'a Path, rules: CommitRules) -> Self {
        Self {
            workdir,
            rules,
            files: 0,
            bytes: 0,
            taken: BTreeSet::new(),
            left: Vec::new(),
            seen: BTreeSet::new(),
            git_dirs: HashMap::new(),
        }
    }

    /// The directory of `path` (one of its parents, the worktree's root excluded) that
    /// has a git directory's layout, if any. A `.git` entry met in one of them (libgit2
    /// passes over it in silence) is noted as left out.
    fn in_git_dir(&mut self, path: &Path) -> Option<PathBuf> {
        let mut found = None;
        for dir in path.ancestors().skip(1) {
            if dir.as_os_str().is_empty() {
                break;
            }
            let workdir = self.workdir;
            let looked = *self.git_dirs.entry(dir.to_path_buf()).or_insert_with(|| {
                let full = workdir.join(dir);
                Looked {
                    git_layout: is_git_dir(&full),
                    dot_git: std::fs::symlink_metadata(full.join(".git")).is_ok(),
                }
            });
            if looked.git_layout {
                // The outermost one is named.
                found = Some(dir.to_path_buf());
            } else if looked.dot_git {
                self.leave(&dir.join(".git"), LeftOutReason::GitName);
            }
        }
        found
    }

    fn leave(&mut self, path: &Path, reason: LeftOutReason) -> i32 {
        // A byte that is not UTF-8 is named `\xNN`, as everywhere crewbox shows one
        // (U+FFFD named a file that is not there, and two such names as one).
        let shown = crate::text::from_bytes(path.as_os_str().as_encoded_bytes()).into_owned();
        if self.seen.insert(shown.clone()) {
            self.left.push(LeftOut {
                path: shown,
                reason,
            });
        }
        // A positive answer tells libgit2 to skip the path.
        1
    }

    /// libgit2's callback: 0 takes `path`, 1 skips it. Sizes come from `lstat` on the
    /// entry itself (a symlink is its link text, never its target).
    pub(crate) fn offer(&mut self, path: &Path) -> i32 {
        if !self.rules.crewbox_writable && in_crewbox(path) {
            return self.leave(path, LeftOutReason::Crewbox);
        }
        // libgit2 refuses to add such a name ("invalid path"), which failed the agent's
        // whole commit, and with it a `single` run.
        if path
            .components()
            .any(|c| crate::fs::name::is_git(c.as_os_str()))
        {
            return self.leave(path, LeftOutReason::GitName);
        }
        let key = path.as_os_str().as_encoded_bytes().to_vec();
        if self.taken.contains(&key) {
            return 0;
        }
        let meta = std::fs::symlink_metadata(self.workdir.join(path));
        // libgit2 offers a directory only when it holds a repository of its own (an
        // agent's `git init` or clone), which it cannot add ("invalid path"): that
        // failed the agent's whole commit, and with it the run.
        if meta.as_ref().is_ok_and(|m| m.is_dir())
            || path.as_os_str().as_encoded_bytes().ends_with(b"/")
        {
            return self.leave(path, LeftOutReason::NestedRepository);
        }
        // A repository without a `.git` entry (a bare one, or its files written one by
        // one): libgit2 offers its files as ordinary ones.
        if let Some(repo) = self.in_git_dir(path) {
            let mut shown = repo.into_os_string();
            shown.push("/");
            return self.leave(Path::new(&shown), LeftOutReason::NestedRepository);
        }
        let size = meta.map_or(0, |m| m.len());
        let limits = self.rules.limits;
        if size > limits.max_file_bytes {
            return self.leave(
                path,
                LeftOutReason::FileTooLarge {
                    bytes: size,
                    limit: limits.max_file_bytes,
                },
            );
        }
        if self.files >= limits.max_files {
            return self.leave(
                path,
                LeftOutReason::TooManyFiles {
                    limit: limits.max_files,
                },
            );
        }
        if self.bytes.saturating_add(size) > limits.max_total_bytes {
            return self.leave(
                path,
                LeftOutReason::TotalTooLarge {
                    limit: limits.max_total_bytes,
                },
            );
        }
        self.files += 1;
        self.bytes += size;
        self.taken.insert(key);
        0
    }

    /// Notes that directory `dir` was left out whole for its depth.
    pub(crate) fn too_deep(&mut self, dir: &Path, limit: u32) {
        let mut shown = dir.as_os_str().to_owned();
        shown.push("/");
        self.leave(Path::new(&shown), LeftOutReason::PathTooDeep { limit });
    }

    /// Notes that the root's `.crewbox` entry differed from the base and was put back
    /// (changes that reached HEAD without passing [`Filter::offer`]).
    pub(crate) fn restored_crewbox(&mut self, name: &str) {
        self.leave(Path::new(name), LeftOutReason::Crewbox);
    }

    /// What was left out, in the order it was met.
    pub(crate) fn into_left_out(self) -> Vec<LeftOut> {
        self.left
    }
}

/// Directories of the worktree at `root` nested at depth `limit` (relative, `/`
/// separated), not followed through links nor into the root's `.git`, at most
/// `MAX_DEEP_SCAN` entries looked at: what a snapshot leaves out whole when libgit2
/// refuses to walk that deep ("directory nesting too deep").
pub(crate) fn dirs_at_depth(root: &Path, limit: usize) -> Vec<PathBuf> {
    const MAX_DEEP_SCAN: usize = 200_000;
    let mut found = Vec::new();
    let mut seen = 0usize;
    let mut stack = vec![(PathBuf::new(), 0usize)];
    while let Some((rel, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_DEEP_SCAN {
                return found;
            }
            if depth == 0 && crate::fs::name::is_git(&entry.file_name()) {
                continue;
            }
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let child = rel.join(entry.file_name());
            if depth + 1 == limit {
                found.push(child);
            } else {
                stack.push((child, depth + 1));
            }
        }
    }
    found.sort();
    found
}

/// A gitignore pattern matching exactly the directory `dir` (relative to the root):
/// every byte a pattern treats specially escaped.
pub(crate) fn ignore_exactly(dir: &Path) -> String {
    let mut out = String::from("/");
    for (i, part) in dir.components().enumerate() {
        if i > 0 {
            out.push('/');
        }
        let text = part.as_os_str().to_string_lossy();
        for c in text.chars() {
            if matches!(c, '\\' | '*' | '?' | '[' | ']' | '!' | '#' | ' ') {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('/');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_directories_are_found_and_matched_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c/d");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(dir.path().join("a/x y*/z")).unwrap();
        std::fs::create_dir_all(dir.path().join(".git/q/r")).unwrap();
        let found = dirs_at_depth(dir.path(), 3);
        assert_eq!(
            found,
            [PathBuf::from("a/b/c"), PathBuf::from("a/x y*/z")],
            "the root's .git is not walked"
        );
        assert_eq!(ignore_exactly(Path::new("a/x y*/z")), "/a/x\\ y\\*/z/");
    }

    #[test]
    fn a_name_that_is_not_utf8_is_left_out_as_it_is_spelled() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = tempfile::tempdir().unwrap();
        let mut f = Filter::new(dir.path(), CommitRules::default());
        for name in [&b"x\x9bRED"[..], b"x\xffRED", b".git\x9b/x"] {
            f.leave(
                Path::new(std::ffi::OsStr::from_bytes(name)),
                LeftOutReason::GitName,
            );
        }
        let shown: Vec<&str> = f.left.iter().map(|l| l.path.as_str()).collect();
        assert_eq!(shown, [r"x\x9bRED", r"x\xffRED", r".git\x9b/x"]);
    }

    #[test]
    fn limits_take_files_until_a_limit_and_name_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        for (name, len) in [("a", 10), ("b", 30), ("c", 10), ("d", 10), ("big", 100)] {
            std::fs::write(dir.path().join(name), vec![b'x'; len]).unwrap();
        }
        let rules = CommitRules {
            limits: CommitLimits {
                max_file_bytes: 50,
                max_files: 3,
                max_total_bytes: 45,
            },
            crewbox_writable: false,
        };
        let mut f = Filter::new(dir.path(), rules);
        let answers: Vec<i32> = [
            "a",
            "big",
            "b",
            "c",
            "d",
            "a",
            ".crewbox/config.toml",
            ".CREWBOX/x",
        ]
        .iter()
        .map(|p| f.offer(Path::new(p)))
        .collect();
        assert_eq!(answers, [0, 1, 0, 1, 1, 0, 1, 1]);
        let left: Vec<(String, LeftOutReason)> = f
            .into_left_out()
            .into_iter()
            .map(|l| (l.path, l.reason))
            .collect();
        assert_eq!(
            left,
            [
                (
                    "big".into(),
                    LeftOutReason::FileTooLarge {
                        bytes: 100,
                        limit: 50
                    }
                ),
                ("c".into(), LeftOutReason::TotalTooLarge { limit: 45 }),
                ("d".into(), LeftOutReason::TotalTooLarge { limit: 45 }),
                (".crewbox/config.toml".into(), LeftOutReason::Crewbox),
                (".CREWBOX/x".into(), LeftOutReason::Crewbox),
            ]
        );
        let granted = CommitRules {
            crewbox_writable: true,
            ..CommitRules::default()
        };
        assert_eq!(
            Filter::new(dir.path(), granted).offer(Path::new(".crewbox/x")),
            0
        );
    }
}

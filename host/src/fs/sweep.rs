//! Clearing a tree of everything a later write by path could be redirected through or
//! blocked on, before crewbox writes into a tree someone else controlled: git's
//! checkout (libgit2) opens each file it rewrites by path with `O_TRUNC` and no
//! `O_NOFOLLOW`, so a tracked file an agent replaced with a symlink, or a tracked
//! directory it replaced with a link to `~/.ssh`, made crewbox's reset of its worktree
//! write repository content over the user's files, as the user, outside every sandbox.
//!
//! The walk holds a descriptor per level and opens each subdirectory from its parent's
//! descriptor with `O_NOFOLLOW`, so a directory swapped for a link while the walk runs
//! is seen as the link it became, never followed.
//!
//! Hard links are not looked for: one made in a sandboxed worktree can only name a
//! file of that worktree (a link across mounts fails with `EXDEV`, and the sandbox
//! shows nothing else writable on the worktree's mount), and checking each file's link
//! count cost a `stat` per file.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use super::{DIR_FLAGS, FsError, Root, name};

/// The deepest directory a sweep enters (one descriptor per level is held).
pub const MAX_SWEEP_DEPTH: usize = 256;

/// What a sweep removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Symbolic links.
    pub links: usize,
    /// FIFOs, sockets and devices.
    pub special: usize,
    /// Directories below the top holding a repository of their own (an entry named
    /// like `.git`), removed whole: git's checkout leaves them, so they outlived a
    /// reset.
    pub nested_repositories: usize,
}

impl Swept {
    /// How many entries went.
    pub fn total(&self) -> usize {
        self.links + self.special + self.nested_repositories
    }
}

/// One directory being swept: its descriptor, where it is, and the subdirectories
/// still to enter.
struct Level {
    dir: Root,
    rel: PathBuf,
    subdirs: Vec<OsString>,
    /// It holds an entry named like `.git`.
    repository: bool,
}

impl Root {
    /// Removes, beneath this directory and without following any link, every symbolic
    /// link, FIFO, socket and device, and every directory below the top that holds a
    /// repository of its own. Only the
    /// entries themselves go (a link, never what it points to). The top's entries named
    /// like `.git` ([`name::is_git`]) are neither removed nor entered: a worktree's
    /// `.git` pointer is checked by whoever opens the repository. A tree deeper than
    /// [`MAX_SWEEP_DEPTH`] is an error, and so is anything that cannot be removed: the
    /// caller must not write into the tree then.
    pub fn sweep(&self) -> Result<Swept, FsError> {
        let mut swept = Swept::default();
        let top = Root {
            fd: rustix::io::fcntl_dupfd_cloexec(&self.fd, 0)
                .map_err(|e| FsError::io(&self.path, "sweep", e))?,
            path: self.path.clone(),
        };
        let mut stack = vec![Level::read(top, PathBuf::new(), &mut swept)?];
        while let Some(level) = stack.last_mut() {
            let depth = stack_depth(level);
            let Some(name) = level.subdirs.pop() else {
                stack.pop();
                continue;
            };
            let rel = level.rel.join(&name);
            if depth >= MAX_SWEEP_DEPTH {
                return Err(FsError::Io {
                    path: rel,
                    op: "sweep",
                    source: io::Error::other(format!(
                        "the tree is deeper than {MAX_SWEEP_DEPTH} directories"
                    )),
                });
            }
            let opened =
                rustix::fs::openat(&level.dir.fd, &name, DIR_FLAGS, rustix::fs::Mode::empty());
            let fd = match opened {
                Ok(fd) => fd,
                // Gone since it was listed.
                Err(Errno::NOENT) => continue,
                // Swapped for something else since it was listed: judged as what it is now.
                Err(Errno::LOOP | Errno::NOTDIR) => {
                    remove_unsafe(&level.dir, &level.rel, &name, &mut swept)?;
                    continue;
                }
                Err(e) => return Err(FsError::io(&rel, "open", e)),
            };
            let path = level.dir.path.join(&name);
            let next = Level::read(
                Root {
                    fd,
                    path: path.clone(),
                },
                rel.clone(),
                &mut swept,
            )?;
            if next.repository {
                drop(next);
                // `remove_dir_all` never follows a link inside what it removes.
                std::fs::remove_dir_all(&path).map_err(|source| FsError::Io {
                    path: rel,
                    op: "remove a nested repository",
                    source,
                })?;
                swept.nested_repositories += 1;
                continue;
            }
            stack.push(next);
        }
        Ok(swept)
    }
}

/// How deep `level` is (its path's components).
fn stack_depth(level: &Level) -> usize {
    level.rel.components().count() + 1
}

impl Level {
    /// Lists `dir`, removing what must go and keeping its subdirectories to enter.
    fn read(dir: Root, rel: PathBuf, swept: &mut Swept) -> Result<Self, FsError> {
        let mut subdirs = Vec::new();
        let mut names = Vec::new();
        let mut repository = false;
        {
            let mut listing =
                rustix::fs::Dir::read_from(&dir.fd).map_err(|e| FsError::io(&rel, "list", e))?;
            while let Some(entry) = listing.read() {
                let entry = entry.map_err(|e| FsError::io(&rel, "list", e))?;
                let name = OsStr::from_bytes(entry.file_name().to_bytes());
                if name == "." || name == ".." {
                    continue;
                }
                if name::is_git(name) {
                    repository = true;
                    continue;
                }
                names.push((name.to_owned(), entry.file_type()));
            }
        }
        for (name, kind) in names {
            // The type the listing gave (no `stat` per file: a reset of a 5,000-file
            // worktree took 9 ms more with one); asked for only where the file system
            // does not say.
            let kind = match kind {
                FileType::Directory | FileType::RegularFile => kind,
                // A link or a special file, or what the listing did not say.
                _ => match remove_unsafe(&dir, &rel, &name, swept)? {
                    Some(kind) => kind,
                    None => continue,
                },
            };
            if kind == FileType::Directory {
                subdirs.push(name);
            }
        }
        Ok(Self {
            dir,
            rel,
            subdirs,
            repository,
        })
    }
}

/// Removes `name` in `dir` if it is a link or a special file; returns what it was
/// (`None`: gone already).
fn remove_unsafe(
    dir: &Root,
    rel: &Path,
    name: &OsStr,
    swept: &mut Swept,
) -> Result<Option<FileType>, FsError> {
    let shown = || rel.join(name);
    let stat = match rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(FsError::io(&shown(), "inspect", e)),
    };
    let kind = FileType::from_raw_mode(stat.st_mode);
    let counter = match kind {
        FileType::Directory | FileType::RegularFile => return Ok(Some(kind)),
        FileType::Symlink => &mut swept.links,
        _ => &mut swept.special,
    };
    match rustix::fs::unlinkat(&dir.fd, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {
            *counter += 1;
            Ok(Some(kind))
        }
        Err(e) => Err(FsError::io(&shown(), "remove", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_special_files_and_nested_repositories_go_and_nothing_outside_is_touched() {
        let base = tempfile::tempdir().unwrap();
        let outside = base.path().join("outside");
        std::fs::create_dir_all(outside.join("dir")).unwrap();
        std::fs::write(outside.join("file"), "KEEP").unwrap();
        std::fs::write(outside.join("dir/inner"), "KEEP").unwrap();
        let tree = base.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b/c")).unwrap();
        std::fs::write(tree.join("a/b/c/kept.txt"), "x").unwrap();
        std::fs::write(tree.join("top.txt"), "x").unwrap();
        symlink(outside.join("file"), tree.join("README.md")).unwrap();
        symlink(outside.join("dir"), tree.join("a/keys")).unwrap();
        symlink("../../..", tree.join("a/b/up")).unwrap();
        symlink("nowhere", tree.join("a/b/c/dangling")).unwrap();
        super::super::make_fifo(&tree.join("a/fifo"));
        // A hard link is a file like any other (a sandboxed agent can only link files
        // of its own worktree): kept.
        std::fs::write(tree.join("a/b/own"), "x").unwrap();
        std::fs::hard_link(tree.join("a/b/own"), tree.join("a/b/hard")).unwrap();
        // A worktree's `.git` pointer is left to its checker; a repository of its own
        // below the top goes whole (without following its links).
        std::fs::write(tree.join(".git"), "gitdir: elsewhere\n").unwrap();
        std::fs::create_dir_all(tree.join("a/nested/.GIT")).unwrap();
        symlink(outside.join("file"), tree.join("a/nested/.GIT/link")).unwrap();
        symlink(outside.join("dir"), tree.join("a/nested/out")).unwrap();
        std::fs::write(tree.join("a/nested/f.txt"), "x").unwrap();

        let swept = Root::open(&tree).unwrap().sweep().unwrap();
        assert_eq!(
            swept,
            Swept {
                // The nested repository's own link goes as it is read.
                links: 5,
                special: 1,
                nested_repositories: 1,
            }
        );
        for gone in [
            "README.md",
            "a/keys",
            "a/b/up",
            "a/b/c/dangling",
            "a/fifo",
            "a/nested",
        ] {
            assert!(
                tree.join(gone).symlink_metadata().is_err(),
                "{gone} is still there"
            );
        }
        for kept in ["a/b/c/kept.txt", "top.txt", ".git", "a/b/hard"] {
            assert!(tree.join(kept).symlink_metadata().is_ok(), "{kept} went");
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("file")).unwrap(),
            "KEEP"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("dir/inner")).unwrap(),
            "KEEP"
        );
        // A second pass finds nothing.
        assert_eq!(Root::open(&tree).unwrap().sweep().unwrap().total(), 0);
    }

    #[test]
    fn a_tree_deeper_than_the_bound_is_an_error() {
        let base = tempfile::tempdir().unwrap();
        let mut deep = base.path().join("tree");
        for _ in 0..MAX_SWEEP_DEPTH + 1 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        let err = Root::open(&base.path().join("tree"))
            .unwrap()
            .sweep()
            .unwrap_err();
        assert!(err.to_string().contains("deeper than 256"), "{err}");
    }
}

//! Resolving a relative path beneath a root's descriptor: `openat2` where the kernel can
//! do it alone, else one component at a time (see the module rules in `fs`).

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode};
use rustix::io::Errno;

use super::{DIR_FLAGS, FsError, Links, MAX_LINKS, Root, Rules, name};

/// What the caller is about to do with the path.
#[derive(Clone, Copy, Debug)]
pub(super) struct Want {
    /// Creates or replaces the final entry (so `.crewbox/` protection applies).
    pub write: bool,
    /// Creates missing directories on the way, with this mode.
    pub create_dirs: Option<u32>,
}

impl Want {
    pub const READ: Want = Want {
        write: false,
        create_dirs: None,
    };
}

/// Where a path leads: a directory (held open) and the name in it, which may not exist
/// yet; no name when the path is the directory itself.
#[derive(Debug)]
pub(super) struct Located {
    pub dir: OwnedFd,
    pub name: Option<OsString>,
    /// The resolved path relative to the root (links replaced by where they lead).
    pub rel: PathBuf,
}

/// The plain components of `input`, normalised lexically.
pub(super) fn lexical(input: &Path) -> Result<Vec<OsString>, FsError> {
    if input.as_os_str().as_bytes().contains(&0) {
        return Err(FsError::Invalid {
            path: input.to_owned(),
        });
    }
    let mut parts: Vec<OsString> = Vec::new();
    for component in input.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {
                return Err(FsError::Absolute {
                    path: input.to_owned(),
                });
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(FsError::Climbs {
                        path: input.to_owned(),
                    });
                }
            }
            Component::Normal(part) => parts.push(part.to_owned()),
        }
    }
    Ok(parts)
}

/// Refuses a component by its name: `.git` anywhere, `.crewbox` at the top when it is
/// protected and the caller writes.
fn check_name(
    input: &Path,
    part: &OsStr,
    depth: usize,
    rules: Rules,
    want: Want,
) -> Result<(), FsError> {
    if name::is_git(part) {
        return Err(FsError::Git {
            path: input.to_owned(),
            component: part.to_string_lossy().into_owned(),
        });
    }
    if want.write && rules.protect_crewbox && depth == 0 && name::is_crewbox(part) {
        return Err(FsError::Protected {
            path: input.to_owned(),
        });
    }
    Ok(())
}

/// Resolves `input` beneath `root`.
pub(super) fn locate(
    root: &Root,
    input: &Path,
    rules: Rules,
    want: Want,
) -> Result<Located, FsError> {
    let parts = lexical(input)?;
    for (depth, part) in parts.iter().enumerate() {
        check_name(input, part, depth, rules, want)?;
    }
    #[cfg(target_os = "linux")]
    if let Some(found) = kernel::locate(root, &parts) {
        return Ok(found);
    }
    walk(root, input, parts, rules, want)
}

#[cfg(target_os = "linux")]
mod kernel {
    use std::ffi::OsString;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicBool, Ordering};

    use rustix::fs::{AtFlags, FileType, Mode, ResolveFlags};
    use rustix::io::Errno;

    use super::super::{DIR_FLAGS, Root};
    use super::Located;

    /// Set once `openat2` is found missing (old kernel, or a seccomp filter refusing it).
    static MISSING: AtomicBool = AtomicBool::new(false);

    /// The parent directory by `openat2` without following any symlink, and the final
    /// entry if it is no symlink: the common case in two system calls. `None` leaves
    /// everything else (links, missing parts, errors) to the walk, which is as safe and
    /// says precisely what is wrong.
    pub(super) fn locate(root: &Root, parts: &[OsString]) -> Option<Located> {
        if MISSING.load(Ordering::Relaxed) {
            return None;
        }
        let (parent, last) = match parts.split_last() {
            Some((last, parents)) => (parents.iter().collect::<PathBuf>(), Some(last)),
            None => (PathBuf::new(), None),
        };
        let parent_arg = if parent.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            parent.clone()
        };
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let mut dir = None;
        // EAGAIN: a rename raced the lookup and the kernel could not prove it stayed
        // beneath; a retry is safe.
        for _ in 0..4 {
            match rustix::fs::openat2(&root.fd, &parent_arg, DIR_FLAGS, Mode::empty(), resolve) {
                Ok(fd) => {
                    dir = Some(fd);
                    break;
                }
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS | Errno::PERM) => {
                    MISSING.store(true, Ordering::Relaxed);
                    return None;
                }
                Err(_) => return None,
            }
        }
        let dir = dir?;
        let Some(last) = last else {
            return Some(Located {
                dir,
                name: None,
                rel: parent,
            });
        };
        match rustix::fs::statat(&dir, last, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => None,
            Ok(_) | Err(Errno::NOENT) => Some(Located {
                dir,
                name: Some(last.clone()),
                rel: parent.join(last),
            }),
            Err(_) => None,
        }
    }
}

/// One step of the walk.
enum Step {
    Name(OsString),
    /// A `..` from a symlink's target (the path itself has none left after
    /// normalising): the link and its target, for the error if it climbs out.
    Up {
        link: PathBuf,
        target: PathBuf,
    },
}

/// The walk: one component at a time from the descriptor of the directory before, each
/// opened with `O_NOFOLLOW`; symlinks resolved here as the rules allow.
fn walk(
    root: &Root,
    input: &Path,
    parts: Vec<OsString>,
    rules: Rules,
    want: Want,
) -> Result<Located, FsError> {
    let mut pending: VecDeque<Step> = parts.into_iter().map(Step::Name).collect();
    // The directories entered, with their names: the resolved path so far.
    let mut stack: Vec<(OwnedFd, OsString)> = Vec::new();
    let mut links = 0usize;
    let mut created = 0usize;
    let mut races = 0usize;
    let rel_of = |stack: &[(OwnedFd, OsString)], name: Option<&OsStr>| -> PathBuf {
        let mut rel: PathBuf = stack.iter().map(|(_, n)| n.as_os_str()).collect();
        if let Some(name) = name {
            rel.push(name);
        }
        rel
    };
    let mut final_name: Option<OsString> = None;
    while let Some(step) = pending.pop_front() {
        let part = match step {
            Step::Up { link, target } => {
                if stack.pop().is_none() {
                    return Err(FsError::LinkEscapes {
                        path: input.to_owned(),
                        link,
                        target,
                    });
                }
                continue;
            }
            Step::Name(part) => part,
        };
        check_name(input, &part, stack.len(), rules, want)?;
        let at: BorrowedFd<'_> = stack.last().map_or(root.fd.as_fd(), |(fd, _)| fd.as_fd());
        if pending.is_empty() {
            match rustix::fs::statat(at, &part, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                    let link = rel_of(&stack, Some(&part));
                    if !follow(at, &part, link, input, rules, &mut links, &mut pending)? {
                        raced(&mut races, input)?;
                        pending.push_front(Step::Name(part));
                    }
                    continue;
                }
                Ok(_) | Err(Errno::NOENT) => {
                    final_name = Some(part);
                    break;
                }
                Err(e) => return Err(FsError::io(input, "inspect", e)),
            }
        }
        match rustix::fs::openat(at, &part, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => stack.push((fd, part)),
            Err(Errno::NOTDIR | Errno::LOOP | Errno::MLINK) => {
                let now = rustix::fs::statat(at, &part, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|st| FileType::from_raw_mode(st.st_mode));
                match now {
                    Ok(FileType::Symlink) => {
                        let link = rel_of(&stack, Some(&part));
                        if !follow(at, &part, link, input, rules, &mut links, &mut pending)? {
                            raced(&mut races, input)?;
                            pending.push_front(Step::Name(part));
                        }
                    }
                    // Swapped back into a directory since the open: look again.
                    Ok(FileType::Directory) => {
                        raced(&mut races, input)?;
                        pending.push_front(Step::Name(part));
                    }
                    _ => {
                        return Err(FsError::NotDirectory {
                            path: input.to_owned(),
                        });
                    }
                }
            }
            Err(Errno::NOENT) => {
                let Some(mode) = want.create_dirs else {
                    return Err(FsError::NotFound {
                        path: input.to_owned(),
                    });
                };
                // Bounded: a directory removed as fast as it is made would loop.
                created += 1;
                if created > 64 {
                    return Err(FsError::io(
                        input,
                        "create the directories of",
                        Errno::NOENT,
                    ));
                }
                match rustix::fs::mkdirat(at, &part, Mode::from_raw_mode(mode)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(FsError::io(input, "create the directories of", e)),
                }
                // Open it like any other: whatever is there now is checked again.
                pending.push_front(Step::Name(part));
            }
            Err(e) => return Err(FsError::io(input, "open", e)),
        }
    }
    let rel = rel_of(&stack, final_name.as_deref());
    let dir = match stack.pop() {
        Some((fd, _)) => fd,
        None => rustix::fs::openat(&root.fd, ".", DIR_FLAGS, Mode::empty())
            .map_err(|e| FsError::io(input, "open", e))?,
    };
    Ok(Located {
        dir,
        name: final_name,
        rel,
    })
}

/// Counts one step looked at again because it changed under the walk; refuses the path
/// when that keeps happening (something swaps it on purpose).
fn raced(races: &mut usize, input: &Path) -> Result<(), FsError> {
    *races += 1;
    if *races > 16 {
        return Err(FsError::io(
            input,
            "resolve (it keeps changing)",
            Errno::AGAIN,
        ));
    }
    Ok(())
}

/// Puts the target of the symlink `part` (in `at`) in front of what is left to walk,
/// or refuses it; `Ok(false)` when `part` is no longer a symlink (swapped meanwhile).
fn follow(
    at: BorrowedFd<'_>,
    part: &OsStr,
    link: PathBuf,
    input: &Path,
    rules: Rules,
    links: &mut usize,
    pending: &mut VecDeque<Step>,
) -> Result<bool, FsError> {
    if rules.links == Links::Refuse {
        return Err(FsError::Link {
            path: input.to_owned(),
            link,
        });
    }
    *links += 1;
    if *links > MAX_LINKS {
        return Err(FsError::TooManyLinks {
            path: input.to_owned(),
        });
    }
    let target = match rustix::fs::readlinkat(at, part, Vec::new()) {
        Ok(target) => target,
        Err(Errno::INVAL | Errno::NOENT) => return Ok(false),
        Err(e) => return Err(FsError::io(input, "read the symlink", e)),
    };
    let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
    if target.is_absolute() || target.as_os_str().is_empty() {
        return Err(FsError::LinkEscapes {
            path: input.to_owned(),
            link,
            target,
        });
    }
    let mut steps = Vec::new();
    for piece in target.as_os_str().as_bytes().split(|b| *b == b'/') {
        match piece {
            b"" | b"." => {}
            b".." => steps.push(Step::Up {
                link: link.clone(),
                target: target.clone(),
            }),
            name => steps.push(Step::Name(OsStr::from_bytes(name).to_owned())),
        }
    }
    for step in steps.into_iter().rev() {
        pending.push_front(step);
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn world() -> (tempfile::TempDir, Root) {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        std::fs::create_dir_all(ws.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join(".crewbox")).unwrap();
        std::fs::write(ws.join(".git/config"), "url = https://token@host/r").unwrap();
        std::fs::write(ws.join("sub/deeper/a.txt"), "hello").unwrap();
        std::fs::write(base.path().join("secret.txt"), "secret").unwrap();
        symlink("deeper/a.txt", ws.join("sub/inside-link")).unwrap();
        symlink("../secret.txt", ws.join("out-link")).unwrap();
        symlink(base.path().join("secret.txt"), ws.join("abs-link")).unwrap();
        symlink("sub", ws.join("dir-link")).unwrap();
        symlink("../.git/config", ws.join("sub/git-link")).unwrap();
        symlink(".crewbox", ws.join("cb-link")).unwrap();
        symlink("../../sub/deeper/a.txt", ws.join("sub/deeper/round")).unwrap();
        symlink("loop-b", ws.join("loop-a")).unwrap();
        symlink("loop-a", ws.join("loop-b")).unwrap();
        let root = Root::open(&ws).unwrap();
        (base, root)
    }

    fn rel(root: &Root, path: &str, rules: Rules) -> Result<PathBuf, FsError> {
        locate(root, Path::new(path), rules, Want::READ).map(|l| l.rel)
    }

    #[test]
    fn lexical_normalisation_refuses_climbing_and_absolute_paths() {
        assert_eq!(
            lexical(Path::new("./a//b/../c")).unwrap(),
            [OsString::from("a"), OsString::from("c")]
        );
        assert!(lexical(Path::new("")).unwrap().is_empty());
        assert!(matches!(
            lexical(Path::new("a/../../b")),
            Err(FsError::Climbs { .. })
        ));
        assert!(matches!(
            lexical(Path::new("/etc/passwd")),
            Err(FsError::Absolute { .. })
        ));
        assert!(matches!(
            lexical(Path::new(OsStr::from_bytes(b"a\0b"))),
            Err(FsError::Invalid { .. })
        ));
    }

    #[test]
    fn links_beneath_are_followed_and_escapes_refused() {
        let (_base, root) = world();
        let follow = Rules::LINKS_BENEATH;
        assert_eq!(
            rel(&root, "sub/inside-link", follow).unwrap(),
            Path::new("sub/deeper/a.txt")
        );
        assert_eq!(
            rel(&root, "dir-link/deeper/a.txt", follow).unwrap(),
            Path::new("sub/deeper/a.txt")
        );
        assert_eq!(
            rel(&root, "sub/deeper/round", follow).unwrap(),
            Path::new("sub/deeper/a.txt")
        );
        for escape in ["out-link", "abs-link"] {
            assert!(
                matches!(rel(&root, escape, follow), Err(FsError::LinkEscapes { .. })),
                "{escape}"
            );
        }
        assert!(matches!(
            rel(&root, "loop-a", follow),
            Err(FsError::TooManyLinks { .. })
        ));
        // Into git's directory through a link: refused like a direct path.
        assert!(matches!(
            rel(&root, "sub/git-link", follow),
            Err(FsError::Git { .. })
        ));
        assert!(matches!(
            rel(&root, ".GIT/config", follow),
            Err(FsError::Git { .. })
        ));
        // Not followed at all where links are refused.
        for link in ["sub/inside-link", "dir-link/deeper/a.txt"] {
            assert!(
                matches!(rel(&root, link, Rules::NO_LINKS), Err(FsError::Link { .. })),
                "{link}"
            );
        }
    }

    #[test]
    fn crewbox_is_protected_for_writes_only_and_through_links() {
        let (_base, root) = world();
        let rules = Rules::LINKS_BENEATH.protecting_crewbox(true);
        let write = Want {
            write: true,
            create_dirs: Some(0o755),
        };
        for path in [
            ".crewbox/config.toml",
            ".CrewBox/x",
            "cb-link/config.toml",
            ".crewbox",
        ] {
            let got = locate(&root, Path::new(path), rules, write);
            assert!(
                matches!(got, Err(FsError::Protected { .. })),
                "{path}: {got:?}"
            );
        }
        assert!(locate(&root, Path::new("cb-link/config.toml"), rules, Want::READ).is_ok());
        assert!(locate(&root, Path::new("sub/.crewbox/x"), rules, write).is_ok());
        let open = Rules::LINKS_BENEATH;
        assert!(locate(&root, Path::new(".crewbox/config.toml"), open, write).is_ok());
    }

    #[test]
    fn the_walk_agrees_with_the_kernel() {
        let (_base, root) = world();
        for path in [
            "sub/deeper/a.txt",
            "sub",
            "",
            "sub/deeper/new",
            "sub/missing/x",
        ] {
            let parts = lexical(Path::new(path)).unwrap();
            let walked = walk(
                &root,
                Path::new(path),
                parts.clone(),
                Rules::NO_LINKS,
                Want::READ,
            )
            .map(|l| (l.rel, l.name));
            #[cfg(target_os = "linux")]
            {
                let kernel = kernel::locate(&root, &parts).map(|l| (l.rel, l.name));
                match (&walked, kernel) {
                    (Ok(w), Some(k)) => assert_eq!(*w, k, "{path}"),
                    (Err(FsError::NotFound { .. }), None) => {}
                    other => panic!("{path}: {other:?}"),
                }
            }
            if path == "sub/missing/x" {
                assert!(matches!(walked, Err(FsError::NotFound { .. })));
            }
        }
    }
}

//! Opening an agent's worktree only through the main repository, after checking that
//! nothing in it points git somewhere else.
//!
//! A linked worktree is a directory with a `.git` *file* (`gitdir: <admin dir>`); its
//! admin directory in the main repository (`.git/worktrees/<slot>/`) holds `gitdir`
//! (back to the worktree's `.git`) and `commondir` (to the main `.git`). Whatever is in
//! the worktree was written by an agent: a `.git` file naming another directory made
//! libgit2 treat any directory as the work tree (the snapshot committed its files, the
//! reset deleted them), and `gitdir: <main>/.git` made crewbox's reset detach the
//! user's HEAD, drop `MERGE_HEAD` and unstage their changes. So before every snapshot,
//! commit, checkpoint and reset the slot is looked up in the main repository
//! (`find_worktree`), opened from there (`open_from_worktree`), and these must all
//! agree: the `.git` file (a regular file, not a link, naming exactly the admin
//! directory), the admin directory's `gitdir` and `commondir`, `core.worktree` (unset,
//! or this directory), and the opened repository's `workdir()`, `path()` and
//! `commondir()`. A slot that fails is retired by the caller, never reused.

use std::path::{Path, PathBuf};

use git2::Repository;

use super::error::WorktreeError;

/// The most bytes read from a `.git` file or an admin file (a path and a newline).
const POINTER_CAP: u64 = 8 * 1024;

/// An agent's worktree, opened through the main repository and checked.
pub(crate) struct Checked {
    /// The worktree's repository (its HEAD and index are the worktree's own).
    pub repo: Repository,
    /// The worktree's directory (canonical).
    pub path: PathBuf,
}

fn tampered(path: &Path, what: String) -> WorktreeError {
    WorktreeError::Tampered {
        path: path.to_owned(),
        what,
    }
}

fn canonical(path: &Path, shown: &Path, what: &str) -> Result<PathBuf, WorktreeError> {
    path.canonicalize().map_err(|e| {
        tampered(
            shown,
            format!("{what} `{}` cannot be resolved: {e}", path.display()),
        )
    })
}

/// The bytes of a pointer file (`.git`, `gitdir`, `commondir`): a regular file, not a
/// link, small; trailing whitespace dropped. Bytes, not text: git writes the path as
/// the file system has it, which need not be UTF-8.
fn pointer(file: &Path, shown: &Path, what: &str) -> Result<Vec<u8>, WorktreeError> {
    let mut bytes = crate::fs::read_path_all_no_follow(file, POINTER_CAP)
        .map_err(|e| tampered(shown, format!("{what}: {e}")))?;
    while bytes.last().is_some_and(u8::is_ascii_whitespace) {
        bytes.pop();
    }
    Ok(bytes)
}

/// `target` as written in a pointer file under `base` (relative paths are relative to
/// `base`), canonical.
fn resolve(base: &Path, target: &[u8], shown: &Path, what: &str) -> Result<PathBuf, WorktreeError> {
    use std::os::unix::ffi::OsStrExt;
    let target = Path::new(std::ffi::OsStr::from_bytes(target));
    let full = if target.is_absolute() {
        target.to_owned()
    } else {
        base.join(target)
    };
    canonical(&full, shown, what)
}

/// Opens the worktree `slot` at `path` through the main repository at `repo_root`, or
/// says what in it points elsewhere ([`WorktreeError::Tampered`]).
pub(crate) fn open_checked(
    repo_root: &Path,
    slot: &str,
    path: &Path,
) -> Result<Checked, WorktreeError> {
    let main = super::git::open(repo_root)?;
    let common = canonical(
        main.commondir(),
        repo_root,
        "the repository's git directory",
    )?;
    let wt = main.find_worktree(slot).map_err(|e| {
        tampered(
            path,
            format!(
                "it is not a registered worktree of {}: {e}",
                repo_root.display()
            ),
        )
    })?;
    let dir = canonical(path, path, "the worktree directory")?;
    let registered = canonical(wt.path(), path, "the registered worktree directory")?;
    if registered != dir {
        return Err(tampered(
            path,
            format!(
                "the repository has this slot registered at {}",
                registered.display()
            ),
        ));
    }
    let admin = canonical(
        &common.join("worktrees").join(slot),
        path,
        "the admin directory",
    )?;

    // The worktree's own `.git`: the one file in it that tells git where to look.
    let dot_git = dir.join(".git");
    let says = pointer(&dot_git, path, "its `.git`")?;
    let Some(gitdir) = says.strip_prefix(b"gitdir:") else {
        return Err(tampered(
            path,
            format!(
                "its `.git` does not start with `gitdir:` ({:?})",
                String::from_utf8_lossy(&says)
            ),
        ));
    };
    let gitdir = resolve(
        &dir,
        gitdir.trim_ascii(),
        path,
        "the git directory its `.git` names",
    )?;
    if gitdir != admin {
        return Err(tampered(
            path,
            format!(
                "its `.git` points to {}, not to its admin directory {}",
                gitdir.display(),
                admin.display()
            ),
        ));
    }
    let back = pointer(
        &admin.join("gitdir"),
        path,
        "the admin directory's `gitdir`",
    )?;
    let back = resolve(&admin, &back, path, "the admin directory's `gitdir`")?;
    if back != dot_git {
        return Err(tampered(
            path,
            format!("the admin directory's `gitdir` names {}", back.display()),
        ));
    }
    let commondir = pointer(
        &admin.join("commondir"),
        path,
        "the admin directory's `commondir`",
    )?;
    let commondir = resolve(
        &admin,
        &commondir,
        path,
        "the admin directory's `commondir`",
    )?;
    if commondir != common {
        return Err(tampered(
            path,
            format!("its `commondir` names {}", commondir.display()),
        ));
    }

    let repo = Repository::open_from_worktree(&wt).map_err(WorktreeError::git("open", path))?;
    let opened = [
        ("workdir()", repo.workdir().map(Path::to_path_buf), &dir),
        ("path()", Some(repo.path().to_path_buf()), &admin),
        ("commondir()", Some(repo.commondir().to_path_buf()), &common),
    ];
    for (what, got, want) in opened {
        let got = got.map(|p| p.canonicalize().unwrap_or(p));
        if got.as_ref() != Some(want) {
            return Err(tampered(
                path,
                format!(
                    "opened through the repository, its {what} is {}, not {}",
                    got.map_or_else(|| "none".to_owned(), |p| p.display().to_string()),
                    want.display()
                ),
            ));
        }
    }
    let config = repo
        .config()
        .map_err(WorktreeError::git("read config", path))?;
    if let Ok(worktree) = config.get_path("core.worktree") {
        use std::os::unix::ffi::OsStrExt;
        let worktree = resolve(
            &admin,
            worktree.as_os_str().as_bytes(),
            path,
            "`core.worktree`",
        )?;
        if worktree != dir {
            return Err(tampered(
                path,
                format!("`core.worktree` names {}", worktree.display()),
            ));
        }
    }
    Ok(Checked { repo, path: dir })
}

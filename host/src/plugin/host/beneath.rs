//! The plugin workspace view's terms over the confined filesystem (`crate::fs`).
//!
//! The workspace root is opened once per call; every guest path is then resolved
//! beneath that descriptor with no symbolic link followed, inside the workspace or out:
//! a link can point anywhere (into `.git`, at `/dev/zero`), and refusing it is the only
//! answer that does not depend on what it points at when. `.git` (a directory or a
//! worktree's `.git` file) is hidden at every depth, in every spelling: it holds remote
//! URLs with tokens and hook scripts.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use crate::fs::{Entry, FsError, Root, Rules};

pub(crate) use crate::fs::Kind;

/// Why an operation beneath the root failed, before it is put in WIT terms.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// `..`, an absolute path, or a symbolic link on the way.
    Outside,
    /// Nothing there (or hidden, like `.git`).
    NotFound,
    /// A directory where a file was asked for.
    IsDirectory,
    /// A file where a directory was asked for.
    NotDirectory,
    /// A FIFO, socket or device.
    NotRegular,
    /// Larger than the cap (bytes).
    TooLarge(u64),
    /// Any other error from the kernel.
    Io(String),
}

/// No link is followed in a plugin's view.
const RULES: Rules = Rules::NO_LINKS;

/// The path relative to the root, or why it cannot be one. Purely lexical: stricter
/// than the confined filesystem, a guest path has no `..` at all.
pub(crate) fn relative(path: &str) -> Result<&str, Refusal> {
    if path.starts_with('/') || path.starts_with('\\') || path.contains('\0') {
        return Err(Refusal::Outside);
    }
    for c in Path::new(path).components() {
        match c {
            Component::Normal(name) if crate::fs::name::is_git(name) => {
                return Err(Refusal::NotFound);
            }
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(Refusal::Outside);
            }
        }
    }
    Ok(if path.is_empty() { "." } else { path })
}

/// Opens the root of a view (the host chose this path; it may itself be a link).
pub(crate) fn open_root(root: &Path) -> Result<Root, FsError> {
    Root::open(root)
}

fn refusal(e: FsError) -> Refusal {
    match e {
        // Hidden, not refused: a guest cannot tell `.git` from nothing.
        FsError::Git { .. } | FsError::NotFound { .. } => Refusal::NotFound,
        FsError::IsDirectory { .. } => Refusal::IsDirectory,
        FsError::NotDirectory { .. } => Refusal::NotDirectory,
        FsError::NotRegular { .. } => Refusal::NotRegular,
        FsError::TooLarge { limit, .. } => Refusal::TooLarge(limit),
        FsError::Io { source, .. } => Refusal::Io(source.to_string()),
        e if e.is_refusal() => Refusal::Outside,
        e => Refusal::Io(e.to_string()),
    }
}

/// Reads a regular file beneath `root`, at most `max` bytes: the size is taken from the
/// opened file and the read itself is bounded, so a file that grows while it is read
/// (or anything that is not a regular file) can never make the host read without end.
pub(crate) fn read(root: &Root, rel: &str, max: u64) -> Result<Vec<u8>, Refusal> {
    root.read_all(Path::new(rel), max, RULES).map_err(refusal)
}

/// Lists a directory beneath `root` through its descriptor, without `.`, `..` and
/// `.git`; each entry is described by `fstatat` on the entry itself. At most `scan`
/// entries are read.
pub(crate) fn list(
    root: &Root,
    rel: &str,
    scan: usize,
) -> Result<Vec<(String, Kind, u64)>, Refusal> {
    let (entries, _more) = root.list(Path::new(rel), RULES, scan).map_err(refusal)?;
    Ok(entries
        .into_iter()
        .map(|Entry { name, kind, size }| {
            let name = OsStr::from_bytes(name.as_bytes())
                .to_string_lossy()
                .into_owned();
            (name, kind, size)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world() -> (tempfile::TempDir, Root) {
        let base = tempfile::tempdir().unwrap();
        let ws = base.path().join("ws");
        std::fs::create_dir_all(ws.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::write(ws.join(".git/config"), "url = https://token@host/r").unwrap();
        std::fs::write(ws.join("sub/deeper/a.txt"), "hello").unwrap();
        std::fs::write(base.path().join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink("deeper/a.txt", ws.join("sub/inside-link")).unwrap();
        std::os::unix::fs::symlink("../secret.txt", ws.join("out-link")).unwrap();
        std::os::unix::fs::symlink("sub", ws.join("dir-link")).unwrap();
        std::os::unix::fs::symlink(".git/config", ws.join("git-link")).unwrap();
        let root = open_root(&ws).unwrap();
        (base, root)
    }

    #[test]
    fn lexical_checks_refuse_escapes_and_hide_git() {
        for bad in ["..", "../x", "a/../../x", "/etc/passwd", "\\x", "a\0b"] {
            assert_eq!(relative(bad), Err(Refusal::Outside), "{bad}");
        }
        for hidden in [".git", ".git/config", "sub/.GIT/HEAD", "./.git", ".git."] {
            assert_eq!(relative(hidden), Err(Refusal::NotFound), "{hidden}");
        }
        assert_eq!(relative(""), Ok("."));
        assert_eq!(relative("./a/b"), Ok("./a/b"));
        assert_eq!(relative(".github/x"), Ok(".github/x"));
    }

    #[test]
    fn no_link_is_followed_inside_or_out() {
        let (_base, root) = world();
        let cases: [(&str, Result<Vec<u8>, Refusal>); 7] = [
            ("sub/deeper/a.txt", Ok(b"hello".to_vec())),
            ("./sub//deeper/./a.txt", Ok(b"hello".to_vec())),
            ("sub/inside-link", Err(Refusal::Outside)),
            ("out-link", Err(Refusal::Outside)),
            ("dir-link/deeper/a.txt", Err(Refusal::Outside)),
            ("git-link", Err(Refusal::Outside)),
            ("missing", Err(Refusal::NotFound)),
        ];
        for (path, want) in cases {
            assert_eq!(read(&root, path, 100), want, "{path}");
        }
    }

    #[test]
    fn reads_are_bounded_and_regular_only() {
        let (base, root) = world();
        let ws = base.path().join("ws");
        std::fs::write(ws.join("big"), vec![b'x'; 101]).unwrap();
        assert_eq!(read(&root, "big", 100), Err(Refusal::TooLarge(100)));
        assert_eq!(read(&root, "sub", 100), Err(Refusal::IsDirectory));
        crate::fs::make_fifo(&ws.join("pipe"));
        assert_eq!(read(&root, "pipe", 100), Err(Refusal::NotRegular));
    }

    #[test]
    fn listings_hide_git_and_never_follow_links() {
        let (_base, root) = world();
        let mut got = list(&root, ".", 100).unwrap();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<(&str, Kind)> = got.iter().map(|(n, k, _)| (n.as_str(), *k)).collect();
        assert_eq!(
            names,
            [
                ("dir-link", Kind::Symlink),
                ("git-link", Kind::Symlink),
                ("out-link", Kind::Symlink),
                ("sub", Kind::Directory)
            ]
        );
        assert_eq!(list(&root, "dir-link", 100), Err(Refusal::Outside));
        assert_eq!(
            list(&root, "sub/deeper/a.txt", 100),
            Err(Refusal::NotDirectory)
        );
        assert_eq!(
            list(&root, "sub/deeper", 100).unwrap(),
            [("a.txt".to_owned(), Kind::File, 5)]
        );
    }
}

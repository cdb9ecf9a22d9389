//! Resolving a model-supplied path inside the workspace root.
//!
//! The rules:
//! - absolute paths are refused: every path is relative to the workspace root;
//! - `.` and `..` are resolved lexically first (like a URL, not like a shell: `link/..`
//!   is the root whatever `link` points to), and a `..` that would climb above the root is
//!   refused;
//! - then the path is walked one component at a time from the canonical root; every
//!   component that exists and is a symlink (including the last one) is resolved and must
//!   land inside the root, otherwise it is refused, naming that component; a dangling
//!   symlink is refused too, since where a write through it would land cannot be checked
//!   without following it;
//! - components that do not exist yet (a file or directories about to be created) are
//!   appended as they are: nothing exists there to point elsewhere.
//!
//! The result is an absolute path with no symlink in its existing part, so opening it
//! touches exactly what was checked. This is race-tolerant, not race-proof: a process
//! that can write in the workspace could swap a checked directory for a symlink between
//! the check and the open. Only agents of the same workspace can do that, and an agent
//! with `exec` could already run anything there, so the check guards against mistakes and
//! prompt-injected paths rather than against a concurrent adversary.

use std::io;
use std::path::{Component, Path, PathBuf};

use super::ToolError;

/// A path checked to be inside the workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute path to open; its existing part contains no symlink.
    pub abs: PathBuf,
    /// The same path relative to the root (empty for the root itself), for messages.
    pub rel: PathBuf,
}

impl Resolved {
    /// The relative path for messages to the model (`.` for the root).
    pub fn display(&self) -> String {
        if self.rel.as_os_str().is_empty() {
            ".".to_owned()
        } else {
            self.rel.display().to_string()
        }
    }
}

fn outside(input: &str, reason: impl Into<String>) -> ToolError {
    ToolError::OutsideWorkspace {
        path: input.to_owned(),
        reason: reason.into(),
    }
}

/// Resolves `input` (relative to `root`) to a path inside `root`, or says why it is not.
///
/// `root` need not be canonical; it is canonicalised here. An empty `input` is the root.
/// Blocking (it stats every component): call it from blocking code.
pub fn resolve(root: &Path, input: &str) -> Result<Resolved, ToolError> {
    let root = root.canonicalize().map_err(|e| {
        ToolError::Failed(format!(
            "the workspace root `{}` cannot be opened: {e}",
            root.display()
        ))
    })?;
    let lexical = normalize(input)?;

    let mut abs = root.clone();
    let mut parts = lexical.iter();
    for part in parts.by_ref() {
        let next = abs.join(part);
        let meta = match next.symlink_metadata() {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                abs = next;
                break;
            }
            Err(e) => {
                return Err(ToolError::Failed(format!(
                    "cannot inspect `{}`: {e}",
                    rel_display(&root, &next)
                )));
            }
        };
        if !meta.file_type().is_symlink() {
            abs = next;
            continue;
        }
        let shown = rel_display(&root, &next);
        match next.canonicalize() {
            Ok(target) if target.starts_with(&root) => abs = target,
            Ok(target) => {
                return Err(outside(
                    input,
                    format!(
                        "`{shown}` is a symlink to `{}`, which is outside the workspace",
                        target.display()
                    ),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(outside(
                    input,
                    format!(
                        "`{shown}` is a symlink whose target does not exist, so where it leads cannot be checked"
                    ),
                ));
            }
            Err(e) => {
                return Err(ToolError::Failed(format!(
                    "cannot resolve symlink `{shown}`: {e}"
                )));
            }
        }
    }
    // What remains does not exist yet: nothing there can be a symlink.
    for part in parts {
        abs.push(part);
    }
    let rel = abs
        .strip_prefix(&root)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(Resolved { abs, rel })
}

/// Lexically normalises `input` into plain components, refusing absolute paths and
/// `..` above the root.
fn normalize(input: &str) -> Result<Vec<String>, ToolError> {
    let mut parts: Vec<String> = Vec::new();
    for component in Path::new(input).components() {
        match component {
            Component::Prefix(_) | Component::RootDir => {
                return Err(outside(
                    input,
                    "absolute paths are not allowed; give a path relative to the workspace root",
                ));
            }
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(outside(input, "`..` climbs above the workspace root"));
                }
            }
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
        }
    }
    Ok(parts)
}

fn rel_display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn reason(err: ToolError) -> String {
        match err {
            ToolError::OutsideWorkspace { reason, .. } => reason,
            other => panic!("expected OutsideWorkspace, got {other:?}"),
        }
    }

    #[test]
    fn plain_paths_resolve_inside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "x").unwrap();

        let r = resolve(&root, "src/a.rs").unwrap();
        assert_eq!(r.abs, root.join("src/a.rs"));
        assert_eq!(r.display(), "src/a.rs");
        assert_eq!(resolve(&root, "").unwrap().abs, root);
        assert_eq!(resolve(&root, ".").unwrap().display(), ".");
        assert_eq!(
            resolve(&root, "./src/../src/./a.rs").unwrap().abs,
            root.join("src/a.rs")
        );
        // Not existing yet: appended as is.
        let r = resolve(&root, "new/dir/file.txt").unwrap();
        assert_eq!(r.abs, root.join("new/dir/file.txt"));
    }

    #[test]
    fn absolute_and_parent_escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        assert!(reason(resolve(root, "/etc/passwd").unwrap_err()).contains("absolute"));
        assert!(reason(resolve(root, "..").unwrap_err()).contains("`..`"));
        assert!(reason(resolve(root, "a/../../b").unwrap_err()).contains("`..`"));
        // Climbing down and back up stays inside.
        assert!(resolve(root, "a/b/../../c").is_ok());
    }

    #[test]
    fn symlinks_leaving_the_root_are_refused() {
        let outside_dir = tempfile::tempdir().unwrap();
        std::fs::write(outside_dir.path().join("secret"), "s").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        symlink(outside_dir.path(), root.join("out")).unwrap();
        symlink(outside_dir.path().join("secret"), root.join("secret-link")).unwrap();
        symlink(root.join("missing"), root.join("dangling")).unwrap();

        let why = reason(resolve(root, "out/secret").unwrap_err());
        assert!(why.contains("`out` is a symlink"), "{why}");
        // Even for a file that does not exist yet behind the symlinked parent.
        assert!(resolve(root, "out/new/file").is_err());
        let why = reason(resolve(root, "secret-link").unwrap_err());
        assert!(why.contains("`secret-link` is a symlink"), "{why}");
        let why = reason(resolve(root, "dangling").unwrap_err());
        assert!(why.contains("does not exist"), "{why}");
    }

    #[test]
    fn symlinks_inside_the_root_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/f"), "x").unwrap();
        symlink("real", root.join("alias")).unwrap();
        symlink("real/f", root.join("f-link")).unwrap();

        assert_eq!(resolve(&root, "alias/f").unwrap().abs, root.join("real/f"));
        assert_eq!(resolve(&root, "f-link").unwrap().abs, root.join("real/f"));
        assert_eq!(
            resolve(&root, "alias/new").unwrap().abs,
            root.join("real/new")
        );
        // A non-canonical root still works.
        let via_dot = root.join(".");
        assert_eq!(
            resolve(&via_dot, "alias/f").unwrap().abs,
            root.join("real/f")
        );
    }

    #[test]
    fn symlink_to_root_parent_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        symlink("..", root.join("up")).unwrap();
        assert!(resolve(&root, "up/ws/x").is_err());
    }
}

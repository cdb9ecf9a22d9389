//! Where plugins are found: built into the binary, in the repository's
//! `.crewbox/plugins/` (only a repository the user trusts, read beneath its root), in the
//! user's `$XDG_CONFIG_HOME/crewbox/plugins/`.
//!
//! Finding a plugin never reads the others: directories are listed by name only, and the
//! one file that is named is read through [`super::file::read_component`] (regular files
//! only, bounded), so a FIFO or a link to `/dev/zero` among them can neither hang nor
//! exhaust the process.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::builtin::BUILTINS;
use super::file::{FileError, read_component};
use super::runtime::PluginSource;

/// Most entries read from one plugin directory.
const MAX_ENTRIES: usize = 1000;

/// A plugin found by name: where it is, not yet read.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Its name (built-in name or file stem).
    pub name: String,
    /// Where it comes from.
    pub source: PluginSource,
    /// For a repository plugin: the repository root it is read beneath.
    root: Option<PathBuf>,
}

/// A plugin with its bytes.
#[derive(Clone, Debug)]
pub struct Found {
    /// Its name.
    pub name: String,
    /// Where it comes from.
    pub source: PluginSource,
    /// The component.
    pub bytes: Arc<[u8]>,
}

impl Candidate {
    /// Reads the component (at most `max` bytes). Blocking.
    pub fn read(self, max: u64) -> Result<Found, FileError> {
        let bytes: Arc<[u8]> = match &self.source {
            PluginSource::Builtin => match BUILTINS.iter().find(|b| b.name == self.name) {
                Some(b) => b.wasm()?,
                None => Arc::from(&[][..]),
            },
            PluginSource::Repo(p) | PluginSource::File(p) if self.root.is_some() => {
                let root = self.root.as_deref().unwrap_or(Path::new("."));
                read_beneath(root, p, max)?.into()
            }
            PluginSource::User(p) | PluginSource::Repo(p) | PluginSource::File(p) => {
                read_component(p, max)?.into()
            }
        };
        Ok(Found {
            name: self.name,
            source: self.source,
            bytes,
        })
    }
}

/// Reads `path` (inside `root`) beneath the root: no `..`, no link out of it, regular
/// files only, at most `max` bytes.
fn read_beneath(root: &Path, path: &Path, max: u64) -> Result<Vec<u8>, FileError> {
    use crate::trust::read::{Confined, ReadError};
    let rel = path.strip_prefix(root).unwrap_or(path);
    let confined = Confined::new(root).map_err(|source| ReadError::Io {
        path: root.to_owned(),
        source,
    })?;
    let read = confined.read(rel, max)?;
    if read.truncated {
        return Err(FileError::TooLarge {
            path: path.to_owned(),
            limit: max,
        });
    }
    Ok(read.bytes)
}

/// `$XDG_CONFIG_HOME/crewbox/plugins`, else `$HOME/.config/crewbox/plugins`.
pub fn user_plugin_dir() -> Option<PathBuf> {
    crate::paths::xdg_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("crewbox").join("plugins"))
}

/// The `*.wasm` names in `dir`, sorted, without opening any of them.
fn listed(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .take(MAX_ENTRIES)
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .collect();
    paths.sort();
    paths
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// Built-ins, then the plugins of the trusted repository at `repo_root` (its
/// `.crewbox/plugins`; `None` for an untrusted one, whose plugins are never opened), then
/// the user's. Lists directories; reads nothing. Blocking.
pub fn candidates(repo_root: Option<&Path>) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = BUILTINS
        .iter()
        .map(|b| Candidate {
            name: b.name.to_owned(),
            source: PluginSource::Builtin,
            root: None,
        })
        .collect();
    if let Some(root) = repo_root {
        for path in listed(&root.join(crate::trust::REPO_PLUGINS)) {
            out.push(Candidate {
                name: stem(&path),
                source: PluginSource::Repo(path),
                root: Some(root.to_owned()),
            });
        }
    }
    if let Some(dir) = user_plugin_dir() {
        for path in listed(&dir) {
            out.push(Candidate {
                name: stem(&path),
                source: PluginSource::User(path),
                root: None,
            });
        }
    }
    out
}

/// Resolves `NAME|FILE`: an existing path is that file; otherwise a built-in, then a
/// repository or user plugin of that name (only that one file is read). Blocking.
pub fn resolve(spec: &str, repo_root: Option<&Path>, max: u64) -> Result<Option<Found>, FileError> {
    let path = Path::new(spec);
    if path.exists() {
        return file(path.to_owned()).read(max).map(Some);
    }
    by_name(spec, repo_root, max)
}

/// A component file named on the command line or in a run.
fn file(path: PathBuf) -> Candidate {
    Candidate {
        name: stem(&path),
        source: PluginSource::File(path),
        root: None,
    }
}

/// The first plugin called `name` among [`candidates`], read. Blocking.
fn by_name(name: &str, repo_root: Option<&Path>, max: u64) -> Result<Option<Found>, FileError> {
    candidates(repo_root)
        .into_iter()
        .find(|c| c.name == name)
        .map(|c| c.read(max))
        .transpose()
}

/// Whether a plugin spec names a file rather than a plugin by name: a `.wasm` suffix, a
/// path separator, a leading `.` or an absolute path. Anything else is a name (a
/// built-in, or a file stem in the plugin directories). Repository files are held to
/// the same rule, so a path without the suffix is still a path, resolved beneath the
/// repository, never a name that happens to be a file elsewhere.
pub fn is_path_spec(spec: &str) -> bool {
    spec.ends_with(".wasm")
        || spec.contains('/')
        || spec.contains('\\')
        || spec.starts_with('.')
        || Path::new(spec).is_absolute()
}

/// Resolves a plugin named in a run (`run --validator NAME`, a team or config file):
/// a spec that looks like a path ([`is_path_spec`]) is that file, relative
/// to `base_dir`; anything else is a name looked up as [`resolve`] does (built-in, the
/// trusted repository's `.crewbox/plugins/`, the user's plugins). Blocking.
pub fn resolve_in(
    spec: &str,
    base_dir: &Path,
    repo_root: Option<&Path>,
    max: u64,
) -> Result<Option<Found>, FileError> {
    let path = Path::new(spec);
    if is_path_spec(spec) {
        let full = if path.is_absolute() {
            path.to_owned()
        } else {
            base_dir.join(path)
        };
        // A path inside the trusted repository (one its config or a team file names,
        // resolved when they were read) is read beneath its root now too: a link
        // swapped in since then cannot lead the read out of it.
        let root = repo_root.and_then(|r| r.canonicalize().ok());
        if let Some(root) = root.filter(|r| full.starts_with(r)) {
            let mut inside = file(full);
            inside.root = Some(root);
            return inside.read(max).map(Some);
        }
        return file(full).read(max).map(Some);
    }
    by_name(spec, repo_root, max)
}

/// Where names are looked up, for an error that says so: built-ins, then these dirs.
pub fn searched(repo_root: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(root) = repo_root {
        dirs.push(root.join(crate::trust::REPO_PLUGINS));
    }
    dirs.extend(user_plugin_dir());
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_inside_the_repository_is_read_beneath_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join(".crewbox")).unwrap();
        std::fs::write(dir.path().join("outside.wasm"), b"\0asm-outside").unwrap();
        std::fs::write(root.join(".crewbox/d.wasm"), b"\0asm").unwrap();
        let root = root.canonicalize().unwrap();
        let named = root.join(".crewbox/d.wasm");
        let read = resolve_in(named.to_str().unwrap(), &root, Some(&root), 1 << 20);
        assert_eq!(&*read.unwrap().unwrap().bytes, b"\0asm");
        // Checked when the config was read, then swapped for a link out of the
        // repository: the read refuses it instead of following it.
        std::fs::remove_file(&named).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside.wasm"), &named).unwrap();
        let e = resolve_in(named.to_str().unwrap(), &root, Some(&root), 1 << 20).unwrap_err();
        assert!(matches!(e, FileError::Repo(_)), "{e}");
        // The user's own paths outside any trusted repository are theirs to name.
        let outside = dir.path().join("outside.wasm");
        let read = resolve_in(outside.to_str().unwrap(), &root, Some(&root), 1 << 20);
        assert_eq!(&*read.unwrap().unwrap().bytes, b"\0asm-outside");
    }

    #[test]
    fn finding_one_plugin_reads_only_that_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let plugins = root.join(crate::trust::REPO_PLUGINS);
        std::fs::create_dir_all(&plugins).unwrap();
        // Anything but a regular file would hang or never end if it were read.
        crate::fs::make_fifo(&plugins.join("hang.wasm"));
        std::os::unix::fs::symlink("/dev/zero", plugins.join("zero.wasm")).unwrap();
        std::fs::write(plugins.join("mine.wasm"), b"\0asm").unwrap();
        let names: Vec<String> = candidates(Some(root)).into_iter().map(|c| c.name).collect();
        assert!(
            names.ends_with(&["hang".into(), "mine".into(), "zero".into()]),
            "{names:?}"
        );
        let mine = resolve("mine", Some(root), 1 << 20).unwrap().unwrap();
        assert_eq!(&*mine.bytes, b"\0asm");
        assert!(matches!(mine.source, PluginSource::Repo(_)));
        assert!(resolve("heuristic", Some(root), 1 << 20).unwrap().is_some());
        assert!(resolve("nothing", Some(root), 1 << 20).unwrap().is_none());
        // Read beneath the root: the FIFO is no regular file, the link leaves it.
        for bad in ["hang", "zero"] {
            let e = resolve(bad, Some(root), 1 << 20).unwrap_err();
            assert!(matches!(e, FileError::Repo(_)), "{bad}: {e}");
        }
        // An untrusted repository's plugins are not even listed.
        assert!(
            candidates(None)
                .iter()
                .all(|c| !matches!(c.source, PluginSource::Repo(_)))
        );
        assert!(resolve("mine", None, 1 << 20).unwrap().is_none());
    }
}

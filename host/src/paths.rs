//! Where crewbox keeps its files: the user's config directory, the state base and the
//! per-repository state directory under it.
//!
//! State belongs to one repository: whatever base is chosen (`--state-dir`,
//! `CREWBOX_STATE_DIR`, `state_dir` in the user's config, else
//! `$XDG_STATE_HOME/crewbox`), each repository gets its own directory
//! `<base>/<repo-id>` under it, so two repositories never share a store or worktrees.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The environment variable naming the state base (as `--state-dir` does).
pub const STATE_DIR_ENV: &str = "CREWBOX_STATE_DIR";

/// `$VAR` if set and absolute, else `$HOME/<fallback>`.
pub fn xdg_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(fallback)))
}

/// `$XDG_CONFIG_HOME/crewbox` (else `~/.config/crewbox`).
pub fn user_config_dir() -> Option<PathBuf> {
    xdg_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("crewbox"))
}

/// `$XDG_STATE_HOME/crewbox` (else `~/.local/state/crewbox`): the default state base
/// and the home of the trust store.
pub fn user_state_dir() -> Option<PathBuf> {
    xdg_dir("XDG_STATE_HOME", ".local/state").map(|d| d.join("crewbox"))
}

/// A stable, readable id for a repository root: its directory name plus a hash of its
/// canonical path (so two clones never share state).
pub fn repo_id(root: &Path) -> String {
    let name: String = root
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect()
        })
        .unwrap_or_else(|| "root".into());
    let hash = Sha256::digest(root.as_os_str().as_encoded_bytes());
    format!("{name}-{}", crate::text::hex(&hash[..6]))
}

/// The path whose bytes these are: a Unix path is bytes, and not every one is UTF-8
/// (a repository may live in a directory named in Latin-1).
pub fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
    }
    #[cfg(not(unix))]
    {
        PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
    }
}

/// The bytes of `path` ([`path_from_bytes`] gives it back).
pub fn path_bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_encoded_bytes()
}

/// Serde for a path that may not be UTF-8: a string when it is (what every record held
/// so far), else the list of its bytes; both read back to the same path.
pub mod serde_path {
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `path` as a string, or as its bytes when it is not UTF-8.
    pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
        match path.to_str() {
            Some(text) => s.serialize_str(text),
            None => s.collect_seq(super::path_bytes(path)),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Text(String),
        Bytes(Vec<u8>),
    }

    /// [`serialize`] for an optional path (`null` when absent).
    pub fn serialize_opt<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match path {
            Some(p) => serialize(p, s),
            None => s.serialize_none(),
        }
    }

    /// Reads what [`serialize_opt`] wrote.
    pub fn deserialize_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(match Option::<Written>::deserialize(d)? {
            None => None,
            Some(Written::Text(text)) => Some(PathBuf::from(text)),
            Some(Written::Bytes(bytes)) => Some(super::path_from_bytes(&bytes)),
        })
    }

    /// `path` as a JSON value the way [`serialize`] writes it.
    pub fn json(path: &Path) -> serde_json::Value {
        match path.to_str() {
            Some(text) => serde_json::Value::from(text),
            None => serde_json::Value::from(super::path_bytes(path).to_vec()),
        }
    }

    /// Reads what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        Ok(match Written::deserialize(d)? {
            Written::Text(text) => PathBuf::from(text),
            Written::Bytes(bytes) => super::path_from_bytes(&bytes),
        })
    }
}

/// The state directory of the repository at `root` (canonical) under `base`.
pub fn repo_state_dir(base: &Path, root: &Path) -> PathBuf {
    base.join(repo_id(root))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_repository_gets_its_own_directory_under_the_base() {
        let a = repo_state_dir(Path::new("/base"), Path::new("/src/app"));
        let b = repo_state_dir(Path::new("/base"), Path::new("/other/app"));
        assert!(a.starts_with("/base") && b.starts_with("/base"));
        assert_ne!(a, b);
        assert!(repo_id(Path::new("/src/my app")).starts_with("my_app-"));
        assert_eq!(
            repo_id(Path::new("/src/app")),
            repo_id(Path::new("/src/app"))
        );
    }
}

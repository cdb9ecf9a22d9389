//! The trust store: which repositories the user trusts, kept outside every repository
//! in the user's state (`$XDG_STATE_HOME/crewbox/trust/`), one small file per
//! repository named by its id and holding its canonical root, so trusting one
//! repository never rewrites another's record. Writes are atomic (a temporary file
//! renamed into place).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::read::read_bounded;

/// The most bytes read from one trust record.
const RECORD_CAP: u64 = 16 * 1024;

/// Why the trust store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// Neither `XDG_STATE_HOME` nor `HOME` is set.
    #[error("neither XDG_STATE_HOME nor HOME is set, so there is no trust store")]
    NoHome,
    /// A record or the directory could not be read or written.
    #[error("trust store {}: {detail}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
}

/// One trusted repository.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRecord {
    /// The repository's canonical root (its bytes when it is not UTF-8).
    #[serde(with = "crate::paths::serde_path")]
    pub root: PathBuf,
    /// When the user trusted it (RFC 3339).
    pub trusted_at: String,
    /// The ceiling of its imported role packs (`crewbox trust --pack-access`); absent:
    /// the user's `[packs] max_access`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_access: Option<crate::team::Access>,
}

/// The store's directory.
#[derive(Clone, Debug)]
pub struct TrustStore {
    dir: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TrustError + '_ {
    move |e| TrustError::Io {
        path: path.to_owned(),
        detail: e.to_string(),
    }
}

impl TrustStore {
    /// The user's store: `$XDG_STATE_HOME/crewbox/trust/` (else under `~/.local/state`).
    pub fn user() -> Result<Self, TrustError> {
        crate::paths::user_state_dir()
            .map(|d| Self::at(d.join("trust")))
            .ok_or(TrustError::NoHome)
    }

    /// A store in `dir`.
    pub fn at(dir: PathBuf) -> Self {
        Self { dir }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn record_path(&self, root: &Path) -> PathBuf {
        self.dir
            .join(format!("{}.toml", crate::paths::repo_id(root)))
    }

    fn notice_path(&self, root: &Path) -> PathBuf {
        self.dir.join("noticed").join(crate::paths::repo_id(root))
    }

    fn read_record(path: &Path) -> Result<Option<TrustRecord>, TrustError> {
        let text = match read_bounded(path, RECORD_CAP) {
            Ok(b) => b.into_text(path, RECORD_CAP),
            Err(e) => Err(e),
        };
        let text = match text {
            Ok(t) => t,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => {
                return Err(TrustError::Io {
                    path: path.to_owned(),
                    detail: e.to_string(),
                });
            }
        };
        toml::from_str(&text).map(Some).map_err(|e| TrustError::Io {
            path: path.to_owned(),
            detail: format!("not a trust record: {}", e.message()),
        })
    }

    /// The record of `root` (canonical), if the user trusts it.
    pub fn get(&self, root: &Path) -> Result<Option<TrustRecord>, TrustError> {
        // The file name is a hash; the record must name this very root.
        Ok(Self::read_record(&self.record_path(root))?.filter(|r| r.root == root))
    }

    /// Whether the user trusts `root` (canonical).
    pub fn is_trusted(&self, root: &Path) -> Result<bool, TrustError> {
        Ok(self.get(root)?.is_some())
    }

    /// Trusts `root` (canonical) and returns the record written. `pack_access` sets
    /// the ceiling of its imported packs; `None` keeps what an earlier record said.
    pub fn trust(
        &self,
        root: &Path,
        pack_access: Option<crate::team::Access>,
    ) -> Result<TrustRecord, TrustError> {
        let kept = match pack_access {
            Some(_) => pack_access,
            None => self.get(root).ok().flatten().and_then(|r| r.pack_access),
        };
        let record = TrustRecord {
            root: root.to_owned(),
            trusted_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            pack_access: kept,
        };
        let text = toml::to_string(&record).map_err(|e| TrustError::Io {
            path: self.dir.clone(),
            detail: e.to_string(),
        })?;
        write_atomic(&self.record_path(root), text.as_bytes())?;
        Ok(record)
    }

    /// Stops trusting `root`; returns whether it was trusted.
    pub fn revoke(&self, root: &Path) -> Result<bool, TrustError> {
        let was = self.is_trusted(root)?;
        let path = self.record_path(root);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path)(e)),
        }
        let _ = std::fs::remove_file(self.notice_path(root));
        Ok(was)
    }

    /// Every trusted repository, sorted by root. Unreadable records are reported, not
    /// skipped silently.
    pub fn list(&self) -> Result<(Vec<TrustRecord>, Vec<TrustError>), TrustError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Vec::new(), Vec::new()));
            }
            Err(e) => return Err(io(&self.dir)(e)),
        };
        let mut records = Vec::new();
        let mut problems = Vec::new();
        for entry in entries {
            let path = entry.map_err(io(&self.dir))?.path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            match Self::read_record(&path) {
                Ok(Some(r)) => records.push(r),
                Ok(None) => {}
                Err(e) => problems.push(e),
            }
        }
        records.sort_by(|a, b| a.root.cmp(&b.root));
        Ok((records, problems))
    }

    /// Whether the one-line notice with this fingerprint was shown for `root` already.
    pub fn noticed(&self, root: &Path, fingerprint: &str) -> bool {
        read_bounded(&self.notice_path(root), RECORD_CAP)
            .ok()
            .is_some_and(|b| b.bytes == fingerprint.as_bytes())
    }

    /// Remembers that the notice with this fingerprint was shown for `root`.
    pub fn mark_noticed(&self, root: &Path, fingerprint: &str) -> Result<(), TrustError> {
        write_atomic(&self.notice_path(root), fingerprint.as_bytes())
    }
}

/// Writes `bytes` to `path` atomically: a private temporary file in the same
/// directory, synced, then renamed over `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrustError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        uuid::Uuid::now_v7().simple()
    ));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let result = (|| {
        let mut file = opts.open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        // The rename is durable once the directory is synced.
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io(path))
}

fn create_private_dir(dir: &Path) -> Result<(), TrustError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(io(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_list_revoke_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().join("trust"));
        let a = Path::new("/src/a");
        let b = Path::new("/src/b");
        assert!(!store.is_trusted(a).unwrap());
        assert_eq!(store.list().unwrap().0, vec![]);
        store.trust(b, None).unwrap();
        let rec = store.trust(a, None).unwrap();
        assert!(store.is_trusted(a).unwrap());
        let (list, problems) = store.list().unwrap();
        assert!(problems.is_empty());
        assert_eq!(list.len(), 2);
        assert_eq!(list[0], rec);
        // The pack ceiling is set, kept by a plain re-trust, and gone with the trust.
        let full = Some(crate::team::Access::Full);
        assert_eq!(store.trust(a, full).unwrap().pack_access, full);
        assert_eq!(store.trust(a, None).unwrap().pack_access, full);
        assert!(store.revoke(a).unwrap());
        assert!(!store.revoke(a).unwrap());
        assert_eq!(store.trust(a, None).unwrap().pack_access, None);
        assert!(store.revoke(a).unwrap());
        assert!(!store.is_trusted(a).unwrap());
        assert!(store.is_trusted(b).unwrap());
        // No temporary files are left behind.
        let names: Vec<String> = std::fs::read_dir(store.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn a_record_must_name_the_root_it_is_filed_under() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().to_owned());
        let root = Path::new("/src/a");
        std::fs::write(
            store.record_path(root),
            "root = \"/src/other\"\ntrusted_at = \"2025-01-01T00:00:00Z\"\n",
        )
        .unwrap();
        assert!(!store.is_trusted(root).unwrap());
        std::fs::write(store.record_path(root), "garbage = [").unwrap();
        assert!(store.is_trusted(root).is_err());
        assert_eq!(store.list().unwrap().1.len(), 1);
    }

    #[test]
    fn notices_are_remembered_per_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().to_owned());
        let root = Path::new("/src/a");
        assert!(!store.noticed(root, "config"));
        store.mark_noticed(root, "config").unwrap();
        assert!(store.noticed(root, "config"));
        assert!(!store.noticed(root, "config+plugins"));
        assert!(store.list().unwrap().0.is_empty(), "notices are not trust");
    }
}

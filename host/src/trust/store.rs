//! The trust store: which repositories the user trusts, kept outside every repository
//! in the user's state (`$XDG_STATE_HOME/crewbox/trust/`), one small file per
//! repository named by its id and holding its canonical root, so trusting one
//! repository never rewrites another's record. Writes are atomic (a temporary file
//! renamed into place).

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
    /// The repository's crewbox files changed since the user trusted it.
    #[error(
        "the crewbox files of {} changed since you trusted it ({}); run `crewbox trust` there again to trust them as they are now",
        root.display(),
        changes.join(", ")
    )]
    Changed {
        /// The repository root.
        root: PathBuf,
        /// What changed, one path each (`.crewbox/config.toml changed`).
        changes: Vec<String>,
    },
    /// The record was written by an older crewbox that did not record the files.
    #[error(
        "{} was trusted by an earlier crewbox, which did not record its crewbox files; run `crewbox trust` there again to record them",
        root.display()
    )]
    Unrecorded {
        /// The repository root.
        root: PathBuf,
    },
    /// The repository's crewbox files cannot be recorded (too many, unreadable).
    #[error(transparent)]
    Digest(#[from] super::digest::DigestError),
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
    pub pack_access: Option<crate::vocab::Access>,
    /// Its crewbox files (path and content digest of each) when the user trusted it; absent in a
    /// record an older crewbox wrote, which is not trusted until re-trusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<super::digest::Files>,
    /// Servers of its `.mcp.json` the user approved (`crewbox trust --mcp NAME`): name
    /// and the sha256 of the definition approved.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub mcp: std::collections::BTreeMap<String, String>,
}

/// Where a repository stands with the user, its files compared with the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// No record.
    Untrusted,
    /// A record, and the files are as it says.
    Trusted(TrustRecord),
    /// A record, but the files changed since (one line per path).
    Changed(TrustRecord, Vec<String>),
    /// A record without files (an older crewbox's).
    Unrecorded(TrustRecord),
}

/// The most changed paths a message names.
const CHANGES_SHOWN: usize = 8;

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

    /// Whether a record for `root` (canonical) exists; whether it still holds is
    /// [`TrustStore::standing`].
    pub fn is_trusted(&self, root: &Path) -> Result<bool, TrustError> {
        Ok(self.get(root)?.is_some())
    }

    /// Where `root` (canonical) stands: its record, checked against its crewbox files
    /// as they are now. Blocking (it reads `.crewbox/`).
    pub fn standing(&self, root: &Path) -> Result<Standing, TrustError> {
        let Some(record) = self.get(root)? else {
            return Ok(Standing::Untrusted);
        };
        let Some(recorded) = &record.files else {
            return Ok(Standing::Unrecorded(record));
        };
        let now = super::digest::crewbox_files(root)?;
        let changes = super::digest::changes(recorded, &now, CHANGES_SHOWN);
        Ok(if changes.is_empty() {
            Standing::Trusted(record)
        } else {
            Standing::Changed(record, changes)
        })
    }

    /// Trusts `root` (canonical) with its crewbox files as they are now, and returns
    /// the record written. `pack_access` sets the ceiling of its imported packs; `None`
    /// keeps what an earlier record said.
    pub fn trust(
        &self,
        root: &Path,
        pack_access: Option<crate::vocab::Access>,
    ) -> Result<TrustRecord, TrustError> {
        self.trust_with_mcp(root, pack_access, &[])
    }

    /// [`Self::trust`], also approving these `.mcp.json` servers (name, digest of the
    /// definition); earlier approvals are kept.
    pub fn trust_with_mcp(
        &self,
        root: &Path,
        pack_access: Option<crate::vocab::Access>,
        approve: &[(String, String)],
    ) -> Result<TrustRecord, TrustError> {
        let earlier = self.get(root).ok().flatten();
        let kept = match pack_access {
            Some(_) => pack_access,
            None => earlier.as_ref().and_then(|r| r.pack_access),
        };
        let mut mcp = earlier.map(|r| r.mcp).unwrap_or_default();
        for (name, digest) in approve {
            mcp.insert(name.clone(), digest.clone());
        }
        let record = TrustRecord {
            root: root.to_owned(),
            trusted_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            pack_access: kept,
            files: Some(super::digest::crewbox_files(root)?),
            mcp,
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

/// Writes `bytes` to `path` atomically, through the confined filesystem: a private
/// temporary file in the same directory (created `0700` when missing), synced, then
/// renamed over `path`.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrustError> {
    use crate::fs::{Root, Rules, WriteOptions};
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default();
    let fail = |e: crate::fs::FsError| TrustError::Io {
        path: path.to_owned(),
        detail: e.to_string(),
    };
    Root::create(dir, 0o700)
        .and_then(|root| {
            root.write(
                Path::new(name),
                bytes,
                WriteOptions::new(Rules::NO_LINKS).private(),
            )
        })
        .map(drop)
        .map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_list_revoke_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().join("trust"));
        for r in ["a", "b"] {
            std::fs::create_dir_all(dir.path().join(r)).unwrap();
        }
        let a = &dir.path().join("a").canonicalize().unwrap();
        let b = &dir.path().join("b").canonicalize().unwrap();
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
        let full = Some(crate::vocab::Access::Full);
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
    fn trust_holds_while_the_crewbox_files_are_as_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let store = TrustStore::at(dir.path().join("trust"));
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join(".crewbox")).unwrap();
        std::fs::write(
            root.join(".crewbox/config.toml"),
            "default_mode = \"crew\"\n",
        )
        .unwrap();
        let root = root.canonicalize().unwrap();
        assert_eq!(store.standing(&root).unwrap(), Standing::Untrusted);
        let record = store.trust(&root, None).unwrap();
        assert_eq!(
            store.standing(&root).unwrap(),
            Standing::Trusted(record.clone())
        );
        std::fs::write(
            root.join(".crewbox/config.toml"),
            "default_mode = \"auto\"\n",
        )
        .unwrap();
        assert_eq!(
            store.standing(&root).unwrap(),
            Standing::Changed(record, vec![".crewbox/config.toml changed".into()])
        );
        let again = store.trust(&root, None).unwrap();
        assert_eq!(store.standing(&root).unwrap(), Standing::Trusted(again));
        // A record from before digests: kept, but it does not hold until re-trusted.
        std::fs::write(
            store.record_path(&root),
            format!(
                "root = {:?}\ntrusted_at = \"2025-01-01T00:00:00Z\"\n",
                root.display().to_string()
            ),
        )
        .unwrap();
        assert!(matches!(
            store.standing(&root).unwrap(),
            Standing::Unrecorded(_)
        ));
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

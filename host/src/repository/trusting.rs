//! What `crewbox trust` asks: the repositories the user trusts (and where each stands
//! now), trusting one as its crewbox files are now (with its pack ceiling and the
//! `.mcp.json` servers approved), and revoking that. Trust lives in the user's own state
//! directory, never in a repository, keyed by the repository's canonical root. Typed
//! answers, typed errors; the binary only renders them.

use std::path::{Path, PathBuf};

use crate::trust::read::{Confined, MAX_FILE_BYTES};
use crate::trust::rules::{REPO_KEYS, RepoRule};
use crate::trust::store::TrustRecord;
use crate::trust::{REPO_CONFIG, REPO_TEAMS, RepoRoot, Standing, TrustError, TrustStore};
use crate::vocab::Access;

/// The user's trust records ([`UserTrust::open`]).
#[derive(Clone, Debug)]
pub struct UserTrust(TrustStore);

/// One trusted repository, and where it stands now.
#[derive(Debug)]
pub struct TrustedRepo {
    /// The record.
    pub record: TrustRecord,
    /// Its files compared with the record (changed since, or recorded by an earlier
    /// crewbox that kept no files), or why that cannot be told.
    pub standing: Result<Standing, TrustError>,
}

/// An `.mcp.json` server approved by [`UserTrust::trust`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovedServer {
    /// Its name in the file.
    pub name: String,
    /// What it runs or reaches, in words.
    pub summary: String,
}

/// What [`UserTrust::trust`] recorded.
#[derive(Clone, Debug)]
pub struct Trusted {
    /// The new record.
    pub record: TrustRecord,
    /// The servers approved with it, in the order named.
    pub approved: Vec<ApprovedServer>,
}

/// Why a repository could not be trusted.
#[derive(Debug, thiserror::Error)]
pub enum TrustCommandError {
    /// The trust store cannot be read or written, or the repository's crewbox files
    /// cannot be recorded.
    #[error(transparent)]
    Store(#[from] TrustError),
    /// `.mcp.json` cannot be read (missing, not a regular file, too large, leads out of
    /// the repository).
    #[error("cannot read {file}: {why}")]
    McpFile {
        /// The file, relative to the repository.
        file: &'static str,
        /// Why not.
        why: String,
    },
    /// `.mcp.json` is not a server file (the message names the file and where).
    #[error("{0}")]
    McpParse(String),
    /// A server to approve that `.mcp.json` does not define.
    #[error("{file} defines no server `{name}` ({})", if known.is_empty() {
        "it defines none".to_owned()
    } else {
        known.join(", ")
    })]
    NoSuchServer {
        /// The file.
        file: &'static str,
        /// The name asked for.
        name: String,
        /// The servers it defines.
        known: Vec<String>,
    },
    /// A server to approve whose definition is not usable.
    #[error("{file}: server `{name}`: {why}")]
    BadServer {
        /// The file.
        file: &'static str,
        /// The server.
        name: String,
        /// Why it is not usable.
        why: String,
    },
}

impl UserTrust {
    /// The user's trust records (in `$XDG_STATE_HOME/crewbox/trust`, else under
    /// `$HOME`).
    pub fn open() -> Result<Self, TrustError> {
        Ok(Self(TrustStore::user()?))
    }

    /// Every trusted repository with where it stands now, and the records that cannot
    /// be read (each one a problem, the list goes on).
    pub fn list(&self) -> Result<(Vec<TrustedRepo>, Vec<TrustError>), TrustError> {
        let (records, problems) = self.0.list()?;
        let repos = records
            .into_iter()
            .map(|record| TrustedRepo {
                standing: self.0.standing(&record.root),
                record,
            })
            .collect();
        Ok((repos, problems))
    }

    /// Stops trusting the repository at `root`: whether it was trusted.
    pub fn revoke(&self, root: &Path) -> Result<bool, TrustError> {
        self.0.revoke(root)
    }

    /// Trusts the repository at `root` as its crewbox files are now: its pack ceiling
    /// `pack_access` (None keeps an earlier one), and approving the `.mcp.json` servers
    /// named in `mcp`, each checked to be a usable definition first (nothing is written
    /// when one is not). Earlier approvals are kept.
    pub fn trust(
        &self,
        root: &Path,
        pack_access: Option<Access>,
        mcp: &[String],
    ) -> Result<Trusted, TrustCommandError> {
        let (digests, approved) = mcp_approvals(root, mcp)?;
        let record = self.0.trust_with_mcp(root, pack_access, &digests)?;
        Ok(Trusted { record, approved })
    }
}

/// The `.crewbox/config.toml` keys a trusted repository may set (the others are the
/// user's alone).
pub fn repo_config_keys() -> Vec<&'static str> {
    REPO_KEYS
        .iter()
        .filter(|r| r.rule != RepoRule::UserOnly)
        .map(|r| r.key)
        .collect()
}

/// The root of the git repository containing `start` (canonical), or `start` itself
/// when it is in none.
pub fn repository_root(start: &Path) -> std::io::Result<PathBuf> {
    Ok(RepoRoot::discover(start)?.path().to_path_buf())
}

/// The digests of the `.mcp.json` servers named, each checked to be a usable
/// definition, with what each runs in words.
type Approvals = (Vec<(String, String)>, Vec<ApprovedServer>);

fn mcp_approvals(root: &Path, names: &[String]) -> Result<Approvals, TrustCommandError> {
    if names.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let file = crate::mcp::project::FILE;
    let unreadable = |why: String| TrustCommandError::McpFile { file, why };
    let confined = Confined::new(root).map_err(|e| unreadable(e.to_string()))?;
    let text = confined
        .read(Path::new(file), MAX_FILE_BYTES)
        .and_then(|b| b.into_text(&root.join(file), MAX_FILE_BYTES))
        .map_err(|e| unreadable(e.to_string()))?;
    let parsed = crate::mcp::project::parse(&text).map_err(TrustCommandError::McpParse)?;
    // The user's providers' keys, which no definition may read (a user config that
    // does not load has none to name; the open that starts a server refuses it then).
    let keys = super::provider_keys(
        &crate::config::Config::load_user()
            .map(|c| c.providers)
            .unwrap_or_default(),
    );
    let (mut digests, mut approved) = (Vec::new(), Vec::new());
    for name in names {
        let Some((_, def, digest)) = parsed.iter().find(|(n, _, _)| n == name) else {
            return Err(TrustCommandError::NoSuchServer {
                file,
                name: name.clone(),
                known: parsed.iter().map(|(n, _, _)| n.clone()).collect(),
            });
        };
        let server = crate::mcp::project::preview(name, def, &keys).map_err(|why| {
            TrustCommandError::BadServer {
                file,
                name: name.clone(),
                why,
            }
        })?;
        digests.push((name.clone(), digest.clone()));
        approved.push(ApprovedServer {
            name: name.clone(),
            summary: server.summary(),
        });
    }
    Ok((digests, approved))
}

/// What [`init_repository`] did with one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// Written now.
    Wrote,
    /// Something was there already (a file, a link, anything): left as it was.
    Kept,
}

/// What [`init_repository`] did.
#[derive(Clone, Debug)]
pub struct Initialized {
    /// Each file, relative to the repository, and what became of it.
    pub files: Vec<(PathBuf, Written)>,
    /// Whether the user trusts the repository (its record then covers the new files).
    pub trusted: bool,
}

/// Why [`init_repository`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A file would land outside the repository (`.crewbox/` is a link leading out),
    /// or its directory cannot be made.
    #[error("refusing to write {}: {why}", path.display())]
    Refused {
        /// The file, relative to the repository.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// A file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The trust record cannot be renewed to cover the new files.
    #[error(transparent)]
    Trust(#[from] TrustError),
}

/// Writes `config` as `.crewbox/config.toml` and `team` as
/// `.crewbox/teams/example.toml` into the repository at `root`, never over anything
/// that exists and never outside the repository. A trusted repository stays trusted:
/// files the user writes here are the user's own change, so the record is renewed to
/// cover them.
pub fn init_repository(root: &Path, config: &str, team: &str) -> Result<Initialized, InitError> {
    let trusted = crate::trust::Trust::of(&RepoRoot::from_canonical(root.to_owned()))
        .0
        .is_trusted();
    let files = [
        (Path::new(REPO_CONFIG).to_path_buf(), config),
        (Path::new(REPO_TEAMS).join("example.toml"), team),
    ];
    let mut done = Vec::new();
    for (rel, text) in files {
        let path = root.join(&rel);
        if path.symlink_metadata().is_ok() {
            done.push((rel, Written::Kept));
            continue;
        }
        let refused = |why: String| InitError::Refused {
            path: rel.clone(),
            why,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| refused(e.to_string()))?;
        }
        // `.crewbox/` may be a symlink a repository ships: never write outside it.
        let parent = rel.parent().unwrap_or(Path::new(""));
        Confined::new(root)
            .map_err(|e| refused(e.to_string()))?
            .dir(parent)
            .map_err(|e| refused(e.to_string()))?;
        // create_new: never follow or replace something that appeared meanwhile.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
            .map_err(|source| InitError::Write {
                path: path.clone(),
                source,
            })?;
        done.push((rel, Written::Wrote));
    }
    if trusted && done.iter().any(|(_, w)| *w == Written::Wrote) {
        TrustStore::user()?.trust(root, None)?;
    }
    Ok(Initialized {
        files: done,
        trusted,
    })
}

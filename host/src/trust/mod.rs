//! Repository trust: what a repository's own files may make crewbox do.
//!
//! crewbox runs in repositories other people wrote, with the user's keys. So:
//! - a repository is **untrusted** until the user runs `crewbox trust` in it (recorded
//!   outside the repository, see [`store`], with a digest of every file under its
//!   `.crewbox/`, see [`digest`]: a change to them makes it untrusted again until the
//!   user re-trusts it); an untrusted repository's
//!   `.crewbox/config.toml` and `.crewbox/plugins/` are ignored entirely, and its teams
//!   (team files and imported packs) load as prompts only: every member read-only, no
//!   provider, model or validator chosen by the repository;
//! - a trusted repository's imported packs (`.squad/`, `.claude/agents/`) stay
//!   read-only until the user raises their ceiling ([`pack_grant`], `[packs]` in the
//!   user's config);
//! - even a **trusted** repository sets only what [`rules::REPO_KEYS`] allows: it may
//!   select the user's providers by name, lower quotas and define teams, validators and
//!   a dispatcher, never define providers, move the state directory or widen grants;
//! - every path a repository file names is read through [`read::Confined`]: inside the
//!   repository, bounded, regular files only.

pub mod digest;
pub mod read;
pub mod repo;
pub mod rules;
pub mod store;

use std::path::Path;

use serde::Serialize;

pub use repo::RepoRoot;
pub use store::{Standing, TrustError, TrustStore};

/// Whether the user trusts a repository.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trust {
    /// Not (yet) trusted: its config and plugins are ignored, its teams read-only.
    #[default]
    Untrusted,
    /// Trusted with `crewbox trust`: what `trust::rules::REPO_KEYS` allows applies.
    Trusted,
}

impl Trust {
    /// `trusted` or `untrusted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Untrusted => "untrusted",
            Self::Trusted => "trusted",
        }
    }

    /// Whether the repository is trusted.
    pub fn is_trusted(self) -> bool {
        self == Self::Trusted
    }

    /// Looks `root` up in the user's trust store and checks its crewbox files against
    /// the record. An unreadable store, changed files or a record without files mean
    /// untrusted (the reason is returned for a warning), never trusted.
    pub fn of(root: &RepoRoot) -> (Self, Option<TrustError>) {
        let standing = TrustStore::user().and_then(|s| s.standing(root.path()));
        match standing {
            Ok(Standing::Trusted(_)) => (Self::Trusted, None),
            Ok(Standing::Untrusted) => (Self::Untrusted, None),
            Ok(Standing::Changed(_, changes)) => (
                Self::Untrusted,
                Some(TrustError::Changed {
                    root: root.path().to_owned(),
                    changes,
                }),
            ),
            Ok(Standing::Unrecorded(_)) => (
                Self::Untrusted,
                Some(TrustError::Unrecorded {
                    root: root.path().to_owned(),
                }),
            ),
            Err(e) => (Self::Untrusted, Some(e)),
        }
    }
}

/// The ceiling the user set for `root`'s imported packs with `crewbox trust
/// --pack-access` (None: not set, not trusted, or the store is unreadable).
pub fn pack_grant(root: &RepoRoot) -> Option<crate::vocab::Access> {
    TrustStore::user()
        .ok()?
        .get(root.path())
        .ok()
        .flatten()?
        .pack_access
}

/// The `.mcp.json` servers the user approved for `root` (name → definition digest).
pub fn mcp_approvals(root: &RepoRoot) -> std::collections::BTreeMap<String, String> {
    TrustStore::user()
        .ok()
        .and_then(|s| s.get(root.path()).ok().flatten())
        .map(|r| r.mcp)
        .unwrap_or_default()
}

/// The repository's own `.crewbox/` files, relative to its root.
pub const REPO_CONFIG: &str = ".crewbox/config.toml";
/// The repository's team directory.
pub const REPO_TEAMS: &str = ".crewbox/teams";
/// The repository's plugin directory.
pub const REPO_PLUGINS: &str = ".crewbox/plugins";

/// What an untrusted repository holds that crewbox ignores or limits, for the one-line
/// notice: each entry is "what (how it is treated)". Empty when there is nothing.
pub fn untrusted_effects(root: &Path) -> Vec<&'static str> {
    let exists = |rel: &str| root.join(rel).symlink_metadata().is_ok();
    let mut out = Vec::new();
    if exists(REPO_CONFIG) {
        out.push(".crewbox/config.toml (ignored)");
    }
    if exists(REPO_PLUGINS) {
        out.push(".crewbox/plugins/ (ignored)");
    }
    if exists(REPO_TEAMS) {
        out.push(".crewbox/teams/ (members read-only)");
    }
    for (pack, effect) in [
        (".squad/team.md", ".squad/ (members read-only)"),
        (".ai-team/team.md", ".ai-team/ (members read-only)"),
        (".claude/agents", ".claude/agents/ (members read-only)"),
    ] {
        if exists(pack) {
            out.push(effect);
        }
    }
    out
}

/// The one line shown on a terminal the first time a command runs in an untrusted
/// repository whose files are affected.
pub fn notice_line(effects: &[&str]) -> String {
    format!(
        "crewbox: this repository is not trusted: {}. Trust it with `crewbox trust` \
         (see `crewbox config` for what that allows).",
        effects.join(", ")
    )
}

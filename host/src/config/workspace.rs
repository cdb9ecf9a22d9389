//! `[workspace]`: what agents may change in their workspace besides ordinary files, and
//! how much one of their commits may take. The grant (`agents_write_crewbox`) is the
//! user's alone; a repository may only lower the limits.

use serde::Deserialize;

use super::ConfigError;
use crate::tool::FileAccess;
use crate::worktree::{CommitLimits, CommitRules};

/// The `[workspace]` table as written.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceFile {
    /// Agents may create and change the repository's `.crewbox/` (its config, teams and
    /// plugins) with the file tools and their commands, and their commits keep those
    /// changes. Default false: read-only. User config only.
    pub agents_write_crewbox: Option<bool>,
    /// A new or changed file larger than this (bytes) is left out of an agent's commit.
    pub max_file_bytes: Option<u64>,
    /// At most this many new or changed files go into one agent's commit.
    pub max_files: Option<u64>,
    /// At most this many bytes of new or changed files go into one agent's commit.
    pub max_total_bytes: Option<u64>,
}

/// The limit keys of `[workspace]` (a repository may only lower them).
pub const LIMIT_KEYS: &[&str] = &["max_file_bytes", "max_files", "max_total_bytes"];

/// `[workspace]` in force.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceSettings {
    /// Whether agents may change `.crewbox/`.
    pub agents_write_crewbox: bool,
    /// What one agent commit may take.
    pub limits: CommitLimits,
}

/// One limit a repository asked for that was above the user's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clamped {
    /// The key under `[workspace]`.
    pub key: &'static str,
    /// What the repository asked.
    pub asked: u64,
    /// What stays.
    pub kept: u64,
}

fn at_least_one(key: &str, origin: &str, n: u64) -> Result<u64, ConfigError> {
    if n == 0 {
        return Err(ConfigError::Value {
            key: format!("workspace.{key}"),
            origin: origin.to_owned(),
            message: "must be at least 1 (a limit of 0 would leave every file out)".into(),
        });
    }
    Ok(n)
}

impl WorkspaceSettings {
    fn slots(&mut self) -> [(&'static str, &mut u64); 3] {
        let l = &mut self.limits;
        [
            ("max_file_bytes", &mut l.max_file_bytes),
            ("max_files", &mut l.max_files),
            ("max_total_bytes", &mut l.max_total_bytes),
        ]
    }

    fn asked(f: &WorkspaceFile) -> [Option<u64>; 3] {
        [f.max_file_bytes, f.max_files, f.max_total_bytes]
    }

    /// The user's own `[workspace]`: everything it sets, checked (`origin` names the
    /// file).
    pub fn apply_user(&mut self, f: &WorkspaceFile, origin: &str) -> Result<(), ConfigError> {
        if let Some(b) = f.agents_write_crewbox {
            self.agents_write_crewbox = b;
        }
        for ((key, have), asked) in self.slots().into_iter().zip(Self::asked(f)) {
            if let Some(n) = asked {
                *have = at_least_one(key, origin, n)?;
            }
        }
        Ok(())
    }

    /// A repository's `[workspace]`: only lower limits are taken; the rest is returned.
    /// The grant is never read from here (the repository parser leaves it out).
    pub fn apply_lower(
        &mut self,
        f: &WorkspaceFile,
        origin: &str,
    ) -> Result<Vec<Clamped>, ConfigError> {
        let mut clamped = Vec::new();
        for ((key, have), asked) in self.slots().into_iter().zip(Self::asked(f)) {
            let Some(n) = asked else { continue };
            let n = at_least_one(key, origin, n)?;
            if n <= *have {
                *have = n;
            } else {
                clamped.push(Clamped {
                    key,
                    asked: n,
                    kept: *have,
                });
            }
        }
        Ok(clamped)
    }

    /// What an agent's commit takes.
    pub fn commit_rules(&self) -> CommitRules {
        CommitRules {
            limits: self.limits,
            crewbox_writable: self.agents_write_crewbox,
        }
    }

    /// What the file tools may change.
    pub fn file_access(&self) -> FileAccess {
        FileAccess {
            crewbox_writable: self.agents_write_crewbox,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_sets_everything_a_repository_only_lowers() {
        let mut s = WorkspaceSettings::default();
        s.apply_user(
            &WorkspaceFile {
                agents_write_crewbox: Some(true),
                max_files: Some(50),
                ..WorkspaceFile::default()
            },
            "user",
        )
        .unwrap();
        assert!(s.agents_write_crewbox && s.limits.max_files == 50);
        let clamped = s
            .apply_lower(
                &WorkspaceFile {
                    max_files: Some(500),
                    max_file_bytes: Some(10),
                    ..WorkspaceFile::default()
                },
                "repo",
            )
            .unwrap();
        assert_eq!(s.limits.max_file_bytes, 10);
        assert_eq!(
            clamped,
            [Clamped {
                key: "max_files",
                asked: 500,
                kept: 50
            }]
        );
        let err = s
            .apply_user(
                &WorkspaceFile {
                    max_total_bytes: Some(0),
                    ..WorkspaceFile::default()
                },
                "user",
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("workspace.max_total_bytes") && err.contains("at least 1"),
            "{err}"
        );
    }
}

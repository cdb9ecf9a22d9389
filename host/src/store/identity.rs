//! Which repository a store belongs to. The first process that opens a store for a
//! repository records the repository's root and root commit; afterwards the store
//! refuses to serve any other repository, so runs, `resume` and worktree pruning can
//! never act on another project's state.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, params};

use super::{StoreError, now_ms};

/// The repository a store is opened for.
pub trait RepoIdentity {
    /// The repository's canonical root.
    fn root(&self) -> &Path;
    /// The first commit of its history (None without commits). May walk the history:
    /// called only when the store records it.
    fn root_commit(&self) -> Option<String>;
    /// Whether the repository holds this commit.
    fn has_commit(&self, id: &str) -> bool;
}

/// What a store records about its repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedRepo {
    /// The canonical root.
    pub root: PathBuf,
    /// The root commit, when the repository had one.
    pub root_commit: Option<String>,
}

fn sql(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::Open {
        path: path.to_owned(),
        detail: format!("cannot check which repository the store belongs to: {e}"),
    }
}

/// The recorded repository, if any.
pub(crate) fn recorded(conn: &Connection, path: &Path) -> Result<Option<RecordedRepo>, StoreError> {
    conn.query_row(
        "SELECT root, root_commit FROM repository WHERE id = 1",
        [],
        |r| {
            // Text for a UTF-8 root (what every store held so far), bytes otherwise.
            let root = match r.get_ref(0)? {
                rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => {
                    crate::paths::path_from_bytes(b)
                }
                other => {
                    return Err(rusqlite::Error::FromSqlConversionFailure(
                        0,
                        other.data_type(),
                        "the repository root is neither text nor bytes".into(),
                    ));
                }
            };
            Ok(RecordedRepo {
                root,
                root_commit: r.get(1)?,
            })
        },
    )
    .optional()
    .map_err(sql(path))
}

/// Records `repo` in a store that has no repository yet, or checks it is the one
/// recorded: the same root, and a repository that holds the recorded root commit.
pub(crate) fn bind(
    conn: &Connection,
    path: &Path,
    repo: &dyn RepoIdentity,
) -> Result<(), StoreError> {
    // The root as it is: a lossy string would make a non-UTF-8 root another one.
    let root = match repo.root().to_str() {
        Some(text) => rusqlite::types::Value::Text(text.to_owned()),
        None => rusqlite::types::Value::Blob(crate::paths::path_bytes(repo.root()).to_vec()),
    };
    match recorded(conn, path)? {
        None => {
            conn.execute(
                "INSERT OR IGNORE INTO repository (id, root, root_commit, recorded_at) \
                 VALUES (1, ?1, ?2, ?3)",
                params![root, repo.root_commit(), now_ms()],
            )
            .map_err(sql(path))?;
            // Another process may have recorded first: check against what won.
            match recorded(conn, path)? {
                Some(rec) => check(&rec, repo, path),
                None => Ok(()),
            }
        }
        Some(rec) => {
            check(&rec, repo, path)?;
            if rec.root_commit.is_none()
                && let Some(commit) = repo.root_commit()
            {
                // The repository got its first commit since: remember it.
                conn.execute(
                    "UPDATE repository SET root_commit = ?1 WHERE id = 1 AND root_commit IS NULL",
                    params![commit],
                )
                .map_err(sql(path))?;
            }
            Ok(())
        }
    }
}

fn check(rec: &RecordedRepo, repo: &dyn RepoIdentity, path: &Path) -> Result<(), StoreError> {
    let same_root = rec.root == repo.root();
    let same_history = rec
        .root_commit
        .as_deref()
        .is_none_or(|c| repo.has_commit(c));
    if same_root && same_history {
        return Ok(());
    }
    if same_root && let Some(commit) = &rec.root_commit {
        return Err(StoreError::HistoryRewritten {
            path: path.to_owned(),
            root: rec.root.clone(),
            commit: commit.clone(),
        });
    }
    Err(StoreError::OtherRepository {
        path: path.to_owned(),
        recorded_root: rec.root.clone(),
        recorded_commit: rec.root_commit.clone(),
        root: repo.root().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Repo {
        root: PathBuf,
        commits: Vec<&'static str>,
    }

    impl RepoIdentity for Repo {
        fn root(&self) -> &Path {
            &self.root
        }
        fn root_commit(&self) -> Option<String> {
            self.commits.first().map(|c| c.to_string())
        }
        fn has_commit(&self, id: &str) -> bool {
            self.commits.contains(&id)
        }
    }

    fn conn() -> Connection {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::migrate(&mut c, Path::new("mem")).unwrap();
        c
    }

    #[test]
    fn first_binding_records_later_ones_must_match() {
        let c = conn();
        let a = Repo {
            root: "/src/a".into(),
            commits: vec!["c0", "c1"],
        };
        bind(&c, Path::new("db"), &a).unwrap();
        bind(&c, Path::new("db"), &a).unwrap();
        assert_eq!(
            recorded(&c, Path::new("db")).unwrap(),
            Some(RecordedRepo {
                root: "/src/a".into(),
                root_commit: Some("c0".into())
            })
        );
        let other = Repo {
            root: "/src/b".into(),
            commits: vec!["c0"],
        };
        let err = bind(&c, Path::new("db"), &other).unwrap_err();
        assert!(matches!(err, StoreError::OtherRepository { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("/src/a") && msg.contains("/src/b"), "{msg}");
        // Same path, different history: another project was put there.
        let replaced = Repo {
            root: "/src/a".into(),
            commits: vec!["x0"],
        };
        let err = bind(&c, Path::new("db"), &replaced).unwrap_err();
        // Named for what it is (probe 18: "belongs to the repository at /src/a, not to
        // /src/a", and advice that did not apply).
        assert!(matches!(err, StoreError::HistoryRewritten { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("c0") && msg.contains("no longer has"), "{msg}");
    }

    #[cfg(unix)]
    #[test]
    fn a_root_that_is_not_utf8_binds_as_its_bytes() {
        use std::os::unix::ffi::OsStrExt;
        let c = conn();
        let root = PathBuf::from(std::ffi::OsStr::from_bytes(b"/src/caf\xe9"));
        let a = Repo {
            root: root.clone(),
            commits: vec!["c0"],
        };
        bind(&c, Path::new("db"), &a).unwrap();
        bind(&c, Path::new("db"), &a).unwrap();
        assert_eq!(recorded(&c, Path::new("db")).unwrap().unwrap().root, root);
        // Its lossy spelling is another path.
        let lossy = Repo {
            root: PathBuf::from(root.to_string_lossy().into_owned()),
            commits: vec!["c0"],
        };
        assert!(bind(&c, Path::new("db"), &lossy).is_err());
    }

    #[test]
    fn a_repository_without_commits_gets_its_root_commit_recorded_later() {
        let c = conn();
        let mut a = Repo {
            root: "/src/a".into(),
            commits: vec![],
        };
        bind(&c, Path::new("db"), &a).unwrap();
        a.commits.push("c0");
        bind(&c, Path::new("db"), &a).unwrap();
        assert_eq!(
            recorded(&c, Path::new("db")).unwrap().unwrap().root_commit,
            Some("c0".into())
        );
    }
}

//! Finding teams: every team file of the user's and the repository's team
//! directories, checked, capped, with the repository's ceiling applied and merged by
//! precedence. One broken file is reported and skipped; it never hides the others.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::file::{Team, TeamError, TeamFiles, TeamSource, load_file, parse_team_with};
use super::limits::{MAX_TEAM_FILES, TeamPolicy};
use super::pack::{PackDir, claude, squad};
use crate::trust::REPO_TEAMS;
use crate::trust::read::{Confined, MAX_FILE_BYTES, ReadError};

/// The teams visible from a repository, and the files that could not be loaded.
#[derive(Debug, Default)]
pub struct Discovered {
    /// Teams by name (sorted), repository over user over built-in.
    pub teams: Vec<Team>,
    /// Files skipped, each with why.
    pub problems: Vec<TeamError>,
    /// Packs that hold no team (an empty roster is a real state), each with why.
    pub notes: Vec<PackNote>,
}

/// Why a pack gave no team.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackNote {
    /// The team it would have been (`squad`, `claude`).
    pub team: String,
    /// Why there is none.
    pub message: String,
}

impl std::fmt::Display for PackNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why [`Discovered::find`] found no team.
#[derive(Debug, thiserror::Error)]
pub enum FindTeamError {
    /// A file meant to define the team could not be loaded.
    #[error("team `{name}` could not be loaded: {problem}")]
    Broken {
        /// The name asked for.
        name: String,
        /// What is wrong with its file.
        problem: String,
    },
    /// No team of that name is defined.
    #[error("{}", unknown_team(name, known))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The teams that are defined.
        known: Vec<String>,
    },
}

fn unknown_team(name: &str, known: &[String]) -> String {
    if known.is_empty() {
        format!("unknown team `{name}`: no teams are defined (add .crewbox/teams/{name}.toml)")
    } else {
        format!("unknown team `{name}` (known: {})", known.join(", "))
    }
}

impl Discovered {
    /// The team called `name` (ignoring case). When there is none, the error says
    /// which teams exist, or that a file meant to define it could not be loaded.
    pub fn find(&self, name: &str) -> Result<&Team, FindTeamError> {
        if let Some(t) = self
            .teams
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
        {
            return Ok(t);
        }
        let broken = self.problems.iter().find(|p| {
            problem_path(p)
                .and_then(|f| f.file_stem())
                .is_some_and(|s| s.to_string_lossy().eq_ignore_ascii_case(name))
        });
        if let Some(p) = broken {
            return Err(FindTeamError::Broken {
                name: name.to_owned(),
                problem: p.to_string(),
            });
        }
        if let Some(n) = self
            .notes
            .iter()
            .find(|n| n.team.eq_ignore_ascii_case(name))
        {
            return Err(FindTeamError::Broken {
                name: name.to_owned(),
                problem: n.to_string(),
            });
        }
        Err(FindTeamError::Unknown {
            name: name.to_owned(),
            known: self.teams.iter().map(|t| t.name.clone()).collect(),
        })
    }
}

fn problem_path(p: &TeamError) -> Option<&Path> {
    match p {
        TeamError::Read { path, .. }
        | TeamError::Parse { path, .. }
        | TeamError::Invalid { path, .. }
        | TeamError::Path { path, .. } => Some(path),
        TeamError::DuplicateTeam { second, .. } => Some(second),
        TeamError::ReadDir { .. } | TeamError::TooManyFiles { .. } => None,
    }
}

/// The user's team directory, `$XDG_CONFIG_HOME/crewbox/teams/`.
pub fn user_team_dir() -> Option<PathBuf> {
    crate::paths::user_config_dir().map(|d| d.join("teams"))
}

/// Every team visible from the repository at `repo` (canonical), in the cascade
/// built-in < user < repo: the user's team files and Claude Code subagents, then the
/// repository's Squad pack, Claude Code subagents and team files (read confined to
/// the repository). At one level a native team file wins over an imported pack of
/// the same name. Every member is limited by `policy`. Blocking: call it from
/// `spawn_blocking`.
pub fn discover(repo: &Path, policy: &TeamPolicy) -> Discovered {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let user = match user_team_dir() {
        Some(dir) => load_user_dir(&dir, &mut problems),
        None => Vec::new(),
    };
    let repo_teams = load_repo_dir(repo, &mut problems);
    let (user_packs, repo_packs) = load_packs(
        repo,
        claude::user_dir().as_deref(),
        &mut problems,
        &mut notes,
    );
    let mut teams = merge_layers([user_packs, user, repo_packs, repo_teams]);
    for t in &mut teams {
        policy.apply(t);
    }
    Discovered {
        teams,
        problems,
        notes,
    }
}

/// The imported packs: (the user's, the repository's). A pack that cannot be read is
/// a problem; one that holds no team a note.
pub fn load_packs(
    repo: &Path,
    user_claude: Option<&Path>,
    problems: &mut Vec<TeamError>,
    notes: &mut Vec<PackNote>,
) -> (Vec<Team>, Vec<Team>) {
    let mut repo_packs = Vec::new();
    let pack_err = |dir: PathBuf, source| TeamError::ReadDir { dir, source };
    let confined = match Confined::new(repo) {
        Ok(c) => Some(c),
        Err(source) => {
            problems.push(pack_err(
                repo.to_owned(),
                ReadError::Io {
                    path: repo.to_owned(),
                    source,
                },
            ));
            None
        }
    };
    let note = |team: &str, message: String| PackNote {
        team: team.into(),
        message,
    };
    if let Some(c) = &confined {
        match squad::find(c) {
            Ok(Some(pack)) => match pack.to_team(repo) {
                Ok(team) => repo_packs.push(team),
                Err(why) => notes.push(note(squad::TEAM_NAME, why)),
            },
            Ok(None) => {}
            Err(e) => notes.push(note(
                squad::TEAM_NAME,
                format!("no squad team: {}", squad::describe(&e)),
            )),
        }
    }
    let user_layer = user_claude.and_then(|dir| match PackDir::at(dir) {
        Ok(Some(d)) => Some((
            claude::read_layer(&d, Path::new("~/.claude/agents"), TeamSource::User),
            dir.to_owned(),
        )),
        Ok(None) => None,
        Err(e) => {
            problems.push(pack_err(dir.to_owned(), e));
            None
        }
    });
    let repo_layer =
        confined
            .as_ref()
            .and_then(|c| match PackDir::in_repo(c, Path::new(claude::REPO_DIR)) {
                Ok(Some(d)) => Some((
                    claude::read_layer(&d, Path::new(claude::REPO_DIR), TeamSource::Repo),
                    repo.join(claude::REPO_DIR),
                )),
                Ok(None) => None,
                Err(e) => {
                    problems.push(pack_err(repo.join(claude::REPO_DIR), e));
                    None
                }
            });
    let mut user_packs = Vec::new();
    match claude::team(user_layer, repo_layer) {
        Ok(Some(team)) if matches!(team.source, TeamSource::User(_)) => user_packs.push(team),
        Ok(Some(team)) => repo_packs.push(team),
        Ok(None) => {}
        Err(why) => notes.push(note(claude::TEAM_NAME, why)),
    }
    (user_packs, repo_packs)
}

/// Loads the `*.toml` team files of the user's directory `dir` (sorted by name; a
/// missing directory holds none). Blocking.
pub fn load_user_dir(dir: &Path, problems: &mut Vec<TeamError>) -> Vec<Team> {
    let paths = match list_toml(dir, problems) {
        Ok(p) => p,
        Err(e) => {
            if !e.is_not_found() {
                problems.push(TeamError::ReadDir {
                    dir: dir.to_owned(),
                    source: e,
                });
            }
            return Vec::new();
        }
    };
    let loaded = paths
        .into_iter()
        .map(|path| load_file(&path, TeamSource::User(path.clone())));
    dedupe(loaded, problems)
}

/// Loads the repository's `.crewbox/teams/*.toml`, every file and every path it names
/// read confined to the repository. Blocking.
pub fn load_repo_dir(repo: &Path, problems: &mut Vec<TeamError>) -> Vec<Team> {
    let shown = repo.join(REPO_TEAMS);
    let dir_err = |source| TeamError::ReadDir {
        dir: shown.clone(),
        source,
    };
    let confined = match Confined::new(repo) {
        Ok(c) => c,
        Err(source) => {
            problems.push(dir_err(ReadError::Io {
                path: repo.to_owned(),
                source,
            }));
            return Vec::new();
        }
    };
    let dir = match confined.dir(Path::new(REPO_TEAMS)) {
        Ok(Some(d)) => d,
        Ok(None) => return Vec::new(),
        Err(e) => {
            problems.push(dir_err(e));
            return Vec::new();
        }
    };
    let paths = match list_toml(&dir, problems) {
        Ok(p) => p,
        Err(e) => {
            problems.push(dir_err(e));
            return Vec::new();
        }
    };
    let loaded = paths.into_iter().map(|path| {
        // Named by where it sits in the repository, opened beneath the root.
        let rel = Path::new(REPO_TEAMS).join(path.file_name().unwrap_or_default());
        let shown = repo.join(&rel);
        let text = confined
            .read_text(&rel, MAX_FILE_BYTES)
            .map_err(|source| TeamError::Read {
                path: shown.clone(),
                source,
            })?;
        parse_team_with(
            &text,
            &shown,
            TeamSource::Repo(shown.clone()),
            TeamFiles::Confined(&confined),
        )
    });
    dedupe(loaded, problems)
}

/// The `*.toml` entries of `dir`, sorted; past [`MAX_TEAM_FILES`] the rest are
/// dropped and reported.
fn list_toml(dir: &Path, problems: &mut Vec<TeamError>) -> Result<Vec<PathBuf>, ReadError> {
    let io = |source| ReadError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            paths.push(path);
        }
    }
    paths.sort();
    if paths.len() > MAX_TEAM_FILES {
        problems.push(TeamError::TooManyFiles {
            dir: dir.to_owned(),
            found: paths.len(),
            kept: MAX_TEAM_FILES,
        });
        paths.truncate(MAX_TEAM_FILES);
    }
    Ok(paths)
}

/// Keeps the loaded teams, moving failures and a second file of the same name (in
/// one directory) to `problems`.
fn dedupe(
    loaded: impl Iterator<Item = Result<Team, TeamError>>,
    problems: &mut Vec<TeamError>,
) -> Vec<Team> {
    let mut teams: Vec<Team> = Vec::new();
    let mut by_name: HashMap<String, PathBuf> = HashMap::new();
    for result in loaded {
        let team = match result {
            Ok(t) => t,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let path = team
            .source
            .path()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        match by_name.get(&team.name.to_ascii_lowercase()) {
            Some(first) => problems.push(TeamError::DuplicateTeam {
                name: team.name,
                first: first.clone(),
                second: path,
            }),
            None => {
                by_name.insert(team.name.to_ascii_lowercase(), path);
                teams.push(team);
            }
        }
    }
    teams
}

/// Merges layers by precedence (built-in < user < repo): a team from a higher source
/// replaces one with the same name (ignoring case) and records it in `shadows`.
/// Sorted by name.
pub fn merge_layers(layers: impl IntoIterator<Item = Vec<Team>>) -> Vec<Team> {
    let mut merged: HashMap<String, Team> = HashMap::new();
    for mut team in layers.into_iter().flatten() {
        let key = team.name.to_ascii_lowercase();
        match merged.remove(&key) {
            None => {
                merged.insert(key, team);
            }
            Some(mut existing) if existing.source.rank() > team.source.rank() => {
                existing.shadows.push(team.source);
                existing
                    .shadows
                    .sort_by_key(|s| std::cmp::Reverse(s.rank()));
                merged.insert(key, existing);
            }
            Some(existing) => {
                if existing.format.is_pack() && !team.format.is_pack() {
                    team.warnings.push(format!(
                        "shadows the imported {} pack at {} (this native team is used; remove it to use the pack)",
                        existing.format,
                        existing.source.path().unwrap_or(Path::new("")).display()
                    ));
                }
                team.shadows.push(existing.source);
                team.shadows.extend(existing.shadows);
                team.shadows.sort_by_key(|s| std::cmp::Reverse(s.rank()));
                merged.insert(key, team);
            }
        }
    }
    let mut teams: Vec<Team> = merged.into_values().collect();
    teams.sort_by(|a, b| a.name.cmp(&b.name));
    teams
}

#[cfg(test)]
mod tests {
    use super::super::file::{Access, parse_team};
    use super::*;
    use crate::trust::Trust;
    use crate::vocab::Mode;
    use pretty_assertions::assert_eq;
    use std::fs;

    const MINIMAL: &str = "mode = \"broadcast\"\n[[members]]\nname = \"alice\"\n";

    fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    fn repo() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        fs::create_dir_all(root.join(REPO_TEAMS)).unwrap();
        let root = root.canonicalize().unwrap();
        (tmp, root)
    }

    fn trusted() -> TeamPolicy {
        TeamPolicy {
            trust: Trust::Trusted,
            providers: vec!["anthropic".into()],
            ..TeamPolicy::default()
        }
    }

    #[test]
    fn example_file_loads() {
        let (_tmp, root) = repo();
        let teams = root.join(REPO_TEAMS);
        let path = write(&teams, "review-crew.toml", include_str!("EXAMPLE.toml"));
        write(
            &teams,
            "charters/security.md",
            "# Security\n\nLooks for injection bugs.\n",
        );
        let mut problems = Vec::new();
        let loaded = load_repo_dir(&root, &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(loaded.len(), 1);
        let team = &loaded[0];
        assert_eq!(team.name, "review-crew");
        assert_eq!(team.mode, Mode::Reflect);
        assert_eq!(team.source, TeamSource::Repo(path));
        let names: Vec<&str> = team.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["architect", "implementer", "security"]);
        assert_eq!(team.member("IMPLEMENTER").unwrap().access, Access::Full);
        let security = team.member("security").unwrap();
        assert_eq!(
            security.summary().as_deref(),
            Some("Looks for injection bugs.")
        );
        assert_eq!(
            security.charter_file,
            Some(PathBuf::from("charters/security.md"))
        );
        assert!(team.orchestrator.as_ref().unwrap().instructions.is_some());
        assert!(team.evaluator.is_some());
    }

    #[test]
    fn a_broken_file_is_reported_and_skipped_never_hiding_the_others() {
        let (_tmp, root) = repo();
        let teams = root.join(REPO_TEAMS);
        write(&teams, "a.toml", MINIMAL);
        write(&teams, "notes.txt", "ignored");
        let bad = write(
            &teams,
            "b.toml",
            "mode = \"broadcast\"\n[[members]]\nname = \"x\"\ncharter_file = \"missing.md\"\n",
        );
        write(
            &teams,
            "c.toml",
            "mode = \"broadcast\"\n[[members]]\nname = \"y\"\n",
        );
        let found = discover_in(&root, &trusted());
        let names: Vec<&str> = found.teams.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(found.problems.len(), 1);
        match &found.problems[0] {
            TeamError::Path { path, key, source } => {
                assert_eq!(path, &bad);
                assert_eq!(key, "members.x.charter_file");
                assert!(source.is_not_found(), "{source}");
            }
            other => panic!("expected a charter error, got {other:?}"),
        }
        let err = found.find("b").unwrap_err().to_string();
        assert!(
            err.contains("could not be loaded") && err.contains("missing.md"),
            "{err}"
        );
        assert!(
            found
                .find("zzz")
                .unwrap_err()
                .to_string()
                .contains("known: a, c")
        );
    }

    fn discover_in(root: &Path, policy: &TeamPolicy) -> Discovered {
        let mut problems = Vec::new();
        let mut teams = load_repo_dir(root, &mut problems);
        for t in &mut teams {
            policy.apply(t);
        }
        Discovered {
            teams: merge_layers([teams]),
            problems,
            notes: Vec::new(),
        }
    }

    #[test]
    fn same_name_in_two_files_keeps_the_first() {
        let (_tmp, root) = repo();
        write(&root.join(REPO_TEAMS), "OPS.toml", MINIMAL);
        write(&root.join(REPO_TEAMS), "ops.toml", MINIMAL);
        let found = discover_in(&root, &trusted());
        assert_eq!(found.teams.len(), 1);
        assert!(matches!(
            found.problems[..],
            [TeamError::DuplicateTeam { .. }]
        ));
    }

    #[test]
    fn repository_paths_are_confined_and_reads_capped() {
        let (tmp, root) = repo();
        let teams = root.join(REPO_TEAMS);
        fs::write(tmp.path().join("id_ed25519"), "CANARY-KEY").unwrap();
        write(
            &teams,
            "dots.toml",
            "mode = \"broadcast\"\n[[members]]\nname = \"x\"\ncharter_file = \"../../../id_ed25519\"\n",
        );
        #[cfg(unix)]
        std::os::unix::fs::symlink(tmp.path().join("id_ed25519"), teams.join("link.md")).unwrap();
        write(
            &teams,
            "link.toml",
            "mode = \"broadcast\"\n[[members]]\nname = \"x\"\ncharter_file = \"link.md\"\n",
        );
        write(
            &teams,
            "big.toml",
            &format!(
                "mode = \"broadcast\"\nshared_context = \"{}\"\n[[members]]\nname = \"x\"\ncharter_file = \"big.md\"\n",
                "c".repeat(9_000)
            ),
        );
        write(&teams, "big.md", &"é".repeat(300_000));
        let mut many = String::from("mode = \"broadcast\"\n");
        for i in 0..300 {
            many.push_str(&format!(
                "[[members]]\nname = \"m{i}\"\naccess = \"full\"\n"
            ));
        }
        write(&teams, "many.toml", &many);
        let found = discover_in(&root, &trusted());
        let msgs: Vec<String> = found.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        for m in &msgs {
            assert!(
                m.contains("members.x.charter_file") && m.contains("outside the repository"),
                "{m}"
            );
            assert!(!m.contains("CANARY"), "{m}");
        }
        let big = found.find("big").unwrap();
        let charter = big.members[0].charter.as_deref().unwrap();
        assert_eq!(charter.chars().count(), 4_000 + "\n[truncated]".len());
        assert!(charter.ends_with("[truncated]"));
        assert!(
            big.shared_context
                .as_deref()
                .unwrap()
                .ends_with("[truncated]")
        );
        assert_eq!(big.warnings.len(), 2, "{:?}", big.warnings);
        let many = found.find("many").unwrap();
        assert_eq!(many.members.len(), 64);
        assert!(
            many.warnings[0].contains("300 members"),
            "{:?}",
            many.warnings
        );
        assert!(many.members.iter().all(|m| m.access == Access::Full));
    }

    #[test]
    fn untrusted_repository_teams_are_read_only_and_choose_nothing() {
        let (_tmp, root) = repo();
        write(
            &root.join(REPO_TEAMS),
            "ops.toml",
            "mode = \"orchestrate\"\nvalidators = [\"no-secrets\"]\n[orchestrator]\nprovider = \"anthropic\"\n\
             [[members]]\nname = \"a\"\naccess = \"full\"\nprovider = \"anthropic\"\nmodel = \"m\"\n",
        );
        let found = discover_in(&root, &TeamPolicy::default());
        let t = found.find("ops").unwrap();
        let m = &t.members[0];
        assert_eq!(
            (m.access, m.requested_access),
            (Access::ReadOnly, Access::Full)
        );
        assert_eq!((m.provider.as_deref(), m.model.as_deref()), (None, None));
        assert_eq!(t.orchestrator.as_ref().unwrap().provider, None);
        assert!(t.validators.is_empty());
        assert_eq!(t.warnings.len(), 4, "{:?}", t.warnings);
        // Trusted: kept, but only the user's providers.
        let found = discover_in(
            &root,
            &TeamPolicy {
                trust: Trust::Trusted,
                providers: vec!["mine".into()],
                ..TeamPolicy::default()
            },
        );
        let t = found.find("ops").unwrap();
        assert_eq!(t.members[0].access, Access::Full);
        assert_eq!(t.members[0].provider, None);
        assert_eq!(t.members[0].model.as_deref(), Some("m"));
        assert_eq!(t.validators, ["no-secrets"]);
    }

    #[test]
    fn higher_sources_override_by_name_and_record_what_they_shadow() {
        let team = |name: &str, source: TeamSource| Team {
            name: name.into(),
            ..parse_team(MINIMAL, Path::new("x.toml"), source).unwrap()
        };
        let merged = merge_layers([
            vec![
                team("review", TeamSource::Builtin),
                team("docs", TeamSource::Builtin),
            ],
            vec![team("Review", TeamSource::User("u/Review.toml".into()))],
            vec![team("review", TeamSource::Repo("r/review.toml".into()))],
        ]);
        let got: Vec<(&str, &TeamSource)> = merged
            .iter()
            .map(|t| (t.name.as_str(), &t.source))
            .collect();
        assert_eq!(
            got,
            [
                ("docs", &TeamSource::Builtin),
                ("review", &TeamSource::Repo("r/review.toml".into())),
            ]
        );
        assert_eq!(
            merged[1].shadows,
            [
                TeamSource::User("u/Review.toml".into()),
                TeamSource::Builtin
            ]
        );
        // Order of layers does not matter: precedence comes from the source.
        let reversed = merge_layers([
            vec![team("review", TeamSource::Repo("r/review.toml".into()))],
            vec![team("review", TeamSource::Builtin)],
        ]);
        assert_eq!(reversed[0].source, TeamSource::Repo("r/review.toml".into()));
        assert_eq!(reversed[0].shadows, [TeamSource::Builtin]);
    }

    #[test]
    fn user_directories_load_and_report() {
        let tmp = tempfile::tempdir().unwrap();
        let mut problems = Vec::new();
        assert!(load_user_dir(&tmp.path().join("absent"), &mut problems).is_empty());
        assert!(problems.is_empty());
        write(tmp.path(), "a.toml", MINIMAL);
        write(tmp.path(), "b.toml", "mode = [");
        let teams = load_user_dir(tmp.path(), &mut problems);
        assert_eq!(teams.len(), 1);
        assert_eq!(problems.len(), 1);
    }
}

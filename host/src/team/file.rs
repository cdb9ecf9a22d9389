//! Team files: `.crewbox/teams/NAME.toml`, parsed, checked and resolved.
//!
//! The format is documented by example in `EXAMPLE.toml` beside this file.
//!
//! # Rules
//! - Unknown keys are errors; messages carry the file path and toml's line/column text.
//! - `name` may be left out; it then is the file stem. When given it must equal the
//!   stem exactly, so a team is always found at `teams/<name>.toml` and a writer
//!   knows which file it owns.
//! - Team and member names use `A-Z a-z 0-9 . _ -`, 1 to 64 characters; member names
//!   are unique ignoring ASCII case; a team has at least one member.
//! - A member has `charter` (inline Markdown), `charter_file` (a relative path, read
//!   from the team file's directory), or neither; not both. Absolute paths are refused.
//! - `access` is `read-only` (the default) or `full`.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::vocab::Mode;

/// The longest team or member name, in characters.
pub const MAX_NAME_LEN: usize = 64;

pub use crate::vocab::Access;

/// The modes that run a team, as a team file names them.
const TEAM_MODES: &[&str] = &["broadcast", "sequential", "orchestrate", "reflect"];

/// Reads a team file's `mode`: one of the modes that run a team.
fn team_mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Mode, D::Error> {
    let name = String::deserialize(d)?;
    Mode::parse(&name)
        .filter(|m| m.runs_a_team())
        .ok_or_else(|| serde::de::Error::unknown_variant(&name, TEAM_MODES))
}

/// Where a team definition came from; later sources override earlier ones by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TeamSource {
    /// Shipped with crewbox.
    Builtin,
    /// `$XDG_CONFIG_HOME/crewbox/teams/`, this file.
    User(PathBuf),
    /// The repository's `.crewbox/teams/`, this file.
    Repo(PathBuf),
}

impl TeamSource {
    /// Precedence rank: built-in < user < repo.
    fn rank(&self) -> u8 {
        match self {
            Self::Builtin => 0,
            Self::User(_) => 1,
            Self::Repo(_) => 2,
        }
    }
}

/// A checked team with charters resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct Team {
    /// Unique name (the file stem).
    pub name: String,
    /// How it runs.
    pub mode: Mode,
    /// Text every member sees.
    pub shared_context: Option<String>,
    /// Hints for the orchestrator on who should do what.
    pub routing: Option<String>,
    /// Overrides for the planning and synthesising agent.
    pub orchestrator: Option<Orchestrator>,
    /// Overrides for the reflect-mode evaluator.
    pub evaluator: Option<Evaluator>,
    /// At least one member, in file order.
    pub members: Vec<Member>,
    /// Validators (`NAME[=CRITERION]`) run after every writing member completes.
    pub validators: Vec<String>,
    /// How broadcast members' results are joined: all at once, or in waves.
    pub delivery: crate::batch::GroupJoinConfig,
    /// How long an orchestrate/reflect worker may run before it counts as timed out.
    pub worker_timeout: std::time::Duration,
    /// Where it was defined.
    pub source: TeamSource,
}

/// How long a worker may run unless the team file says otherwise (`worker_timeout_s`).
pub const DEFAULT_WORKER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

impl Team {
    /// The member with this name, ignoring ASCII case.
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.name.eq_ignore_ascii_case(name))
    }
}

/// The orchestrator's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Orchestrator {
    /// Provider name from the config; the run's default when absent.
    pub provider: Option<String>,
    /// Model name; the provider's default when absent.
    pub model: Option<String>,
    /// Extra instructions added to the planning and synthesis prompts.
    pub instructions: Option<String>,
}

/// The evaluator's settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evaluator {
    /// Provider name from the config; the orchestrator's when absent.
    pub provider: Option<String>,
    /// Model name; the provider's default when absent.
    pub model: Option<String>,
    /// Score (0..=1) at which the reflect loop's goal is met (default 0.9).
    pub threshold: Option<f64>,
}

/// A team member with its charter text resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Unique within the team, ignoring ASCII case.
    pub name: String,
    /// Short role label (e.g. "reviewer"); the name when not given.
    pub role: String,
    /// The charter text (inline or read from `charter_file`).
    pub charter: Option<String>,
    /// The file the charter was read from, as written in the team file.
    pub charter_file: Option<PathBuf>,
    /// What the member may do.
    pub access: Access,
    /// Provider name; the run's default when absent.
    pub provider: Option<String>,
    /// Model name; the provider's default when absent.
    pub model: Option<String>,
    /// Validators for this member, in addition to the team's.
    pub validators: Vec<String>,
}

impl Member {
    /// A one-line description: the charter's first non-heading line, at most 160 chars.
    pub fn summary(&self) -> Option<String> {
        let line = self
            .charter
            .as_deref()?
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))?;
        Some(if line.chars().count() > 160 {
            let cut: String = line.chars().take(159).collect();
            format!("{cut}…")
        } else {
            line.to_owned()
        })
    }
}

/// The file as written, before checks.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTeam {
    name: Option<String>,
    #[serde(deserialize_with = "team_mode")]
    mode: Mode,
    shared_context: Option<String>,
    routing: Option<String>,
    orchestrator: Option<Orchestrator>,
    evaluator: Option<Evaluator>,
    #[serde(default)]
    members: Vec<RawMember>,
    #[serde(default)]
    validators: Vec<String>,
    #[serde(default)]
    delivery: crate::batch::DeliveryMode,
    first_wave_s: Option<u64>,
    wave_every_s: Option<u64>,
    worker_timeout_s: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMember {
    name: String,
    role: Option<String>,
    charter: Option<String>,
    charter_file: Option<PathBuf>,
    #[serde(default)]
    access: Access,
    provider: Option<String>,
    model: Option<String>,
    #[serde(default)]
    validators: Vec<String>,
}

/// What is wrong with a team definition.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TeamProblem {
    /// `[evaluator] threshold` outside 0..=1.
    #[error("[evaluator] threshold = {value} is out of range: use a score from 0 to 1 (e.g. 0.9)")]
    Threshold {
        /// The value as written.
        value: f64,
    },
    /// `[[members]]` is missing or empty.
    #[error("a team needs at least one [[members]] entry")]
    NoMembers,
    /// Two members share a name (ignoring case).
    #[error("member name `{name}` is used twice (names are compared ignoring case)")]
    DuplicateMember {
        /// The second occurrence.
        name: String,
    },
    /// A team or member name with bad characters or length.
    #[error("invalid {what} name `{name}`: use 1 to 64 of A-Z a-z 0-9 . _ -")]
    InvalidName {
        /// "team" or "member".
        what: &'static str,
        /// The name as written.
        name: String,
    },
    /// `name` differs from the file stem.
    #[error(
        "`name = \"{name}\"` does not match the file name `{stem}.toml`; rename one or drop `name`"
    )]
    NameMismatch {
        /// The `name` key.
        name: String,
        /// The file stem.
        stem: String,
    },
    /// Both `charter` and `charter_file` on one member.
    #[error("member `{member}` has both `charter` and `charter_file`; keep one")]
    CharterAndFile {
        /// The member.
        member: String,
    },
    /// `charter_file` is absolute.
    #[error("member `{member}`: charter_file `{path}` must be relative to the team file")]
    AbsoluteCharterFile {
        /// The member.
        member: String,
        /// The path as written.
        path: PathBuf,
    },
}

/// Why teams could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    /// The teams directory could not be listed.
    #[error("cannot list team directory {}: {source}", dir.display())]
    ReadDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// A team file could not be read.
    #[error("cannot read team file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The TOML is malformed or has unknown or wrongly typed keys.
    #[error("team file {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// toml's message, with line, column and key.
        message: String,
    },
    /// The TOML is well formed but breaks a rule.
    #[error("team file {}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The rule broken.
        problem: TeamProblem,
    },
    /// A `charter_file` could not be read.
    #[error("team file {}: member `{member}`: cannot read charter_file {}: {source}", path.display(), charter.display())]
    Charter {
        /// The team file.
        path: PathBuf,
        /// The member.
        member: String,
        /// The resolved charter path.
        charter: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// Two files in one directory define the same team name (ignoring case).
    #[error("team `{name}` is defined twice: {} and {}", first.display(), second.display())]
    DuplicateTeam {
        /// The name.
        name: String,
        /// The first file.
        first: PathBuf,
        /// The second file.
        second: PathBuf,
    },
}

/// Checks a team or member name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Parses and checks one team file's text; `path` names the file in errors, gives
/// the default name (its stem) and the directory `charter_file` is read from.
pub fn parse_team(text: &str, path: &Path, source: TeamSource) -> Result<Team, TeamError> {
    let invalid = |problem| TeamError::Invalid {
        path: path.to_owned(),
        problem,
    };
    let raw: RawTeam = toml::from_str(text).map_err(|err| TeamError::Parse {
        path: path.to_owned(),
        message: err.to_string().trim_end().to_owned(),
    })?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match raw.name {
        Some(name) if name != stem => {
            return Err(invalid(TeamProblem::NameMismatch { name, stem }));
        }
        Some(name) => name,
        None => stem,
    };
    if !valid_name(&name) {
        return Err(invalid(TeamProblem::InvalidName { what: "team", name }));
    }
    if raw.members.is_empty() {
        return Err(invalid(TeamProblem::NoMembers));
    }
    if let Some(value) = raw.evaluator.as_ref().and_then(|e| e.threshold)
        && !(0.0..=1.0).contains(&value)
    {
        return Err(invalid(TeamProblem::Threshold { value }));
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut seen: Vec<String> = Vec::new();
    let mut members = Vec::with_capacity(raw.members.len());
    for m in raw.members {
        if !valid_name(&m.name) {
            return Err(invalid(TeamProblem::InvalidName {
                what: "member",
                name: m.name,
            }));
        }
        let folded = m.name.to_ascii_lowercase();
        if seen.contains(&folded) {
            return Err(invalid(TeamProblem::DuplicateMember { name: m.name }));
        }
        seen.push(folded);
        let charter = match (m.charter, &m.charter_file) {
            (Some(_), Some(_)) => {
                return Err(invalid(TeamProblem::CharterAndFile { member: m.name }));
            }
            (Some(text), None) => Some(text),
            (None, Some(file)) if file.is_absolute() => {
                return Err(invalid(TeamProblem::AbsoluteCharterFile {
                    member: m.name,
                    path: file.clone(),
                }));
            }
            (None, Some(file)) => {
                let full = dir.join(file);
                let text = fs::read_to_string(&full).map_err(|source| TeamError::Charter {
                    path: path.to_owned(),
                    member: m.name.clone(),
                    charter: full.clone(),
                    source,
                })?;
                Some(text)
            }
            (None, None) => None,
        };
        members.push(Member {
            role: m.role.unwrap_or_else(|| m.name.clone()),
            name: m.name,
            charter,
            charter_file: m.charter_file,
            access: m.access,
            provider: m.provider,
            model: m.model,
            validators: m.validators,
        });
    }
    Ok(Team {
        name,
        mode: raw.mode,
        shared_context: raw.shared_context,
        routing: raw.routing,
        orchestrator: raw.orchestrator,
        evaluator: raw.evaluator,
        members,
        validators: raw.validators,
        worker_timeout: raw
            .worker_timeout_s
            .map_or(DEFAULT_WORKER_TIMEOUT, std::time::Duration::from_secs),
        delivery: crate::batch::GroupJoinConfig {
            mode: raw.delivery,
            waves: crate::batch::WaveConfig {
                first: raw.first_wave_s.map_or(
                    crate::batch::WaveConfig::default().first,
                    std::time::Duration::from_secs,
                ),
                every: raw.wave_every_s.map_or(
                    crate::batch::WaveConfig::default().every,
                    std::time::Duration::from_secs,
                ),
            },
        },
        source,
    })
}

/// Reads and checks one team file.
pub fn load_file(path: &Path, source: TeamSource) -> Result<Team, TeamError> {
    let text = fs::read_to_string(path).map_err(|source| TeamError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_team(&text, path, source)
}

/// Loads every `*.toml` in `dir` (sorted by file name), tagging each with
/// `source(path)`, e.g. `load_dir(dir, TeamSource::Repo)`. A missing directory
/// holds no teams. Blocking: call it from `spawn_blocking`.
pub fn load_dir(dir: &Path, source: fn(PathBuf) -> TeamSource) -> Result<Vec<Team>, TeamError> {
    let read_dir_err = |source| TeamError::ReadDir {
        dir: dir.to_owned(),
        source,
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(read_dir_err(err)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(read_dir_err)?.path();
        if path.extension().is_some_and(|e| e == "toml") && path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    let mut teams: Vec<Team> = Vec::with_capacity(paths.len());
    let mut by_name: HashMap<String, PathBuf> = HashMap::new();
    for path in paths {
        let team = load_file(&path, source(path.clone()))?;
        if let Some(first) = by_name.insert(team.name.to_ascii_lowercase(), path.clone()) {
            return Err(TeamError::DuplicateTeam {
                name: team.name,
                first,
                second: path,
            });
        }
        teams.push(team);
    }
    Ok(teams)
}

/// Merges layers by precedence (built-in < user < repo): a team from a higher
/// source replaces one with the same name (ignoring case). Sorted by name.
pub fn merge_layers(layers: impl IntoIterator<Item = Vec<Team>>) -> Vec<Team> {
    let mut merged: HashMap<String, Team> = HashMap::new();
    for team in layers.into_iter().flatten() {
        let key = team.name.to_ascii_lowercase();
        match merged.get(&key) {
            Some(existing) if existing.source.rank() > team.source.rank() => {}
            _ => {
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
    use super::*;
    use pretty_assertions::assert_eq;

    const MINIMAL: &str = r#"
mode = "broadcast"
[[members]]
name = "alice"
"#;

    fn parse(text: &str) -> Result<Team, TeamError> {
        parse_team(text, Path::new("teams/demo.toml"), TeamSource::Builtin)
    }

    fn problem(text: &str) -> TeamProblem {
        match parse(text) {
            Err(TeamError::Invalid { problem, .. }) => problem,
            other => panic!("expected a rule error, got {other:?}"),
        }
    }

    #[test]
    fn minimal_team_gets_defaults() {
        let team = parse(MINIMAL).unwrap();
        assert_eq!(
            team,
            Team {
                name: "demo".into(),
                mode: Mode::Broadcast,
                shared_context: None,
                routing: None,
                orchestrator: None,
                evaluator: None,
                members: vec![Member {
                    name: "alice".into(),
                    role: "alice".into(),
                    charter: None,
                    charter_file: None,
                    access: Access::ReadOnly,
                    provider: None,
                    model: None,
                    validators: Vec::new(),
                }],
                validators: Vec::new(),
                delivery: Default::default(),
                worker_timeout: DEFAULT_WORKER_TIMEOUT,
                source: TeamSource::Builtin,
            }
        );
        assert_eq!(team.mode, Mode::Broadcast);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let err = parse("mode = \"broadcast\"\ncolour = \"red\"\n[[members]]\nname = \"a\"\n")
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("teams/demo.toml"), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
        assert!(msg.contains("colour"), "{msg}");
    }

    #[test]
    fn unknown_member_key_and_bad_values_are_parse_errors() {
        let err = parse("mode = \"broadcast\"\n[[members]]\nname = \"a\"\nrank = 1\n").unwrap_err();
        assert!(err.to_string().contains("rank"), "{err}");
        let err = parse("mode = \"chaos\"\n[[members]]\nname = \"a\"\n").unwrap_err();
        assert!(err.to_string().contains("chaos"), "{err}");
        let err = parse("mode = \"broadcast\"\n[[members]]\nname = \"a\"\naccess = \"root\"\n")
            .unwrap_err();
        assert!(err.to_string().contains("root"), "{err}");
        let err = parse(
            "mode = \"reflect\"\n[orchestrator]\ntemperature = 1\n[[members]]\nname = \"a\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("temperature"), "{err}");
        assert!(
            matches!(
                parse("[[members]]\nname = \"a\"\n"),
                Err(TeamError::Parse { .. })
            ),
            "mode is required"
        );
    }

    #[test]
    fn rules() {
        assert_eq!(problem("mode = \"broadcast\"\n"), TeamProblem::NoMembers);
        assert_eq!(
            problem(
                "mode = \"broadcast\"\n[[members]]\nname = \"Bob\"\n[[members]]\nname = \"bob\"\n"
            ),
            TeamProblem::DuplicateMember { name: "bob".into() }
        );
        assert_eq!(
            problem("mode = \"broadcast\"\n[[members]]\nname = \"bad name\"\n"),
            TeamProblem::InvalidName {
                what: "member",
                name: "bad name".into()
            }
        );
        assert_eq!(
            problem("name = \"other\"\nmode = \"broadcast\"\n[[members]]\nname = \"a\"\n"),
            TeamProblem::NameMismatch {
                name: "other".into(),
                stem: "demo".into()
            }
        );
        assert_eq!(
            problem(
                "mode = \"broadcast\"\n[[members]]\nname = \"a\"\ncharter = \"x\"\ncharter_file = \"a.md\"\n"
            ),
            TeamProblem::CharterAndFile { member: "a".into() }
        );
        assert_eq!(
            problem(
                "mode = \"broadcast\"\n[[members]]\nname = \"a\"\ncharter_file = \"/etc/passwd\"\n"
            ),
            TeamProblem::AbsoluteCharterFile {
                member: "a".into(),
                path: "/etc/passwd".into()
            }
        );
        assert!(
            parse("name = \"demo\"\nmode = \"broadcast\"\n[[members]]\nname = \"a\"\n").is_ok()
        );
        let bad_stem = parse_team(MINIMAL, Path::new("my team.toml"), TeamSource::Builtin);
        assert!(matches!(
            bad_stem,
            Err(TeamError::Invalid {
                problem: TeamProblem::InvalidName { what: "team", .. },
                ..
            })
        ));
    }

    #[test]
    fn summary_skips_headings_and_truncates() {
        let mut member = parse(MINIMAL).unwrap().members.remove(0);
        assert_eq!(member.summary(), None);
        member.charter = Some("# Reviewer\n\nReads diffs.\nMore.".into());
        assert_eq!(member.summary().as_deref(), Some("Reads diffs."));
        member.charter = Some("x".repeat(300));
        assert_eq!(member.summary().unwrap().chars().count(), 160);
    }

    fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn example_file_loads() {
        let tmp = tempfile::tempdir().unwrap();
        let teams = tmp.path().join(".crewbox/teams");
        let path = write(&teams, "review-crew.toml", include_str!("EXAMPLE.toml"));
        write(
            &teams,
            "charters/security.md",
            "# Security\n\nLooks for injection bugs.\n",
        );
        let loaded = load_dir(&teams, TeamSource::Repo).unwrap();
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
    fn load_dir_reports_the_failing_file_and_missing_charters() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(
            load_dir(&tmp.path().join("absent"), TeamSource::Repo)
                .unwrap()
                .is_empty()
        );
        write(tmp.path(), "a.toml", MINIMAL);
        write(tmp.path(), "notes.txt", "ignored");
        let bad = write(
            tmp.path(),
            "b.toml",
            "mode = \"broadcast\"\n[[members]]\nname = \"x\"\ncharter_file = \"missing.md\"\n",
        );
        match load_dir(tmp.path(), TeamSource::User) {
            Err(TeamError::Charter {
                path,
                member,
                charter,
                ..
            }) => {
                assert_eq!(path, bad);
                assert_eq!(member, "x");
                assert_eq!(charter, tmp.path().join("missing.md"));
            }
            other => panic!("expected a charter error, got {other:?}"),
        }
        fs::remove_file(&bad).unwrap();
        let teams = load_dir(tmp.path(), TeamSource::User).unwrap();
        assert_eq!(
            teams.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
    }

    #[test]
    fn same_name_in_two_files_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "ops.toml", MINIMAL);
        write(tmp.path(), "OPS.toml", MINIMAL);
        let err = load_dir(tmp.path(), TeamSource::Repo).unwrap_err();
        assert!(matches!(err, TeamError::DuplicateTeam { .. }), "{err}");
    }

    #[test]
    fn higher_sources_override_by_name() {
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
        // Order of layers does not matter: precedence comes from the source.
        let reversed = merge_layers([
            vec![team("review", TeamSource::Repo("r/review.toml".into()))],
            vec![team("review", TeamSource::Builtin)],
        ]);
        assert_eq!(reversed[0].source, TeamSource::Repo("r/review.toml".into()));
    }
}

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
//!   from the team file's directory), or neither; not both. Absolute paths are refused;
//!   a repository's charter files must stay inside the repository (see
//!   [`crate::trust::read`]) and are read bounded, regular files only.
//! - `access` is `read-only` (the default) or `full`; what a member finally gets also
//!   depends on where the team came from (see [`super::limits`]).
//! - Sizes are capped ([`super::limits`]): over a cap, text is cut with a visible
//!   `[truncated]` marker and the team carries a warning; extra members are dropped.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use super::files::TeamFiles;
use super::limits::{self, MAX_CHARTER_CHARS, MAX_MEMBERS};
pub use super::origin::{Skipped, SkippedWhat, TeamFormat, TeamSource};
use crate::trust::read::{MAX_FILE_BYTES, ReadError, cap_chars, read_bounded};
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
    /// Where it was defined (for an imported pack: its directory or roster file).
    pub source: TeamSource,
    /// The format it was read from.
    pub format: TeamFormat,
    /// Lower-precedence definitions of the same name this one replaces.
    pub shadows: Vec<TeamSource>,
    /// What was cut, capped or ignored while loading it (one line each).
    pub warnings: Vec<String>,
    /// Roster rows and files of an imported pack that are not members, each with why.
    pub skipped: Vec<Skipped>,
    /// MCP servers (the user's, by name) every member is granted.
    pub mcp: Vec<String>,
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
    /// What the member may do: its `access`, capped by the ceiling of its team's source.
    pub access: Access,
    /// The `access` its team file asked for.
    pub requested_access: Access,
    /// Provider name; the run's default when absent.
    pub provider: Option<String>,
    /// Model name; the provider's default when absent.
    pub model: Option<String>,
    /// Validators for this member, in addition to the team's.
    pub validators: Vec<String>,
    /// The name as its definition shows it (`McManus` for `mcmanus`).
    pub display: String,
    /// Where this member was defined (a Claude team mixes the user's and the
    /// repository's files).
    pub source: TeamSource,
    /// The file its charter came from (its definition file when the charter is inline).
    pub file: Option<PathBuf>,
    /// Whether its charter was cut at the cap.
    pub truncated: bool,
    /// Fields of its definition that crewbox read but never acts on.
    pub ignored: Vec<String>,
    /// A turn limit below the configured one (a definition may only lower it).
    pub max_turns: Option<u32>,
    /// MCP servers (the user's, by name) this member is granted besides the team's.
    pub mcp: Vec<String>,
}

impl Member {
    /// A one-line description: the charter's first line of text that is no heading,
    /// outside a section on the member's model (a Squad charter's `## Model`, whose
    /// `- **Preferred:** …` describes nothing), a quote's `>` left off; at most 160
    /// chars.
    pub fn summary(&self) -> Option<String> {
        let mut in_model = false;
        let line = self.charter.as_deref()?.lines().map(str::trim).find(|l| {
            if let Some(heading) = l.strip_prefix('#') {
                in_model = heading
                    .trim_start_matches('#')
                    .trim()
                    .eq_ignore_ascii_case("model");
                return false;
            }
            !l.is_empty() && !in_model && !l.trim_start_matches('>').trim().is_empty()
        })?;
        let line = line.trim_start_matches('>').trim();
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
    #[serde(default)]
    mcp: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMember {
    name: String,
    display: Option<String>,
    role: Option<String>,
    charter: Option<String>,
    charter_file: Option<PathBuf>,
    #[serde(default)]
    access: Access,
    provider: Option<String>,
    model: Option<String>,
    #[serde(default)]
    validators: Vec<String>,
    max_turns: Option<u32>,
    #[serde(default)]
    mcp: Vec<String>,
}

/// What is wrong with a team definition.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum TeamProblem {
    /// A number outside the range its key accepts.
    #[error("`{key} = {value}` is out of range: {allowed}")]
    OutOfRange {
        /// The key (`worker_timeout_s`, `members.NAME.max_turns`).
        key: String,
        /// The value as written.
        value: u64,
        /// What the key accepts.
        allowed: &'static str,
    },
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
    /// A member named as one of crewbox's own agents in team runs.
    #[error(
        "member name `{name}` is the name of crewbox's own {name} in team runs (reports, the tree and script `agent` filters could not tell them apart); rename the member"
    )]
    ReservedName {
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
    /// `display` is not one short line.
    #[error("member `{member}`: display must be one line of at most 64 characters")]
    InvalidDisplay {
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
        /// Why.
        source: ReadError,
    },
    /// A team file could not be read (or was refused: outside the repository, not a
    /// regular file, too large).
    #[error("cannot read team file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: ReadError,
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
    /// A path the team file names could not be read or was refused.
    #[error("team file {}: `{key}`: {source}", path.display())]
    Path {
        /// The team file.
        path: PathBuf,
        /// The key naming the path (`members.NAME.charter_file`, `validators`, …).
        key: String,
        /// Why it was refused or could not be read.
        source: ReadError,
    },
    /// A team directory holds more files than are read.
    #[error("team directory {} holds {found} team files; only the first {kept} (by name) are read", dir.display())]
    TooManyFiles {
        /// The directory.
        dir: PathBuf,
        /// How many there are.
        found: usize,
        /// How many were read.
        kept: usize,
    },
    /// Two files in one directory define the same team name (ignoring case); the
    /// second is skipped.
    #[error("team `{name}` is defined twice: {} and {} (the second is skipped)", first.display(), second.display())]
    DuplicateTeam {
        /// The name.
        name: String,
        /// The first file.
        first: PathBuf,
        /// The second file.
        second: PathBuf,
    },
}

/// The names of crewbox's own agents in team runs, which no member may take.
pub const RESERVED_NAMES: [&str; 3] = ["orchestrator", "synthesis", "evaluator"];

/// Whether `name` is one of [`RESERVED_NAMES`] (ignoring ASCII case).
pub fn reserved_name(name: &str) -> bool {
    RESERVED_NAMES.iter().any(|r| r.eq_ignore_ascii_case(name))
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
/// the default name (its stem) and the directory `charter_file` is read from (read
/// anywhere, bounded: for the user's own and built-in teams).
pub fn parse_team(text: &str, path: &Path, source: TeamSource) -> Result<Team, TeamError> {
    parse_team_with(text, path, source, TeamFiles::Anywhere)
}

/// [`parse_team`] reading the paths the file names through `files`.
pub fn parse_team_with(
    text: &str,
    path: &Path,
    source: TeamSource,
    files: TeamFiles<'_>,
) -> Result<Team, TeamError> {
    let invalid = |problem| TeamError::Invalid {
        path: path.to_owned(),
        problem,
    };
    let raw: RawTeam = toml::from_str(text).map_err(|err| TeamError::Parse {
        path: path.to_owned(),
        message: crate::text::toml_error(&err, text),
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
    // Durations become deadlines: zero or more than a year is a mistake, and a value
    // no clock can hold must not reach one.
    let max_s = crate::vocab::MAX_DURATION_S;
    for (key, value, lo) in [
        ("worker_timeout_s", raw.worker_timeout_s, 1),
        ("first_wave_s", raw.first_wave_s, 0),
        ("wave_every_s", raw.wave_every_s, 1),
    ] {
        if let Some(v) = value.filter(|v| !(lo..=max_s).contains(v)) {
            return Err(invalid(TeamProblem::OutOfRange {
                key: key.into(),
                value: v,
                allowed: match lo {
                    0 => "0..=31536000 seconds (at most a year)",
                    _ => "1..=31536000 seconds (at most a year)",
                },
            }));
        }
    }
    if let Some(m) = raw.members.iter().find(|m| m.max_turns == Some(0)) {
        return Err(invalid(TeamProblem::OutOfRange {
            key: format!("members.{}.max_turns", m.name),
            value: 0,
            allowed: "at least 1 turn",
        }));
    }
    let mut warnings = Vec::new();
    let mut raw_members = raw.members;
    if raw_members.len() > MAX_MEMBERS {
        warnings.push(format!(
            "{} members; only the first {MAX_MEMBERS} are kept",
            raw_members.len()
        ));
        raw_members.truncate(MAX_MEMBERS);
    }
    let path_err = |key: String, source| TeamError::Path {
        path: path.to_owned(),
        key,
        source,
    };
    let mut seen: Vec<String> = Vec::new();
    let mut members = Vec::with_capacity(raw_members.len());
    for m in raw_members {
        if !valid_name(&m.name) {
            return Err(invalid(TeamProblem::InvalidName {
                what: "member",
                name: m.name,
            }));
        }
        if reserved_name(&m.name) {
            return Err(invalid(TeamProblem::ReservedName { name: m.name }));
        }
        let folded = m.name.to_ascii_lowercase();
        if seen.contains(&folded) {
            return Err(invalid(TeamProblem::DuplicateMember { name: m.name }));
        }
        seen.push(folded);
        if let Some(d) = &m.display
            && (d.trim().is_empty() || d.chars().count() > MAX_NAME_LEN || d.contains(['\n', '\r']))
        {
            return Err(invalid(TeamProblem::InvalidDisplay { member: m.name }));
        }
        let mut truncated = false;
        let charter = match (m.charter, &m.charter_file) {
            (Some(_), Some(_)) => {
                return Err(invalid(TeamProblem::CharterAndFile { member: m.name }));
            }
            (Some(mut text), None) => {
                if cap_chars(&mut text, MAX_CHARTER_CHARS) {
                    truncated = true;
                    warnings.push(limits::cut_warning(
                        &format!("member `{}`: charter", m.name),
                        MAX_CHARTER_CHARS,
                    ));
                }
                Some(text)
            }
            (None, Some(file)) if file.is_absolute() => {
                return Err(invalid(TeamProblem::AbsoluteCharterFile {
                    member: m.name,
                    path: file.clone(),
                }));
            }
            (None, Some(file)) => {
                let (text, cut) = files
                    .read_charter(path, file)
                    .map_err(|e| path_err(format!("members.{}.charter_file", m.name), e))?;
                if cut {
                    truncated = true;
                    warnings.push(limits::cut_warning(
                        &format!("member `{}`: charter_file {}", m.name, file.display()),
                        MAX_CHARTER_CHARS,
                    ));
                }
                Some(text)
            }
            (None, None) => None,
        };
        let validators = limits::cap_list(
            m.validators,
            &format!("member `{}`: validators", m.name),
            &mut warnings,
        )
        .into_iter()
        .map(|v| {
            files
                .validator(&v)
                .map_err(|e| path_err(format!("members.{}.validators", m.name), e))
        })
        .collect::<Result<Vec<_>, _>>()?;
        let file = match &m.charter_file {
            Some(f) => Some(path.parent().unwrap_or(Path::new("")).join(f)),
            None => charter.is_some().then(|| path.to_owned()),
        };
        members.push(Member {
            role: m.role.unwrap_or_else(|| m.name.clone()),
            display: m.display.unwrap_or_else(|| m.name.clone()),
            name: m.name,
            charter,
            charter_file: m.charter_file,
            access: m.access,
            requested_access: m.access,
            provider: m.provider,
            model: m.model,
            validators,
            source: source.clone(),
            file,
            truncated,
            ignored: Vec::new(),
            max_turns: m.max_turns,
            mcp: m.mcp,
        });
    }
    let validators = limits::cap_list(raw.validators, "validators", &mut warnings)
        .into_iter()
        .map(|v| {
            files
                .validator(&v)
                .map_err(|e| path_err("validators".into(), e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut team = Team {
        name,
        mode: raw.mode,
        shared_context: raw.shared_context,
        routing: raw.routing,
        orchestrator: raw.orchestrator,
        evaluator: raw.evaluator,
        members,
        validators,
        mcp: raw.mcp,
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
        format: TeamFormat::Crewbox,
        shadows: Vec::new(),
        warnings,
        skipped: Vec::new(),
    };
    limits::cap_texts(&mut team);
    Ok(team)
}

/// Reads and checks one team file of the user's (or a built-in): anywhere, bounded.
pub fn load_file(path: &Path, source: TeamSource) -> Result<Team, TeamError> {
    let text = read_bounded(path, MAX_FILE_BYTES)
        .and_then(|b| b.into_text(path, MAX_FILE_BYTES))
        .map_err(|source| TeamError::Read {
            path: path.to_owned(),
            source,
        })?;
    parse_team(&text, path, source)
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
                mcp: Vec::new(),
                name: "demo".into(),
                mode: Mode::Broadcast,
                shared_context: None,
                routing: None,
                orchestrator: None,
                evaluator: None,
                members: vec![Member {
                    mcp: Vec::new(),
                    name: "alice".into(),
                    role: "alice".into(),
                    charter: None,
                    charter_file: None,
                    access: Access::ReadOnly,
                    requested_access: Access::ReadOnly,
                    provider: None,
                    model: None,
                    validators: Vec::new(),
                    display: "alice".into(),
                    source: TeamSource::Builtin,
                    file: None,
                    truncated: false,
                    ignored: Vec::new(),
                    max_turns: None,
                }],
                validators: Vec::new(),
                delivery: Default::default(),
                worker_timeout: DEFAULT_WORKER_TIMEOUT,
                source: TeamSource::Builtin,
                format: TeamFormat::Crewbox,
                shadows: Vec::new(),
                warnings: Vec::new(),
                skipped: Vec::new(),
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
            problem("mode = \"reflect\"\n[[members]]\nname = \"Evaluator\"\n"),
            TeamProblem::ReservedName {
                name: "Evaluator".into()
            }
        );
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
        // A Squad charter opening with its model preference, then a quoted line.
        member.charter = Some(
            "# Lead\n\n## Model\n- **Preferred:** claude-opus-4.5\n\n## Identity\n\n>\n> Owns the plan.\n"
                .into(),
        );
        assert_eq!(member.summary().as_deref(), Some("Owns the plan."));
    }
}

//! `crewbox team export NAME --format squad|crewbox [--dir DIR]`: writing a team as a
//! crewbox team file or back into a Squad pack.
//!
//! The round trip: `team export squad --format crewbox` writes
//! `.crewbox/teams/squad.toml` from the imported pack (charters inline); the user
//! edits it, and the native team now shadows the pack; `team export squad --format
//! squad` writes the edited team back into `.squad/`, in place (see
//! `pack::squad_write`).
//!
//! An export never widens access: a crewbox file gets each member's *granted*
//! access, not what the pack asked for. Every target lies inside the repository and
//! is written atomically beneath it (`pack::write`).

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::file::{Team, TeamFormat, parse_team};
use super::pack::write::{WriteError, WriteRoot};
use super::pack::{models, squad, squad_write};
use crate::trust::REPO_TEAMS;
use crate::trust::read::{Confined, ReadError};

/// The format `team export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// A Squad pack (`team.md` rows and charters, edited in place).
    Squad,
    /// A crewbox team file (`.crewbox/teams/NAME.toml`).
    Crewbox,
}

/// Why an export did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The export would lose or overwrite something, or cannot be done.
    #[error("{0}")]
    Refused(String),
    /// A file of the target could not be read.
    #[error("{0}")]
    Read(#[from] ReadError),
    /// A file could not be written.
    #[error("{0}")]
    Write(#[from] WriteError),
}

/// What an export did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ExportReport {
    /// The directory written to, relative to the repository.
    pub dir: PathBuf,
    /// Files written, relative to the repository, in order.
    pub written: Vec<PathBuf>,
    /// What was left as it is, and why.
    pub notes: Vec<String>,
}

/// `dir` (relative to the repository, or absolute inside it) as a relative path
/// without `..`.
fn inside(repo: &Path, dir: &Path) -> Result<PathBuf, ExportError> {
    let rel = if dir.is_absolute() {
        let canonical_parent = dir
            .parent()
            .and_then(|p| p.canonicalize().ok())
            .map(|p| p.join(dir.file_name().unwrap_or_default()));
        canonical_parent
            .as_deref()
            .unwrap_or(dir)
            .strip_prefix(repo)
            .map(Path::to_path_buf)
            .map_err(|_| {
                ExportError::Refused(format!(
                    "--dir {} is outside the repository {}; exports stay inside it",
                    dir.display(),
                    repo.display()
                ))
            })?
    } else {
        dir.to_owned()
    };
    if rel.as_os_str().is_empty()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(ExportError::Refused(format!(
            "--dir {} must name a directory inside the repository (no `..`)",
            dir.display()
        )));
    }
    Ok(rel
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect())
}

/// Exports `team` from the repository at `repo` (canonical) in `format`, into `dir`
/// (default: the pack the team came from, `.squad`, or `.crewbox/teams`).
/// `aliases` is the user's `[packs.models]`. Blocking.
pub fn export(
    repo: &Path,
    team: &Team,
    format: ExportFormat,
    dir: Option<&Path>,
    force: bool,
    aliases: &std::collections::BTreeMap<String, String>,
) -> Result<ExportReport, ExportError> {
    let confined = Confined::new(repo).map_err(|source| ReadError::Io {
        path: repo.to_owned(),
        source,
    })?;
    let writer = WriteRoot::new(repo, false)?;
    match format {
        ExportFormat::Crewbox => {
            let rel = inside(repo, dir.unwrap_or(Path::new(REPO_TEAMS)))?;
            export_crewbox(&writer, team, &rel, force, aliases)
        }
        ExportFormat::Squad => {
            let (rel, layout) = match dir {
                Some(d) => {
                    let rel = inside(repo, d)?;
                    let layout = if rel == Path::new(".ai-team") {
                        TeamFormat::SquadLegacy
                    } else {
                        TeamFormat::Squad
                    };
                    (rel, layout)
                }
                None => match squad::find(&confined)? {
                    Some(p) => (p.rel.clone(), p.format),
                    None => (PathBuf::from(".squad"), TeamFormat::Squad),
                },
            };
            let pack = squad::open(&confined, &rel, layout)?;
            let plan =
                squad_write::plan(team, pack.as_ref(), &rel).map_err(ExportError::Refused)?;
            let mut report = ExportReport {
                dir: rel.clone(),
                written: Vec::new(),
                notes: plan.notes,
            };
            for w in plan.writes {
                let target = rel.join(&w.rel);
                writer.write(&target, &w.bytes, true)?;
                report.written.push(target);
            }
            Ok(report)
        }
    }
}

/// A member as a crewbox team file writes it.
#[derive(Serialize)]
struct OutMember<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    display: Option<&'a str>,
    role: &'a str,
    access: super::Access,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_turns: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    charter: Option<&'a str>,
}

#[derive(Serialize)]
struct OutTeam<'a> {
    mode: crate::vocab::Mode,
    #[serde(skip_serializing_if = "Option::is_none")]
    shared_context: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    routing: Option<&'a str>,
    members: Vec<OutMember<'a>>,
}

fn export_crewbox(
    writer: &WriteRoot,
    team: &Team,
    dir: &Path,
    force: bool,
    aliases: &std::collections::BTreeMap<String, String>,
) -> Result<ExportReport, ExportError> {
    let rel = dir.join(format!("{}.toml", team.name));
    let target = writer.root().join(&rel);
    if target.symlink_metadata().is_ok() && !force {
        return Err(ExportError::Refused(format!(
            "{} exists; pass --force to replace it",
            rel.display()
        )));
    }
    let mut notes = Vec::new();
    let members = team
        .members
        .iter()
        .map(|m| {
            // A pack's alias (`sonnet`) becomes the id a provider takes.
            let model = m.model.as_deref().map(|declared| {
                if team.format.is_pack() {
                    models::canonical(declared, aliases)
                } else {
                    declared.to_owned()
                }
            });
            if m.access != m.requested_access {
                notes.push(format!(
                    "member `{}`: written with the access it was granted (`{}`), not the `{}` it asked for",
                    m.name, m.access, m.requested_access
                ));
            }
            OutMember {
                name: &m.name,
                display: Some(m.display.as_str()).filter(|d| *d != m.name),
                role: &m.role,
                access: m.access,
                model,
                max_turns: m.max_turns,
                charter: m.charter.as_deref(),
            }
        })
        .collect();
    let out = OutTeam {
        mode: team.mode,
        shared_context: team.shared_context.as_deref(),
        routing: team.routing.as_deref(),
        members,
    };
    let body = toml::to_string_pretty(&out).map_err(|e| ExportError::Refused(e.to_string()))?;
    let origin = team
        .source
        .path()
        .map(|p| super::pack::shown(writer.root(), p).display().to_string())
        .unwrap_or_else(|| "built-in".into());
    let text = format!(
        "# Team `{}`, exported by `crewbox team export` from {origin} ({}).\n\
         # This file now shadows that definition; `crewbox team export {} --format squad`\n\
         # writes it back. Access is what each member was granted when exported.\n\n{body}",
        team.name, team.format, team.name
    );
    // What is written must load as it is.
    parse_team(&text, &rel, super::TeamSource::Builtin)
        .map_err(|e| ExportError::Refused(format!("the exported team does not load: {e}")))?;
    writer.write(&rel, text.as_bytes(), true)?;
    Ok(ExportReport {
        dir: dir.to_owned(),
        written: vec![rel],
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirs_stay_inside() {
        let repo = Path::new("/r");
        assert_eq!(
            inside(repo, Path::new(".squad")).unwrap(),
            PathBuf::from(".squad")
        );
        assert_eq!(
            inside(repo, Path::new("./a/b")).unwrap(),
            PathBuf::from("a/b")
        );
        for bad in ["../x", "a/../../x", "", "/elsewhere"] {
            assert!(inside(repo, Path::new(bad)).is_err(), "{bad}");
        }
    }
}

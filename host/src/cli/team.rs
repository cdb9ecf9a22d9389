//! `crewbox team list|show NAME|export NAME`: the teams visible from this repository
//! (team files and imported packs), and writing one out.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use crate::cli::render::{columns, fit};
use crate::cli::{Context, Exit};
use crewbox::Access;
use crewbox::types::{Member, Team, TeamSource};

/// Arguments of `crewbox team`.
#[derive(Debug, Clone, Args)]
pub struct TeamArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: TeamCommand,
}

/// `crewbox team` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum TeamCommand {
    /// List the teams: `.crewbox/teams/`, `$XDG_CONFIG_HOME/crewbox/teams/`, and the
    /// imported packs `.squad/` (or `.ai-team/`), `.claude/agents/` and
    /// `~/.claude/agents/`.
    List {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one team: mode, format, members with their access, and where each came from.
    Show {
        /// The team's name.
        name: String,
        /// Print a JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a team as a crewbox team file (`--format crewbox`, into
    /// `.crewbox/teams/`) or back into a Squad pack (`--format squad`, edited in place:
    /// only the rows and charters that changed).
    Export {
        /// The team's name.
        name: String,
        /// What to write.
        #[arg(long, value_enum)]
        format: super::choices::ExportChoice,
        /// The directory, inside the repository (default: `.crewbox/teams` for
        /// crewbox; the repository's Squad pack, else `.squad`, for squad).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Replace an existing crewbox team file.
        #[arg(long)]
        force: bool,
        /// Print a JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

impl TeamCommand {
    /// Whether it prints JSON.
    pub fn json(&self) -> bool {
        match self {
            Self::List { json } | Self::Show { json, .. } | Self::Export { json, .. } => *json,
        }
    }
}

fn source_json(s: &TeamSource) -> serde_json::Value {
    json!({"source": s.kind(), "path": s.path().map(crewbox::serde_path::json)})
}

fn member_json(m: &Member) -> serde_json::Value {
    json!({
        "name": m.name,
        "display": m.display,
        "role": m.role,
        "source": m.source.kind(),
        "file": m.file.as_deref().map(crewbox::serde_path::json),
        "requested_access": m.requested_access,
        "access": m.access,
        "provider": m.provider,
        "model": m.model,
        "max_turns": m.max_turns,
        "charter_chars": m.charter.as_deref().map_or(0, |c| c.chars().count()),
        "truncated": m.truncated,
        "ignored": m.ignored,
    })
}

/// A team as `list --json` and `show --json` print it.
fn team_json(t: &Team) -> serde_json::Value {
    json!({
        "name": t.name,
        "mode": t.mode,
        "format": t.format.as_str(),
        "source": t.source.kind(),
        "path": t.source.path().map(crewbox::serde_path::json),
        "shadows": t.shadows.iter().map(source_json).collect::<Vec<_>>(),
        "skipped": t.skipped,
        "warnings": t.warnings,
        "members": t.members.iter().map(member_json).collect::<Vec<_>>(),
    })
}

fn path_of(s: &TeamSource) -> String {
    s.path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in".into())
}

/// Runs `crewbox team` for the context's repository.
pub async fn run(args: TeamArgs, ctx: &Context) -> anyhow::Result<Exit> {
    let found = ctx.teams().await?;
    // A broken file is reported and skipped; the others are still listed.
    for problem in &found.problems {
        errln!("crewbox: warning: {problem}");
    }
    for note in &found.notes {
        errln!("crewbox: note: {note}");
    }
    let teams = &found.teams;
    let mut out = crate::text::stdout();
    match args.command {
        TeamCommand::List { json } => {
            if json {
                let all: Vec<_> = teams.iter().map(team_json).collect();
                serde_json::to_writer_pretty(&mut out, &all)?;
                writeln!(out)?;
            } else if teams.is_empty() {
                writeln!(
                    out,
                    "no teams (add one at .crewbox/teams/NAME.toml, or a .squad/ or .claude/agents/ pack; see the README)"
                )?;
            } else {
                let rows: Vec<Vec<String>> = teams
                    .iter()
                    .map(|t| {
                        let shadows = match t.shadows.first() {
                            Some(s) => format!(" (shadows {} {})", s.kind(), path_of(s)),
                            None => String::new(),
                        };
                        vec![
                            t.name.clone(),
                            t.mode.to_string(),
                            t.format.as_str().to_owned(),
                            names_within(t.members.iter().map(|m| m.name.as_str()), MEMBERS_WIDTH),
                            format!("{}{shadows}", path_of(&t.source)),
                        ]
                    })
                    .collect();
                for line in columns(&rows, "") {
                    writeln!(out, "{line}")?;
                }
            }
        }
        TeamCommand::Show { name, json } => {
            let t = match found.find(&name) {
                Ok(t) => t,
                Err(e) => {
                    errln!("crewbox: {e}");
                    return Ok(Exit::Usage);
                }
            };
            if json {
                serde_json::to_writer_pretty(&mut out, &team_json(t))?;
                writeln!(out)?;
            } else {
                show_text(&mut out, t)?;
            }
        }
        TeamCommand::Export {
            name,
            format,
            dir,
            force,
            json,
        } => {
            let t = match found.find(&name) {
                Ok(t) => t.clone(),
                Err(e) => {
                    errln!("crewbox: {e}");
                    return Ok(Exit::Usage);
                }
            };
            let (report, retrusted) = match ctx.export_team(t, format.into(), dir, force).await {
                Ok(done) => (done.report, done.retrusted),
                Err(e @ crewbox::TeamExportError::Refused(_)) => {
                    errln!("crewbox: {e}");
                    return Ok(Exit::Usage);
                }
                Err(e) => return Err(e.into()),
            };
            if json {
                serde_json::to_writer_pretty(&mut out, &report)?;
                writeln!(out)?;
            } else {
                if retrusted {
                    writeln!(out, "the trust record now covers the files written")?;
                }
                if report.written.is_empty() {
                    writeln!(out, "nothing changed in {}", report.dir.display())?;
                }
                for w in &report.written {
                    writeln!(out, "wrote {}", w.display())?;
                }
                for n in &report.notes {
                    writeln!(out, "note: {n}")?;
                }
            }
        }
    }
    Ok(Exit::Ok)
}

/// The widest a member's role is shown in `team show` (the JSON has it whole).
const ROLE_WIDTH: usize = 40;
/// The widest the member names of a team are shown in `team list`.
const MEMBERS_WIDTH: usize = 60;

/// `names` joined with `, ` within about `width` characters, the rest counted: `a, b,
/// c +17`. The first name is always shown (cut to fit).
fn names_within<'a>(names: impl ExactSizeIterator<Item = &'a str>, width: usize) -> String {
    let total = names.len();
    let mut out = String::new();
    for (i, name) in names.enumerate() {
        let rest = total - i;
        let sep = if i == 0 { "" } else { ", " };
        let more = if rest > 1 {
            format!(" +{}", rest - 1)
        } else {
            String::new()
        };
        if i > 0 && out.chars().count() + sep.len() + name.chars().count() + more.len() > width {
            out.push_str(&format!(" +{rest}"));
            return out;
        }
        out.push_str(sep);
        out.push_str(&fit(name, width.saturating_sub(more.len()).max(1)));
    }
    out
}

fn show_text(out: &mut impl Write, t: &Team) -> std::io::Result<()> {
    writeln!(out, "team:   {}", t.name)?;
    writeln!(out, "mode:   {}", t.mode)?;
    writeln!(out, "format: {}", t.format.as_str())?;
    writeln!(out, "source: {} ({})", path_of(&t.source), t.source.kind())?;
    for s in &t.shadows {
        writeln!(out, "shadows: {} ({})", path_of(s), s.kind())?;
    }
    for w in &t.warnings {
        writeln!(out, "warning: {w}")?;
    }
    for s in &t.skipped {
        let what = match &s.what {
            crewbox::types::SkippedWhat::Name(n) => format!("row `{n}`"),
            crewbox::types::SkippedWhat::File(f) => f.display().to_string(),
        };
        writeln!(out, "skipped: {what}: {}", s.reason)?;
    }
    writeln!(out, "members:")?;
    let rows: Vec<Vec<String>> = t
        .members
        .iter()
        .map(|m| {
            let model = match (&m.provider, &m.model) {
                (Some(p), Some(md)) => format!("{p}/{md}"),
                (Some(p), None) => p.clone(),
                (None, Some(md)) => md.clone(),
                (None, None) => "(run's model)".into(),
            };
            // What it gets, and why when that is not what it asks for: a ceiling that
            // grants more (Squad declares no tools, so its members ask for read-only),
            // or one that grants less.
            let access = match (m.access, m.requested_access) {
                (got, asked) if got == asked => got.to_string(),
                (Access::Full, asked) => format!("full (your ceiling; asks {asked})"),
                (got, asked) => format!("{got} (asks {asked}; your ceiling)"),
            };
            let name = if m.display == m.name {
                m.name.clone()
            } else {
                format!("{} ({})", m.name, m.display)
            };
            let origin = match (&m.source, &t.source) {
                (a, b) if a.kind() == b.kind() => String::new(),
                (a, _) => format!(" [{}]", a.kind()),
            };
            vec![
                name,
                fit(&m.role, ROLE_WIDTH),
                access,
                format!("{model}{origin}"),
            ]
        })
        .collect();
    for line in columns(&rows, "  ") {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::names_within;

    #[test]
    fn member_names_past_the_width_are_counted() {
        let few = ["alice", "bob"];
        assert_eq!(names_within(few.into_iter(), 48), "alice, bob");
        let many: Vec<String> = (0..20).map(|i| format!("member{i:02}")).collect();
        let shown = names_within(many.iter().map(String::as_str), 48);
        assert!(shown.chars().count() <= 48, "{shown}");
        assert!(shown.starts_with("member00, member01"), "{shown}");
        let listed = shown.matches("member").count();
        assert!(shown.ends_with(&format!(" +{}", 20 - listed)), "{shown}");
        // One name longer than the width is cut, never dropped.
        let long = "n".repeat(100);
        assert_eq!(
            names_within([long.as_str()].into_iter(), 10)
                .chars()
                .count(),
            10
        );
        // Cut to leave room for what follows it.
        assert_eq!(
            names_within([long.as_str(), "b"].into_iter(), 10),
            "nnnnnn…, b"
        );
        let three = names_within([long.as_str(), "bb", "cc"].into_iter(), 10);
        assert_eq!(three, "nnnnnn… +2");
    }
}

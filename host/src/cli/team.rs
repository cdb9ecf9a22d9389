//! `crewbox team list|show NAME`: the teams visible from this repository.

use std::io::Write;

use clap::{Args, Subcommand};
use serde_json::json;

use crate::cli::{Context, Exit};
use crate::team::{Team, TeamSource, discover};

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
    /// List the teams from `.crewbox/teams/` and `$XDG_CONFIG_HOME/crewbox/teams/`.
    List {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one team: mode, members and where it was defined.
    Show {
        /// The team's name.
        name: String,
        /// Print a JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

impl TeamCommand {
    /// Whether it prints JSON.
    pub fn json(&self) -> bool {
        match self {
            Self::List { json } | Self::Show { json, .. } => *json,
        }
    }
}

fn source_json(s: &TeamSource) -> serde_json::Value {
    json!({"source": s.kind(), "path": s.path()})
}

/// A team as `list --json` and `show --json` print it.
fn team_json(t: &Team) -> serde_json::Value {
    json!({
        "name": t.name,
        "mode": t.mode,
        "source": t.source.kind(),
        "path": t.source.path(),
        "shadows": t.shadows.iter().map(source_json).collect::<Vec<_>>(),
        "warnings": t.warnings,
        "members": t.members.iter().map(|m| json!({
            "name": m.name,
            "role": m.role,
            "access": m.access,
            "requested_access": m.requested_access,
            "provider": m.provider,
            "model": m.model,
        })).collect::<Vec<_>>(),
    })
}

fn path_of(s: &TeamSource) -> String {
    s.path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in".into())
}

/// Runs `crewbox team` for the context's repository.
pub async fn run(args: TeamArgs, ctx: &Context) -> anyhow::Result<Exit> {
    let dir = ctx.root().to_path_buf();
    let policy = ctx.config().team_policy();
    let found = tokio::task::spawn_blocking(move || discover(&dir, &policy)).await?;
    // A broken file is reported and skipped; the others are still listed.
    for problem in &found.problems {
        eprintln!("crewbox: warning: {problem}");
    }
    let teams = &found.teams;
    let mut out = std::io::stdout().lock();
    match args.command {
        TeamCommand::List { json } => {
            if json {
                let all: Vec<_> = teams.iter().map(team_json).collect();
                serde_json::to_writer_pretty(&mut out, &all)?;
                writeln!(out)?;
            } else if teams.is_empty() {
                writeln!(
                    out,
                    "no teams (add one at .crewbox/teams/NAME.toml; see the README)"
                )?;
            } else {
                for t in teams {
                    let members: Vec<&str> = t.members.iter().map(|m| m.name.as_str()).collect();
                    let shadows = match t.shadows.first() {
                        Some(s) => format!(" (shadows {} {})", s.kind(), path_of(s)),
                        None => String::new(),
                    };
                    writeln!(
                        out,
                        "{:<20} {:<12} {:<40} {}{shadows}",
                        t.name,
                        t.mode,
                        members.join(", "),
                        path_of(&t.source)
                    )?;
                }
            }
        }
        TeamCommand::Show { name, json } => {
            let t = match found.find(&name) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("crewbox: {e}");
                    return Ok(Exit::Usage);
                }
            };
            if json {
                serde_json::to_writer_pretty(&mut out, &team_json(t))?;
                writeln!(out)?;
            } else {
                writeln!(out, "team:   {}", t.name)?;
                writeln!(out, "mode:   {}", t.mode)?;
                writeln!(out, "source: {} ({})", path_of(&t.source), t.source.kind())?;
                for s in &t.shadows {
                    writeln!(out, "shadows: {} ({})", path_of(s), s.kind())?;
                }
                for w in &t.warnings {
                    writeln!(out, "warning: {w}")?;
                }
                writeln!(out, "members:")?;
                for m in &t.members {
                    let model = match (&m.provider, &m.model) {
                        (Some(p), Some(md)) => format!("{p}/{md}"),
                        (Some(p), None) => p.clone(),
                        (None, Some(md)) => md.clone(),
                        (None, None) => "(run's model)".into(),
                    };
                    let access = if m.access == m.requested_access {
                        m.access.to_string()
                    } else {
                        format!("{} (asked {})", m.access, m.requested_access)
                    };
                    writeln!(
                        out,
                        "  {:<16} {:<20} {:<10} {}",
                        m.name, m.role, access, model
                    )?;
                }
            }
        }
    }
    Ok(Exit::Ok)
}

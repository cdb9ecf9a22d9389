//! `crewbox team list|show NAME`: the teams visible from this repository.

use std::io::Write;
use std::path::Path;

use clap::{Args, Subcommand};
use serde_json::json;

use crate::cli::Exit;
use crate::team::{Team, discover};

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

/// A team as `list --json` and `show --json` print it.
fn team_json(t: &Team) -> serde_json::Value {
    json!({
        "name": t.name,
        "mode": t.mode,
        "source": t.source.kind(),
        "path": t.source.path(),
        "members": t.members.iter().map(|m| json!({
            "name": m.name,
            "role": m.role,
            "access": m.access,
            "provider": m.provider,
            "model": m.model,
        })).collect::<Vec<_>>(),
    })
}

fn path_of(t: &Team) -> String {
    t.source
        .path()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "built-in".into())
}

/// Runs `crewbox team` for the repository at `repo`.
pub async fn run(args: TeamArgs, repo: &Path) -> anyhow::Result<Exit> {
    let dir = repo.to_path_buf();
    let teams = match tokio::task::spawn_blocking(move || discover(&dir)).await? {
        Ok(teams) => teams,
        Err(e) => {
            eprintln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
    };
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
                for t in &teams {
                    let members: Vec<&str> = t.members.iter().map(|m| m.name.as_str()).collect();
                    writeln!(
                        out,
                        "{:<20} {:<12} {:<40} {}",
                        t.name,
                        t.mode,
                        members.join(", "),
                        path_of(t)
                    )?;
                }
            }
        }
        TeamCommand::Show { name, json } => {
            let Some(t) = teams.iter().find(|t| t.name.eq_ignore_ascii_case(&name)) else {
                let known: Vec<&str> = teams.iter().map(|t| t.name.as_str()).collect();
                eprintln!(
                    "crewbox: unknown team `{name}` (known: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                );
                return Ok(Exit::Usage);
            };
            if json {
                serde_json::to_writer_pretty(&mut out, &team_json(t))?;
                writeln!(out)?;
            } else {
                writeln!(out, "team:   {}", t.name)?;
                writeln!(out, "mode:   {}", t.mode)?;
                writeln!(out, "source: {} ({})", path_of(t), t.source.kind())?;
                writeln!(out, "members:")?;
                for m in &t.members {
                    let model = match (&m.provider, &m.model) {
                        (Some(p), Some(md)) => format!("{p}/{md}"),
                        (Some(p), None) => p.clone(),
                        (None, Some(md)) => md.clone(),
                        (None, None) => "(run's model)".into(),
                    };
                    writeln!(
                        out,
                        "  {:<16} {:<20} {:<10} {}",
                        m.name, m.role, m.access, model
                    )?;
                }
            }
        }
    }
    Ok(Exit::Ok)
}

//! `crewbox worktree list|prune`: inspect and clean up agent worktrees.

use std::io::Write;

use clap::{Args, Subcommand};

use crate::cli::{Context, Exit};
use crewbox::Worktrees;
use crewbox::types::{PruneReason, WorktreeState};

/// Arguments of `crewbox worktree`.
#[derive(Debug, Clone, Args)]
pub struct WorktreeArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: WorktreeCommand,
}

/// `crewbox worktree` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum WorktreeCommand {
    /// Show every agent worktree: path, agent (or "pooled"), HEAD, owner pid, state.
    List {
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Remove worktrees left behind by dead processes (live ones are never touched).
    Prune {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

impl WorktreeCommand {
    /// Whether it prints JSON.
    pub fn json(&self) -> bool {
        match self {
            Self::List { json } | Self::Prune { json } => *json,
        }
    }
}

/// Runs `crewbox worktree` for the context's repository.
pub async fn run(args: WorktreeArgs, ctx: &Context) -> anyhow::Result<Exit> {
    let mut out = crate::text::stdout();
    match args.command {
        WorktreeCommand::List { json } => {
            let Worktrees {
                dir,
                worktrees: rows,
            } = ctx.worktrees().await?;
            if json {
                serde_json::to_writer_pretty(&mut out, &rows)?;
                writeln!(out)?;
            } else if rows.is_empty() {
                writeln!(out, "no agent worktrees in {}", dir.display())?;
            } else {
                writeln!(
                    out,
                    "{:<10} {:<28} {:<12} {:>8}  PATH",
                    "STATE", "AGENT", "HEAD", "PID"
                )?;
                for row in rows {
                    let agent = match (row.state, row.agent_id.as_deref()) {
                        (WorktreeState::Pooled, _) => "pooled",
                        (_, Some(agent)) => agent,
                        (_, None) => "-",
                    };
                    let head = match (&row.branch, &row.head) {
                        (Some(b), _) => b.clone(),
                        (None, Some(h)) => h.chars().take(12).collect(),
                        (None, None) => "-".to_owned(),
                    };
                    let pid = row
                        .owner_pid
                        .map_or_else(|| "-".to_owned(), |p| p.to_string());
                    writeln!(
                        out,
                        "{:<10} {:<28} {:<12} {:>8}  {}",
                        state_label(row.state),
                        agent,
                        head,
                        pid,
                        row.path.display()
                    )?;
                }
            }
        }
        WorktreeCommand::Prune { json } => {
            let report = ctx.prune_worktrees().await?;
            if json {
                serde_json::to_writer_pretty(&mut out, &report)?;
                writeln!(out)?;
            } else {
                for r in &report.removed {
                    let why = match r.reason {
                        PruneReason::OwnerDead { pid: Some(pid) } => {
                            format!("owner pid {pid} is gone")
                        }
                        PruneReason::OwnerDead { pid: None } => "owner is gone".to_owned(),
                        PruneReason::NoMarker => "no owner marker".to_owned(),
                        PruneReason::DirectoryMissing => "directory missing".to_owned(),
                    };
                    writeln!(out, "removed {} ({why})", r.path.display())?;
                }
                for b in &report.branches_deleted {
                    writeln!(out, "deleted temporary branch {b}")?;
                }
                writeln!(
                    out,
                    "{} removed, {} kept (owner alive)",
                    report.removed.len(),
                    report.kept_live.len()
                )?;
            }
        }
    }
    Ok(Exit::Ok)
}

/// The table label of a state.
fn state_label(state: WorktreeState) -> &'static str {
    match state {
        WorktreeState::Creating => "creating",
        WorktreeState::Active => "active",
        WorktreeState::Pooled => "pooled",
        WorktreeState::Removing => "removing",
        WorktreeState::Orphaned => "orphaned",
    }
}

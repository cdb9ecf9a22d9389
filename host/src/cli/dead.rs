//! `crewbox dead [--run RUN] [--json]`: the dead letters — agents that ended `error` or
//! `aborted` and that nobody dropped or retried — with the class of why each died;
//! `crewbox dead drop AGENT|--run RUN`: forgets them (they stay in history; the drop is
//! audited). `crewbox retry` runs one again.

use super::{Context, Exit};
use crate::text::escape as clean;
use crewbox::types::DeadLetter;
use crewbox::{DeadTarget, DropError, ReadError};

/// Arguments of `crewbox dead`.
#[derive(Debug, Clone, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DeadArgs {
    /// `drop`: forget dead letters instead of listing them.
    #[command(subcommand)]
    pub command: Option<DeadCommand>,
    /// Only this run's dead letters (id or unique prefix).
    #[arg(long)]
    pub run: Option<String>,
    /// Print JSON: a list of dead letters.
    #[arg(long)]
    pub json: bool,
}

/// The subcommands of `crewbox dead`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum DeadCommand {
    /// Forget one dead letter, or every one of a run: no longer listed, kept in history.
    Drop {
        /// The agent (id, unique prefix or tail).
        #[arg(required_unless_present = "run", conflicts_with = "run")]
        agent: Option<String>,
        /// Every dead letter of this run.
        #[arg(long)]
        run: Option<String>,
        /// Print JSON: the dropped agents' ids.
        #[arg(long)]
        json: bool,
    },
}

impl DeadArgs {
    /// Whether the output is JSON.
    pub fn json(&self) -> bool {
        match &self.command {
            Some(DeadCommand::Drop { json, .. }) => *json || self.json,
            None => self.json,
        }
    }
}

/// Lists or drops dead letters.
pub async fn run(ctx: Context, args: DeadArgs) -> anyhow::Result<Exit> {
    let json = args.json();
    match args.command {
        Some(DeadCommand::Drop { agent, run, .. }) => drop(&ctx, agent, run, json).await,
        None => list(&ctx, args.run.as_deref(), json).await,
    }
}

/// Says there is nothing: nothing has run in this state directory yet.
fn nothing_ran(json: bool) -> std::io::Result<Exit> {
    if json {
        outln!("[]");
    } else {
        outln!("no dead letters (nothing has run here yet)");
    }
    Ok(Exit::Ok)
}

async fn list(ctx: &Context, run: Option<&str>, json: bool) -> anyhow::Result<Exit> {
    let dead = match ctx.dead_letters(run).await {
        Ok(dead) => dead,
        Err(ReadError::NoRuns) => return Ok(nothing_ran(json)?),
        Err(e) if e.is_usage() => {
            errln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        outln!("{}", serde_json::to_string_pretty(&dead)?);
        return Ok(Exit::Ok);
    }
    if dead.is_empty() {
        outln!("no dead letters");
        return Ok(Exit::Ok);
    }
    outln!(
        "{:<28} {:<28} {:<14} {:<10} {:<18} ERROR",
        "AGENT",
        "RUN",
        "NAME",
        "CLASS",
        "STEP"
    );
    for d in &dead {
        outln!("{}", line(d));
    }
    outln!("\nretry one with `crewbox retry AGENT`, forget it with `crewbox dead drop AGENT`");
    Ok(Exit::Ok)
}

/// One dead letter as a line of the listing.
fn line(d: &DeadLetter) -> String {
    let error = d.error.as_deref().unwrap_or("-");
    let error = error.lines().next().unwrap_or("-");
    let error = match error.char_indices().nth(100) {
        Some((end, _)) => format!("{}…", &error[..end]),
        None => error.to_owned(),
    };
    format!(
        "{:<28} {:<28} {:<14} {:<10} {:<18} {}",
        d.agent_id,
        d.run_id,
        clean(&d.name),
        d.class,
        d.step.as_deref().map_or_else(|| "-".into(), clean),
        clean(&error)
    )
}

async fn drop(
    ctx: &Context,
    agent: Option<String>,
    run: Option<String>,
    json: bool,
) -> anyhow::Result<Exit> {
    let target = match (&agent, &run) {
        (Some(text), _) => DeadTarget::Agent(text),
        (None, Some(text)) => DeadTarget::Run(text),
        (None, None) => {
            errln!("crewbox: name an agent or pass --run RUN");
            return Ok(Exit::Usage);
        }
    };
    let ids = match ctx.drop_dead_letters(target).await {
        Ok(ids) => ids,
        Err(DropError::Read(ReadError::NoRuns)) => return Ok(nothing_ran(json)?),
        Err(e) if e.is_usage() => {
            errln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
        Err(e) => return Err(e.into()),
    };
    let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
    if json {
        outln!("{}", serde_json::json!({ "dropped": ids }));
    } else if ids.is_empty() {
        outln!("no dead letters to drop");
    } else {
        outln!("dropped {} dead letter(s): {}", ids.len(), ids.join(", "));
    }
    Ok(Exit::Ok)
}

//! `crewbox status [RUN_ID]`.

use serde_json::json;

use super::{Context, Exit};
use crate::text::escape;
use crewbox::RunStatus;
use crewbox::types::RunRecord;

/// Arguments of `crewbox status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// A run id (or unique prefix): print that run's report.
    pub run: Option<String>,
    /// How many recent runs to list.
    #[arg(long, default_value_t = 10)]
    pub limit: u32,
    /// Only runs in this state.
    #[arg(long, value_enum)]
    pub state: Option<StateFilter>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// The states `status --state` selects by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StateFilter {
    /// Going, with a live process.
    Running,
    /// Left unfinished by a crash or a signal (`crewbox resume` finishes them).
    Interrupted,
    /// Finished with a usable result.
    Completed,
    /// Finished without one.
    Failed,
    /// Stopped by a person.
    Cancelled,
    /// A replay that stopped matching its recording.
    Diverged,
}

impl StateFilter {
    fn stored(self) -> RunStatus {
        match self {
            Self::Running | Self::Interrupted => RunStatus::Running,
            Self::Completed => RunStatus::Completed,
            Self::Failed => RunStatus::Failed,
            Self::Cancelled => RunStatus::Cancelled,
            Self::Diverged => RunStatus::Diverged,
        }
    }

    fn admits(self, run: &RunRecord) -> bool {
        match self {
            Self::Running => !run.is_interrupted(),
            Self::Interrupted => run.is_interrupted(),
            Self::Completed | Self::Failed | Self::Cancelled | Self::Diverged => true,
        }
    }
}

/// Prints recent runs or one run's report. Works while another process is writing;
/// never creates a store.
pub async fn run(ctx: Context, args: StatusArgs) -> anyhow::Result<Exit> {
    if let Some(id) = &args.run {
        let report = match ctx.run_report(id).await {
            Ok(report) => report,
            Err(e) if e.is_usage() => {
                errln!("crewbox: {e}");
                return Ok(Exit::Usage);
            }
            Err(e) => return Err(e.into()),
        };
        let workers = ctx.agent_workers(&report.run_id).await?;
        if args.json {
            let mut value = serde_json::to_value(&report)?;
            if !workers.is_empty() {
                value["workers"] = serde_json::to_value(&workers)?;
            }
            outln!("{}", serde_json::to_string_pretty(&value)?);
        } else {
            out!("{}", report.render_text());
            if !workers.is_empty() {
                outln!("ran on workers:");
                for w in &workers {
                    outln!("  {}  @ {}", escape(&w.agent_id), escape(&w.worker));
                }
            }
        }
        return Ok(Exit::Ok);
    }
    let (runs, counts, path) = match args.state {
        None => {
            let list = ctx.runs(None, Some(args.limit)).await?;
            (list.runs, list.agents, list.store)
        }
        // Running and interrupted runs are told apart by their process, so the stored
        // ones are read until `limit` of the wanted kind are found.
        Some(state) => {
            let list = ctx.runs(Some(state.stored()), None).await?;
            let runs = list
                .runs
                .into_iter()
                .filter(|r| state.admits(r))
                .take(args.limit as usize)
                .collect();
            (runs, list.agents, list.store)
        }
    };
    let runs = &runs;
    if args.json {
        let runs: Vec<_> = runs.iter().map(RunRecord::summary).collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "runs": runs, "agents": counts, "store": path })
            )?
        );
    } else {
        let path = path.map_or_else(
            || "none yet (nothing has run here)".to_owned(),
            |p| p.display().to_string(),
        );
        outln!(
            "agents: {} running, {} queued   store: {path}",
            counts.running,
            counts.queued
        );
        for r in runs {
            let prompt: String = r.prompt.chars().take(60).collect();
            let status = if r.is_interrupted() {
                "interrupted"
            } else {
                r.status.as_str()
            };
            outln!(
                "{}  {:<11} {:<11} {}",
                r.id,
                r.mode.as_str(),
                status,
                escape(&prompt.replace('\n', " "))
            );
        }
    }
    Ok(Exit::Ok)
}

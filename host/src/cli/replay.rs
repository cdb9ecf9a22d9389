//! `crewbox replay RUN [--validator NAME]... [--dispatcher FILE] [--json]`: re-runs a
//! recorded run in a scratch state, every model call answered from its recording and
//! every tool really run, and reports whether it matched (see `replay/`).

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crewbox::RecordingError;
use crewbox::types::{ReplayOptions, ReplayOutcome, ReplayReport};

use super::{Context, Exit};

/// Arguments of `crewbox replay`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// The recorded run (id or unique prefix).
    pub run: String,
    /// Run this validator instead of the recorded ones (`NAME[=CRITERION]`, a built-in,
    /// a plugin name or a `.wasm` path); repeat for several.
    #[arg(long = "validator", value_name = "NAME")]
    pub validators: Vec<String>,
    /// Ask this dispatcher component which mode to run, instead of keeping the
    /// recorded mode.
    #[arg(long, value_name = "FILE")]
    pub dispatcher: Option<PathBuf>,
    /// Print one JSON object: the comparison and the replay's report.
    #[arg(long)]
    pub json: bool,
}

/// Replays the run and prints the comparison.
pub async fn run(ctx: Context, args: ReplayArgs) -> anyhow::Result<Exit> {
    let opts = ReplayOptions {
        validators: args.validators,
        // A file named on the command line is relative to where the user is.
        dispatcher: args
            .dispatcher
            .map(|p| std::path::absolute(&p).unwrap_or(p).display().to_string()),
    };
    let plan = match ctx.plan_replay(&args.run, opts).await {
        Ok(plan) => plan,
        Err(RecordingError::Run(e)) if !e.is_usage() => return Err(e.into()),
        Err(e) => {
            errln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
    };
    if !args.json {
        errln!(
            "crewbox: replaying run {} ({}, {} recorded model calls)",
            plan.original.run_id,
            plan.original.mode,
            plan.recorded
        );
    }
    let shutdown = CancellationToken::new();
    let engine = super::context::engine(&plan.scratch, shutdown.clone()).await?;
    let request = plan.request.clone();
    let driven = super::run::drive(&engine, &shutdown, args.json, engine.run(request)).await?;
    drop(engine);
    let report = match driven {
        Ok(report) => report,
        Err(exit) => return Ok(exit),
    };
    let compared = plan.finish(report).await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&compared)?);
    } else {
        print_text(&compared)?;
    }
    Ok(match (compared.outcome, compared.identical) {
        (ReplayOutcome::Matched, true) => Exit::Ok,
        _ => Exit::CheckFailed,
    })
}

fn print_text(r: &ReplayReport) -> anyhow::Result<()> {
    out!("{}", r.report.render_text());
    outln!(
        "replay of run {}: {} ({} of {} recorded model calls answered)",
        r.recorded_run,
        r.outcome.as_str(),
        r.answered_calls,
        r.recorded_calls
    );
    if let Some(d) = &r.divergence {
        outln!("  first divergence: {d}");
    }
    outln!(
        "  status: recorded {}, replayed {}",
        r.recorded_status,
        r.report.status
    );
    for a in &r.agents {
        let state = |s: Option<crewbox::types::AgentState>| {
            s.map_or_else(|| "-".to_owned(), |s| s.to_string())
        };
        let tree = match a.same_tree {
            Some(true) => ", same tree",
            Some(false) => ", different tree",
            None => "",
        };
        outln!(
            "  agent {}: recorded {}, replayed {}, {} result{tree}",
            a.name,
            state(a.recorded),
            state(a.replayed),
            if a.same_result { "same" } else { "different" }
        );
    }
    outln!(
        "  {}",
        if r.identical {
            "the replay reproduced the recorded run"
        } else {
            "the replay did not reproduce the recorded run"
        }
    );
    Ok(())
}

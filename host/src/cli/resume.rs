//! `crewbox resume [RUN]`: finishes runs a crash (`kill -9`, power loss) or a signal
//! left unfinished. Steps stored as done are read back; only the rest runs again.

use tokio_util::sync::CancellationToken;

use crewbox::RunStatus;

use super::{Context, Exit};

/// Arguments of `crewbox resume`.
#[derive(Debug, Clone, clap::Args)]
pub struct ResumeArgs {
    /// The run (id or unique prefix). Without it: every unfinished run that no live
    /// process drives, oldest first.
    pub run: Option<String>,
    /// Print JSON: the run's report, or a list of reports without RUN.
    #[arg(long)]
    pub json: bool,
    /// Where the rest of its agents execute [default: `executor` in your config].
    #[arg(long, value_enum)]
    pub executor: Option<super::choices::ExecutorChoice>,
}

/// Resumes one run or every orphaned one and prints the reports.
pub async fn run(ctx: Context, args: ResumeArgs) -> anyhow::Result<Exit> {
    let ctx = match args.executor {
        Some(e) => ctx.with_executor(e.into()),
        None => ctx,
    };
    let runs = match &args.run {
        Some(id) => match ctx.run_record(Some(id)).await {
            Ok(run) => vec![run],
            Err(e) if e.is_usage() => {
                errln!("crewbox: {e}");
                return Ok(Exit::Usage);
            }
            Err(e) => return Err(e.into()),
        },
        // Nothing has ever run here: nothing is unfinished either.
        None => ctx.orphaned_runs().await?,
    };
    if runs.is_empty() {
        return nothing_to_resume(args.json);
    }
    let shutdown = CancellationToken::new();
    let engine = super::context::engine(&ctx, shutdown.clone()).await?;
    let mut reports = Vec::with_capacity(runs.len());
    let mut exit = Exit::Ok;
    for run in runs {
        if !args.json {
            errln!("crewbox: resuming run {} ({})", run.id, run.mode);
        }
        let report =
            match super::run::drive(&engine, &shutdown, args.json, engine.resume(&run.id)).await? {
                Ok(report) => report,
                Err(code) => {
                    // A run another process drives, or one that cannot be rebuilt, does
                    // not stop the others from being resumed.
                    exit = code;
                    if code == Exit::Interrupted {
                        break;
                    }
                    continue;
                }
            };
        if report.status != RunStatus::Completed && exit == Exit::Ok {
            exit = Exit::of_report(&report);
        }
        if !args.json {
            out!("{}", report.render_text());
        }
        reports.push(report);
    }
    if args.json {
        if args.run.is_some() && reports.len() == 1 {
            outln!("{}", serde_json::to_string_pretty(&reports[0])?);
        } else {
            outln!("{}", serde_json::to_string_pretty(&reports)?);
        }
    }
    Ok(exit)
}

fn nothing_to_resume(json: bool) -> anyhow::Result<Exit> {
    if json {
        outln!("[]");
    } else {
        outln!("nothing to resume: no unfinished run without a live process");
    }
    Ok(Exit::Ok)
}

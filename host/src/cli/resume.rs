//! `crewbox resume [RUN]`: finishes runs a crash (`kill -9`, power loss) or a signal
//! left unfinished. Steps stored as done are read back; only the rest runs again.

use futures::StreamExt as _;
use tokio_util::sync::CancellationToken;

use crewbox::{EngineError, ErrorClass, RunStatus};

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

/// Runs resumed at once without RUN.
const AT_ONCE: usize = 4;

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
    // Up to `AT_ONCE` runs at a time, each printed as it ends: a run that waits long
    // (for a worker, a slow model) does not hold back the others.
    let resumes = futures::stream::iter(runs.into_iter().enumerate())
        .map(|(i, run)| {
            let engine = engine.clone();
            async move {
                if !args.json {
                    errln!("crewbox: resuming run {} ({})", run.id, run.mode);
                }
                (i, engine.resume(&run.id).await)
            }
        })
        .buffer_unordered(AT_ONCE);
    let ended = super::run::drive(&engine, &shutdown, args.json, async {
        let mut ended = Vec::new();
        futures::pin_mut!(resumes);
        while let Some((i, result)) = resumes.next().await {
            match result {
                Ok(report) => {
                    if !args.json {
                        // A reader that went away does not stop the others' resumes.
                        let _ = std::io::Write::write_all(
                            &mut crate::text::stdout(),
                            report.render_text().as_bytes(),
                        );
                    }
                    ended.push((i, Ok(report)));
                }
                Err(e) => {
                    errln!("crewbox: {e}");
                    let interrupted = e.class() == ErrorClass::Interrupted;
                    ended.push((i, Err(e)));
                    if interrupted {
                        break;
                    }
                }
            }
        }
        Ok::<_, EngineError>(ended)
    })
    .await?;
    let Ok(mut ended) = ended else {
        unreachable!("the future above never fails")
    };
    ended.sort_by_key(|(i, _)| *i);
    for (_, result) in ended {
        match result {
            Ok(report) => {
                if report.status != RunStatus::Completed && exit == Exit::Ok {
                    exit = Exit::of_report(&report);
                }
                reports.push(report);
            }
            // A run another process drives, or one that cannot be rebuilt, does not
            // stop the others from being resumed.
            Err(e) => {
                let code = match e.class() {
                    ErrorClass::Usage => Exit::Usage,
                    ErrorClass::PluginFault => Exit::PluginFault,
                    ErrorClass::Interrupted => Exit::Interrupted,
                };
                if exit != Exit::Interrupted {
                    exit = code;
                }
            }
        }
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

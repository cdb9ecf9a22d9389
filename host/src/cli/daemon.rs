//! `crewbox daemon`: resumes runs a crash left unfinished, then fires scheduled jobs
//! until SIGTERM or SIGINT.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crewbox::AgentId;
use tokio_util::sync::CancellationToken;

use super::{Context, Exit};
use crewbox::types::{FireNotice, LockError};

/// Arguments of `crewbox daemon`.
#[derive(Debug, Clone, clap::Args)]
pub struct DaemonArgs {
    /// Where the agents of fired jobs execute [default: `executor` in your config].
    #[arg(long, value_enum)]
    pub executor: Option<super::choices::ExecutorChoice>,
}

/// Runs the scheduler in the foreground. The first signal stops firing and waits for the
/// runs in flight; a second one exits at once.
pub async fn run(ctx: Context, args: DaemonArgs) -> anyhow::Result<Exit> {
    let ctx = match args.executor {
        Some(e) => ctx.with_executor(e.into()),
        None => ctx,
    };
    // One daemon per state directory, or one `run-now` would fire in each.
    let _lock = match ctx.lock_daemon() {
        Ok(lock) => lock,
        Err(e @ LockError::Held { .. }) => {
            errln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
        Err(e) => return Err(e.into()),
    };
    // Never cancelled on the first signal: runs in flight are allowed to finish.
    let engine = super::context::engine(&ctx, CancellationToken::new()).await?;
    let stop = CancellationToken::new();
    let signals = tokio::spawn(watch_signals(stop.clone()));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<FireNotice>();
    let printer = tokio::spawn(async move {
        while let Some(n) = rx.recv().await {
            let due = n
                .due
                .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                .unwrap_or_else(|| "-".into());
            let run = n.run.as_deref().unwrap_or("-");
            if n.resumed {
                say(format_args!("resume job={} run={run}", n.job));
            } else {
                say(format_args!(
                    "fire job={} due={} missed={} status={} run={run}",
                    n.job, due, n.missed, n.status
                ));
            }
        }
    });
    if !ctx.config().scheduling {
        errln!("crewbox: scheduling is disabled in the configuration; no job will fire");
    }
    let scheduler = engine.scheduler(tx);
    // Runs a crash left unfinished are finished first (alongside the scheduler), even
    // with scheduling disabled. Worktrees they held were pruned when the engine started.
    // A job's run is the scheduler's to resume: as that job's, which stays busy meanwhile.
    let job_runs = scheduler.job_runs().await?;
    let resumed: Vec<_> = engine
        .orphaned_runs()
        .await?
        .into_iter()
        .filter(|run| !job_runs.contains(run.id.as_str()))
        .map(|run| {
            let engine = engine.clone();
            tokio::spawn(async move {
                errln!("crewbox daemon: resuming run {} ({})", run.id, run.mode);
                match engine.resume(&run.id).await {
                    Ok(report) => say(format_args!(
                        "resume run={} status={} exit_reason={}",
                        run.id,
                        report.status,
                        report.exit_reason.map_or("-", |r| r.as_str())
                    )),
                    Err(e) => {
                        say(format_args!("resume run={} status=error", run.id));
                        errln!("crewbox daemon: cannot resume run {}: {e}", run.id);
                    }
                }
            })
        })
        .collect();
    // Transient dead letters are retried alongside, with backoff (`retry_transient`).
    let retries = tokio::spawn(retry_transient(
        engine.clone(),
        ctx.config().retry_transient,
        stop.clone(),
    ));
    errln!("crewbox daemon: running (pid {})", std::process::id());
    let result = scheduler.run(stop).await;
    for r in resumed {
        let _ = r.await;
    }
    let _ = retries.await;
    let _ = printer.await;
    signals.abort();
    result?;
    errln!("crewbox daemon: stopped");
    Ok(Exit::Ok)
}

/// How often the daemon looks for transient dead letters to retry.
const RETRY_POLL: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest a dead letter whose retry was refused is held back.
const RETRY_HOLD_MAX: std::time::Duration = std::time::Duration::from_secs(60);

/// Retries each transient dead letter up to `limit` times, the nth retry waiting the
/// reflect loop's backoff after the failure (2 s, 4 s, 8 s, … capped at 60 s), until
/// `stop`. A retry in flight finishes first.
async fn retry_transient(engine: crewbox::Engine, limit: u32, stop: CancellationToken) {
    if limit == 0 {
        return;
    }
    // Letters whose retry was refused (their run is driven, here or elsewhere), each
    // held back for a while that doubles with every refusal (at most a minute): a
    // refusal does not use a letter up, and retrying it again at once spun the loop.
    let mut held: HashMap<AgentId, (u32, Instant)> = HashMap::new();
    loop {
        let now = Instant::now();
        let holding: HashSet<AgentId> = held
            .iter()
            .filter(|(_, (_, until))| *until > now)
            .map(|(a, _)| a.clone())
            .collect();
        let due = match engine.due_retry(limit, &holding).await {
            Ok(due) => due,
            Err(e) => {
                errln!("crewbox daemon: cannot list dead letters: {e}");
                None
            }
        };
        if let Some(d) = due {
            let overrides = crewbox::types::RetryOverrides::default();
            match engine.retry(&d.agent_id, &overrides).await {
                Ok(report) => {
                    held.remove(&d.agent_id);
                    say(format_args!(
                        "retry agent={} run={} attempt={} status={}",
                        d.agent_id,
                        d.run_id,
                        d.retries + 1,
                        report.status
                    ))
                }
                Err(e) => {
                    let refusals = held.get(&d.agent_id).map_or(0, |(n, _)| *n) + 1;
                    let wait = RETRY_POLL
                        .saturating_mul(1 << refusals.min(6))
                        .min(RETRY_HOLD_MAX);
                    held.insert(d.agent_id.clone(), (refusals, Instant::now() + wait));
                    say(format_args!(
                        "retry agent={} run={} attempt={} status=error",
                        d.agent_id,
                        d.run_id,
                        d.retries + 1
                    ));
                    errln!("crewbox daemon: cannot retry agent {}: {e}", d.agent_id);
                }
            }
            if !stop.is_cancelled() {
                continue;
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(RETRY_POLL) => {}
        }
    }
}

async fn watch_signals(stop: CancellationToken) {
    let mut terminate = super::signals::Terminate::install();
    terminate.recv().await;
    errln!("crewbox daemon: stopping; waiting for runs in flight (signal again to exit now)");
    stop.cancel();
    terminate.recv().await;
    errln!("crewbox daemon: exiting at once");
    std::process::exit(130);
}

/// One line of the daemon's log on stdout; a reader that went away does not stop the
/// scheduler (the line is dropped).
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let _ = writeln!(crate::text::stdout(), "{line}");
}

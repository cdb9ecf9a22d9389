//! `crewbox schedule add|list|rm|pause|resume|run-now`.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{Context, Exit};
use crewbox::types::{CatchUp, FireStatus, Overlap, StoreError};
use crewbox::{JobTiming, ModeChoice, NewJob};

/// Arguments of `crewbox schedule`.
#[derive(Debug, Clone, clap::Args)]
pub struct ScheduleArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ScheduleCommand,
}

/// The `schedule` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ScheduleCommand {
    /// Add a job (fired by `crewbox daemon`).
    Add(Box<AddArgs>),
    /// List jobs.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a job.
    Rm {
        /// The job name.
        name: String,
    },
    /// Stop a job from firing until resumed.
    Pause {
        /// The job name.
        name: String,
    },
    /// Let a paused job fire again.
    Resume {
        /// The job name.
        name: String,
    },
    /// Make the daemon fire a job at its next tick (the job's schedule is kept).
    RunNow {
        /// The job name.
        name: String,
    },
}

impl ScheduleCommand {
    /// Whether it prints JSON.
    pub fn json(&self) -> bool {
        matches!(self, Self::List { json: true })
    }
}

/// Arguments of `crewbox schedule add`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["cron", "every", "at", "in_"])))]
#[command(group(clap::ArgGroup::new("what").required(true).args(["prompt", "prompt_flag"])))]
pub struct AddArgs {
    /// A cron expression: 5 fields (minute first) or 6 (seconds first), or an @alias.
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// Repeat at this interval (at least 1m), e.g. `90m` or `1h30m`.
    #[arg(long, value_name = "DURATION")]
    pub every: Option<String>,
    /// Once, at this RFC 3339 time.
    #[arg(long, value_name = "TIMESTAMP")]
    pub at: Option<String>,
    /// Once, this long from now, e.g. `10m`.
    #[arg(long = "in", id = "in_", value_name = "DURATION")]
    pub in_: Option<String>,
    /// The zone a cron expression is read in [default: config `timezone`, else UTC].
    #[arg(long, value_name = "ZONE")]
    pub tz: Option<String>,
    /// What each run does (as `crewbox run` takes it).
    pub prompt: Option<String>,
    /// The same as the positional PROMPT (the older spelling).
    #[arg(long = "prompt", id = "prompt_flag", value_name = "PROMPT")]
    pub prompt_flag: Option<String>,
    /// The job's name [default: generated].
    #[arg(long)]
    pub name: Option<String>,
    /// Orchestration mode [default: from config].
    #[arg(long, value_parser = super::run::parse_mode)]
    pub mode: Option<ModeChoice>,
    /// Team for team modes.
    #[arg(long)]
    pub team: Option<String>,
    /// Provider name from the config.
    #[arg(long)]
    pub provider: Option<String>,
    /// Model to use instead of the provider's configured one.
    #[arg(long, value_parser = super::run::parse_model)]
    pub model: Option<String>,
    /// Runs missed while the daemon was down: skip them, or run once for all.
    #[arg(long, value_parser = parse_catch_up, default_value = "once")]
    pub catch_up: CatchUp,
    /// A fire while the previous run is going: skip it, or queue one run.
    #[arg(long, value_parser = parse_overlap, default_value = "skip")]
    pub overlap: Overlap,
}

fn parse_catch_up(s: &str) -> Result<CatchUp, String> {
    CatchUp::parse(s).ok_or_else(|| format!("unknown catch-up policy `{s}` (skip or once)"))
}

fn parse_overlap(s: &str) -> Result<Overlap, String> {
    Overlap::parse(s).ok_or_else(|| format!("unknown overlap policy `{s}` (skip or queue)"))
}

/// Runs a `schedule` subcommand.
pub async fn run(ctx: Context, args: ScheduleArgs) -> anyhow::Result<Exit> {
    match args.command {
        ScheduleCommand::Add(a) => add(&ctx, *a).await,
        ScheduleCommand::List { json } => list(&ctx, json).await,
        ScheduleCommand::Rm { name } => {
            done(ctx.remove_schedule(&name).await, &format!("removed {name}"))
        }
        ScheduleCommand::Pause { name } => done(
            ctx.pause_schedule(&name, true).await,
            &format!("paused {name}"),
        ),
        ScheduleCommand::Resume { name } => done(
            ctx.pause_schedule(&name, false).await,
            &format!("resumed {name}"),
        ),
        // Its next fire becomes now, which the daemon's next tick starts (under the
        // job's overlap policy) before planning the schedule again.
        ScheduleCommand::RunNow { name } => done(
            ctx.fire_schedule_now(&name, Utc::now()).await,
            &format!("{name} will fire at the daemon's next tick"),
        ),
    }
}

/// Says `message` (exit 0), or why the job could not be changed: no such job, or a
/// name taken, is a usage error (exit 2).
fn done(result: Result<(), StoreError>, message: &str) -> anyhow::Result<Exit> {
    match result {
        Ok(()) => {
            outln!("{message}");
            Ok(Exit::Ok)
        }
        Err(e @ (StoreError::NoSuchSchedule { .. } | StoreError::ScheduleExists { .. })) => {
            errln!("crewbox: {e}");
            Ok(Exit::Usage)
        }
        Err(e) => Err(e.into()),
    }
}

async fn add(ctx: &Context, a: AddArgs) -> anyhow::Result<Exit> {
    let timing = match (a.cron, a.every, a.at, a.in_) {
        (Some(expr), ..) => JobTiming::Cron(expr),
        (_, Some(every), ..) => JobTiming::Every(every),
        (_, _, Some(at), _) => JobTiming::At(at),
        (.., Some(delay)) => JobTiming::In(delay),
        _ => unreachable!("clap requires one of --cron, --every, --at, --in"),
    };
    let job = NewJob {
        timing,
        tz: a.tz,
        prompt: a.prompt.or(a.prompt_flag).unwrap_or_default(),
        name: a.name,
        mode: a.mode,
        team: a.team,
        provider: a.provider,
        model: a.model,
        catch_up: a.catch_up,
        overlap: a.overlap,
    };
    match ctx.add_schedule(job, Utc::now()).await {
        Ok(added) => {
            outln!(
                "added {}: {}, next fire {}",
                added.job.name,
                added.schedule,
                fmt_ms(added.job.next_fire)
            );
            Ok(Exit::Ok)
        }
        Err(e) if e.is_usage() => {
            errln!("crewbox: {e}");
            Ok(Exit::Usage)
        }
        Err(e) => Err(e.into()),
    }
}

fn rfc3339(ms: Option<i64>) -> Option<String> {
    ms.and_then(DateTime::from_timestamp_millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

fn fmt_ms(ms: Option<i64>) -> String {
    ms.and_then(DateTime::from_timestamp_millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| "-".into())
}

async fn list(ctx: &Context, as_json: bool) -> anyhow::Result<Exit> {
    let jobs = ctx.schedules().await?;
    if as_json {
        let jobs: Vec<_> = jobs
            .iter()
            .map(|j| {
                json!({
                    "name": j.name, "kind": j.kind, "spec": j.spec, "tz": j.tz,
                    "prompt": j.prompt, "catch_up": j.catch_up, "overlap": j.overlap,
                    "mode": j.mode, "team": j.team, "provider": j.provider, "model": j.model,
                    "last_error": j.last_error,
                    "next_fire": rfc3339(j.next_fire),
                    "last_fire": rfc3339(j.last_fire),
                    "last_run": j.last_run, "last_status": j.last_status,
                    "run_count": j.run_count, "paused": j.paused, "queued": j.queued,
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&jobs)?);
        return Ok(Exit::Ok);
    }
    if jobs.is_empty() {
        outln!("no scheduled jobs");
    }
    for j in &jobs {
        let state = if j.paused {
            "paused"
        } else if j.next_fire.is_none() {
            "ended"
        } else {
            "active"
        };
        outln!(
            "{:<24} {:<6} {:<22} {:<7} next {:<20} runs {:<4} last {}",
            j.name,
            j.kind.as_str(),
            j.spec,
            state,
            fmt_ms(j.next_fire),
            j.run_count,
            j.last_status.map(FireStatus::as_str).unwrap_or("-"),
        );
        outln!(
            "{:<24} mode {} · team {} · provider {} · model {}",
            "",
            j.mode.map_or("default", |m| m.as_str()),
            j.team.as_deref().unwrap_or("-"),
            j.provider.as_deref().unwrap_or("default"),
            j.model.as_deref().unwrap_or("default"),
        );
        if let Some(e) = &j.last_error {
            outln!("{:<24} last error: {}", "", crewbox::secrets::clean(e));
        }
    }
    Ok(Exit::Ok)
}

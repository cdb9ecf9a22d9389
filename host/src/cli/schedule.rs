//! `crewbox schedule add|list|rm|pause|resume|run-now`.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::{Context, Exit};
use crate::schedule::{CatchUp, Overlap, ScheduleSpec, validate_job_name, validate_prompt};
use crate::store::{FireStatus, ScheduleRecord, StoreError};
use crewbox::ModeChoice;

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
    #[arg(long)]
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
            let Some(store) = job_store(&ctx, &name)? else {
                return Ok(Exit::Usage);
            };
            done(
                store.remove_schedule(&name).await,
                &format!("removed {name}"),
            )
        }
        ScheduleCommand::Pause { name } => {
            let Some(store) = job_store(&ctx, &name)? else {
                return Ok(Exit::Usage);
            };
            done(
                store.set_schedule_paused(&name, true).await,
                &format!("paused {name}"),
            )
        }
        ScheduleCommand::Resume { name } => {
            let Some(store) = job_store(&ctx, &name)? else {
                return Ok(Exit::Usage);
            };
            done(
                store.set_schedule_paused(&name, false).await,
                &format!("resumed {name}"),
            )
        }
        ScheduleCommand::RunNow { name } => run_now(&ctx, &name).await,
    }
}

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

/// The store holding job `name`, for commands that change a job; without a store
/// there is no such job (said on stderr), and none is created.
fn job_store(ctx: &Context, name: &str) -> anyhow::Result<Option<crate::store::Store>> {
    let store = ctx.store_if_exists()?;
    if store.is_none() {
        errln!(
            "crewbox: {}",
            StoreError::NoSuchSchedule {
                name: name.to_owned()
            }
        );
    }
    Ok(store)
}

fn usage(e: impl std::fmt::Display) -> anyhow::Result<Exit> {
    errln!("crewbox: {e}");
    Ok(Exit::Usage)
}

async fn add(ctx: &Context, a: AddArgs) -> anyhow::Result<Exit> {
    let now = Utc::now();
    let spec = if let Some(expr) = &a.cron {
        ScheduleSpec::cron(
            expr,
            Some(a.tz.as_deref().unwrap_or(&ctx.config().timezone)),
        )
    } else if let Some(every) = &a.every {
        ScheduleSpec::every(every)
    } else if let Some(at) = &a.at {
        ScheduleSpec::at(at, now)
    } else if let Some(delay) = &a.in_ {
        ScheduleSpec::in_from_now(delay, now)
    } else {
        unreachable!("clap requires one of --cron, --every, --at, --in")
    };
    let spec = match spec {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    // Whatever would make every fire fail is refused now, not once a minute later.
    if let Some(tz) = &a.tz
        && let Err(e) = crate::schedule::parse_time_zone(tz)
    {
        return usage(e);
    }
    if let Err(e) = check_job(ctx, &a).await {
        return usage(e);
    }
    let prompt = a
        .prompt
        .clone()
        .or(a.prompt_flag.clone())
        .unwrap_or_default();
    if let Err(e) = validate_prompt(&prompt) {
        return usage(e);
    }
    let name = a.name.clone().unwrap_or_else(|| generated_name(now));
    if let Err(e) = validate_job_name(&name) {
        return usage(e);
    }
    let mut job = ScheduleRecord::new(&name, &spec, &prompt, now);
    job.mode = a.mode;
    job.provider = a.provider;
    job.model = a.model;
    job.team = a.team;
    job.catch_up = a.catch_up;
    job.overlap = a.overlap;
    let store = ctx.open_store()?;
    let next = job.next_fire;
    done(
        store.insert_schedule(&job).await,
        &format!("added {name}: {spec}, next fire {}", fmt_ms(next)),
    )
}

/// The mode, team and provider a job names can run: the team exists and loads, the
/// mode runs it (or, without a team, needs none), and the provider is configured.
async fn check_job(ctx: &Context, a: &AddArgs) -> Result<(), String> {
    let mode = a.mode.unwrap_or(ctx.config().default_mode);
    match (&a.team, mode) {
        (Some(team), ModeChoice::Mode(mode)) if !mode.runs_a_team() => {
            return Err(crewbox::UsageError::NotATeamMode {
                team: team.clone(),
                mode,
            }
            .to_string());
        }
        (None, ModeChoice::Mode(mode)) if mode.runs_a_team() => {
            return Err(crewbox::UsageError::TeamModeWithoutTeam(mode).to_string());
        }
        _ => {}
    }
    if let Some(team) = &a.team {
        let found = ctx
            .teams()
            .await
            .map_err(|e| format!("cannot load the teams: {e}"))?;
        found.find(team).map_err(|e| e.to_string())?;
    }
    // Only the name is checked: the daemon's environment holds the keys, not this one.
    let no_env = |_: &str| Some("set".to_owned());
    ctx.config()
        .choose_provider(a.provider.as_deref(), None, &no_env)
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// `job-` plus the creation time and a random suffix, so names sort by age.
fn generated_name(now: DateTime<Utc>) -> String {
    format!(
        "job-{}-{:04x}",
        now.format("%Y%m%d%H%M%S"),
        fastrand::u16(..)
    )
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
                    "run_count": j.run_count, "paused": j.paused,
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
            outln!("{:<24} last error: {}", "", crate::redact::clean(e));
        }
    }
    Ok(Exit::Ok)
}

/// Marks the job due now: its next fire becomes now, which the daemon's next tick
/// starts (under the job's overlap policy) before planning the schedule again.
async fn run_now(ctx: &Context, name: &str) -> anyhow::Result<Exit> {
    let Some(store) = job_store(ctx, name)? else {
        return Ok(Exit::Usage);
    };
    let result = store.request_schedule_run(name, Utc::now()).await;
    done(
        result,
        &format!("{name} will fire at the daemon's next tick"),
    )
}

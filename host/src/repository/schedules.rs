//! What `crewbox schedule` and `crewbox daemon` ask a repository: adding a job (checked
//! the way every fire would check it), removing, pausing and resuming one, a fire on
//! request; the daemon's lock, its scheduler and the dead letters it retries. Typed
//! answers, typed errors; the binary only renders them.

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::ProviderChoiceError;
use crate::engine::{Engine, UsageError};
use crate::schedule::daemon::{Daemon, DaemonError, FireNotice};
use crate::schedule::lock::{DaemonLock, LockError};
use crate::schedule::spec::ScheduleError;
use crate::schedule::{
    CatchUp, Overlap, ScheduleSpec, parse_time_zone, plan_fires, validate_job_name, validate_prompt,
};
use crate::store::{DeadLetter, FireStatus, ScheduleRecord, StoreError, now_ms};
use crate::team::FindTeamError;
use crate::vocab::{DeadClass, ModeChoice};

use super::{ReadError, Repository};

/// When a new job fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobTiming {
    /// A cron expression: 5 fields (minute first) or 6 (seconds first), or an @alias.
    Cron(String),
    /// Repeatedly, at this interval (at least 1m), e.g. `90m`.
    Every(String),
    /// Once, at this RFC 3339 time.
    At(String),
    /// Once, this long from now, e.g. `10m`.
    In(String),
}

/// A job to add ([`Repository::add_schedule`]).
#[derive(Clone, Debug)]
pub struct NewJob {
    /// When it fires.
    pub timing: JobTiming,
    /// The zone a cron expression is read in (default: the config's `timezone`); any
    /// job's zone must exist.
    pub tz: Option<String>,
    /// What each run does.
    pub prompt: String,
    /// Its name (default: `job-` plus the creation time and a random suffix).
    pub name: Option<String>,
    /// The mode it runs in (default: the config's).
    pub mode: Option<ModeChoice>,
    /// The team of a team mode.
    pub team: Option<String>,
    /// A provider of the config.
    pub provider: Option<String>,
    /// A model instead of the provider's.
    pub model: Option<String>,
    /// What happens to fires missed while the daemon was down.
    pub catch_up: CatchUp,
    /// What happens to a fire while the previous run is going.
    pub overlap: Overlap,
}

/// A job as [`Repository::add_schedule`] stored it.
#[derive(Clone, Debug)]
pub struct AddedJob {
    /// The stored job (its name, its next fire).
    pub job: ScheduleRecord,
    /// Its schedule as a person reads it (`every 1h30m`, `cron … (UTC)`, …).
    pub schedule: String,
}

/// Why a job was not added. Everything that would make each of its fires fail is
/// refused when it is added, not once a minute later.
#[derive(Debug, thiserror::Error)]
pub enum AddJobError {
    /// Its timing, zone, prompt or name is invalid.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// Its mode and team do not go together.
    #[error(transparent)]
    Mode(#[from] UsageError),
    /// The teams cannot be read.
    #[error("cannot load the teams: {0}")]
    Teams(ReadError),
    /// Its team is not there, or does not load.
    #[error(transparent)]
    Team(#[from] FindTeamError),
    /// Its provider is not configured.
    #[error(transparent)]
    Provider(#[from] ProviderChoiceError),
    /// The store cannot be opened or written, or a job of that name exists.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AddJobError {
    /// True when the job itself is wrong (exit code 2), not the store.
    pub fn is_usage(&self) -> bool {
        match self {
            Self::Store(e) => is_job_usage(e),
            Self::Schedule(_)
            | Self::Mode(_)
            | Self::Teams(_)
            | Self::Team(_)
            | Self::Provider(_) => true,
        }
    }
}

/// Whether a store error of a job change is the user's (no such job, a name taken).
fn is_job_usage(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::NoSuchSchedule { .. } | StoreError::ScheduleExists { .. }
    )
}

impl Repository {
    /// Adds a job for `crewbox daemon` to fire, after checking everything a fire would
    /// need: its timing, zone, prompt and name; its mode with its team (which exists and
    /// loads); its provider (by name only: the daemon's environment holds the keys).
    pub async fn add_schedule(
        &self,
        job: NewJob,
        now: DateTime<Utc>,
    ) -> Result<AddedJob, AddJobError> {
        let spec = match &job.timing {
            JobTiming::Cron(expr) => ScheduleSpec::cron(
                expr,
                Some(job.tz.as_deref().unwrap_or(&self.config.timezone)),
            ),
            JobTiming::Every(every) => ScheduleSpec::every(every),
            JobTiming::At(at) => ScheduleSpec::at(at, now),
            JobTiming::In(delay) => ScheduleSpec::in_from_now(delay, now),
        }?;
        if let Some(tz) = &job.tz {
            parse_time_zone(tz)?;
        }
        self.check_job(&job).await?;
        validate_prompt(&job.prompt)?;
        let name = job.name.clone().unwrap_or_else(|| generated_name(now));
        validate_job_name(&name)?;
        let mut record = ScheduleRecord::new(&name, &spec, &job.prompt, now);
        record.mode = job.mode;
        record.provider = job.provider;
        record.model = job.model;
        record.team = job.team;
        record.catch_up = job.catch_up;
        record.overlap = job.overlap;
        let store = self.open_store()?;
        store.insert_schedule(&record).await?;
        Ok(AddedJob {
            job: record,
            schedule: spec.to_string(),
        })
    }

    /// The mode, team and provider a job names can run: the team exists and loads, the
    /// mode runs it (or, without a team, needs none), and the provider is configured.
    async fn check_job(&self, job: &NewJob) -> Result<(), AddJobError> {
        let mode = job.mode.unwrap_or(self.config.default_mode);
        match (&job.team, mode) {
            (Some(team), ModeChoice::Mode(mode)) if !mode.runs_a_team() => {
                return Err(UsageError::NotATeamMode {
                    team: team.clone(),
                    mode,
                }
                .into());
            }
            (None, ModeChoice::Mode(mode)) if mode.runs_a_team() => {
                return Err(UsageError::TeamModeWithoutTeam(mode).into());
            }
            _ => {}
        }
        if let Some(team) = &job.team {
            let found = self.teams().await.map_err(AddJobError::Teams)?;
            found.find(team)?;
        }
        let no_env = |_: &str| Some("set".to_owned());
        self.config
            .choose_provider(job.provider.as_deref(), None, &no_env)?;
        Ok(())
    }

    /// Removes job `name`. Without a store there is no such job, and none is created.
    pub async fn remove_schedule(&self, name: &str) -> Result<(), StoreError> {
        self.job_store(name)?.remove_schedule(name).await
    }

    /// Pauses job `name` (no fire until resumed), or resumes it.
    ///
    /// The due times of a repeating job that passed while it was paused are not missed
    /// fires: resuming records them as one skipped fire (its last due time, so an
    /// interval keeps its grid) before the job is unpaused, so the daemon neither runs
    /// a catch-up for them nor shows a next fire in the past. A one-shot job whose
    /// time passed while paused fires once on resume (skipping it would lose it).
    pub async fn pause_schedule(&self, name: &str, paused: bool) -> Result<(), StoreError> {
        let store = self.job_store(name)?;
        if !paused
            && let Some(job) = store.schedule(name).await?
            && job.paused
            && let Ok(spec) = job.schedule()
            && !spec.is_one_shot()
        {
            let plan = plan_fires(&spec, job.anchor(), Utc::now(), CatchUp::Skip);
            if let Some(due) = plan.due {
                store
                    .record_schedule_fire(name, Some(due), plan.next, FireStatus::Skipped, None)
                    .await?;
            }
        }
        store.set_schedule_paused(name, paused).await
    }

    /// Makes the daemon fire job `name` at its next tick (the schedule is kept).
    pub async fn fire_schedule_now(
        &self,
        name: &str,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.job_store(name)?.request_schedule_run(name, now).await
    }

    /// The store holding job `name`, for a change to it; without a store there is no
    /// such job.
    fn job_store(&self, name: &str) -> Result<crate::store::Store, StoreError> {
        self.store_if_exists()?
            .ok_or_else(|| StoreError::NoSuchSchedule {
                name: name.to_owned(),
            })
    }

    /// Takes the daemon lock of this state directory: one daemon per state directory,
    /// or one `run-now` would fire in each. Held until the lock is dropped.
    pub fn lock_daemon(&self) -> Result<DaemonLock, LockError> {
        DaemonLock::acquire(self.state_dir())
    }
}

/// The scheduler of a repository's jobs, firing them as runs of an engine
/// ([`Engine::scheduler`]).
pub struct Scheduler(Daemon);

impl Scheduler {
    /// Fires jobs until `stop` is cancelled, then waits for the runs in flight. With
    /// scheduling disabled in the config it watches the jobs and fires nothing.
    pub async fn run(self, stop: CancellationToken) -> Result<(), DaemonError> {
        self.0.run(stop).await
    }

    /// The runs of job fires that [`Scheduler::run`] takes over when it starts (each
    /// resumed as its job's, or started when a killed daemon never created it): the
    /// ones a caller resuming orphaned runs beside it leaves alone.
    pub async fn job_runs(&self) -> Result<std::collections::HashSet<String>, StoreError> {
        Daemon::job_runs(&self.0.store).await
    }
}

impl Engine {
    /// The scheduler firing this repository's jobs as runs of this engine; each
    /// decision it takes is sent to `notices`.
    pub fn scheduler(&self, notices: mpsc::UnboundedSender<FireNotice>) -> Scheduler {
        Scheduler(Daemon {
            store: self.store().clone(),
            runner: std::sync::Arc::new(self.clone()),
            enabled: self.config().scheduling,
            notices: Some(notices),
        })
    }

    /// The first transient dead letter due for an automatic retry: retried fewer than
    /// `limit` times, with a step to retry, and whose wait has passed — the nth retry
    /// waits the reflect loop's backoff after the failure (2 s, 4 s, 8 s, … capped at
    /// 60 s). Letters in `held` (ones whose retry was just refused) are passed over.
    pub async fn due_retry(
        &self,
        limit: u32,
        held: &std::collections::HashSet<crate::ids::AgentId>,
    ) -> Result<Option<DeadLetter>, StoreError> {
        let dead = self.store().dead_letters(None).await?;
        let now = now_ms();
        Ok(dead
            .into_iter()
            .find(|d| !held.contains(&d.agent_id) && retry_due(d, limit, now)))
    }
}

/// Whether dead letter `d` is due for its next automatic retry at `now` (Unix ms).
fn retry_due(d: &DeadLetter, limit: u32, now: i64) -> bool {
    let wait = crate::engine::modes::team::reflect_loop::backoff_delay(d.retries + 1);
    let wait = i64::try_from(wait.as_millis()).unwrap_or(i64::MAX);
    d.class == DeadClass::Transient
        && d.step.is_some()
        && d.retries < limit
        && d.finished_at.unwrap_or(0).saturating_add(wait) <= now
}

/// `job-` plus the creation time and a random suffix, so names sort by age.
fn generated_name(now: DateTime<Utc>) -> String {
    format!(
        "job-{}-{:04x}",
        now.format("%Y%m%d%H%M%S"),
        fastrand::u16(..)
    )
}

//! The scheduler loop behind `crewbox daemon`: it re-reads the jobs from the store every
//! tick, fires due ones as ordinary runs and records every decision before acting on it,
//! so a crash right after a fire never fires the same due time twice.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{OverlapAction, plan_fires};
use crate::ids::RunId;
use crate::store::{FireStatus, ScheduleRecord, Store, StoreError, now_ms};

/// Runs a fired job as an ordinary run (the engine implements it; the scheduler never
/// depends on how runs are carried out).
pub trait JobRunner: Send + Sync {
    /// Runs `job` to its end as run `run` (its id is chosen, and recorded with the
    /// fire, before the run is created).
    fn run_job(&self, job: ScheduleRecord, run: RunId) -> BoxFuture<'static, JobOutcome>;
    /// Finishes run `run` of a job, which a daemon stopped or killed left unfinished.
    fn resume_job(&self, run: RunId) -> BoxFuture<'static, JobOutcome>;
}

/// How a job's run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct JobOutcome {
    /// Whether the run was created (else it could not start).
    pub started: bool,
    /// How the fire ended (`Running`: its run is left unfinished, to be resumed).
    pub status: FireStatus,
    /// Why it failed (what `schedule list` shows as the job's last error).
    pub error: Option<String>,
}

impl JobOutcome {
    /// A created run that is at `status` (for `Running`: left unfinished), with its
    /// exit `reason` in the error of one that did not complete.
    pub fn of_run(
        run: &str,
        status: crate::vocab::RunStatus,
        reason: Option<crate::vocab::ExitReason>,
    ) -> Self {
        use crate::vocab::RunStatus;
        let fire = match status {
            RunStatus::Completed => FireStatus::Completed,
            RunStatus::Failed | RunStatus::Diverged => FireStatus::Failed,
            RunStatus::Cancelled => FireStatus::Cancelled,
            RunStatus::Running => FireStatus::Running,
        };
        Self {
            started: true,
            status: fire,
            error: (fire != FireStatus::Completed).then(|| {
                format!(
                    "run {run} {status} ({})",
                    reason.map_or("-", |r| r.as_str())
                )
            }),
        }
    }
}

/// How often the daemon looks at the jobs.
pub const TICK: Duration = Duration::from_millis(250);

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A fire could not be recorded, so it was not started.
    #[error("cannot record a fire of job `{job}`: {source}")]
    Record {
        /// The job.
        job: String,
        /// The store's error.
        source: StoreError,
    },
}

/// One decision the daemon took, for its log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FireNotice {
    /// The job.
    pub job: String,
    /// The due time the decision accounts for (`None`: a `run-now` request or a
    /// queued fire starting).
    pub due: Option<DateTime<Utc>>,
    /// Due times that were missed while the daemon was down.
    pub missed: u32,
    /// What happened.
    pub status: FireStatus,
    /// The run a `running` decision starts (or resumes).
    pub run: Option<String>,
    /// The decision is resuming the job's run a stopped or killed daemon left
    /// unfinished, not a fire.
    pub resumed: bool,
}

/// The scheduler.
pub struct Daemon {
    /// Where jobs live.
    pub store: Store,
    /// Runs fired jobs.
    pub runner: Arc<dyn JobRunner>,
    /// `false` (config `scheduling = false`): watch jobs but fire nothing.
    pub enabled: bool,
    /// Receives a notice per decision (printed by the CLI).
    pub notices: Option<mpsc::UnboundedSender<FireNotice>>,
}

#[derive(Default)]
struct Jobs {
    /// Each job's run going here, by job name, with the run's id: a job is busy while
    /// its stored `active_run` is that run (one removed and added again under the same
    /// name is another job, not busy with the first one's run).
    running: HashMap<String, (String, JoinHandle<()>)>,
    /// Runs of jobs removed (or replaced) while they went: waited for at the end.
    detached: Vec<JoinHandle<()>>,
    /// Jobs with a fire waiting for their run to end. By [`JobKey`], as `resuming`: a
    /// fire queued behind a removed job's run is not started for a job added again
    /// under its name (it started at once, at a time nobody scheduled).
    queued: HashSet<JobKey>,
    /// Jobs whose run a stopped or killed daemon left, resumed here: each is not
    /// looked at until that run ends, then the due times that passed meanwhile are
    /// missed fires like those of the time the daemon was down (its `--catch-up`
    /// applies), not fires during a run (its `--overlap`). A job added again under its
    /// name is another job, not held by the old one's run.
    resuming: HashSet<JobKey>,
}

/// One job, told apart from a job removed and added again under its name (`schedule
/// rm`, `schedule add`): its name and when it was added.
type JobKey = (String, i64);

fn key_of(job: &ScheduleRecord) -> JobKey {
    (job.name.clone(), job.created_at)
}

impl Daemon {
    /// The runs of job fires a daemon stopped or killed left behind (the job's
    /// `active_run`): what `crewbox daemon` does not resume as a plain orphan, because
    /// [`Daemon::run`] resumes each as its job's.
    pub async fn job_runs(store: &Store) -> Result<HashSet<String>, StoreError> {
        Ok(store
            .schedules()
            .await?
            .into_iter()
            .filter_map(|j| j.active_run)
            .collect())
    }

    /// Fires jobs until `stop` is cancelled, then waits for the runs in flight.
    pub async fn run(self, stop: CancellationToken) -> Result<(), DaemonError> {
        let mut jobs = Jobs::default();
        match self.store.schedules().await {
            Ok(list) => {
                for job in &list {
                    self.adopt(job, &mut jobs).await;
                }
                // Fires queued behind a run when the last daemon stopped (or was
                // killed) are queued again: each starts once its job is free.
                if self.enabled {
                    jobs.queued
                        .extend(list.iter().filter(|j| j.queued).map(key_of));
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the jobs' runs and queued fires"),
        }
        let mut ticker = tokio::time::interval(TICK);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut broken = HashSet::new();
        let outcome = loop {
            tokio::select! {
                _ = stop.cancelled() => break Ok(()),
                _ = ticker.tick() => {}
            }
            jobs.running.retain(|_, (_, h)| !h.is_finished());
            jobs.detached.retain(|h| !h.is_finished());
            let Jobs {
                running, resuming, ..
            } = &mut jobs;
            resuming.retain(|(name, _)| running.contains_key(name));
            if !self.enabled {
                continue;
            }
            let list = match self.store.schedules().await {
                Ok(list) => list,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read scheduled jobs; retrying");
                    continue;
                }
            };
            let mut failed = None;
            for job in list {
                if let Err(e) = self.tick_job(&job, &mut jobs, &mut broken).await {
                    failed = Some(e);
                    break;
                }
            }
            if let Some(e) = failed {
                break Err(e);
            }
        };
        for (name, (_, handle)) in jobs.running.drain() {
            tracing::info!(job = %name, "waiting for the job's run to finish");
            let _ = handle.await;
        }
        for handle in jobs.detached.drain(..) {
            let _ = handle.await;
        }
        outcome
    }

    /// Sends `notice` to whoever prints the daemon's decisions.
    fn notify(&self, notice: FireNotice) {
        if let Some(tx) = &self.notices {
            let _ = tx.send(notice);
        }
    }

    /// Takes over the run a job's fire started when the last daemon stopped or was
    /// killed: one still unfinished is resumed as the job's (the job fires nothing
    /// meanwhile, see [`Jobs::resuming`]; the run's end is recorded on the job); one that ended has its end recorded; one never created
    /// (killed between the fire's record and the run's) is started now, once — the fire
    /// was recorded, so no due time fires twice, and none is lost.
    async fn adopt(&self, job: &ScheduleRecord, jobs: &mut Jobs) {
        let Some(run) = job.active_run.clone() else {
            return;
        };
        let id = RunId::from_string(run.clone());
        let stored = match self.store.run(&id).await {
            Ok(stored) => stored,
            Err(e) => {
                tracing::warn!(job = %job.name, run = %run, error = %e, "cannot read the job's run");
                return;
            }
        };
        let handle = match stored {
            Some(r) if r.status != crate::vocab::RunStatus::Running => {
                let outcome = JobOutcome::of_run(&run, r.status, r.exit_reason);
                finished(&self.store, &job.name, &run, outcome).await;
                return;
            }
            Some(_) => {
                tracing::info!(job = %job.name, run = %run, "resuming the job's run");
                self.notify(FireNotice {
                    job: job.name.clone(),
                    due: None,
                    missed: 0,
                    status: FireStatus::Running,
                    run: Some(run.clone()),
                    resumed: true,
                });
                let (runner, store, name) =
                    (self.runner.clone(), self.store.clone(), job.name.clone());
                let r = run.clone();
                jobs.resuming.insert(key_of(job));
                tokio::spawn(async move {
                    let outcome = runner.resume_job(RunId::from_string(r.clone())).await;
                    finished(&store, &name, &r, outcome).await;
                })
            }
            // Starting a run is firing: not with scheduling off (the fire stays
            // recorded, and a daemon with it on starts it).
            None if !self.enabled => return,
            None => {
                tracing::warn!(job = %job.name, run = %run, "the job's last fire was recorded but its run never created; starting it");
                self.notify(FireNotice {
                    job: job.name.clone(),
                    due: None,
                    missed: 0,
                    status: FireStatus::Running,
                    run: Some(run.clone()),
                    resumed: false,
                });
                tokio::spawn(start_run(
                    self.runner.clone(),
                    self.store.clone(),
                    job.clone(),
                    run.clone(),
                ))
            }
        };
        jobs.running.insert(job.name.clone(), (run, handle));
    }

    async fn tick_job(
        &self,
        job: &ScheduleRecord,
        jobs: &mut Jobs,
        broken: &mut HashSet<String>,
    ) -> Result<(), DaemonError> {
        if job.paused || jobs.resuming.contains(&key_of(job)) {
            return Ok(());
        }
        // A job that does not read back (or can never fire) is said once and not read
        // again each tick: finding that a cron date never comes takes a search.
        let key = format!("{}\n{}\n{}", job.name, job.spec, job.tz);
        if broken.contains(&key) {
            return Ok(());
        }
        let spec = match job.schedule() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(job = %job.name, error = %e, "stored job does not parse; skipped");
                broken.insert(key);
                return Ok(());
            }
        };
        let busy = jobs
            .running
            .get(&job.name)
            .is_some_and(|(run, _)| job.active_run.as_ref() == Some(run));
        if !busy && jobs.queued.remove(&key_of(job)) {
            let next = job.next_fire.and_then(DateTime::from_timestamp_millis);
            self.fire(job, None, next, 0, FireStatus::Running, jobs)
                .await?;
            return Ok(());
        }
        let now = Utc::now();
        let plan = plan_fires(&spec, job.anchor(), now, job.catch_up);
        // A `run-now` request moves the stored next fire to now without a due time.
        let requested = plan.due.is_none() && job.next_fire.is_some_and(|n| n <= now_ms());
        if plan.due.is_none() && !requested {
            return Ok(());
        }
        let status = if !plan.fire_now && !requested {
            FireStatus::Skipped
        } else {
            match job
                .overlap
                .on_fire(busy, jobs.queued.contains(&key_of(job)))
            {
                OverlapAction::Start => FireStatus::Running,
                OverlapAction::Drop => FireStatus::Skipped,
                OverlapAction::Enqueue => FireStatus::Queued,
            }
        };
        self.fire(job, plan.due, plan.next, plan.missed, status, jobs)
            .await
    }

    /// Records the decision, then acts on it.
    async fn fire(
        &self,
        job: &ScheduleRecord,
        due: Option<DateTime<Utc>>,
        next: Option<DateTime<Utc>>,
        missed: u32,
        status: FireStatus,
        jobs: &mut Jobs,
    ) -> Result<(), DaemonError> {
        // The run's id is chosen now and recorded with the fire: a daemon killed before
        // the run is created starts it when it comes back (see `adopt`).
        let run = (status == FireStatus::Running).then(|| RunId::new().to_string());
        match self
            .store
            .record_schedule_fire(&job.name, due, next, status, run.as_deref())
            .await
        {
            Ok(()) => {}
            // Removed by `schedule rm` since this tick read it: nothing to fire.
            Err(StoreError::NoSuchSchedule { .. }) => return Ok(()),
            Err(source) => {
                return Err(DaemonError::Record {
                    job: job.name.clone(),
                    source,
                });
            }
        }
        tracing::info!(job = %job.name, ?due, missed, status = %status, "scheduled fire");
        self.notify(FireNotice {
            job: job.name.clone(),
            due,
            missed,
            status,
            run: run.clone(),
            resumed: false,
        });
        match (status, run) {
            (FireStatus::Running, Some(run)) => {
                let handle = tokio::spawn(start_run(
                    self.runner.clone(),
                    self.store.clone(),
                    job.clone(),
                    run.clone(),
                ));
                if let Some((_, earlier)) = jobs.running.insert(job.name.clone(), (run, handle)) {
                    // The run of a job removed and added again under this name.
                    jobs.detached.push(earlier);
                }
            }
            (FireStatus::Running, None) => {}
            (FireStatus::Queued, _) => {
                jobs.queued.insert(key_of(job));
            }
            (
                FireStatus::Completed
                | FireStatus::Failed
                | FireStatus::Cancelled
                | FireStatus::Error
                | FireStatus::Skipped,
                _,
            ) => {}
        }
        Ok(())
    }
}

async fn start_run(runner: Arc<dyn JobRunner>, store: Store, job: ScheduleRecord, run: String) {
    let name = job.name.clone();
    let outcome = runner.run_job(job, RunId::from_string(run.clone())).await;
    finished(&store, &name, &run, outcome).await;
}

/// Records how run `run` of job `name` ended, unless it is left unfinished (a later
/// daemon resumes it as the job's).
async fn finished(store: &Store, name: &str, run: &str, outcome: JobOutcome) {
    if outcome.status == FireStatus::Running {
        tracing::warn!(job = %name, run = %run, "the job's run is left unfinished");
        return;
    }
    if let Err(e) = store
        .record_schedule_finished(
            name,
            run,
            outcome.started,
            outcome.status,
            outcome.error.as_deref(),
        )
        .await
    {
        // The job may have been removed (or added again) while its run was going.
        tracing::debug!(job = %name, error = %e, "run end not recorded on the job");
    }
}

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
use crate::store::{FireStatus, ScheduleRecord, Store, StoreError, now_ms};

/// Runs a fired job as an ordinary run (the engine implements it; the scheduler never
/// depends on how runs are carried out).
pub trait JobRunner: Send + Sync {
    /// Runs `job` to its end.
    fn run_job(&self, job: ScheduleRecord) -> BoxFuture<'static, JobOutcome>;
}

/// How a job's run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct JobOutcome {
    /// The run's id (None when it could not start).
    pub run_id: Option<String>,
    /// How the fire ended.
    pub status: FireStatus,
    /// Why it failed (what `schedule list` shows as the job's last error).
    pub error: Option<String>,
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
    running: HashMap<String, JoinHandle<()>>,
    queued: HashSet<String>,
}

impl Daemon {
    /// Fires jobs until `stop` is cancelled, then waits for the runs in flight.
    pub async fn run(self, stop: CancellationToken) -> Result<(), DaemonError> {
        let mut jobs = Jobs::default();
        // Fires queued behind a run when the last daemon stopped (or was killed) are
        // queued again: each starts once its job is free.
        if self.enabled {
            match self.store.schedules().await {
                Ok(list) => jobs
                    .queued
                    .extend(list.into_iter().filter(|j| j.queued).map(|j| j.name)),
                Err(e) => tracing::warn!(error = %e, "cannot read queued fires"),
            }
        }
        let mut ticker = tokio::time::interval(TICK);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut broken = HashSet::new();
        let outcome = loop {
            tokio::select! {
                _ = stop.cancelled() => break Ok(()),
                _ = ticker.tick() => {}
            }
            jobs.running.retain(|_, h| !h.is_finished());
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
        for (name, handle) in jobs.running.drain() {
            tracing::info!(job = %name, "waiting for the job's run to finish");
            let _ = handle.await;
        }
        outcome
    }

    async fn tick_job(
        &self,
        job: &ScheduleRecord,
        jobs: &mut Jobs,
        broken: &mut HashSet<String>,
    ) -> Result<(), DaemonError> {
        if job.paused {
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
        let busy = jobs.running.contains_key(&job.name);
        if !busy && jobs.queued.remove(&job.name) {
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
            match job.overlap.on_fire(busy, jobs.queued.contains(&job.name)) {
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
        match self
            .store
            .record_schedule_fire(&job.name, due, next, status)
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
        if let Some(tx) = &self.notices {
            let _ = tx.send(FireNotice {
                job: job.name.clone(),
                due,
                missed,
                status,
            });
        }
        match status {
            FireStatus::Running => {
                let handle = tokio::spawn(start_run(
                    self.runner.clone(),
                    self.store.clone(),
                    job.clone(),
                ));
                jobs.running.insert(job.name.clone(), handle);
            }
            FireStatus::Queued => {
                jobs.queued.insert(job.name.clone());
            }
            FireStatus::Completed
            | FireStatus::Failed
            | FireStatus::Cancelled
            | FireStatus::Error
            | FireStatus::Skipped => {}
        }
        Ok(())
    }
}

async fn start_run(runner: Arc<dyn JobRunner>, store: Store, job: ScheduleRecord) {
    let name = job.name.clone();
    let outcome = runner.run_job(job).await;
    if let Err(e) = store
        .record_schedule_finished(
            &name,
            outcome.run_id.as_deref(),
            outcome.status,
            outcome.error.as_deref(),
        )
        .await
    {
        // The job may have been removed while its run was going.
        tracing::debug!(job = %name, error = %e, "run end not recorded on the job");
    }
}

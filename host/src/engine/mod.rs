//! The engine: runs requests to their end through the loop (dispatch → spawn →
//! execute → validate → handoff → join; see ARCHITECTURE.md at the repository root).
//!
//! - [`services`]: store, manager, configuration, repository, breakers, plugins,
//!   worktrees — built once, fields private.
//! - [`run`]: a run's lifecycle (prepare → decide → record → drive → finish), also
//!   for resumed runs.
//! - [`modes`]: one type per mode behind one trait; team modes in `modes/team/`.
//! - [`spawn`]: the spawn queue over the batcher; every agent goes through it to the
//!   [`executor`] (worktree → turn loop → validate → branch).
//! - [`join`]: the one loop awaiting members under a swarm or group join rule.
//! - [`journal`]: typed steps, so a resumed run reads back what is done.
//! - [`report`]: the typed report, built from the store.

mod context;
pub(crate) mod dispatch;
mod error;
pub(crate) mod executor;
mod join;
mod journal;
pub(crate) mod model_access;
pub(crate) mod modes;
pub(crate) mod plugins;
pub(crate) mod providers;
mod recorded;
mod report;
pub(crate) mod request;
mod retry;
mod run;
pub(crate) mod services;
mod spawn;
pub(crate) mod validate;
pub(crate) mod workspace;
mod worktrees;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

pub use dispatch::Decision;
pub use error::{EngineError, ErrorClass, PluginLoadError, PluginStep, RoleCall, UsageError};
pub use providers::DEMO_SCRIPT;
pub use report::{
    AgentReport, ChainLink, CrewDetails, CrewExecution, EvaluatorKind, IntegrationReport,
    MemberEntry, MembersDetails, MergeRecord, ModeDetails, OrchestrateDetails, ReflectDetails,
    RunDetails, RunFault, RunReport, SingleDetails, SwarmDetails, Tokens, VoteGroup,
};
pub use request::{DEFAULT_FIX_ROUNDS, MAX_FIX_ROUNDS, RunRequest, check_model_name};

use crate::config::Config;
use crate::event::EventRecord;
use crate::ids::RunId;
use crate::sandbox::Sandbox;
use crate::store::{RunRecord, Store, StoreError};
use services::Services;
use spawn::SpawnQueue;

/// Runs requests on one repository. Cheap to clone; clones share one store, agent
/// manager, spawn queue and plugin set. Open one with
/// [`Repository::engine`](crate::Repository::engine).
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    services: Arc<Services>,
    spawns: Arc<SpawnQueue>,
    shutdown: CancellationToken,
}

impl Engine {
    /// Opens the engine of `repo` over its `store`, running agents' commands in
    /// `sandbox`, with agent worktrees in `worktrees_dir`, and agents through the
    /// executor `executor` builds. Runs in flight are left
    /// resumable when `shutdown` is cancelled.
    pub(crate) async fn open(
        repo: PathBuf,
        store: Store,
        sandbox: Sandbox,
        worktrees_dir: &std::path::Path,
        config: Arc<Config>,
        executor: &dyn executor::ExecutorFactory,
        shutdown: CancellationToken,
    ) -> Result<Self, EngineError> {
        let concurrency = config.max_concurrent;
        let services = Arc::new(
            Services::open(repo, store, sandbox, worktrees_dir, config, concurrency).await?,
        );
        let executor = executor.build(services.clone()).await?;
        let spawns = Arc::new(SpawnQueue::start(executor, services.store().clone()));
        // `spawn_agent` children take the same path as every other agent.
        services
            .manager()
            .route_children(Arc::new(spawn::QueuedChildren::new(
                &spawns,
                services.store().clone(),
            )));
        Ok(Self {
            inner: Arc::new(Inner {
                services,
                spawns,
                shutdown,
            }),
        })
    }

    /// Runs a request to its end and returns its report. Agents failing is a report
    /// that says so; an `Err` means the run could not be carried out (or, for
    /// [`EngineError::Interrupted`], was left resumable by a shutdown).
    pub async fn run(&self, req: RunRequest) -> Result<RunReport, EngineError> {
        run::start(&self.inner, req, None, None).await
    }

    /// [`run`](Self::run), telling `started` the run's id as soon as the run is
    /// recorded (before any agent starts). A request refused before that drops
    /// `started` unsent; the refusal is the `Err`.
    pub async fn run_announced(
        &self,
        req: RunRequest,
        started: tokio::sync::oneshot::Sender<RunId>,
    ) -> Result<RunReport, EngineError> {
        run::start(&self.inner, req, Some(started), None).await
    }

    /// Finishes a run a crash or a signal left unfinished: stored steps are read back,
    /// only the rest runs again. Refused while a live process drives it.
    pub async fn resume(&self, id: &RunId) -> Result<RunReport, EngineError> {
        run::resume(&self.inner, id, None).await
    }

    /// [`resume`](Self::resume), telling `claimed` the run's id as soon as this process
    /// holds the run (before anything of it runs again). A resume refused before that
    /// (no such run, finished, driven by a live process) drops `claimed` unsent; the
    /// refusal is the `Err`.
    pub async fn resume_announced(
        &self,
        id: &RunId,
        claimed: tokio::sync::oneshot::Sender<RunId>,
    ) -> Result<RunReport, EngineError> {
        run::resume(&self.inner, id, Some(claimed)).await
    }

    /// Runs dead letter `agent` (an agent that ended `error` or `aborted`) again inside
    /// its run, from its last stored conversation unless `overrides.fresh`, and
    /// finishes the run: its join, later stages and report take the new result.
    pub async fn retry(
        &self,
        agent: &crate::ids::AgentId,
        overrides: &crate::store::RetryOverrides,
    ) -> Result<RunReport, EngineError> {
        retry::retry(&self.inner, agent, overrides).await
    }

    /// Unfinished runs whose driving process is gone, oldest first (what a bare
    /// `crewbox resume` finishes).
    pub async fn orphaned_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.inner.services.store().orphaned_runs().await
    }

    /// Every event this engine stores from now on, with its sequence number, as it is
    /// committed. A receiver that falls behind gets `Lagged` and can read the missed
    /// sequence numbers back from the event log.
    pub fn subscribe(&self) -> broadcast::Receiver<EventRecord> {
        self.inner.services.store().subscribe()
    }

    /// The store this engine writes (unstable: for crewbox's own commands and tests).
    #[doc(hidden)]
    pub fn store(&self) -> &Store {
        self.inner.services.store()
    }

    /// The process sandbox agents' commands run in (unstable: for crewbox's own
    /// commands, which warn when it is off).
    #[doc(hidden)]
    pub fn sandbox(&self) -> &Sandbox {
        self.inner.services.manager().sandbox()
    }

    /// The configuration runs use (unstable: for crewbox's own commands).
    #[doc(hidden)]
    pub fn config(&self) -> &Config {
        self.inner.services.config()
    }
}

/// A scheduled job fires as an ordinary run of this engine.
impl crate::schedule::daemon::JobRunner for Engine {
    fn run_job(
        &self,
        job: crate::store::ScheduleRecord,
        run: RunId,
    ) -> futures::future::BoxFuture<'static, crate::schedule::daemon::JobOutcome> {
        let engine = self.clone();
        Box::pin(async move {
            let req = RunRequest {
                prompt: job.prompt.clone(),
                mode: job.mode,
                provider: job.provider.clone(),
                model: job.model.clone(),
                team: job.team.clone(),
                ..RunRequest::default()
            };
            let ended = run::start(&engine.inner, req, None, Some(run.clone())).await;
            if let Err(e) = &ended {
                tracing::warn!(job = %job.name, run = %run, error = %e, "scheduled run failed");
            }
            engine.job_outcome(&run, ended).await
        })
    }

    fn resume_job(
        &self,
        run: RunId,
    ) -> futures::future::BoxFuture<'static, crate::schedule::daemon::JobOutcome> {
        let engine = self.clone();
        Box::pin(async move {
            let ended = engine.resume(&run).await;
            if let Err(e) = &ended {
                tracing::warn!(run = %run, error = %e, "scheduled run not resumed");
            }
            engine.job_outcome(&run, ended).await
        })
    }
}

impl Engine {
    /// How a job's run `run` went, from its report or, when it did not end with one,
    /// from what the store says of it.
    async fn job_outcome(
        &self,
        run: &RunId,
        ended: Result<RunReport, EngineError>,
    ) -> crate::schedule::daemon::JobOutcome {
        use crate::schedule::daemon::JobOutcome;
        use crate::store::FireStatus;
        match ended {
            Ok(report) => JobOutcome::of_run(run.as_str(), report.status, report.exit_reason),
            Err(e) => match self.store().run(run).await {
                // It was never created: it could not start.
                Ok(None) => JobOutcome {
                    started: false,
                    status: FireStatus::Error,
                    error: Some(e.to_string()),
                },
                // Created: it ended (a resume of one that had), or it is left
                // unfinished (`Running`: a later daemon resumes it as the job's).
                Ok(Some(record)) => {
                    JobOutcome::of_run(run.as_str(), record.status, record.exit_reason)
                }
                Err(read) => {
                    tracing::warn!(run = %run, error = %read, "cannot read a scheduled run");
                    JobOutcome {
                        started: true,
                        status: FireStatus::Running,
                        error: None,
                    }
                }
            },
        }
    }
}

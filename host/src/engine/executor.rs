//! Executing one agent with everything that makes its work safe to use: its own
//! worktree (when it can write), the turn loop, validators with fix rounds, and its
//! changes committed to a branch that becomes its `branch` artifact.
//!
//! [`Executor`] is the boundary the spawn queue calls: [`LocalExecutor`] runs agents in
//! this process; an executor for remote workers implements the same trait (it can take
//! [`Placement::Isolated`] jobs, which name only a base commit; a [`Placement::Held`]
//! worktree is this machine's and stays local).

use std::sync::Arc;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::error::EngineError;
use super::model_access::ProviderModel;
use super::services::Services;
use super::validate::{RoundResult, ValidationStatus, ValidatorEntry, ValidatorReview};
use super::worktrees::{self, HeldWorktree, WorktreeResult};
use crate::agent::manager::{Review, Seal, SpawnOptions};
use crate::agent::runner::{AgentOutcome, AgentSpec};
use crate::event::Event;
use crate::ids::AgentId;
use crate::plugin::ModelAccess;
use crate::provider::{AgentLabel, Message};
use crate::vocab::{Capability, Isolation};
use crate::worktree::BranchArtifact;

/// How an agent is validated and isolated. Built by the run context (its one
/// constructor for run agents) or [`ExecOptions::unvalidated`].
#[derive(Clone, Default)]
pub(crate) struct ExecOptions {
    /// Worktree or in place, for agents that can write.
    pub isolation: Isolation,
    /// Validators run after it completes.
    pub validators: Vec<ValidatorEntry>,
    /// Most fix rounds the validators can ask for.
    pub max_fix_rounds: u32,
}

impl ExecOptions {
    /// No validators, in place: orchestrators, planners and reviewers.
    pub(crate) fn unvalidated() -> Self {
        Self {
            isolation: Isolation::None,
            validators: Vec::new(),
            max_fix_rounds: 0,
        }
    }
}

/// Where an agent works.
pub(crate) enum Placement {
    /// Its own worktree at `base` (a commit) or HEAD when it can write and the options
    /// isolate; finished (committed) when it ends. Otherwise `spec.workspace`.
    Isolated {
        /// The commit to start from (a predecessor's branch tip).
        base: Option<String>,
    },
    /// A worktree the mode holds across several agents (crew revisions); the mode
    /// finishes it.
    Held(HeldWorktree),
    /// A read-only agent reads a checkout of `base` (a team run's integration head),
    /// thrown away when it ends.
    Reader {
        /// The commit to read.
        base: String,
    },
    /// A `spawn_agent` child: it works in its parent's workspace (`spec.workspace`), in
    /// its parent's slot, and its parent's end commits what it changed.
    WithParent,
}

/// Tells jobs of a stopped run not to start.
#[derive(Clone, Default)]
pub(crate) struct Stop {
    run: CancellationToken,
    shutdown: CancellationToken,
}

impl Stop {
    /// Stopped when either the run is stopped or the process shuts down.
    pub(crate) fn new(run: CancellationToken, shutdown: CancellationToken) -> Self {
        Self { run, shutdown }
    }

    /// True once the run was stopped or the process is shutting down.
    pub(crate) fn is_stopped(&self) -> bool {
        self.run.is_cancelled() || self.shutdown.is_cancelled()
    }

    /// Resolves when the run is stopped on request.
    pub(crate) async fn run_stopped(&self) {
        self.run.cancelled().await;
    }
}

/// One agent to execute.
pub(crate) struct Job {
    /// The agent.
    pub spec: AgentSpec,
    /// How it is validated and isolated.
    pub opts: ExecOptions,
    /// Where it works.
    pub placement: Placement,
    /// Start from this conversation instead of system + task.
    pub history: Option<Vec<Message>>,
    /// How it was joined (`group:ID`, `swarm:ID`), set by the spawn queue.
    pub join: Option<String>,
    /// Its run's stop signal.
    pub stop: Stop,
    /// A [`Placement::Held`] worktree is checkpointed to this ref as the agent ends,
    /// before its end is stored (a crew executor's), so a resume finds its state.
    pub checkpoint: Option<String>,
    /// When the mode made it (ms): its stored creation time, so agents a mode makes in
    /// order keep that order however their executions are scheduled.
    pub created_at: i64,
}

impl Job {
    /// A job for `spec` isolated at HEAD as `opts` say.
    pub(crate) fn new(spec: AgentSpec, opts: ExecOptions, stop: Stop) -> Self {
        Self {
            spec,
            opts,
            placement: Placement::Isolated { base: None },
            history: None,
            join: None,
            stop,
            checkpoint: None,
            created_at: crate::store::now_ms(),
        }
    }
}

/// What executing an agent produced.
#[derive(Clone, Debug)]
pub(crate) struct ExecResult {
    /// The agent's id.
    pub agent_id: AgentId,
    /// How its turn loop ended.
    pub outcome: AgentOutcome,
    /// Paths it changed (its own worktree only).
    pub changed: Vec<String>,
    /// Its unified diff against its base (its own worktree only).
    pub diff: String,
    /// The branch holding its commit, when it changed something in its own worktree.
    pub branch: Option<BranchArtifact>,
    /// How validation ended.
    pub validation: ValidationStatus,
    /// Every validator result of every round.
    pub rounds: Vec<RoundResult>,
}

/// Runs agents. The spawn queue is its only caller.
#[async_trait]
pub(crate) trait Executor: Send + Sync {
    /// Runs `job` to its end.
    async fn execute(&self, job: Job) -> Result<ExecResult, EngineError>;
}

/// Builds an engine's executor over its services. The composition root
/// (`repository/`) chooses one from the user's config; the engine never names the
/// executors above it (scale-out lives in `remote/`).
#[async_trait]
pub(crate) trait ExecutorFactory: Send + Sync {
    /// The executor over `services`.
    async fn build(&self, services: Arc<Services>) -> Result<Arc<dyn Executor>, EngineError>;
}

/// Agents in this process: the executor of `executor = "local"`.
pub(crate) struct InProcess;

#[async_trait]
impl ExecutorFactory for InProcess {
    async fn build(&self, services: Arc<Services>) -> Result<Arc<dyn Executor>, EngineError> {
        Ok(Arc::new(LocalExecutor::new(services)))
    }
}

/// Runs agents in this process.
pub(crate) struct LocalExecutor {
    services: Arc<Services>,
}

impl LocalExecutor {
    /// An executor over the engine's services.
    pub(crate) fn new(services: Arc<Services>) -> Self {
        Self { services }
    }
}

#[async_trait]
impl Executor for LocalExecutor {
    async fn execute(&self, job: Job) -> Result<ExecResult, EngineError> {
        let Job {
            mut spec,
            opts,
            placement,
            history,
            join,
            stop,
            checkpoint,
            created_at,
        } = job;
        if stop.is_stopped() {
            return Err(EngineError::Stopped(spec.run_id));
        }
        let mut reader = false;
        let in_parent_slot = matches!(placement, Placement::WithParent);
        let (held, owned) = match placement {
            Placement::WithParent => (None, false),
            Placement::Held(held) => (Some(held), false),
            Placement::Reader { base } => {
                reader = true;
                let held = worktrees::acquire(&self.services, &mut spec, Some(&base)).await?;
                (Some(held), true)
            }
            Placement::Isolated { base } => {
                let isolate = opts.isolation == Isolation::Worktree
                    && spec.perms.caps.contains(Capability::Write);
                if isolate {
                    let held =
                        worktrees::acquire(&self.services, &mut spec, base.as_deref()).await?;
                    (Some(held), true)
                } else {
                    (None, false)
                }
            }
        };
        let review = (!opts.validators.is_empty()).then(|| {
            Arc::new(ValidatorReview::new(
                opts.validators.clone(),
                self.services.store().clone(),
                held.clone(),
                Some(validator_model(&spec)),
            ))
        });
        let seal = Arc::new(WorktreeSeal {
            services: self.services.clone(),
            review: review.clone(),
            held: std::sync::Mutex::new(held.map(|h| (h, owned, reader))),
            checkpoint,
            done: std::sync::Mutex::new(None),
        });
        let spawn = SpawnOptions {
            join,
            review: review.clone().map(|r| r as Arc<dyn Review>),
            max_fix_rounds: opts.max_fix_rounds,
            history,
            seal: Some(seal.clone() as Arc<dyn Seal>),
            in_parent_slot,
            created_at: Some(created_at),
        };
        let outcome = self
            .services
            .manager()
            .spawn(spec.clone(), spawn)
            .await?
            .wait()
            .await;
        let (validation, rounds, wt) = seal.take(&spec, &outcome).await?;
        Ok(ExecResult {
            agent_id: spec.id,
            outcome,
            changed: wt.changed,
            diff: wt.diff,
            branch: wt.branch,
            validation,
            rounds,
        })
    }
}

/// What sealing an agent's work left: how validation ended, every round, and what its
/// worktree left behind.
type Sealed = (ValidationStatus, Vec<RoundResult>, WorktreeResult);

/// Seals an agent's work before its end is stored: validation recorded, its own
/// worktree committed to its branch (a reader's thrown away). So an agent the store
/// says completed has its branch, and a resume finishes its step from the store.
struct WorktreeSeal {
    services: Arc<Services>,
    review: Option<Arc<ValidatorReview>>,
    /// The worktree, whether the agent owns it, whether it only reads it.
    held: std::sync::Mutex<Option<(HeldWorktree, bool, bool)>>,
    /// The ref a held worktree is checkpointed to.
    checkpoint: Option<String>,
    done: std::sync::Mutex<Option<Result<Sealed, EngineError>>>,
}

impl WorktreeSeal {
    async fn seal_now(
        &self,
        spec: &AgentSpec,
        outcome: &AgentOutcome,
    ) -> Result<Sealed, EngineError> {
        let (validation, rounds) = match &self.review {
            Some(r) => {
                r.release_worktree();
                (r.status(), r.rounds())
            }
            None => (ValidationStatus::Skipped, Vec::new()),
        };
        if validation != ValidationStatus::Skipped {
            let last = rounds.iter().map(|r| r.round).max().unwrap_or(0);
            self.services
                .store()
                .append_event(
                    &spec.run_id,
                    Some(&spec.id),
                    Event::AgentValidation {
                        status: validation,
                        fix_rounds: last,
                    },
                )
                .await?;
        }
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner()).take();
        let wt =
            match held {
                Some((held, _, true)) => {
                    worktrees::discard(spec, held).await?;
                    WorktreeResult::default()
                }
                Some((held, true, false)) => {
                    worktrees::finish(&self.services, spec, held, &outcome.result).await?
                }
                Some(((manager, wt), false, false)) => {
                    if let Some(reference) = &self.checkpoint {
                        let message = format!("crewbox checkpoint: agent {}", spec.id);
                        let commit = manager.checkpoint(&wt, reference, &message).await.map_err(
                            |source| EngineError::Worktree {
                                agent: spec.id.clone(),
                                source,
                            },
                        )?;
                        self.services
                            .store()
                            .append_event(
                                &spec.run_id,
                                Some(&spec.id),
                                Event::AgentCheckpoint { commit },
                            )
                            .await?;
                    }
                    WorktreeResult::default()
                }
                None => WorktreeResult::default(),
            };
        Ok((validation, rounds, wt))
    }

    /// What sealing left: sealed now if the agent ended without reaching its seal
    /// (stopped before it started, or its task failed).
    async fn take(&self, spec: &AgentSpec, outcome: &AgentOutcome) -> Result<Sealed, EngineError> {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner()).take();
        match done {
            Some(sealed) => sealed,
            None => self.seal_now(spec, outcome).await,
        }
    }
}

#[async_trait]
impl Seal for WorktreeSeal {
    async fn seal(&self, spec: &AgentSpec, outcome: &AgentOutcome) {
        let sealed = self.seal_now(spec, outcome).await;
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(sealed);
    }
}

/// The model a validator of `spec` may use: the agent's own provider, labelled as its
/// validator (scripts can match on it).
fn validator_model(spec: &AgentSpec) -> Arc<dyn ModelAccess> {
    let label = AgentLabel {
        id: format!("{}-validator", spec.id),
        name: "validator".into(),
        role: "validator".into(),
    };
    Arc::new(ProviderModel::new(spec.provider.clone(), label))
}

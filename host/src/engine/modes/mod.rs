//! The orchestration modes: one type per mode, each implementing [`Mode`]. A mode gets
//! its run's context and returns how the run ended; every agent it starts goes through
//! the spawn queue. A new mode is a file here (or in `team/`), a variant of
//! [`crate::vocab::Mode`] and an arm in [`mode`].

mod crew;
mod single;
pub(crate) mod swarm;
pub(crate) mod team;

use async_trait::async_trait;

use super::context::RunContext;
use super::error::EngineError;
use super::report::{ModeDetails, RunFault};
use crate::event::RoundResult;
use crate::event::{ValidationStatus, VerdictOutcome};
use crate::vocab::{self, AgentState, ExitReason, RunStatus};

/// One orchestration mode.
#[async_trait]
pub(crate) trait Mode: Send + Sync {
    /// Runs the mode to its end. An `Err` fails the run (a plugin fault is recorded as
    /// the run's `fault`); agents failing are an `Ok` outcome that says so.
    async fn run(&self, ctx: &RunContext) -> Result<ModeOutcome, EngineError>;
}

/// The implementation of `kind`.
pub(crate) fn mode(kind: vocab::Mode) -> &'static dyn Mode {
    match kind {
        vocab::Mode::Single => &single::Single,
        vocab::Mode::Swarm => &swarm::Swarm,
        vocab::Mode::Crew => &crew::Crew,
        vocab::Mode::Broadcast => &team::broadcast::Broadcast,
        vocab::Mode::Sequential => &team::sequential::Sequential,
        vocab::Mode::Orchestrate => &team::orchestrate::Orchestrate,
        vocab::Mode::Reflect => &team::reflect::Reflect,
    }
}

/// How a mode ended.
pub(crate) struct ModeOutcome {
    /// Run status.
    pub status: RunStatus,
    /// Why.
    pub reason: ExitReason,
    /// The final text.
    pub result: String,
    /// The mode's own facts for the report.
    pub details: Option<ModeDetails>,
    /// The plugin fault that decided the run, if one did.
    pub fault: Option<RunFault>,
}

impl ModeOutcome {
    /// A run that ended as `status`/`reason` with `result`.
    pub(crate) fn new(
        (status, reason): (RunStatus, ExitReason),
        result: String,
        details: ModeDetails,
    ) -> Self {
        Self {
            status,
            reason,
            result,
            details: Some(details),
            fault: None,
        }
    }

    /// A failed run.
    pub(crate) fn failed(result: String, details: ModeDetails) -> Self {
        Self::new((RunStatus::Failed, ExitReason::Failed), result, details)
    }
}

/// Run status and exit reason for a finished agent whose work is the run's result.
pub(crate) fn status_of(
    state: AgentState,
    validation: ValidationStatus,
) -> (RunStatus, ExitReason) {
    use ValidationStatus as V;
    match (state, validation) {
        (AgentState::Completed | AgentState::Steered, V::Passed | V::Skipped) => {
            (RunStatus::Completed, ExitReason::GoalMet)
        }
        (AgentState::Completed | AgentState::Steered, V::ValidationFailed | V::Faulted) => {
            (RunStatus::Failed, ExitReason::Failed)
        }
        (AgentState::Stopped, _) => (RunStatus::Cancelled, ExitReason::Cancelled),
        (AgentState::Queued | AgentState::Running | AgentState::Error | AgentState::Aborted, _) => {
            (RunStatus::Failed, ExitReason::Failed)
        }
    }
}

/// The fault that decided a run whose result is an agent's validated work: a validator
/// that trapped or hit a limit in the agent's last round.
pub(crate) fn validator_fault(
    validation: ValidationStatus,
    rounds: &[RoundResult],
) -> Option<RunFault> {
    if validation != ValidationStatus::Faulted {
        return None;
    }
    let last = rounds.iter().map(|r| r.round).max()?;
    rounds
        .iter()
        .filter(|r| r.round == last)
        .find_map(|r| match &r.outcome {
            VerdictOutcome::Fault { fault } => Some(RunFault {
                step: super::error::PluginStep::Validate {
                    validator: r.validator.clone(),
                }
                .to_string(),
                fault: fault.clone(),
            }),
            VerdictOutcome::Passed { .. }
            | VerdictOutcome::Failed { .. }
            | VerdictOutcome::Error { .. } => None,
        })
}

//! Agents run as journal steps: an agent whose step is stored as done is read back
//! instead of run again; a fresh one is recorded as begun before it starts and its
//! result is stored the moment it ends. `single`, the `swarm` members and each crew
//! position go through here (team members go through `modes/team::run_group`, which
//! stores a member's own shape of result). The result text itself is the agent row's
//! (replies run to megabytes and are stored once); a step stores everything else.

use serde::{Deserialize, Serialize};

use super::context::RunContext;
use super::error::EngineError;
use super::executor::{ExecResult, Job};
use super::journal::{Journal, StepInput, StepKey};
use crate::agent::AgentState;
use crate::agent::runner::{AgentOutcome, FailReason};
use crate::event::{RoundResult, ValidationStatus};
use crate::ids::AgentId;
use crate::store::AgentStats;
use crate::worktree::BranchArtifact;

/// An executed agent as its step stores it: everything a mode reads of an
/// [`ExecResult`] but the result text (in the agent's row) and the conversation
/// (stored beside it where a later agent continues it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct StoredExec {
    /// The agent.
    pub agent_id: String,
    /// Its end state.
    pub state: AgentState,
    /// Why it failed.
    #[serde(default)]
    pub error: Option<String>,
    /// Why it failed, as a kind.
    #[serde(default)]
    pub reason: Option<FailReason>,
    /// Its counters.
    #[serde(default)]
    pub stats: AgentStats,
    /// Paths it changed in its own worktree.
    #[serde(default)]
    pub changed: Vec<String>,
    /// Its diff against its base.
    #[serde(default)]
    pub diff: String,
    /// Its branch.
    #[serde(default)]
    pub branch: Option<BranchArtifact>,
    /// How validation ended.
    pub validation: ValidationStatus,
    /// Every validator result.
    #[serde(default)]
    pub rounds: Vec<RoundResult>,
    /// The commit checkpointing the worktree it shares with later agents (a crew
    /// executor's), as it was when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

impl StoredExec {
    /// The stored form of `r`.
    pub(crate) fn of(r: &ExecResult) -> Self {
        let o = &r.outcome;
        Self {
            agent_id: r.agent_id.to_string(),
            state: o.state,
            error: o.error.clone(),
            reason: o.reason,
            stats: o.stats,
            changed: r.changed.clone(),
            diff: r.diff.clone(),
            branch: r.branch.clone(),
            validation: r.validation,
            rounds: r.rounds.clone(),
            checkpoint: None,
        }
    }

    /// The result read back, with the agent's `result` text and its `history`.
    fn into_result(self, result: String, history: Vec<crate::provider::Message>) -> ExecResult {
        ExecResult {
            agent_id: AgentId::from_string(self.agent_id),
            outcome: AgentOutcome {
                state: self.state,
                stats: self.stats,
                result,
                error: self.error,
                exceeded: None,
                reason: self.reason,
                history,
            },
            changed: self.changed,
            diff: self.diff,
            branch: self.branch,
            validation: self.validation,
            rounds: self.rounds,
        }
    }
}

/// Records that `job`'s agent begins step `key`.
pub(crate) async fn begin(journal: &Journal, key: &StepKey, job: &Job) -> Result<(), EngineError> {
    let input = StepInput {
        name: &job.spec.name,
        task: None,
    };
    Ok(journal.begin(key, Some(&job.spec.id), &input).await?)
}

/// Stores `r` as step `key`'s result.
pub(crate) async fn record(
    journal: &Journal,
    key: &StepKey,
    r: &ExecResult,
) -> Result<(), EngineError> {
    Ok(journal
        .finish(key, Some(&r.agent_id), &StoredExec::of(r), Vec::new())
        .await?)
}

impl RunContext {
    /// The result of step `key` when it is stored as done, with its agent's result
    /// text and, when stored, its conversation.
    pub(crate) async fn replay(&self, key: &StepKey) -> Result<Option<ExecResult>, EngineError> {
        let Some(stored) = self.journal.done::<StoredExec>(key) else {
            return Ok(None);
        };
        let id = AgentId::from_string(stored.agent_id.clone());
        let result = self
            .services()
            .store()
            .agent(&id)
            .await?
            .and_then(|a| a.result)
            .unwrap_or_default();
        let history = self.journal.conversation(key).unwrap_or_default();
        Ok(Some(stored.into_result(result, history)))
    }

    /// Runs `job` on its own as step `key`, or reads its stored result back.
    pub(crate) async fn execute_step(
        &self,
        key: &StepKey,
        job: Job,
    ) -> Result<ExecResult, EngineError> {
        if let Some(done) = self.replay(key).await? {
            return Ok(done);
        }
        begin(&self.journal, key, &job).await?;
        let r = self.execute(job).await?;
        record(&self.journal, key, &r).await?;
        Ok(r)
    }
}

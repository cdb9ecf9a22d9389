//! Agents run as journal steps: an agent whose step is stored as done is read back
//! instead of run again; a fresh one is recorded as begun before it starts and its
//! result, with its final conversation, is stored the moment it ends. `single`, the
//! `swarm` members and each crew position go through here (team members go through
//! `modes/team::run_group`, which stores a member's own shape of result).

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
/// [`ExecResult`] (the conversation is stored beside it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct StoredExec {
    /// The agent.
    pub agent_id: String,
    /// Its end state.
    pub state: AgentState,
    /// Its final text.
    pub result: String,
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
            result: o.result.clone(),
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

    /// The result read back, with the conversation stored beside it.
    pub(crate) fn into_result(self, history: Vec<crate::provider::Message>) -> ExecResult {
        ExecResult {
            agent_id: AgentId::from_string(self.agent_id),
            outcome: AgentOutcome {
                state: self.state,
                stats: self.stats,
                result: self.result,
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

/// The result of step `key` when it is stored as done.
pub(crate) fn replay(journal: &Journal, key: &StepKey) -> Option<ExecResult> {
    let stored = journal.done::<StoredExec>(key)?;
    Some(stored.into_result(journal.conversation(key).unwrap_or_default()))
}

/// Records that `job`'s agent begins step `key`.
pub(crate) async fn begin(journal: &Journal, key: &StepKey, job: &Job) -> Result<(), EngineError> {
    let input = StepInput {
        name: &job.spec.name,
        task: None,
    };
    Ok(journal.begin(key, Some(&job.spec.id), &input).await?)
}

/// Stores `r` as step `key`'s result, with the agent's final conversation.
pub(crate) async fn record(
    journal: &Journal,
    key: &StepKey,
    r: &ExecResult,
) -> Result<(), EngineError> {
    Ok(journal
        .finish_agent(key, &r.agent_id, &StoredExec::of(r), &r.outcome.history)
        .await?)
}

impl RunContext {
    /// Runs `job` on its own as step `key`, or reads its stored result back.
    pub(crate) async fn execute_step(
        &self,
        key: &StepKey,
        job: Job,
    ) -> Result<ExecResult, EngineError> {
        if let Some(done) = replay(&self.journal, key) {
            return Ok(done);
        }
        begin(&self.journal, key, &job).await?;
        let r = self.execute(job).await?;
        record(&self.journal, key, &r).await?;
        Ok(r)
    }
}

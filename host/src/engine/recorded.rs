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
use super::worktrees::DIFF_CAP;
use crate::agent::runner::{AgentOutcome, FailReason};
use crate::event::{Artifact, Event, RoundResult, ValidationStatus};
use crate::ids::AgentId;
use crate::vocab::{AgentState, AgentStats, Isolation};
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

    /// The result of step `key` when an earlier process began it with an agent that
    /// the store says completed, but was killed before recording the step: rebuilt
    /// from the agent's row, its stored conversation, its branch (committed before its
    /// end was stored, see `executor.rs`) and its validation events — without a model
    /// call. `None` when the step was not begun, or its agent did not complete.
    pub(crate) async fn recover(&self, key: &StepKey) -> Result<Option<ExecResult>, EngineError> {
        let Some(id) = self.journal.started_by(key).cloned() else {
            return Ok(None);
        };
        let store = self.services().store();
        let Some(agent) = store.agent(&id).await? else {
            return Ok(None);
        };
        if !agent.state.is_success() {
            return Ok(None);
        }
        let history = match store.agent_conversation(&id).await? {
            Some(text) => serde_json::from_str(&text).unwrap_or_default(),
            None => Vec::new(),
        };
        let mut branch = None;
        let mut validation = ValidationStatus::Skipped;
        let mut rounds = Vec::new();
        let kinds = &["agent.artifact", "agent.validation", "validator.verdict"];
        for e in store.events_of_kinds(&self.run_id, kinds).await? {
            if e.agent_id.as_ref() != Some(&id) {
                continue;
            }
            match e.event {
                Event::AgentArtifact(Artifact::Branch(b)) => branch = Some(b),
                Event::AgentValidation { status, .. } => validation = status,
                Event::ValidatorVerdict(r) => rounds.push(r),
                _ => {}
            }
        }
        let (diff, changed) =
            match (&branch, self.services().worktrees()) {
                (Some(b), Some(manager)) => match b.commits.last() {
                    Some(tip) => {
                        let diff = manager.diff_commits(&b.base, tip, DIFF_CAP).await.map_err(
                            |source| EngineError::Worktree {
                                agent: id.clone(),
                                source,
                            },
                        )?;
                        let changed = changed_in(&diff);
                        (diff, changed)
                    }
                    None => (String::new(), Vec::new()),
                },
                _ => (String::new(), Vec::new()),
            };
        store
            .append_event(
                &self.run_id,
                Some(&id),
                Event::AgentRecovered {
                    step: key.to_string(),
                },
            )
            .await?;
        Ok(Some(ExecResult {
            agent_id: id,
            outcome: AgentOutcome {
                state: agent.state,
                stats: agent.stats,
                result: agent.result.unwrap_or_default(),
                error: agent.error,
                exceeded: None,
                reason: None,
                history,
            },
            changed,
            diff,
            branch,
            validation,
            rounds,
        }))
    }

    /// The commit this run's agents start from when they work in worktrees: HEAD when
    /// the run began, journaled (`base`), so agents of a resumed run start where the
    /// killed process's agents started, not at a HEAD that moved since.
    pub(crate) async fn run_base(&self) -> Result<Option<String>, EngineError> {
        if self.req.isolation() != Isolation::Worktree {
            return Ok(None);
        }
        if let Some(base) = self.journal.peek::<String>(&StepKey::Base) {
            return Ok(Some(base));
        }
        let Some(manager) = self.services().worktrees() else {
            return Ok(None);
        };
        let head = match &self.req.base {
            Some(base) => base.clone(),
            None => manager.head().await.map_err(|e| {
                EngineError::Internal(format!("the base commit of run {}: {e}", self.run_id))
            })?,
        };
        self.journal
            .finish(&StepKey::Base, None, &head, Vec::new())
            .await?;
        Ok(Some(head))
    }

    /// Records that `job`'s agent begins step `key`, after applying the retry that
    /// reopened the step, if any (see `retry.rs`).
    pub(crate) async fn begin_job(&self, key: &StepKey, job: &mut Job) -> Result<(), EngineError> {
        self.apply_retry(key, job).await?;
        begin(&self.journal, key, job).await
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
        if let Some(recovered) = self.recover(key).await? {
            record(&self.journal, key, &recovered).await?;
            return Ok(recovered);
        }
        let mut job = job;
        self.begin_job(key, &mut job).await?;
        let r = self.execute(job).await?;
        record(&self.journal, key, &r).await?;
        Ok(r)
    }
}

/// The paths a unified diff changes (its `diff --git a/… b/…` headers).
fn changed_in(diff: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git a/")
            && let Some((_, b)) = rest.split_once(" b/")
            && !out.iter().any(|p| p == b)
        {
            out.push(b.to_owned());
        }
    }
    out
}

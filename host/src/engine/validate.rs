//! Validators after an agent completes: run in parallel on a read-only view of the agent's
//! workspace and its output; failed criteria become a fix prompt sent back to the same
//! agent (same worktree, same history), at most `max_fix_rounds` times. A plugin fault is
//! reported as a fault and never starts a fix round.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::agent::manager::Review;
use crate::agent::runner::{AgentOutcome, AgentSpec};
use crate::event::Event;
pub use crate::event::{RoundResult, ValidationStatus, VerdictOutcome};
use crate::plugin::{AgentOutput, AgentStatus, CallEnv, ModelAccess, Plugin, WorkspaceView};
use crate::store::Store;
use crate::vocab::{AgentState, Capability};
use crate::worktree::{Worktree, WorktreeManager};

/// Most bytes of diff shown to a validator.
const DIFF_CAP: usize = 256 * 1024;

/// One configured validator: a loaded plugin and its criteria (empty: its defaults).
#[derive(Clone)]
pub struct ValidatorEntry {
    /// The loaded plugin.
    pub plugin: Plugin,
    /// Criteria passed to it.
    pub criteria: Vec<String>,
}

/// The validators of one agent, acting as the manager's reviewer.
pub struct ValidatorReview {
    validators: Vec<ValidatorEntry>,
    store: Store,
    worktree: Mutex<Option<(WorktreeManager, Arc<Worktree>)>>,
    model: Option<Arc<dyn ModelAccess>>,
    rounds: Mutex<Vec<RoundResult>>,
    status: Mutex<ValidationStatus>,
}

impl ValidatorReview {
    /// Validators for one agent; `worktree` gives them the agent's changes.
    pub fn new(
        validators: Vec<ValidatorEntry>,
        store: Store,
        worktree: Option<(WorktreeManager, Arc<Worktree>)>,
        model: Option<Arc<dyn ModelAccess>>,
    ) -> Self {
        Self {
            validators,
            store,
            worktree: Mutex::new(worktree),
            model,
            rounds: Mutex::new(Vec::new()),
            status: Mutex::new(ValidationStatus::Skipped),
        }
    }

    /// Every round's results so far.
    pub fn rounds(&self) -> Vec<RoundResult> {
        self.rounds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How validation ended.
    pub fn status(&self) -> ValidationStatus {
        *self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets go of the agent's worktree so its owner can finish it.
    pub fn release_worktree(&self) {
        self.worktree
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    /// The read-only view validators get. A git failure is an error, not an empty
    /// change list: a validator must never pass work it could not see.
    async fn view(&self, spec: &AgentSpec) -> Result<WorkspaceView, String> {
        let wt = self
            .worktree
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (changed, diff) = match wt {
            Some((manager, wt)) => {
                let changed = manager
                    .changed_paths(&wt)
                    .await
                    .map_err(|e| format!("cannot list the agent's changed files: {e}"))?;
                let diff = manager
                    .diff(&wt, DIFF_CAP)
                    .await
                    .map_err(|e| format!("cannot read the agent's diff: {e}"))?;
                (
                    changed
                        .into_iter()
                        .map(|c| (c.path, plugin_change(c.kind)))
                        .collect(),
                    diff,
                )
            }
            // Working in place (`--isolation none`): the checkout's uncommitted changes.
            None if spec.perms.caps.contains(Capability::Write) => {
                let root = spec.workspace.clone();
                let (changed, diff) = tokio::task::spawn_blocking(move || {
                    crate::worktree::checkout_changes(&root, DIFF_CAP)
                })
                .await
                .map_err(|e| format!("cannot list the agent's changes: {e}"))?
                .map_err(|e| format!("cannot list the agent's changes in the checkout: {e}"))?;
                (
                    changed
                        .into_iter()
                        .map(|c| (c.path, plugin_change(c.kind)))
                        .collect(),
                    diff,
                )
            }
            // An agent that cannot write changed nothing.
            None => (Vec::new(), String::new()),
        };
        Ok(WorkspaceView {
            root: spec.workspace.clone(),
            changed,
            diff,
        })
    }

    /// Runs every validator once, in parallel.
    pub async fn check(
        &self,
        spec: &AgentSpec,
        outcome: &AgentOutcome,
        round: u32,
    ) -> Vec<RoundResult> {
        let view = match self.view(spec).await {
            Ok(view) => view,
            Err(message) => {
                // Every validator reports the same error; the round counts as faulted.
                let results: Vec<RoundResult> = self
                    .validators
                    .iter()
                    .map(|v| RoundResult {
                        round,
                        validator: v.plugin.name().to_owned(),
                        source: v.plugin.source().to_string(),
                        outcome: VerdictOutcome::Error {
                            message: message.clone(),
                        },
                    })
                    .collect();
                return self.record(spec, results);
            }
        };
        let output = AgentOutput {
            agent_id: spec.id.to_string(),
            role: spec.role.clone(),
            task: spec.task.clone(),
            status: match outcome.state {
                AgentState::Completed => AgentStatus::Completed,
                AgentState::Steered => AgentStatus::Steered,
                AgentState::Stopped | AgentState::Aborted => AgentStatus::Stopped,
                AgentState::Queued | AgentState::Running | AgentState::Error => AgentStatus::Error,
            },
            reply: outcome.result.clone(),
        };
        let calls = self.validators.iter().map(|v| {
            let env = CallEnv {
                workspace: Some(view.clone()),
                model: self
                    .model
                    .clone()
                    .filter(|_| v.plugin.grants().model_budget().is_some()),
            };
            let output = &output;
            async move {
                let outcome = match v.plugin.validate(env, output, &v.criteria).await {
                    // The one verdict rule: its flag and every criterion.
                    Ok(Ok(verdict)) if crate::plugin::verdict::passes(&verdict) => {
                        VerdictOutcome::Passed { verdict }
                    }
                    Ok(Ok(verdict)) => VerdictOutcome::Failed { verdict },
                    Ok(Err(message)) => VerdictOutcome::Error { message },
                    Err(fault) => VerdictOutcome::Fault {
                        fault: fault.to_string(),
                    },
                };
                RoundResult {
                    round,
                    validator: v.plugin.name().to_owned(),
                    source: v.plugin.source().to_string(),
                    outcome,
                }
            }
        });
        let results = futures::future::join_all(calls).await;
        self.record(spec, results)
    }

    fn record(&self, spec: &AgentSpec, results: Vec<RoundResult>) -> Vec<RoundResult> {
        for r in &results {
            self.store.log_event(
                &spec.run_id,
                Some(&spec.id),
                Event::ValidatorVerdict(r.clone()),
            );
        }
        self.rounds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(results.clone());
        results
    }
}

fn plugin_change(kind: crate::worktree::ChangeKind) -> crate::plugin::ChangeKind {
    use crate::worktree::ChangeKind as W;
    match kind {
        W::Added => crate::plugin::ChangeKind::Added,
        W::Modified => crate::plugin::ChangeKind::Modified,
        W::Deleted => crate::plugin::ChangeKind::Deleted,
    }
}

/// The fix prompt for the failed verdicts of a round (None when none failed); every
/// failed verdict contributes, even one that names no failed criterion.
pub fn fix_prompt(results: &[RoundResult]) -> Option<String> {
    let failed: Vec<crate::plugin::verdict::Failed<'_>> = results
        .iter()
        .filter_map(|r| match &r.outcome {
            VerdictOutcome::Failed { verdict } => Some(crate::plugin::verdict::Failed {
                validator: &r.validator,
                source: &r.source,
                verdict,
            }),
            VerdictOutcome::Passed { .. }
            | VerdictOutcome::Error { .. }
            | VerdictOutcome::Fault { .. } => None,
        })
        .collect();
    crate::plugin::verdict::fix_prompt(&failed)
}

#[async_trait]
impl Review for ValidatorReview {
    async fn review(&self, spec: &AgentSpec, outcome: &AgentOutcome, round: u32) -> Option<String> {
        let results = self.check(spec, outcome, round).await;
        let faulted = results.iter().any(|r| {
            matches!(
                r.outcome,
                VerdictOutcome::Fault { .. } | VerdictOutcome::Error { .. }
            )
        });
        let fix = fix_prompt(&results);
        *self.status.lock().unwrap_or_else(|p| p.into_inner()) = match (&fix, faulted) {
            (Some(_), _) => ValidationStatus::ValidationFailed,
            (None, true) => ValidationStatus::Faulted,
            (None, false) => ValidationStatus::Passed,
        };
        fix
    }
}

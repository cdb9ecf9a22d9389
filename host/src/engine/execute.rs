//! Executing one agent with everything that makes its work safe to use: its own worktree
//! (when it can write), validators with fix rounds, and its changes committed to a branch
//! that becomes its `branch` artifact.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::run::{Engine, EngineError};
use super::validate::{RoundResult, ValidationStatus, ValidatorEntry, ValidatorReview};
use crate::agent::manager::{Review, SpawnOptions};
use crate::agent::runner::{AgentOutcome, AgentSpec};
use crate::ids::AgentId;
use crate::tool::Capability;
use crate::worktree::{BranchArtifact, FinishOutcome, sanitize_message};

/// Where an agent works.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// Its own git worktree at HEAD when it can write (read-only agents read the repo).
    #[default]
    Worktree,
    /// Directly in the repository directory.
    None,
}

/// How to execute one agent.
#[derive(Clone, Default)]
pub struct ExecOptions {
    /// Worktree or in place.
    pub isolation: Isolation,
    /// Validators run after it completes.
    pub validators: Vec<ValidatorEntry>,
    /// Most fix rounds the validators can ask for.
    pub max_fix_rounds: u32,
    /// Join mode label recorded with the agent.
    pub join: Option<String>,
}

/// What executing an agent produced.
#[derive(Clone, Debug)]
pub struct ExecResult {
    /// The agent's id.
    pub agent_id: AgentId,
    /// How its turn loop ended.
    pub outcome: AgentOutcome,
    /// Paths it changed (relative, `/`-separated).
    pub changed: Vec<String>,
    /// Its unified diff against HEAD (empty when unchanged or not isolated).
    pub diff: String,
    /// The branch holding its commit, when it changed something in a worktree.
    pub branch: Option<BranchArtifact>,
    /// How validation ended.
    pub validation: ValidationStatus,
    /// Every validator result of every round.
    pub rounds: Vec<RoundResult>,
}

/// Most bytes of diff kept for reviewers and reports.
const DIFF_CAP: usize = 512 * 1024;

impl Engine {
    /// Runs one agent to the end, isolated and validated as asked.
    pub async fn execute(&self, mut spec: AgentSpec, opts: ExecOptions) -> Result<ExecResult, EngineError> {
        let isolate = opts.isolation == Isolation::Worktree && spec.perms.caps.contains(Capability::Write);
        let worktree = if isolate {
            let manager = self.worktrees.clone().ok_or_else(|| {
                EngineError::Config(format!(
                    "{} is not a git repository with a commit; run with isolation = \"none\" to work in place",
                    self.repo.display()
                ))
            })?;
            let wt = manager.acquire(spec.id.as_str()).await.map_err(|e| EngineError::Config(e.to_string()))?;
            spec.workspace = wt.path().to_path_buf();
            self.store.log_event(
                &spec.run_id,
                Some(&spec.id),
                "agent.worktree",
                json!({ "path": wt.path(), "base": wt.base_commit() }),
            );
            Some((manager, Arc::new(wt)))
        } else {
            None
        };
        let review = (!opts.validators.is_empty()).then(|| {
            Arc::new(ValidatorReview::new(
                opts.validators.clone(),
                self.store.clone(),
                worktree.clone(),
                self.validator_model(&spec),
            ))
        });
        let spawn = SpawnOptions {
            join: opts.join.clone(),
            review: review.clone().map(|r| r as Arc<dyn Review>),
            max_fix_rounds: opts.max_fix_rounds,
            history: None,
        };
        let agent_id = spec.id.clone();
        let run_id = spec.run_id.clone();
        let outcome = self.manager.spawn(spec, spawn).await?.wait().await;
        let (validation, rounds) = match &review {
            Some(r) => {
                r.release_worktree();
                (r.status(), r.rounds())
            }
            None => (ValidationStatus::Skipped, Vec::new()),
        };
        let mut result =
            ExecResult { agent_id, outcome, changed: Vec::new(), diff: String::new(), branch: None, validation, rounds };
        if let Some((manager, wt)) = worktree {
            let wt = Arc::try_unwrap(wt).map_err(|_| EngineError::Config("worktree still in use after the agent ended".into()))?;
            let git = |e: crate::worktree::WorktreeError| EngineError::Config(e.to_string());
            result.changed = manager.changed_paths(&wt).await.map_err(git)?.into_iter().map(|c| c.path).collect();
            result.diff = manager.diff(&wt, DIFF_CAP).await.map_err(git)?;
            let message = sanitize_message(&format!("crewbox {}: {}", result.outcome.state, first_line(&result.outcome.result)));
            if let FinishOutcome::Committed(branch) = manager.finish(wt, &message).await.map_err(git)? {
                self.store
                    .append_event(&run_id, Some(&result.agent_id), "agent.artifact", json!({ "type": "branch", "branch": branch.branch, "base": branch.base, "commits": branch.commits }))
                    .await?;
                result.branch = Some(branch);
            }
        }
        if validation != ValidationStatus::Skipped {
            self.store
                .append_event(&run_id, Some(&result.agent_id), "agent.validation", json!({ "status": validation, "rounds": result.rounds.iter().map(|r| r.round).max().unwrap_or(0) }))
                .await?;
        }
        Ok(result)
    }
}

fn first_line(s: &str) -> &str {
    s.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no summary")
}

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
use crate::worktree::{BranchArtifact, FinishOutcome, Worktree, WorktreeManager, sanitize_message};

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

/// A worktree held by the engine for an agent (shared with its validators while it runs).
pub type HeldWorktree = (WorktreeManager, Arc<Worktree>);

/// What one run of the turn loop (with its fix rounds) produced.
pub struct AgentRun {
    /// How it ended.
    pub outcome: AgentOutcome,
    /// How validation ended.
    pub validation: ValidationStatus,
    /// Every validator result.
    pub rounds: Vec<RoundResult>,
}

/// What a finished worktree left behind.
#[derive(Default)]
pub struct WorktreeResult {
    /// Changed paths.
    pub changed: Vec<String>,
    /// Unified diff against the base.
    pub diff: String,
    /// The branch, when something changed.
    pub branch: Option<BranchArtifact>,
}

impl Engine {
    /// A fresh worktree at HEAD for `spec`, which is pointed at it.
    pub async fn acquire_worktree(
        &self,
        spec: &mut AgentSpec,
    ) -> Result<HeldWorktree, EngineError> {
        self.acquire_worktree_at(spec, None).await
    }

    /// A worktree at `base` (a commit id) or HEAD for `spec`, which is pointed at it.
    pub async fn acquire_worktree_at(
        &self,
        spec: &mut AgentSpec,
        base: Option<&str>,
    ) -> Result<HeldWorktree, EngineError> {
        let manager = self.worktrees.clone().ok_or_else(|| {
            EngineError::Config(format!(
                "{} is not a git repository with a commit; run with isolation = \"none\" to work in place",
                self.repo.display()
            ))
        })?;
        let wt = match base {
            Some(commit) => manager.acquire_at(spec.id.as_str(), commit).await,
            None => manager.acquire(spec.id.as_str()).await,
        }
        .map_err(|e| EngineError::Config(e.to_string()))?;
        spec.workspace = wt.path().to_path_buf();
        self.store.log_event(
            &spec.run_id,
            Some(&spec.id),
            "agent.worktree",
            json!({ "path": wt.path(), "base": wt.base_commit() }),
        );
        Ok((manager, Arc::new(wt)))
    }

    /// Runs one agent (with validators and fix rounds) in `spec.workspace`.
    pub async fn run_agent(
        &self,
        spec: AgentSpec,
        opts: &ExecOptions,
        worktree: Option<&HeldWorktree>,
        history: Option<Vec<crate::provider::Message>>,
    ) -> Result<AgentRun, EngineError> {
        let review = (!opts.validators.is_empty()).then(|| {
            Arc::new(ValidatorReview::new(
                opts.validators.clone(),
                self.store.clone(),
                worktree.cloned(),
                self.validator_model(&spec),
            ))
        });
        let spawn = SpawnOptions {
            join: opts.join.clone(),
            review: review.clone().map(|r| r as Arc<dyn Review>),
            max_fix_rounds: opts.max_fix_rounds,
            history,
        };
        let (agent_id, run_id) = (spec.id.clone(), spec.run_id.clone());
        let outcome = self.manager.spawn(spec, spawn).await?.wait().await;
        let (validation, rounds) = match &review {
            Some(r) => {
                r.release_worktree();
                (r.status(), r.rounds())
            }
            None => (ValidationStatus::Skipped, Vec::new()),
        };
        if validation != ValidationStatus::Skipped {
            let last = rounds.iter().map(|r| r.round).max().unwrap_or(0);
            self.store
                .append_event(
                    &run_id,
                    Some(&agent_id),
                    "agent.validation",
                    json!({ "status": validation, "fix_rounds": last }),
                )
                .await?;
        }
        Ok(AgentRun {
            outcome,
            validation,
            rounds,
        })
    }

    /// Commits a worktree's changes to the agent's branch and gives the worktree back.
    pub async fn finish_worktree(
        &self,
        spec: &AgentSpec,
        held: HeldWorktree,
        summary: &str,
    ) -> Result<WorktreeResult, EngineError> {
        let (manager, wt) = held;
        let wt = Arc::try_unwrap(wt).map_err(|_| {
            EngineError::Config("worktree still in use after the agent ended".into())
        })?;
        let git = |e: crate::worktree::WorktreeError| EngineError::Config(e.to_string());
        let mut out = WorktreeResult {
            changed: manager
                .changed_paths(&wt)
                .await
                .map_err(git)?
                .into_iter()
                .map(|c| c.path)
                .collect(),
            diff: manager.diff(&wt, DIFF_CAP).await.map_err(git)?,
            branch: None,
        };
        let message = sanitize_message(&format!("crewbox {}: {}", spec.role, first_line(summary)));
        if let FinishOutcome::Committed(branch) = manager.finish(wt, &message).await.map_err(git)? {
            self.store
                .append_event(
                    &spec.run_id,
                    Some(&spec.id),
                    "agent.artifact",
                    json!({ "type": "branch", "branch": branch.branch, "base": branch.base, "commits": branch.commits }),
                )
                .await?;
            out.branch = Some(branch);
        }
        Ok(out)
    }

    /// Runs one agent to the end, isolated (when it can write) and validated as asked.
    pub async fn execute(
        &self,
        spec: AgentSpec,
        opts: ExecOptions,
    ) -> Result<ExecResult, EngineError> {
        self.execute_from(spec, opts, None).await
    }

    /// Like [`Engine::execute`], in a worktree at `commit` (a predecessor's branch tip).
    pub async fn execute_at(
        &self,
        spec: AgentSpec,
        opts: ExecOptions,
        commit: &str,
    ) -> Result<ExecResult, EngineError> {
        self.execute_from(spec, opts, Some(commit)).await
    }

    async fn execute_from(
        &self,
        mut spec: AgentSpec,
        opts: ExecOptions,
        base: Option<&str>,
    ) -> Result<ExecResult, EngineError> {
        let isolate =
            opts.isolation == Isolation::Worktree && spec.perms.caps.contains(Capability::Write);
        let held = if isolate {
            Some(self.acquire_worktree_at(&mut spec, base).await?)
        } else {
            None
        };
        let run = self
            .run_agent(spec.clone(), &opts, held.as_ref(), None)
            .await?;
        let wt = match held {
            Some(held) => {
                self.finish_worktree(&spec, held, &run.outcome.result)
                    .await?
            }
            None => WorktreeResult::default(),
        };
        Ok(ExecResult {
            agent_id: spec.id,
            outcome: run.outcome,
            changed: wt.changed,
            diff: wt.diff,
            branch: wt.branch,
            validation: run.validation,
            rounds: run.rounds,
        })
    }
}

fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no summary")
}

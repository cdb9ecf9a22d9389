//! The crew executor's worktree, held across revisions and journaled: which agent it
//! is named after (so its branch is `crewbox/<first-executor-id>`), the commit it
//! started from, and after each revision a checkpoint of its state. A resumed crew
//! gets a fresh worktree at the same base with the last stored revision's checkpoint
//! checked out in it: exactly what that revision left, never the half-done edits of a
//! revision the killed process was still running (those are thrown away with the dead
//! process's worktree when it is pruned).

use serde::{Deserialize, Serialize};

use crate::agent::runner::AgentSpec;
use crate::engine::context::RunContext;
use crate::engine::error::{EngineError, UsageError};
use crate::engine::journal::StepKey;
use crate::engine::recorded::StoredExec;
use crate::engine::worktrees::{self, HeldWorktree, WorktreeResult};
use crate::event::Event;
use crate::ids::AgentId;
use crate::vocab::{Capability, Isolation};
use crate::worktree::{BranchArtifact, checkpoint_ref};

/// The held worktree as the journal stores it (`crew/worktree`).
#[derive(Clone, Debug, Serialize, Deserialize)]
struct StoredWorktree {
    /// The agent it is named after (the first executor).
    agent_id: String,
    /// The commit it started from.
    base: String,
    /// Where it was checked out (the process that held it may be gone).
    path: std::path::PathBuf,
}

/// What finishing the worktree left (`crew/branch`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct StoredBranch {
    branch: Option<BranchArtifact>,
    changed: Vec<String>,
}

/// The executor's worktree, when the crew isolates it.
pub(super) struct Held {
    held: Option<HeldWorktree>,
    reference: String,
    /// Recreated from the journal: the agent it is named after already has its row.
    pub(super) reopened: bool,
}

impl Held {
    /// The worktree for `exec_spec` (pointed at it): the stored one recreated with the
    /// last stored revision's state, or a new one at HEAD, journaled. `None` when the
    /// executor works in place.
    pub(super) async fn open(
        ctx: &RunContext,
        exec_spec: &mut AgentSpec,
    ) -> Result<Self, EngineError> {
        let reference = checkpoint_ref(ctx.run_id.as_str());
        let isolate = ctx.req.isolation() == Isolation::Worktree
            && exec_spec.perms.caps.contains(Capability::Write);
        if !isolate || ctx.journal.has(&StepKey::CrewBranch) {
            return Ok(Self {
                held: None,
                reference,
                reopened: false,
            });
        }
        let reopened = ctx.journal.has(&StepKey::CrewWorktree);
        let held = match ctx.journal.peek::<StoredWorktree>(&StepKey::CrewWorktree) {
            Some(stored) => {
                exec_spec.id = AgentId::from_string(stored.agent_id.clone());
                let work = last_checkpoint(ctx);
                reopen(ctx, exec_spec, &stored, work.as_deref()).await?
            }
            None => {
                let held =
                    worktrees::acquire(ctx.services(), exec_spec, ctx.req.base.as_deref()).await?;
                let stored = StoredWorktree {
                    agent_id: exec_spec.id.to_string(),
                    base: held.1.base_commit(),
                    path: held.1.path().to_path_buf(),
                };
                ctx.journal
                    .finish(&StepKey::CrewWorktree, None, &stored, Vec::new())
                    .await?;
                held
            }
        };
        Ok(Self {
            held: Some(held),
            reference,
            reopened,
        })
    }

    /// The ref its checkpoints go to.
    pub(super) fn reference(&self) -> &str {
        &self.reference
    }

    /// The worktree, while the crew holds one.
    pub(super) fn worktree(&self) -> Option<&HeldWorktree> {
        self.held.as_ref()
    }

    /// Its diff against its base (empty in place).
    pub(super) async fn diff(&self, exec_spec: &AgentSpec) -> Result<String, EngineError> {
        match &self.held {
            Some(held) => worktrees::diff(exec_spec, held).await,
            None => Ok(String::new()),
        }
    }

    /// Checkpoints its state now (after a revision), for a resume to start from.
    pub(super) async fn checkpoint(
        &self,
        exec_spec: &AgentSpec,
        revision: u32,
    ) -> Result<Option<String>, EngineError> {
        let Some((manager, wt)) = &self.held else {
            return Ok(None);
        };
        let message = format!("crewbox checkpoint: revision {revision}");
        let commit = manager
            .checkpoint(wt, &self.reference, &message)
            .await
            .map_err(|source| EngineError::Worktree {
                agent: exec_spec.id.clone(),
                source,
            })?;
        Ok(Some(commit))
    }

    /// Commits its changes to the executor's branch (journaled, so a resume that
    /// finds it done does not commit again) and lets the checkpoints go.
    pub(super) async fn finish(
        self,
        ctx: &RunContext,
        exec_spec: &AgentSpec,
        summary: &str,
    ) -> Result<Option<WorktreeResult>, EngineError> {
        if let Some(done) = ctx.journal.peek::<StoredBranch>(&StepKey::CrewBranch) {
            return Ok(Some(WorktreeResult {
                changed: done.changed,
                diff: String::new(),
                branch: done.branch,
            }));
        }
        let Some(held) = self.held else {
            return Ok(None);
        };
        let manager = held.0.clone();
        let wt = worktrees::finish(ctx.services(), exec_spec, held, summary).await?;
        let stored = StoredBranch {
            branch: wt.branch.clone(),
            changed: wt.changed.clone(),
        };
        ctx.journal
            .finish(&StepKey::CrewBranch, None, &stored, Vec::new())
            .await?;
        if let Err(e) = manager.drop_reference(&self.reference).await {
            tracing::warn!(reference = %self.reference, error = %e, "could not delete a crew checkpoint");
        }
        Ok(Some(wt))
    }
}

/// A resumed crew whose executor completed (its end stored, its worktree checkpointed
/// as it ended) but whose revision step was not recorded: the step is finished from the
/// store and the checkpoint, without running the executor again. Called before the
/// worktree is reopened, which then holds that checkpoint.
pub(super) async fn recover_execution(ctx: &RunContext) -> Result<(), EngineError> {
    let Some(n) =
        (0..=super::MAX_REVISIONS).find(|n| !ctx.journal.has(&StepKey::CrewExecution(*n)))
    else {
        return Ok(());
    };
    let key = StepKey::CrewExecution(n);
    let Some(exec) = ctx.recover(&key).await? else {
        return Ok(());
    };
    let mut stored = StoredExec::of(&exec);
    let store = ctx.services().store();
    let checkpoint = store
        .events_of_kinds(&ctx.run_id, &["agent.checkpoint"])
        .await?
        .into_iter()
        .filter(|e| e.agent_id.as_ref() == Some(&exec.agent_id))
        .find_map(|e| match e.event {
            Event::AgentCheckpoint { commit } => Some(commit),
            _ => None,
        });
    let base = ctx
        .journal
        .peek::<StoredWorktree>(&StepKey::CrewWorktree)
        .map(|w| w.base);
    if let (Some(commit), Some(base), Some(manager)) =
        (&checkpoint, &base, ctx.services().worktrees())
    {
        stored.diff = manager
            .diff_commits(base, commit, worktrees::DIFF_CAP)
            .await
            .map_err(|source| EngineError::Worktree {
                agent: exec.agent_id.clone(),
                source,
            })?;
    }
    stored.checkpoint = checkpoint;
    ctx.journal
        .finish_recovered(&key, &exec.agent_id, &stored, &exec.outcome.history)
        .await?;
    Ok(())
}

/// The checkpoint of the latest revision stored as done.
fn last_checkpoint(ctx: &RunContext) -> Option<String> {
    (0..=super::MAX_REVISIONS)
        .map_while(|n| ctx.journal.peek::<StoredExec>(&StepKey::CrewExecution(n)))
        .filter_map(|e| e.checkpoint)
        .last()
}

/// A fresh worktree at the stored base holding checkpoint `work` (or just the base).
async fn reopen(
    ctx: &RunContext,
    spec: &mut AgentSpec,
    stored: &StoredWorktree,
    work: Option<&str>,
) -> Result<HeldWorktree, EngineError> {
    let Some(work) = work else {
        return worktrees::acquire(ctx.services(), spec, Some(&stored.base)).await;
    };
    let manager = ctx
        .services()
        .worktrees()
        .cloned()
        .ok_or_else(|| UsageError::NoWorktrees {
            repo: ctx.services().repo().to_path_buf(),
        })?;
    let wt = manager
        .acquire_with_work(spec.id.as_str(), &stored.base, work)
        .await
        .map_err(|source| EngineError::Worktree {
            agent: spec.id.clone(),
            source,
        })?;
    spec.workspace = wt.path().to_path_buf();
    ctx.emit(
        Some(&spec.id),
        Event::AgentWorktree {
            path: wt.path().to_path_buf(),
            base: wt.base_commit(),
        },
    );
    Ok((manager, std::sync::Arc::new(wt)))
}

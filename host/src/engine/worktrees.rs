//! An agent's worktree as the engine holds it: acquired at HEAD (or a predecessor's
//! branch tip) before the agent starts, shared with its validators while it runs, and
//! finished after it ends — its changes committed to `crewbox/<agent-id>`, which
//! becomes its `branch` artifact.

use std::sync::Arc;

use super::error::{EngineError, UsageError};
use super::services::Services;
use crate::agent::runner::AgentSpec;
use crate::event::{Artifact, Event};
use crate::worktree::{BranchArtifact, FinishOutcome, Worktree, WorktreeManager, sanitize_message};

/// Most bytes of diff kept for reviewers and reports.
pub(crate) const DIFF_CAP: usize = 512 * 1024;

/// Most left-out files named one by one in an event (the rest are counted).
const LEFT_OUT_LISTED: usize = 100;

/// A worktree held for an agent (shared with its validators while it runs).
pub(crate) type HeldWorktree = (WorktreeManager, Arc<Worktree>);

/// What a finished worktree left behind.
#[derive(Default)]
pub(crate) struct WorktreeResult {
    /// Changed paths (relative, `/`-separated).
    pub changed: Vec<String>,
    /// Unified diff against the base.
    pub diff: String,
    /// The branch, when something changed.
    pub branch: Option<BranchArtifact>,
}

/// A fresh worktree at `base` (a commit id) or HEAD for `spec`, which is pointed at it.
pub(crate) async fn acquire(
    services: &Services,
    spec: &mut AgentSpec,
    base: Option<&str>,
) -> Result<HeldWorktree, EngineError> {
    let manager = services
        .worktrees()
        .cloned()
        .ok_or_else(|| UsageError::NoWorktrees {
            repo: services.repo().to_path_buf(),
        })?;
    let wt = match base {
        Some(commit) => manager.acquire_at(spec.id.as_str(), commit).await,
        None => manager.acquire(spec.id.as_str()).await,
    }
    .map_err(|source| EngineError::Worktree {
        agent: spec.id.clone(),
        source,
    })?;
    spec.workspace = wt.path().to_path_buf();
    services.store().log_event(
        &spec.run_id,
        Some(&spec.id),
        Event::AgentWorktree {
            path: wt.path().to_path_buf(),
            base: wt.base_commit(),
        },
    );
    Ok((manager, Arc::new(wt)))
}

/// The diff of a held worktree against its base.
pub(crate) async fn diff(spec: &AgentSpec, held: &HeldWorktree) -> Result<String, EngineError> {
    let (manager, wt) = held;
    manager
        .diff(wt, DIFF_CAP)
        .await
        .map_err(|source| EngineError::Worktree {
            agent: spec.id.clone(),
            source,
        })
}

/// Commits a worktree's changes to the agent's branch and gives the worktree back.
pub(crate) async fn finish(
    services: &Services,
    spec: &AgentSpec,
    held: HeldWorktree,
    summary: &str,
) -> Result<WorktreeResult, EngineError> {
    let (manager, wt) = held;
    let git = |source| EngineError::Worktree {
        agent: spec.id.clone(),
        source,
    };
    let wt = unshared(spec, wt)?;
    let (changed, left_out) = manager.changes(&wt).await.map_err(git)?;
    if !left_out.is_empty() {
        let more =
            u32::try_from(left_out.len().saturating_sub(LEFT_OUT_LISTED)).unwrap_or(u32::MAX);
        let files = left_out.into_iter().take(LEFT_OUT_LISTED).collect();
        services
            .store()
            .append_event(
                &spec.run_id,
                Some(&spec.id),
                Event::AgentLeftOut { files, more },
            )
            .await?;
    }
    let mut out = WorktreeResult {
        changed: changed.into_iter().map(|c| c.path).collect(),
        diff: manager.diff(&wt, DIFF_CAP).await.map_err(git)?,
        branch: None,
    };
    // A handoff's summary says what the change is; a reply's first line often does not.
    let handoff = crewbox_handoff::parse(summary).ok();
    let subject = handoff
        .as_ref()
        .map(|h| first_line(&h.summary))
        .filter(|l| *l != "no summary")
        .unwrap_or_else(|| first_line(summary));
    let message = sanitize_message(&format!("crewbox {}: {subject}", spec.role));
    if let FinishOutcome::Committed(branch) = manager.finish(wt, &message).await.map_err(git)? {
        services
            .store()
            .append_event(
                &spec.run_id,
                Some(&spec.id),
                Event::AgentArtifact(Artifact::Branch(branch.clone())),
            )
            .await?;
        out.branch = Some(branch);
    }
    Ok(out)
}

/// Gives a reader's worktree back, throwing away whatever is in it.
pub(crate) async fn discard(spec: &AgentSpec, held: HeldWorktree) -> Result<(), EngineError> {
    let (manager, wt) = held;
    let wt = unshared(spec, wt)?;
    manager
        .discard(wt)
        .await
        .map_err(|source| EngineError::Worktree {
            agent: spec.id.clone(),
            source,
        })
}

/// The worktree back from the validators, which share it while the agent runs and let
/// go when it ends.
fn unshared(spec: &AgentSpec, wt: Arc<Worktree>) -> Result<Worktree, EngineError> {
    Arc::try_unwrap(wt).map_err(|_| {
        EngineError::Internal(format!(
            "the worktree of agent {} is still in use after it ended",
            spec.id
        ))
    })
}

fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no summary")
}

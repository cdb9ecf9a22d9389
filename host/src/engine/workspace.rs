//! A team run's workspace: the integration branch `crewbox/run/<run-id>` that carries
//! work from one member, stage and iteration to the next.
//!
//! It starts at HEAD when the run starts (that commit is journaled, so a resumed run
//! starts from the same one). Writing members get their worktree at its head; when a
//! stage ends, their branches are merged into it in team order. A conflict leaves the
//! head as it was and keeps the member's branch; the record names the files, and the
//! synthesis and evaluation are told. Readers (read-only members, planner, synthesis,
//! evaluator) read a checkout of the head once it has moved. The branch ref is written
//! only when the head moves, so a run that changed nothing leaves no branch.
//!
//! Merge results are journaled per stage: a resumed run reads them back (merging is
//! idempotent anyway: a branch already in the head is up to date).

use tokio::sync::Mutex;

use super::error::EngineError;
use super::journal::{Journal, StepKey};
use super::report::{IntegrationReport, MergeRecord};
use super::services::Services;
use crate::ids::RunId;
use crate::worktree::{BranchArtifact, MergeOutcome, WorktreeError, WorktreeManager};

/// Most bytes of the run's diff shown to the synthesis and the evaluator.
const PROMPT_DIFF_CAP: usize = 32 * 1024;

/// A member's finished work, as a stage hands it to [`RunWorkspace::merge_stage`].
pub(crate) struct StageWork<'a> {
    /// The member's name.
    pub member: &'a str,
    /// Its agent.
    pub agent_id: &'a str,
    /// Its branch, when it changed something.
    pub branch: Option<&'a BranchArtifact>,
}

/// A stage's merges as journaled: the records and the integration head after them.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum StoredMerge {
    Stage {
        records: Vec<MergeRecord>,
        head: String,
    },
    /// As older versions journaled it (no head).
    Records(Vec<MergeRecord>),
}

impl StoredMerge {
    fn into_records(self) -> Vec<MergeRecord> {
        match self {
            Self::Stage { records, .. } | Self::Records(records) => records,
        }
    }
}

/// The integration heads the journal's done merge steps ended at; `None` when one of
/// them was journaled without its head (an older version), so none can be trusted
/// to be the last.
fn journaled_heads(journal: &Journal) -> Option<Vec<String>> {
    journal
        .done_merges()
        .into_iter()
        .map(|v| match serde_json::from_value::<StoredMerge>(v) {
            Ok(StoredMerge::Stage { head, .. }) => Some(head),
            _ => None,
        })
        .collect()
}

/// The integration branch of one team run.
pub(crate) struct RunWorkspace {
    manager: WorktreeManager,
    branch: String,
    base: String,
    state: Mutex<State>,
}

struct State {
    head: String,
    merges: Vec<MergeRecord>,
}

fn git(run: &RunId) -> impl Fn(WorktreeError) -> EngineError + '_ {
    move |e| EngineError::Internal(format!("the integration branch of run {run}: {e}"))
}

impl RunWorkspace {
    /// The workspace of run `run_id`, when its agents work in worktrees: the base
    /// commit is read from the journal (or taken from `start`, else HEAD, now and
    /// journaled), the head from the integration branch when a resumed run had already
    /// moved it.
    pub(crate) async fn open(
        services: &Services,
        journal: &Journal,
        run_id: &RunId,
        start: Option<&str>,
    ) -> Result<Option<Self>, EngineError> {
        let Some(manager) = services.worktrees().cloned() else {
            return Ok(None);
        };
        let base = match journal.done::<String>(&StepKey::Workspace) {
            Some(base) => base,
            None => {
                let base = match start {
                    Some(commit) => commit.to_owned(),
                    None => manager.head().await.map_err(git(run_id))?,
                };
                journal
                    .finish(&StepKey::Workspace, None, &base, Vec::new())
                    .await?;
                base
            }
        };
        let branch = integration_branch(run_id);
        let head = if journal.is_resumed() {
            // Merges after the last journaled one are dropped: a killed process merged
            // without recording it, or a retry reopened the stages that made them
            // (they ran on the failed result and run again on the new one).
            match journaled_heads(journal) {
                Some(known) => manager.rewind_branch(&branch, &base, known).await,
                None => manager.branch_tip(&branch).await,
            }
        } else {
            manager.branch_tip(&branch).await
        }
        .map_err(git(run_id))?
        .unwrap_or_else(|| base.clone());
        Ok(Some(Self {
            manager,
            branch,
            base,
            state: Mutex::new(State {
                head,
                merges: Vec::new(),
            }),
        }))
    }

    /// The integration head now (hex id).
    pub(crate) async fn head(&self) -> String {
        self.state.lock().await.head.clone()
    }

    /// The head, once work has been merged into it (readers then read a checkout of it).
    pub(crate) async fn moved_head(&self) -> Option<String> {
        let head = self.head().await;
        (head != self.base).then_some(head)
    }

    /// Merges each member's branch of stage `stage` into the head, in the order given
    /// (team order), and journals the results; a resumed run reads them back.
    pub(crate) async fn merge_stage(
        &self,
        journal: &Journal,
        run_id: &RunId,
        stage: &str,
        work: &[StageWork<'_>],
    ) -> Result<Vec<MergeRecord>, EngineError> {
        let key = StepKey::Merge(stage.to_owned());
        let mut state = self.state.lock().await;
        if let Some(stored) = journal.done::<StoredMerge>(&key) {
            let records = stored.into_records();
            state.merges.extend(records.iter().cloned());
            return Ok(records);
        }
        let mut records = Vec::new();
        for w in work {
            let Some(branch) = w.branch else { continue };
            let Some(tip) = branch.commits.last() else {
                continue;
            };
            let message = format!(
                "crewbox run {run_id}: merge {} ({})",
                w.member, branch.branch
            );
            let merged = self
                .manager
                .merge_into(&self.branch, &state.head, tip, &message)
                .await
                .map_err(git(run_id))?;
            state.head = merged.head;
            records.push(MergeRecord {
                stage: stage.to_owned(),
                member: w.member.to_owned(),
                agent_id: w.agent_id.to_owned(),
                branch: branch.branch.clone(),
                outcome: merged.outcome,
            });
        }
        let stored = StoredMerge::Stage {
            records,
            head: state.head.clone(),
        };
        journal.finish(&key, None, &stored, Vec::new()).await?;
        let records = stored.into_records();
        state.merges.extend(records.iter().cloned());
        Ok(records)
    }

    /// What the synthesis and the evaluator are shown of the work so far: the diff
    /// since the run started and every merge conflict. `None` while nothing changed.
    pub(crate) async fn progress_section(
        &self,
        run_id: &RunId,
    ) -> Result<Option<String>, EngineError> {
        let (head, conflicts) = {
            let state = self.state.lock().await;
            let conflicts: Vec<String> = state
                .merges
                .iter()
                .filter_map(|m| match &m.outcome {
                    MergeOutcome::Conflict { files } => Some(format!(
                        "- {}: merge-conflict in {}",
                        m.member,
                        files.join(", ")
                    )),
                    MergeOutcome::UpToDate
                    | MergeOutcome::FastForward
                    | MergeOutcome::Merged { .. } => None,
                })
                .collect();
            (state.head.clone(), conflicts)
        };
        if head == self.base && conflicts.is_empty() {
            return Ok(None);
        }
        // No branch or run id: they differ on every run of the same work (a replay
        // asks what its recording asked), and the model can do nothing with them.
        let mut s = String::from("\n## The work so far\n");
        if head != self.base {
            let diff = self
                .manager
                .diff_commits(&self.base, &head, PROMPT_DIFF_CAP)
                .await
                .map_err(git(run_id))?;
            s.push_str("The diff since the run started:\n```diff\n");
            s.push_str(diff.trim_end());
            s.push_str("\n```\n");
        }
        if !conflicts.is_empty() {
            s.push_str("These members' work could not be merged and is NOT in the branch:\n");
            for c in conflicts {
                s.push_str(&c);
                s.push('\n');
            }
        }
        Ok(Some(s))
    }

    /// The report's view: the branch with its commits (when it exists) and every merge.
    pub(crate) async fn report(
        &self,
        run_id: &RunId,
    ) -> Result<Option<IntegrationReport>, EngineError> {
        let state = self.state.lock().await;
        let branch = if state.head == self.base {
            None
        } else {
            Some(BranchArtifact {
                branch: self.branch.clone(),
                base: self.base.clone(),
                commits: self
                    .manager
                    .commits_between(&self.base, &state.head)
                    .await
                    .map_err(git(run_id))?,
            })
        };
        if branch.is_none() && state.merges.is_empty() {
            return Ok(None);
        }
        Ok(Some(IntegrationReport {
            branch,
            merges: state.merges.clone(),
        }))
    }
}

/// The integration branch of team run `run_id`: `crewbox/run/<run-id>`.
pub(crate) fn integration_branch(run_id: &RunId) -> String {
    format!(
        "crewbox/run/{}",
        crate::worktree::sanitize_branch_component(run_id.as_str())
    )
}

//! The run report: what `crewbox run --json` prints, built from the store (the single
//! source of truth), so a resumed or inspected run reports the same way.

mod details;
mod render;

use std::collections::HashMap;

use serde::Serialize;

pub use details::{
    ChainLink, CrewDetails, CrewExecution, EvaluatorKind, IntegrationReport, MemberEntry,
    MembersDetails, MergeRecord, ModeDetails, OrchestrateDetails, ReflectDetails, RunDetails,
    RunFault, SingleDetails, SwarmDetails, VoteGroup,
};

use crate::event::{Artifact, Event, RoundResult, ValidationStatus};
use crate::ids::{AgentId, RunId};
use crate::store::{AgentRecord, RunRecord, Store, StoreError};
use crate::vocab::{AgentState, ExitReason, Mode, RunStatus};
use crate::worktree::BranchArtifact;

/// Token counts of an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
}

/// One agent in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentReport {
    /// Its id.
    pub id: AgentId,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// Who spawned it.
    pub parent: Option<AgentId>,
    /// Its task.
    pub task: String,
    /// The task an orchestrator assigned it (team workers; `task` wraps it with the
    /// charter, shared context and request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assigned_task: Option<String>,
    /// Its state.
    pub state: AgentState,
    /// Turns taken.
    pub turns: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tokens used.
    pub tokens: Tokens,
    /// Cost, when prices are configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Run time in milliseconds (0 if it never started).
    pub duration_ms: i64,
    /// Its final text.
    pub result: Option<String>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How it was joined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub join: Option<String>,
    /// Its `branch` artifact, when it changed files in a worktree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<Artifact>,
    /// Files it changed that its commit left out, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<crate::worktree::LeftOut>,
    /// How many more were left out than `left_out` lists.
    #[serde(skip_serializing_if = "none_more")]
    pub left_out_more: u32,
    /// How validation ended (passed, validation-failed, faulted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationStatus>,
    /// Every validator verdict, round by round.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<RoundResult>,
    /// The typed handoff v2 parsed from its result (the last fenced JSON block), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff: Option<crewbox_handoff::Handoff>,
}

fn none_more(n: &u32) -> bool {
    *n == 0
}

impl From<AgentRecord> for AgentReport {
    fn from(a: AgentRecord) -> Self {
        let duration_ms = match (a.started_at, a.finished_at) {
            (Some(s), Some(f)) => (f - s).max(0),
            _ => 0,
        };
        let handoff = a
            .result
            .as_deref()
            .and_then(|r| crewbox_handoff::parse(r).ok());
        Self {
            handoff,
            id: a.id,
            name: a.name,
            role: a.role,
            parent: a.parent,
            task: a.task,
            assigned_task: None,
            state: a.state,
            turns: a.stats.turns,
            tool_calls: a.stats.tool_calls,
            tokens: Tokens {
                input: a.stats.tokens_in,
                output: a.stats.tokens_out,
            },
            cost: a.stats.cost,
            duration_ms,
            result: a.result,
            error: a.error,
            join: a.join,
            branch: None,
            left_out: Vec::new(),
            left_out_more: 0,
            validation: None,
            verdicts: Vec::new(),
        }
    }
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// The run.
    pub run_id: RunId,
    /// The mode it ran in.
    pub mode: Mode,
    /// The team it ran (team modes only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// completed, failed or cancelled (running if it has not ended).
    pub status: RunStatus,
    /// Still `running` in the store, but the process driving it is gone (a crash or a
    /// signal): `crewbox resume` finishes it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Why it ended.
    pub exit_reason: Option<ExitReason>,
    /// The final text.
    pub result: Option<String>,
    /// Every agent, in creation order.
    pub agents: Vec<AgentReport>,
    /// The decision, the mode's own facts and any deciding fault (merged into the
    /// top level).
    #[serde(flatten)]
    pub details: RunDetails,
}

impl RunReport {
    /// Builds the report of a stored run.
    pub async fn load(store: &Store, run: RunRecord) -> Result<Self, StoreError> {
        let mut agents: Vec<AgentReport> = store
            .agents(&run.id)
            .await?
            .into_iter()
            .map(AgentReport::from)
            .collect();
        let index: HashMap<AgentId, usize> = agents
            .iter()
            .enumerate()
            .map(|(i, a)| (a.id.clone(), i))
            .collect();
        for e in store.events_of_kinds(&run.id, Event::REPORT_KINDS).await? {
            let Some(&i) = e.agent_id.as_ref().and_then(|a| index.get(a)) else {
                continue;
            };
            let agent = &mut agents[i];
            match e.event {
                Event::AgentArtifact(artifact) => agent.branch = Some(artifact),
                Event::AgentLeftOut { files, more } => {
                    agent.left_out = files;
                    agent.left_out_more = more;
                }
                Event::AgentValidation { status, .. } => agent.validation = Some(status),
                Event::ValidatorVerdict(round) => agent.verdicts.push(round),
                // Only the kinds above are read; anything else is not part of a report.
                Event::RunStarted { .. }
                | Event::RunResumed { .. }
                | Event::RunInterrupted {}
                | Event::RunFinished { .. }
                | Event::BatchFinalized(_)
                | Event::AgentState { .. }
                | Event::AgentWorktree { .. }
                | Event::AgentWrapUp { .. }
                | Event::AgentCompacted { .. }
                | Event::AgentSteer { .. }
                | Event::AgentSteerUndelivered { .. }
                | Event::AgentContinue { .. }
                | Event::AgentFixRound { .. }
                | Event::AgentChain { .. }
                | Event::AgentRecovered { .. }
                | Event::AgentCheckpoint { .. }
                | Event::ModelReply { .. }
                | Event::ToolCall { .. }
                | Event::ProviderBreakerOpen { .. }
                | Event::SwarmDelivery { .. }
                | Event::GroupDelivery { .. }
                | Event::GroupDeliveryFailed { .. }
                | Event::CrewReview(_)
                | Event::OrchestratePlan { .. }
                | Event::OrchestrateUnknownWorkers { .. }
                | Event::MergeConflict { .. }
                | Event::ReflectIteration(_)
                | Event::ReflectScoreUnreadable { .. }
                | Event::TeamMessages { .. }
                | Event::Other { .. } => {}
            }
        }
        // Team members' assigned tasks, from the run's journal (begun or done steps).
        for step in store.steps(&run.id).await? {
            if let (Some(agent), Some(task)) = (&step.agent_id, step.data["task"].as_str())
                && let Some(&i) = index.get(&AgentId::from_string(agent.clone()))
            {
                agents[i].assigned_task = Some(task.to_owned());
            }
        }
        Ok(Self {
            interrupted: run.is_interrupted(),
            details: RunDetails::read(run.mode, run.details),
            run_id: run.id,
            mode: run.mode,
            team: run.team,
            status: run.status,
            exit_reason: run.exit_reason,
            result: run.result,
            agents,
        })
    }

    /// The branch holding the run's result: the last agent's (`single`), the
    /// executor's (`crew`) or the integration branch (team modes), when something
    /// changed in a worktree.
    pub fn branch(&self) -> Option<&BranchArtifact> {
        if let Some(integration) = &self.details.integration {
            return integration.branch.as_ref();
        }
        match self.details.mode.as_ref()? {
            ModeDetails::Single(single) => single.branch.as_ref(),
            ModeDetails::Crew(crew) => crew.execution.as_ref()?.branch.as_ref(),
            ModeDetails::Swarm(_)
            | ModeDetails::Members(_)
            | ModeDetails::Orchestrate(_)
            | ModeDetails::Reflect(_) => None,
        }
    }

    /// True when a plugin fault decided the run (`crewbox` exits 3).
    pub fn faulted(&self) -> bool {
        self.details.fault.is_some()
    }

    /// A human-readable rendering for terminals.
    pub fn render_text(&self) -> String {
        render::text(self)
    }
}

//! The typed, mode-specific facts of a run: stored with the run when it ends and
//! merged into the top level of its report (`crewbox run --json`). Each mode has its
//! own type; the run's mode says which one a stored run holds.

use serde::{Deserialize, Serialize};

use crate::engine::dispatch::Decision;
use crate::event::{Assignment, IterationRecord, ReviewVerdict, ValidationStatus};
use crate::ids::AgentId;
use crate::provider::replay::ReplayStatus;
use crate::vocab::{AgentState, Mode, Strategy};
use crate::worktree::{BranchArtifact, MergeOutcome};

/// Everything a run reports beyond its status, result and agents.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunDetails {
    /// How the mode was chosen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Steps read back instead of run (resumed runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_steps: Option<u32>,
    /// The plugin fault that decided the run, if one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<RunFault>,
    /// Team runs: the integration branch and what was merged into it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub integration: Option<IntegrationReport>,
    /// Replayed runs: how many recorded model calls answered, and the first request
    /// that differed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayStatus>,
    /// The mode's own facts (absent when the mode failed before producing any).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeDetails>,
}

impl RunDetails {
    /// Reads the details stored with a run of `mode`; what no longer reads is dropped.
    pub(crate) fn read(mode: Mode, value: Option<serde_json::Value>) -> Self {
        #[derive(Deserialize)]
        struct Common {
            decision: Option<Decision>,
            resumed_steps: Option<u32>,
            fault: Option<RunFault>,
            integration: Option<IntegrationReport>,
            replay: Option<ReplayStatus>,
        }
        let Some(value) = value.filter(serde_json::Value::is_object) else {
            return Self::default();
        };
        let common: Option<Common> = serde_json::from_value(value.clone()).ok();
        let (decision, resumed_steps, fault, integration, replay) = common
            .map(|c| {
                (
                    c.decision,
                    c.resumed_steps,
                    c.fault,
                    c.integration,
                    c.replay,
                )
            })
            .unwrap_or_default();
        Self {
            decision,
            resumed_steps,
            fault,
            integration,
            replay,
            mode: ModeDetails::read(mode, value),
        }
    }
}

/// A plugin fault that decided a run: its call and what happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFault {
    /// The call that faulted (e.g. ``role `planner` faulted in interpret``).
    pub step: String,
    /// The fault (it names the plugin).
    pub fault: String,
}

/// A team run's integration branch (`crewbox/run/<run-id>`): where its result lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntegrationReport {
    /// The branch with its commits since the run's base; absent when nothing changed.
    pub branch: Option<BranchArtifact>,
    /// Every member branch merged (or not) into it, in order.
    #[serde(default)]
    pub merges: Vec<MergeRecord>,
}

impl IntegrationReport {
    /// The merges that conflicted: (member, branch, files).
    pub fn conflicts(&self) -> impl Iterator<Item = (&str, &str, &[String])> {
        self.merges.iter().filter_map(|m| match &m.outcome {
            MergeOutcome::Conflict { files } => {
                Some((m.member.as_str(), m.branch.as_str(), files.as_slice()))
            }
            MergeOutcome::UpToDate | MergeOutcome::FastForward | MergeOutcome::Merged { .. } => {
                None
            }
        })
    }
}

/// One member's branch merged into the integration branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeRecord {
    /// The stage it ended (`member/<name>`, `it<n>`, `round`).
    pub stage: String,
    /// The member.
    pub member: String,
    /// Its agent.
    pub agent_id: String,
    /// Its branch (kept as it is, also after a conflict).
    pub branch: String,
    /// What the merge did.
    #[serde(flatten)]
    pub outcome: MergeOutcome,
}

/// The facts of one mode.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ModeDetails {
    /// `single`.
    Single(SingleDetails),
    /// `swarm`.
    Swarm(SwarmDetails),
    /// `crew`.
    Crew(CrewDetails),
    /// `broadcast` and `sequential`.
    Members(MembersDetails),
    /// `orchestrate`.
    Orchestrate(OrchestrateDetails),
    /// `reflect`.
    Reflect(ReflectDetails),
}

impl ModeDetails {
    fn read(mode: Mode, value: serde_json::Value) -> Option<Self> {
        fn as_<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Option<T> {
            serde_json::from_value(v).ok()
        }
        match mode {
            Mode::Single => as_(value).map(Self::Single),
            Mode::Swarm => as_(value).map(Self::Swarm),
            Mode::Crew => as_(value).map(Self::Crew),
            Mode::Broadcast | Mode::Sequential => as_(value).map(Self::Members),
            Mode::Orchestrate => as_(value).map(Self::Orchestrate),
            Mode::Reflect => as_(value).map(Self::Reflect),
        }
    }
}

/// `single`: the last agent's branch and validation, and the chain of follow-ups.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SingleDetails {
    /// The last agent's branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<BranchArtifact>,
    /// How the last agent's validation ended (when validators ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationStatus>,
    /// Follow-up agents, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<ChainLink>,
}

/// One follow-up agent of a chain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChainLink {
    /// The agent.
    pub agent: AgentId,
    /// Its branch, when it changed something.
    pub branch: Option<String>,
}

/// `swarm`: how results were joined.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwarmDetails {
    /// The strategy.
    pub strategy: Strategy,
    /// Files changed by more than one member.
    pub conflicts: Vec<String>,
    /// Waves of delivered agent ids.
    pub deliveries: Vec<Vec<AgentId>>,
    /// Members' branches.
    pub branches: Vec<String>,
    /// `vote`: equivalent answers with counts, largest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<VoteGroup>>,
    /// `vote`: the winning group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<Vec<AgentId>>,
    /// Members that could not be executed at all (`swarm-N: why`); the swarm went on
    /// with the others, and says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
}

/// Members of a swarm that gave equivalent answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VoteGroup {
    /// How many.
    pub count: usize,
    /// Who.
    pub agents: Vec<AgentId>,
}

/// `crew`: the plan, the review and the executor's work.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CrewDetails {
    /// The planner's plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// What execution and review produced (absent when planning failed).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<CrewExecution>,
}

/// A crew's execution and review.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CrewExecution {
    /// The last review (null when the executor never reached one).
    pub verdict: Option<ReviewVerdict>,
    /// Revisions after FAIL reviews.
    pub revisions: u32,
    /// The executor's branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<BranchArtifact>,
    /// Files the executor changed (when it worked in a worktree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<Vec<String>>,
    /// How the executor's validation ended (when validators ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<ValidationStatus>,
}

/// `broadcast` and `sequential`: each member's agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MembersDetails {
    /// Members in team order.
    pub members: Vec<MemberEntry>,
}

/// A team member's agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberEntry {
    /// The member.
    pub name: String,
    /// Its agent.
    pub agent_id: String,
    /// How it ended.
    pub state: AgentState,
}

/// `orchestrate`: the round's assignments.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OrchestrateDetails {
    /// The first plan had no assignment and the orchestrator was asked again.
    #[serde(default, skip_serializing_if = "is_false")]
    pub nudged: bool,
    /// Names the orchestrator used that are not members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_workers: Vec<String>,
    /// Workers assigned.
    pub workers_used: usize,
    /// Each assignment and how it went.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assignments: Vec<Assignment>,
}

/// `reflect`: every iteration and how the loop ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReflectDetails {
    /// Every iteration.
    pub iterations: Vec<IterationRecord>,
    /// The goal score.
    pub threshold: f64,
    /// The iteration limit.
    pub max_iterations: u32,
    /// Who judged the iterations.
    pub evaluator: EvaluatorKind,
    /// The iteration whose synthesis is the result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_iteration: Option<u32>,
    /// Messages sent to the loop that no iteration took in (they came too late).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread_messages: Vec<String>,
}

/// Who evaluates a reflect loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EvaluatorKind {
    /// The team's `[evaluator]` (a score).
    Evaluator,
    /// The orchestrator judging itself (sentinels).
    Orchestrator,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_details_read_back_by_mode() {
        let details = RunDetails {
            decision: Some(Decision::explicit(Mode::Crew)),
            resumed_steps: None,
            fault: None,
            integration: None,
            replay: None,
            mode: Some(ModeDetails::Crew(CrewDetails {
                plan: Some("1. fix".into()),
                execution: Some(CrewExecution {
                    verdict: None,
                    revisions: 0,
                    branch: None,
                    changed: None,
                    validation: None,
                }),
            })),
        };
        let stored = serde_json::to_value(&details).unwrap();
        assert!(stored["verdict"].is_null() && stored.get("verdict").is_some());
        assert_eq!(stored["decision"]["mode"], "crew");
        assert_eq!(RunDetails::read(Mode::Crew, Some(stored)), details);
        let planner_failed = serde_json::json!({ "decision": Decision::explicit(Mode::Crew) });
        let read = RunDetails::read(Mode::Crew, Some(planner_failed));
        assert_eq!(
            read.mode,
            Some(ModeDetails::Crew(CrewDetails::default())),
            "no execution facts, no verdict key"
        );
    }
}

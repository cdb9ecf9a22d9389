//! What a run emits: one typed [`Event`] enum. The store takes events (it writes
//! `kind` and `data` columns) and publishes each stored one, with its sequence number,
//! on an in-process broadcast channel; `crewbox events` prints the same JSON
//! (`{"seq", "run_id", "agent_id", "at", "kind", "data"}`) that a subscriber sees.
//! The report, the progress view and the tests match variants, never kind strings.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::batch::{DeliveryKind, MemberCounts};
use crate::ids::{AgentId, RunId};
use crate::vocab::{
    AgentState, BranchArtifact, Exceeded, ExitReason, FailReason, LeftOut, Mode, RunStatus,
    StopReason, Trend, Usage, Verdict, WorkerStatus,
};

/// One fact of a run, as stored in the event log and published in-process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data")]
pub enum Event {
    /// A run was recorded and its mode starts.
    #[serde(rename = "run.started")]
    RunStarted {
        /// The decided mode.
        mode: Mode,
        /// The provider's name.
        provider: String,
    },
    /// A process took over an unfinished run.
    #[serde(rename = "run.resumed")]
    RunResumed {
        /// The process now driving it.
        pid: u32,
        /// Agents the previous process left queued or running (now `error`).
        interrupted_agents: u32,
    },
    /// The process was asked to stop; the run is unfinished and resumable.
    #[serde(rename = "run.interrupted")]
    RunInterrupted {},
    /// The run ended.
    #[serde(rename = "run.finished")]
    RunFinished {
        /// How.
        status: RunStatus,
        /// Why.
        exit_reason: ExitReason,
    },
    /// A batch of spawns was finalised (recorded before any of its agents starts).
    #[serde(rename = "batch.finalized")]
    BatchFinalized(BatchShare),
    /// An agent changed state.
    #[serde(rename = "agent.state")]
    AgentState {
        /// Its new state.
        state: AgentState,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Which hard budget ran out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exceeded: Option<Exceeded>,
        /// Why it did not end well (every ending that is not a success).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<FailReason>,
    },
    /// An agent got its own worktree.
    #[serde(rename = "agent.worktree")]
    AgentWorktree {
        /// Where.
        path: PathBuf,
        /// The commit it starts from.
        base: String,
    },
    /// The soft turn limit was reached; the agent was told to wrap up.
    #[serde(rename = "agent.wrap-up")]
    AgentWrapUp {
        /// The turn.
        turn: u32,
    },
    /// Old tool outputs were compacted to stay within the context budget.
    #[serde(rename = "agent.compacted")]
    AgentCompacted {
        /// Messages dropped.
        dropped: usize,
    },
    /// A steering message was delivered.
    #[serde(rename = "agent.steer")]
    AgentSteer {
        /// The message (capped).
        message: String,
    },
    /// A steering message never reached the agent's model: the agent ended first.
    #[serde(rename = "agent.steer-undelivered")]
    AgentSteerUndelivered {
        /// The message.
        message: String,
        /// Why it was not delivered.
        why: String,
    },
    /// The agent was asked to go on after a cut or an empty reply.
    #[serde(rename = "agent.continue")]
    AgentContinue {
        /// What was wrong with the reply (`truncated` or `empty-reply`).
        reason: FailReason,
        /// Which continuation of a cut reply this is (from 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        continuation: Option<u32>,
    },
    /// Validators asked for a fix round.
    #[serde(rename = "agent.fix-round")]
    AgentFixRound {
        /// The round (from 1).
        round: u32,
    },
    /// How validation of an agent ended.
    #[serde(rename = "agent.validation")]
    AgentValidation {
        /// Passed, failed, faulted.
        status: ValidationStatus,
        /// The last fix round taken.
        fix_rounds: u32,
    },
    /// An agent left an artifact (its branch).
    #[serde(rename = "agent.artifact")]
    AgentArtifact(Artifact),
    /// Files an agent changed that its commit left out: over the workspace limits, or
    /// in `.crewbox/` without the user's grant. Stored before the commit is made.
    #[serde(rename = "agent.left-out")]
    AgentLeftOut {
        /// The first of them, with why.
        files: Vec<LeftOut>,
        /// How many more were left out than `files` lists.
        #[serde(default, skip_serializing_if = "is_zero")]
        more: u32,
    },
    /// A resumed run found this agent completed (its end and branch stored) but its
    /// step not recorded: the step was finished from the store, without running it again.
    #[serde(rename = "agent.recovered")]
    AgentRecovered {
        /// The journal step it finished.
        step: String,
    },
    /// The state of a worktree held across agents (a crew executor's) was checkpointed
    /// as this agent ended, before its end was stored.
    #[serde(rename = "agent.checkpoint")]
    AgentCheckpoint {
        /// The checkpoint commit (hex id).
        commit: String,
    },
    /// A follow-up agent of a `single --chain` run started.
    #[serde(rename = "agent.chain")]
    AgentChain {
        /// The agent it continues.
        after: AgentId,
    },
    /// A model answered a turn.
    #[serde(rename = "model.reply")]
    ModelReply {
        /// The turn.
        turn: u32,
        /// Its text (capped).
        text: String,
        /// The model's reasoning, when it sent some (capped; never the result).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// The tools it called.
        tool_calls: Vec<String>,
        /// Tokens used.
        usage: Usage,
        /// Why the model stopped (absent in events of older versions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop: Option<StopReason>,
    },
    /// A provider's circuit breaker opened: its calls fail fast until it half-opens.
    #[serde(rename = "provider.breaker-open")]
    ProviderBreakerOpen {
        /// The breaker (provider and model).
        breaker: String,
        /// The failure that opened it (capped).
        cause: String,
    },
    /// A tool ran.
    #[serde(rename = "tool.call")]
    ToolCall {
        /// The turn.
        turn: u32,
        /// The tool's name.
        tool: String,
        /// The MCP server of an MCP tool (`mcp__SERVER__TOOL`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<String>,
        /// Its arguments as JSON text (capped).
        args: String,
        /// Whether it succeeded.
        ok: bool,
        /// What it returned (capped).
        output: String,
    },
    /// One validator's verdict in one round.
    #[serde(rename = "validator.verdict")]
    ValidatorVerdict(RoundResult),
    /// A swarm handed results on.
    #[serde(rename = "swarm.delivery")]
    SwarmDelivery {
        /// The wave (from 1).
        wave: u32,
        /// The members delivered.
        agents: Vec<AgentId>,
    },
    /// A group handed results on.
    #[serde(rename = "group.delivery")]
    GroupDelivery {
        /// The group.
        group: String,
        /// All at once, a wave, or the final flush.
        kind: DeliveryKind,
        /// Each member delivered.
        results: Vec<MemberSummary>,
        /// Member accounting after the delivery.
        counts: MemberCounts,
    },
    /// A group's delivery failed after its retries (the results stay in the store).
    #[serde(rename = "group.delivery-failed")]
    GroupDeliveryFailed {
        /// The group.
        group: String,
        /// Attempts made.
        attempts: u32,
        /// Each attempt's error.
        errors: Vec<String>,
    },
    /// A crew reviewer failed the executor's work.
    #[serde(rename = "crew.review")]
    CrewReview(ReviewVerdict),
    /// An orchestrator's plan was stored.
    #[serde(rename = "orchestrate.plan")]
    OrchestratePlan {
        /// Its journal step.
        step: String,
        /// Assignments read from it.
        assignments: usize,
    },
    /// The orchestrator named workers the team does not have.
    #[serde(rename = "orchestrate.unknown_workers")]
    OrchestrateUnknownWorkers {
        /// The names.
        names: Vec<String>,
    },
    /// A member's branch could not be merged into the run's integration branch.
    #[serde(rename = "team.merge_conflict")]
    MergeConflict {
        /// The member.
        member: String,
        /// Its branch (kept).
        branch: String,
        /// The conflicting paths.
        files: Vec<String>,
    },
    /// A reflect iteration ended.
    #[serde(rename = "reflect.iteration")]
    ReflectIteration(IterationRecord),
    /// An evaluation had no readable score.
    #[serde(rename = "reflect.score-unreadable")]
    ReflectScoreUnreadable {
        /// The iteration.
        iteration: u32,
        /// The score assumed instead.
        assumed: f64,
    },
    /// Messages sent to the team were taken in by an iteration.
    #[serde(rename = "team.messages")]
    TeamMessages {
        /// The iteration.
        iteration: u32,
        /// How many.
        count: usize,
    },
    /// An event this build does not know (written by another version), kept as stored.
    #[serde(untagged)]
    Other {
        /// The stored kind.
        kind: String,
        /// The stored data.
        data: serde_json::Value,
    },
}

impl Event {
    /// The stored kinds a run report reads: artifacts, validations and verdicts.
    pub(crate) const REPORT_KINDS: &'static [&'static str] = &[
        "agent.artifact",
        "agent.validation",
        "validator.verdict",
        "agent.left-out",
    ];

    /// Whether this is a fact about one agent (its state, turns, tools, validation): the
    /// only events a worker forwards and a coordinator takes from one. A run's own
    /// facts (start, end, joins, team stages) are the coordinator's to write, and an
    /// unknown kind is no one's.
    pub fn is_about_an_agent(&self) -> bool {
        match self {
            Self::AgentState { .. }
            | Self::AgentWorktree { .. }
            | Self::AgentWrapUp { .. }
            | Self::AgentCompacted { .. }
            | Self::AgentSteer { .. }
            | Self::AgentSteerUndelivered { .. }
            | Self::AgentContinue { .. }
            | Self::AgentFixRound { .. }
            | Self::AgentValidation { .. }
            | Self::AgentArtifact(_)
            | Self::AgentLeftOut { .. }
            | Self::AgentRecovered { .. }
            | Self::AgentCheckpoint { .. }
            | Self::AgentChain { .. }
            | Self::ModelReply { .. }
            | Self::ProviderBreakerOpen { .. }
            | Self::ToolCall { .. }
            | Self::ValidatorVerdict(_) => true,
            Self::RunStarted { .. }
            | Self::RunResumed { .. }
            | Self::RunInterrupted {}
            | Self::RunFinished { .. }
            | Self::BatchFinalized(_)
            | Self::SwarmDelivery { .. }
            | Self::GroupDelivery { .. }
            | Self::GroupDeliveryFailed { .. }
            | Self::CrewReview(_)
            | Self::OrchestratePlan { .. }
            | Self::OrchestrateUnknownWorkers { .. }
            | Self::MergeConflict { .. }
            | Self::ReflectIteration(_)
            | Self::ReflectScoreUnreadable { .. }
            | Self::TeamMessages { .. }
            | Self::Other { .. } => false,
        }
    }

    /// The stored kind and data of this event.
    pub fn to_parts(&self) -> (String, serde_json::Value) {
        let (kind, data) = self.to_stored();
        let data = serde_json::from_str(&data).unwrap_or(serde_json::Value::Null);
        (kind, data)
    }

    /// The stored kind and data (as JSON text) of this event: serialised once, the
    /// envelope split off without building a JSON tree (the store's hot path).
    pub(crate) fn to_stored(&self) -> (String, String) {
        #[derive(Deserialize)]
        struct Envelope<'a> {
            kind: &'a str,
            #[serde(borrow)]
            data: &'a serde_json::value::RawValue,
        }
        // Every variant serialises to `{"kind": …, "data": …}`; anything else would be a
        // bug worth seeing in the log, so it is stored under a kind that says so.
        let text = serde_json::to_string(self).unwrap_or_default();
        match serde_json::from_str::<Envelope<'_>>(&text) {
            Ok(e) => (e.kind.to_owned(), e.data.get().to_owned()),
            Err(_) => ("unserialisable".into(), text),
        }
    }

    /// The event stored as `kind` with `data`; one this build cannot read stays as
    /// [`Event::Other`].
    pub fn from_parts(kind: String, data: serde_json::Value) -> Self {
        let value = serde_json::json!({ "kind": kind, "data": data });
        serde_json::from_value(value).unwrap_or(Self::Other { kind, data })
    }
}

/// A kind of [`Event`] a read of the log keeps on its own
/// ([`Watch::latest`](crate::Watch::latest)), named by variant so that a misspelt kind
/// does not compile. Its stored name is the event's JSON `kind`; kinds are added here as
/// readers need them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// [`Event::ModelReply`] (`model.reply`).
    ModelReply,
    /// [`Event::ToolCall`] (`tool.call`).
    ToolCall,
    /// [`Event::AgentSteer`] (`agent.steer`).
    AgentSteer,
    /// [`Event::ReflectIteration`] (`reflect.iteration`).
    ReflectIteration,
}

impl EventKind {
    /// The `kind` its events are stored and printed under.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ModelReply => "model.reply",
            Self::ToolCall => "tool.call",
            Self::AgentSteer => "agent.steer",
            Self::ReflectIteration => "reflect.iteration",
        }
    }
}

/// One stored event: its position in the log, run, agent, time and what happened.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Position in the log (assigned by the store; increases with every event).
    pub seq: i64,
    /// The run.
    pub run_id: RunId,
    /// The agent, if the event is about one.
    pub agent_id: Option<AgentId>,
    /// Time (ms since the Unix epoch).
    pub at: i64,
    /// What happened.
    #[serde(flatten)]
    pub event: Event,
}

/// One run's share of a finalised batch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchShare {
    /// Its groups.
    pub groups: Vec<JoinMembers>,
    /// Its swarms.
    pub swarms: Vec<JoinMembers>,
    /// Agents joined individually.
    pub individuals: Vec<AgentId>,
}

/// A group or swarm of a batch with its members.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JoinMembers {
    /// The group or swarm id.
    pub id: String,
    /// Its members, in spawn order.
    pub members: Vec<AgentId>,
}

/// A member as a group delivery hands it on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberSummary {
    /// The agent.
    pub agent: AgentId,
    /// How it ended.
    pub state: AgentState,
}

/// Something an agent left behind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Artifact {
    /// A branch holding its commits.
    Branch(BranchArtifact),
}

/// How validation ended for an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValidationStatus {
    /// Every validator passed.
    Passed,
    /// Still failing after the last fix round.
    ValidationFailed,
    /// A validator faulted or could not judge; no fix rounds were started for it.
    Faulted,
    /// The agent did not complete, so nothing was validated.
    Skipped,
}

impl ValidationStatus {
    /// Whether the agent's work may count as a result: validation passed, or there was
    /// none. Every mode decides with this (a failed or faulted validation never ends a
    /// run as goal-met).
    pub fn accepts(self) -> bool {
        match self {
            Self::Passed | Self::Skipped => true,
            Self::ValidationFailed | Self::Faulted => false,
        }
    }
}

/// What one validator said in one round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum VerdictOutcome {
    /// Every criterion passed.
    Passed {
        /// The verdict.
        verdict: Verdict,
    },
    /// Some criterion failed.
    Failed {
        /// The verdict.
        verdict: Verdict,
    },
    /// The validator answered that it could not judge (its WIT `err`).
    Error {
        /// What it said.
        message: String,
    },
    /// The plugin trapped, ran out of time or hit a limit.
    Fault {
        /// The fault.
        fault: String,
    },
}

/// One validator's result in one round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundResult {
    /// 0 for the first check, then 1, 2… after each fix round.
    pub round: u32,
    /// The validator's name.
    pub validator: String,
    /// Where it came from (`builtin`, `file:PATH`, …): a file named like a built-in is
    /// told apart by this (empty in events of older versions).
    #[serde(default)]
    pub source: String,
    /// What it said.
    #[serde(flatten)]
    pub outcome: VerdictOutcome,
}

/// A crew reviewer's verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict")]
pub enum ReviewVerdict {
    /// The work passes.
    #[serde(rename = "PASS")]
    Pass {
        /// The reviewer's summary.
        summary: String,
        /// Always empty for a pass (kept so both verdicts have the same fields).
        #[serde(default)]
        findings: Vec<String>,
    },
    /// The work fails; the findings go back to the executor.
    #[serde(rename = "FAIL")]
    Fail {
        /// What to fix.
        findings: Vec<String>,
    },
}

impl ReviewVerdict {
    /// True for a pass.
    pub fn passed(&self) -> bool {
        match self {
            Self::Pass { .. } => true,
            Self::Fail { .. } => false,
        }
    }

    /// `PASS` or `FAIL`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Pass { .. } => "PASS",
            Self::Fail { .. } => "FAIL",
        }
    }

    /// The findings (empty for a pass).
    pub fn findings(&self) -> &[String] {
        match self {
            Self::Pass { findings, .. } | Self::Fail { findings } => findings,
        }
    }
}

/// One team worker's assignment and how it went.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// The member.
    pub worker: String,
    /// The task the orchestrator gave it.
    pub task: String,
    /// Its agent.
    pub agent_id: String,
    /// How its part ended.
    pub status: WorkerStatus,
    /// How long it was awaited.
    pub duration_ms: u64,
}

/// One reflect iteration as reported and logged.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IterationRecord {
    /// Its number (from 1).
    pub iteration: u32,
    /// Failed tries of this iteration before this one (a failed try is retried).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry: u32,
    /// Its workers.
    pub workers: Vec<Assignment>,
    /// Names the orchestrator assigned work to that are not members.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_workers: Vec<String>,
    /// Messages sent to the team that it took in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
    /// The evaluation's score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// The score could not be read and was assumed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub score_defaulted: bool,
    /// The evaluator's reasons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// The score's direction (present once evaluated; null for the first score).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub trend: Option<Option<Trend>>,
    /// The evaluator said the work is complete.
    #[serde(default, skip_serializing_if = "is_false")]
    pub complete: bool,
    /// Why the iteration failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The loop saw signs of a stall.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stall_warning: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A field that is present (even as `null`) reads as `Some`.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(event: Event) -> EventRecord {
        EventRecord {
            seq: 7,
            run_id: RunId::from_string(String::from("r")),
            agent_id: None,
            at: 1,
            event,
        }
    }

    #[test]
    fn events_keep_their_stored_json() {
        let (kind, data) = Event::AgentState {
            state: AgentState::Running,
            error: None,
            exceeded: None,
            reason: None,
        }
        .to_parts();
        assert_eq!(kind, "agent.state");
        assert_eq!(data, serde_json::json!({ "state": "running" }));
        let (kind, data) = Event::RunInterrupted {}.to_parts();
        assert_eq!(
            (kind.as_str(), data),
            ("run.interrupted", serde_json::json!({}))
        );
        let line = serde_json::to_value(record(Event::ToolCall {
            turn: 2,
            tool: "read_file".into(),
            server: None,
            args: "{}".into(),
            ok: true,
            output: "x".into(),
        }))
        .unwrap();
        assert_eq!(line["kind"], "tool.call");
        assert_eq!(line["data"]["tool"], "read_file");
        assert_eq!(line["seq"], 7);
    }

    #[test]
    fn stored_events_read_back_as_variants() {
        for event in [
            Event::RunFinished {
                status: RunStatus::Completed,
                exit_reason: ExitReason::GoalMet,
            },
            Event::CrewReview(ReviewVerdict::Fail {
                findings: vec!["tests fail".into()],
            }),
            Event::ReflectIteration(IterationRecord {
                iteration: 1,
                trend: Some(None),
                ..IterationRecord::default()
            }),
            Event::GroupDelivery {
                group: "g".into(),
                kind: DeliveryKind::Wave(2),
                results: Vec::new(),
                counts: MemberCounts {
                    total: 2,
                    completed: 1,
                    delivered: 1,
                },
            },
        ] {
            let (kind, data) = event.to_parts();
            assert_eq!(Event::from_parts(kind, data), event);
        }
    }

    #[test]
    fn report_kinds_are_the_kinds_of_their_variants() {
        let artifact = Event::AgentArtifact(Artifact::Branch(BranchArtifact {
            branch: "b".into(),
            base: "0".into(),
            commits: Vec::new(),
        }));
        let validation = Event::AgentValidation {
            status: ValidationStatus::Passed,
            fix_rounds: 0,
        };
        let verdict = Event::ValidatorVerdict(RoundResult {
            round: 0,
            validator: "v".into(),
            source: "builtin".into(),
            outcome: VerdictOutcome::Error {
                message: "m".into(),
            },
        });
        let left_out = Event::AgentLeftOut {
            files: Vec::new(),
            more: 0,
        };
        let kinds: Vec<String> = [artifact, validation, verdict, left_out]
            .iter()
            .map(|e| e.to_parts().0)
            .collect();
        assert_eq!(kinds, Event::REPORT_KINDS);
    }

    #[test]
    fn event_kinds_are_the_kinds_of_their_variants() {
        let reply = Event::ModelReply {
            turn: 1,
            text: String::new(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: Usage::default(),
            stop: None,
        };
        let call = Event::ToolCall {
            turn: 1,
            tool: "read_file".into(),
            server: None,
            args: "{}".into(),
            ok: true,
            output: String::new(),
        };
        let steer = Event::AgentSteer {
            message: "m".into(),
        };
        let iteration = Event::ReflectIteration(IterationRecord::default());
        for (kind, event) in [
            (EventKind::ModelReply, reply),
            (EventKind::ToolCall, call),
            (EventKind::AgentSteer, steer),
            (EventKind::ReflectIteration, iteration),
        ] {
            assert_eq!(kind.as_str(), event.to_parts().0, "{kind:?}");
        }
    }

    #[test]
    fn unknown_or_unreadable_events_are_kept_as_stored() {
        let data = serde_json::json!({ "x": 1 });
        let e = Event::from_parts("future.kind".into(), data.clone());
        assert_eq!(
            e,
            Event::Other {
                kind: "future.kind".into(),
                data: data.clone()
            }
        );
        assert_eq!(e.to_parts(), ("future.kind".into(), data));
        let e = Event::from_parts("run.started".into(), serde_json::json!({ "mode": 3 }));
        assert!(matches!(e, Event::Other { .. }), "{e:?}");
    }
}

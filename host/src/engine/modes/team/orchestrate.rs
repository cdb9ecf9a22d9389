//! `orchestrate`: one round of plan (with one corrective nudge) → workers in parallel →
//! synthesis. `reflect` runs such rounds in a loop (see [`super::reflect`]).
//!
//! Every step of a round goes through the run's journal: the plan with its parsed
//! assignments is stored before any worker starts, each worker's result as it
//! arrives, the synthesis when it is written. A resumed round reads those back, so
//! only workers without a stored result run again, each with its stored task.

use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::eval::Evaluation;
use super::parse::parse_assignments;
use super::prompts::{
    PlanningInput, WorkerInfo, WorkerResult, nudge_prompt, planning_prompt, synthesis_prompt,
    worker_prompt,
};
use super::{GroupItem, MemberRun, TeamContext, integrate, run_group};
use crate::engine::context::RunContext;
use crate::engine::error::EngineError;
use crate::engine::executor::ExecOptions;
use crate::engine::journal::{Round, StepInput, StepKey};
use crate::engine::modes::{Mode, ModeOutcome};
use crate::engine::report::{ModeDetails, OrchestrateDetails};
use crate::event::{Assignment, Event};
use crate::provider::{Message, Provider};
use crate::team::Member;
use crate::vocab::{AgentState, ExitReason, RunStatus};

/// Plan, workers, synthesis.
pub(crate) struct Orchestrate;

#[async_trait]
impl Mode for Orchestrate {
    async fn run(&self, ctx: &RunContext) -> Result<ModeOutcome, EngineError> {
        let input = RoundInput {
            round: Round::Only,
            last_evaluation: None,
            messages: &[],
        };
        let round = orchestrate_round(ctx, &input).await?;
        let details = ModeDetails::Orchestrate(OrchestrateDetails {
            nudged: round.plan.nudged,
            unknown_workers: round.plan.unknown.clone(),
            workers_used: round.workers.len(),
            assignments: round.assignments(),
        });
        Ok(match round.end {
            RoundEnd::Failed(why) => ModeOutcome::failed(why, details),
            RoundEnd::Stopped(why) => {
                ModeOutcome::new((RunStatus::Cancelled, ExitReason::Cancelled), why, details)
            }
            // The seed's rule: the orchestrator's own answer stands; the reason says so.
            RoundEnd::NoAssignment(answer) => ModeOutcome::new(
                (RunStatus::Completed, ExitReason::AnsweredDirectly),
                answer,
                details,
            ),
            RoundEnd::Synthesised(answer) => {
                ModeOutcome::new((RunStatus::Completed, ExitReason::GoalMet), answer, details)
            }
        })
    }
}

/// What a round is planned from.
pub(crate) struct RoundInput<'a> {
    /// Which round (the one of orchestrate, or a reflect iteration).
    pub round: Round,
    /// Reflect: the previous iteration's number and evaluation.
    pub last_evaluation: Option<(u32, &'a Evaluation)>,
    /// Reflect: messages sent to the team for this iteration.
    pub messages: &'a [String],
}

/// The plan as stored: the orchestrator's answer and what was read from it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct StoredPlan {
    /// The orchestrator's last planning answer.
    pub answer: String,
    /// (member name as defined, task), in order; one entry per member.
    pub tasks: Vec<(String, String)>,
    /// Names the orchestrator used that are not members.
    pub unknown: Vec<String>,
    /// The first answer had no assignment and the nudge was sent.
    pub nudged: bool,
    /// Why planning failed (the orchestrator's agent did not complete).
    pub failed: Option<String>,
    /// The orchestrator's agent was stopped: the loop ends `cancelled`.
    #[serde(default)]
    pub stopped: bool,
    /// The orchestrator agent whose answer is the plan: the workers' parent in the
    /// agent tree (absent in journals of older versions).
    #[serde(default)]
    pub agent_id: Option<String>,
}

/// One orchestrator reply (synthesis, evaluation) as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct StoredReply {
    /// The agent that wrote it.
    pub agent_id: String,
    /// The reply, when the agent completed.
    pub text: Option<String>,
    /// Why there is none.
    pub error: Option<String>,
    /// The agent was stopped (a person stopped it): the loop ends `cancelled`.
    #[serde(default)]
    pub stopped: bool,
}

/// How a round ended.
pub(crate) enum RoundEnd {
    /// Planning or synthesis failed; the text says why.
    Failed(String),
    /// The orchestrator's planning or synthesis agent was stopped.
    Stopped(String),
    /// No assignment even after the nudge; the orchestrator's answer.
    NoAssignment(String),
    /// The synthesis.
    Synthesised(String),
}

/// One round's facts.
pub(crate) struct RoundFacts {
    /// The plan.
    pub plan: StoredPlan,
    /// Each assigned member with its task and result, in plan order.
    pub workers: Vec<(String, String, MemberRun)>,
    /// How it ended.
    pub end: RoundEnd,
}

impl RoundFacts {
    /// The workers as the report lists them.
    pub(crate) fn assignments(&self) -> Vec<Assignment> {
        self.workers
            .iter()
            .map(|(name, task, run)| Assignment {
                worker: name.clone(),
                task: task.clone(),
                agent_id: run.agent_id.clone(),
                status: run.status,
                duration_ms: run.duration_ms,
            })
            .collect()
    }
}

/// Plans, runs the workers and synthesises, reading back whatever the journal has.
pub(crate) async fn orchestrate_round(
    ctx: &RunContext,
    input: &RoundInput<'_>,
) -> Result<RoundFacts, EngineError> {
    let tc = ctx.team()?;
    let team = &tc.team;
    let plan_key = StepKey::Plan(input.round);
    let plan = match ctx.journal.done::<StoredPlan>(&plan_key) {
        Some(plan) => plan,
        None => {
            let plan = plan(ctx, tc, input, &plan_key).await?;
            ctx.journal
                .finish(&plan_key, None, &plan, Vec::new())
                .await?;
            if !plan.unknown.is_empty() {
                ctx.emit(
                    None,
                    Event::OrchestrateUnknownWorkers {
                        names: plan.unknown.clone(),
                    },
                );
            }
            ctx.emit(
                None,
                Event::OrchestratePlan {
                    step: plan_key.to_string(),
                    assignments: plan.tasks.len(),
                },
            );
            plan
        }
    };
    if let Some(why) = &plan.failed {
        let end = if plan.stopped {
            RoundEnd::Stopped(why.clone())
        } else {
            RoundEnd::Failed(why.clone())
        };
        return Ok(RoundFacts {
            plan,
            workers: Vec::new(),
            end,
        });
    }
    if plan.tasks.is_empty() {
        let end = RoundEnd::NoAssignment(plan.answer.clone());
        return Ok(RoundFacts {
            plan,
            workers: Vec::new(),
            end,
        });
    }

    // Workers in parallel, each bounded by the team's worker timeout.
    let mut items = Vec::with_capacity(plan.tasks.len());
    let mut assigned: Vec<(&Member, &str)> = Vec::with_capacity(plan.tasks.len());
    for (worker, task) in &plan.tasks {
        let Some(m) = team.member(worker) else {
            continue;
        };
        let prompt = worker_prompt(team.shared_context.as_deref(), &ctx.req.prompt, task);
        let mut spec = tc.member_spec(ctx, m, &prompt);
        // Workers sit under the orchestrator that assigned them (`tree`, `top`).
        spec.parent = plan.agent_id.clone().map(crate::ids::AgentId::from_string);
        items.push(GroupItem {
            key: StepKey::worker(input.round, &m.name),
            spec,
            opts: tc.member_options(ctx, m),
            assigned: task.clone(),
        });
        assigned.push((m, task.as_str()));
    }
    let mut runs = run_group(ctx, tc, items, Some(team.worker_timeout)).await?;
    {
        let mut stage: Vec<(&str, &mut MemberRun)> = assigned
            .iter()
            .map(|(m, _)| m.name.as_str())
            .zip(runs.iter_mut())
            .collect();
        let label = match input.round {
            Round::Only => "round".to_owned(),
            Round::Iteration(n) => format!("it{n}"),
        };
        integrate(ctx, tc, &label, &mut stage).await?;
    }
    let results: Vec<WorkerResult<'_>> = assigned
        .iter()
        .zip(&runs)
        .map(|((m, _), run)| WorkerResult {
            name: &m.name,
            status: run.status,
            output: &run.reply,
        })
        .collect();
    let mut synth_prompt = synthesis_prompt(&ctx.req.prompt, &results, instructions(tc));
    synth_prompt.push_str(&progress(ctx).await?);
    let synthesis = orchestrator_step(
        ctx,
        &StepKey::Synthesis(input.round),
        "synthesis",
        "orchestrator",
        &synth_prompt,
        &tc.orchestrator,
    )
    .await?;
    let end = match synthesis.text {
        Some(text) => RoundEnd::Synthesised(text),
        None if synthesis.stopped => RoundEnd::Stopped(synthesis.error.unwrap_or_default()),
        None => RoundEnd::Failed(synthesis.error.unwrap_or_default()),
    };
    let workers = assigned
        .iter()
        .zip(runs)
        .map(|((m, task), run)| (m.name.clone(), (*task).to_owned(), run))
        .collect();
    Ok(RoundFacts { plan, workers, end })
}

/// Asks the orchestrator for assignments (one nudge if none can be read).
async fn plan(
    ctx: &RunContext,
    tc: &TeamContext,
    input: &RoundInput<'_>,
    key: &StepKey,
) -> Result<StoredPlan, EngineError> {
    let team = &tc.team;
    let names: Vec<&str> = team.members.iter().map(|m| m.name.as_str()).collect();
    let displays: Vec<(&str, &str)> = team
        .members
        .iter()
        .map(|m| (m.display.as_str(), m.name.as_str()))
        .collect();
    let summaries: Vec<Option<String>> = team.members.iter().map(Member::summary).collect();
    let workers: Vec<WorkerInfo<'_>> = team
        .members
        .iter()
        .zip(&summaries)
        .map(|(m, s)| WorkerInfo::from_member(m, s.as_deref()))
        .collect();
    let mut prompt = planning_prompt(&PlanningInput {
        request: &ctx.req.prompt,
        workers: &workers,
        routing: team.routing.as_deref(),
        instructions: instructions(tc),
        last_evaluation: input.last_evaluation,
    });
    if !input.messages.is_empty() {
        prompt.push_str("\n## Messages sent to the team since the last iteration\n");
        for m in input.messages {
            prompt.push_str(&format!("- {}\n", m.trim()));
        }
    }
    let spec = TeamContext::orchestrator_spec(ctx, "orchestrator", &prompt, &tc.orchestrator);
    let input = StepInput {
        name: "orchestrator",
        task: None,
    };
    // What a retry that reopened the plan changed (provider, prices, turns), kept for
    // the nudge: both turns of the planning are the retried orchestrator's.
    let mut retried = None;
    let first = match ctx.recover(key).await? {
        Some(first) => first,
        None => {
            let mut job = ctx.job(spec, ExecOptions::unvalidated());
            if ctx.journal.retry_of(key).is_some() {
                ctx.apply_retry(key, &mut job).await?;
                retried = Some((
                    job.spec.provider.clone(),
                    job.spec.prices,
                    job.spec.quotas.clone(),
                ));
            }
            ctx.journal.begin(key, Some(&job.spec.id), &input).await?;
            ctx.execute(job).await?
        }
    };
    let mut planner = first.agent_id.to_string();
    if !first.outcome.state.is_success() {
        return Ok(StoredPlan {
            failed: Some(format!(
                "the orchestrator ended {}: {}",
                first.outcome.state,
                first.outcome.error.unwrap_or_default()
            )),
            stopped: first.outcome.state == AgentState::Stopped,
            agent_id: Some(planner),
            ..StoredPlan::default()
        });
    }
    let mut plan = StoredPlan {
        answer: first.outcome.result.clone(),
        ..StoredPlan::default()
    };
    let mut parsed = parse_assignments(&plan.answer, &names, &displays);
    plan.unknown = parsed.unknown.clone();
    if parsed.tasks.is_empty() {
        let nudge = nudge_prompt(&names);
        let mut history = first.outcome.history.clone();
        history.push(Message::user(nudge.clone()));
        let spec = TeamContext::orchestrator_spec(ctx, "orchestrator", &nudge, &tc.orchestrator);
        planner = spec.id.to_string();
        let mut job = ctx.job(spec, ExecOptions::unvalidated());
        if let Some((provider, prices, quotas)) = retried {
            job.spec.provider = provider;
            job.spec.prices = prices;
            job.spec.quotas = quotas;
        }
        job.history = Some(history);
        let again = ctx.execute(job).await?;
        plan.nudged = true;
        if again.outcome.state == AgentState::Stopped {
            plan.failed = Some("the orchestrator was stopped".into());
            plan.stopped = true;
        }
        if again.outcome.state.is_success() {
            plan.answer = again.outcome.result.clone();
            parsed = parse_assignments(&plan.answer, &names, &displays);
            plan.unknown.extend(parsed.unknown.iter().cloned());
        }
    }
    let mut seen = std::collections::HashSet::new();
    plan.unknown.retain(|n| seen.insert(n.to_ascii_lowercase()));
    plan.tasks = parsed
        .tasks
        .into_iter()
        .filter_map(|(worker, task)| team.member(&worker).map(|m| (m.name.clone(), task)))
        .collect();
    // Members in team order, whatever order the plan named them in (reports, tree, top).
    let rank = |name: &str| team.members.iter().position(|m| m.name == name);
    plan.tasks.sort_by_key(|(name, _)| rank(name));
    plan.agent_id = Some(planner);
    Ok(plan)
}

/// Runs one orchestrator-side agent as journal step `key`, or reads it back.
pub(crate) async fn orchestrator_step(
    ctx: &RunContext,
    key: &StepKey,
    name: &str,
    role: &str,
    task: &str,
    provider: &Arc<dyn Provider>,
) -> Result<StoredReply, EngineError> {
    if let Some(stored) = ctx.journal.done::<StoredReply>(key) {
        return Ok(stored);
    }
    let mut spec = ctx.agent_spec(name, role, task, crate::vocab::Access::ReadOnly);
    spec.provider = provider.clone();
    let input = StepInput { name, task: None };
    let run = match ctx.recover(key).await? {
        Some(run) => run,
        None => {
            // A retry that reopened this step applies its provider, model and turns.
            let mut job = ctx.job(spec, ExecOptions::unvalidated());
            ctx.apply_retry(key, &mut job).await?;
            ctx.journal.begin(key, Some(&job.spec.id), &input).await?;
            ctx.execute(job).await?
        }
    };
    let id = run.agent_id.clone();
    let o = run.outcome;
    let reply = if o.state.is_success() {
        StoredReply {
            agent_id: id.to_string(),
            text: Some(o.result),
            error: None,
            stopped: false,
        }
    } else {
        StoredReply {
            agent_id: id.to_string(),
            text: None,
            stopped: o.state == AgentState::Stopped,
            error: Some(format!(
                "the {name} ended {}: {}",
                o.state,
                o.error.unwrap_or_default()
            )),
        }
    };
    ctx.journal
        .finish(key, Some(&id), &reply, Vec::new())
        .await?;
    Ok(reply)
}

/// The integration branch's diff since the start and its conflicts, for the
/// synthesis and the evaluator (empty without a workspace or before any change).
pub(crate) async fn progress(ctx: &RunContext) -> Result<String, EngineError> {
    match ctx.workspace() {
        Some(ws) => Ok(ws.progress_section(&ctx.run_id).await?.unwrap_or_default()),
        None => Ok(String::new()),
    }
}

fn instructions(tc: &TeamContext) -> Option<&str> {
    tc.team
        .orchestrator
        .as_ref()
        .and_then(|o| o.instructions.as_deref())
}

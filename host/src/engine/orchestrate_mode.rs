//! `orchestrate`: one round of plan (with one corrective nudge) → workers in parallel →
//! synthesis. `reflect` runs such rounds in a loop (see [`super::reflect_mode`]).
//!
//! Every step of a round goes through the run's journal: the plan with its parsed
//! assignments is stored before any worker starts, each worker's result as it
//! arrives, the synthesis when it is written. A resumed round reads those back, so
//! only workers without a stored result run again, each with its stored task.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::execute::ExecOptions;
use super::orchestrate::{
    Evaluation, PlanningInput, WorkerInfo, WorkerResult, nudge_prompt, parse_assignments,
    planning_prompt, synthesis_prompt, worker_prompt,
};
use super::run::{Engine, EngineError, ModeContext, ModeResult};
use super::team_modes::{GroupItem, MemberRun, TeamContext, failed};
use super::{ExitReason, RunStatus};
use crate::agent::permissions::CapSet;
use crate::provider::{Message, Provider};
use crate::team::Member;

/// What a round is planned from.
pub(super) struct RoundInput<'a> {
    /// Prefix of the round's journal keys (`""`, or `it3/` in reflect).
    pub prefix: String,
    /// Reflect: the previous iteration's number and evaluation.
    pub last_evaluation: Option<(u32, &'a Evaluation)>,
    /// Reflect: messages sent to the team for this iteration.
    pub messages: &'a [String],
}

/// The plan as stored: the orchestrator's answer and what was read from it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(super) struct StoredPlan {
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
}

/// One orchestrator reply (synthesis, evaluation) as stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct StoredReply {
    /// The agent that wrote it.
    pub agent_id: String,
    /// The reply, when the agent completed.
    pub text: Option<String>,
    /// Why there is none.
    pub error: Option<String>,
}

/// How a round ended.
pub(super) enum RoundEnd {
    /// Planning or synthesis failed; the text says why.
    Failed(String),
    /// No assignment even after the nudge; the orchestrator's answer.
    NoAssignment(String),
    /// The synthesis.
    Synthesised(String),
}

/// One round's facts.
pub(super) struct Round {
    /// The plan.
    pub plan: StoredPlan,
    /// Each assigned member with its task and result, in plan order.
    pub workers: Vec<(String, String, MemberRun)>,
    /// How it ended.
    pub end: RoundEnd,
}

impl Round {
    /// The workers as the report lists them.
    pub fn workers_json(&self) -> serde_json::Value {
        json!(
            self.workers
                .iter()
                .map(|(name, task, run)| json!({
                    "worker": name,
                    "task": task,
                    "agent_id": run.agent_id,
                    "status": run.status,
                    "duration_ms": run.duration_ms,
                }))
                .collect::<Vec<_>>()
        )
    }
}

impl Engine {
    /// Orchestrate: one round, its synthesis as the result.
    pub(super) async fn run_orchestrate(
        &self,
        ctx: &ModeContext,
    ) -> Result<ModeResult, EngineError> {
        let round = self
            .orchestrate_round(
                ctx,
                &RoundInput {
                    prefix: String::new(),
                    last_evaluation: None,
                    messages: &[],
                },
            )
            .await?;
        let mut details = serde_json::Map::new();
        if round.plan.nudged {
            details.insert("nudged".into(), json!(true));
        }
        if !round.plan.unknown.is_empty() {
            details.insert("unknown_workers".into(), json!(round.plan.unknown));
        }
        details.insert("workers_used".into(), json!(round.workers.len()));
        if !round.workers.is_empty() {
            details.insert("assignments".into(), round.workers_json());
        }
        Ok(match round.end {
            RoundEnd::Failed(why) => failed(why, details),
            RoundEnd::NoAssignment(answer) | RoundEnd::Synthesised(answer) => ModeResult {
                status: RunStatus::Completed,
                reason: ExitReason::GoalMet,
                result: answer,
                details,
            },
        })
    }

    /// Plans, runs the workers and synthesises, reading back whatever the journal has.
    pub(super) async fn orchestrate_round(
        &self,
        ctx: &ModeContext,
        input: &RoundInput<'_>,
    ) -> Result<Round, EngineError> {
        let tc = self.team(ctx)?;
        let team = &tc.team;
        let plan_key = format!("{}plan", input.prefix);
        let plan = match ctx.journal.done::<StoredPlan>(&plan_key) {
            Some(plan) => plan,
            None => {
                let plan = self.plan(ctx, tc, input, &plan_key).await?;
                ctx.journal
                    .finish(&plan_key, None, &plan, Vec::new())
                    .await?;
                if !plan.unknown.is_empty() {
                    self.store.log_event(
                        &ctx.run_id,
                        None,
                        "orchestrate.unknown_workers",
                        json!({ "names": plan.unknown }),
                    );
                }
                self.store.log_event(
                    &ctx.run_id,
                    None,
                    "orchestrate.plan",
                    json!({ "step": plan_key, "assignments": plan.tasks.len() }),
                );
                plan
            }
        };
        if let Some(why) = &plan.failed {
            let end = RoundEnd::Failed(why.clone());
            return Ok(Round {
                plan,
                workers: Vec::new(),
                end,
            });
        }
        if plan.tasks.is_empty() {
            let end = RoundEnd::NoAssignment(plan.answer.clone());
            return Ok(Round {
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
            items.push(GroupItem {
                key: format!("{}worker/{}", input.prefix, m.name.to_ascii_lowercase()),
                spec: self.member_spec(ctx, tc, m, &prompt),
                opts: Self::member_opts(ctx, tc, m, "orchestrate"),
                assigned: task.clone(),
            });
            assigned.push((m, task.as_str()));
        }
        let runs = self
            .run_group(ctx, items, Some(team.worker_timeout))
            .await?;
        let results: Vec<WorkerResult<'_>> = assigned
            .iter()
            .zip(&runs)
            .map(|((m, _), run)| WorkerResult {
                name: &m.name,
                status: run.status,
                duration: run.duration(),
                output: &run.reply,
            })
            .collect();
        let instructions = orchestrator_instructions(tc);
        let synth_prompt = synthesis_prompt(&ctx.req.prompt, &results, instructions);
        let synthesis = self
            .orchestrator_step(
                ctx,
                &format!("{}synthesis", input.prefix),
                "synthesis",
                "orchestrator",
                &synth_prompt,
                &tc.orchestrator,
            )
            .await?;
        let end = match synthesis.text {
            Some(text) => RoundEnd::Synthesised(text),
            None => RoundEnd::Failed(synthesis.error.unwrap_or_default()),
        };
        let workers = assigned
            .iter()
            .zip(runs)
            .map(|((m, task), run)| (m.name.clone(), (*task).to_owned(), run))
            .collect();
        Ok(Round { plan, workers, end })
    }

    /// Asks the orchestrator for assignments (one nudge if none can be read).
    async fn plan(
        &self,
        ctx: &ModeContext,
        tc: &TeamContext,
        input: &RoundInput<'_>,
        key: &str,
    ) -> Result<StoredPlan, EngineError> {
        let team = &tc.team;
        let names: Vec<&str> = team.members.iter().map(|m| m.name.as_str()).collect();
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
            instructions: orchestrator_instructions(tc),
            last_evaluation: input.last_evaluation,
        });
        if !input.messages.is_empty() {
            prompt.push_str("\n## Messages sent to the team since the last iteration\n");
            for m in input.messages {
                prompt.push_str(&format!("- {}\n", m.trim()));
            }
        }
        let spec = self.orchestrator_spec(ctx, "orchestrator", "orchestrator", &prompt, tc);
        ctx.journal
            .begin(
                key,
                Some(spec.id.as_str()),
                json!({ "name": "orchestrator" }),
            )
            .await?;
        let first = self
            .run_agent(spec, &ExecOptions::default(), None, None)
            .await?;
        if !first.outcome.state.is_success() {
            return Ok(StoredPlan {
                failed: Some(format!(
                    "the orchestrator ended {}: {}",
                    first.outcome.state,
                    first.outcome.error.unwrap_or_default()
                )),
                ..StoredPlan::default()
            });
        }
        let mut plan = StoredPlan {
            answer: first.outcome.result.clone(),
            ..StoredPlan::default()
        };
        let mut parsed = parse_assignments(&plan.answer, &names);
        plan.unknown = parsed.unknown.clone();
        if parsed.tasks.is_empty() {
            let nudge = nudge_prompt(&names);
            let mut history = first.outcome.history.clone();
            history.push(Message::user(nudge.clone()));
            let spec = self.orchestrator_spec(ctx, "orchestrator", "orchestrator", &nudge, tc);
            let again = self
                .run_agent(spec, &ExecOptions::default(), None, Some(history))
                .await?;
            plan.nudged = true;
            if again.outcome.state.is_success() {
                plan.answer = again.outcome.result.clone();
                parsed = parse_assignments(&plan.answer, &names);
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
        Ok(plan)
    }

    /// A read-only orchestrator-side agent (planner, synthesis, evaluator).
    pub(super) fn orchestrator_spec(
        &self,
        ctx: &ModeContext,
        name: &str,
        role: &str,
        task: &str,
        tc: &TeamContext,
    ) -> crate::agent::runner::AgentSpec {
        let mut spec = self.agent_spec(ctx, name, role, task, CapSet::read_only());
        spec.provider = tc.orchestrator.clone();
        spec
    }

    /// Runs one orchestrator-side agent as journal step `key`, or reads it back.
    pub(super) async fn orchestrator_step(
        &self,
        ctx: &ModeContext,
        key: &str,
        name: &str,
        role: &str,
        task: &str,
        provider: &std::sync::Arc<dyn Provider>,
    ) -> Result<StoredReply, EngineError> {
        if let Some(stored) = ctx.journal.done::<StoredReply>(key) {
            return Ok(stored);
        }
        let mut spec = self.agent_spec(ctx, name, role, task, CapSet::read_only());
        spec.provider = provider.clone();
        let id = spec.id.clone();
        ctx.journal
            .begin(key, Some(id.as_str()), json!({ "name": name }))
            .await?;
        let run = self
            .run_agent(spec, &ExecOptions::default(), None, None)
            .await?;
        let o = run.outcome;
        let reply = if o.state.is_success() {
            StoredReply {
                agent_id: id.to_string(),
                text: Some(o.result),
                error: None,
            }
        } else {
            StoredReply {
                agent_id: id.to_string(),
                text: None,
                error: Some(format!(
                    "the {name} ended {}: {}",
                    o.state,
                    o.error.unwrap_or_default()
                )),
            }
        };
        ctx.journal
            .finish(key, Some(id.as_str()), &reply, Vec::new())
            .await?;
        Ok(reply)
    }
}

fn orchestrator_instructions(tc: &TeamContext) -> Option<&str> {
    tc.team
        .orchestrator
        .as_ref()
        .and_then(|o| o.instructions.as_deref())
}

//! The team modes: `broadcast` (every member at once), `sequential` (one after another,
//! each seeing the earlier replies) and `orchestrate` (an orchestrator assigns tasks,
//! workers run in parallel, the orchestrator synthesises). The prompts and the parsing
//! are in [`super::orchestrate`]; this file only drives agents around them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::json;

use super::execute::{ExecOptions, ExecResult};
use super::orchestrate::{
    EarlierReply, PlanningInput, WorkerInfo, WorkerResult, WorkerStatus, broadcast_prompt,
    nudge_prompt, parse_assignments, planning_prompt, sequential_prompt, synthesis_prompt,
    worker_prompt,
};
use super::run::{Engine, EngineError, ModeContext, ModeResult, RunRequest};
use super::{ExitReason, Mode, RunStatus};
use crate::agent::AgentState;
use crate::agent::permissions::CapSet;
use crate::agent::runner::AgentSpec;
use crate::batch::{
    Deliver, Delivery, GroupId, GroupJoin, JoinMode, RetryPolicy, deliver_with_retry,
};
use crate::provider::{Message, Provider};
use crate::team::{Access, Member, Team};

/// How long an orchestrate worker may run before it counts as timed out.
pub const WORKER_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A loaded team with the model each of its agents uses.
pub struct TeamContext {
    /// The team definition.
    pub team: Team,
    /// Member name → its provider (the run's unless the member names another).
    pub providers: HashMap<String, Arc<dyn Provider>>,
    /// The orchestrator's provider (orchestrate mode).
    pub orchestrator: Arc<dyn Provider>,
    /// Member name → the team's and its own validators, loaded.
    pub validators: HashMap<String, Vec<super::validate::ValidatorEntry>>,
}

impl TeamContext {
    fn provider(&self, member: &str, fallback: &Arc<dyn Provider>) -> Arc<dyn Provider> {
        self.providers
            .get(member)
            .cloned()
            .unwrap_or_else(|| fallback.clone())
    }
}

/// The tools an access level grants.
pub fn caps_for(access: Access) -> CapSet {
    match access {
        Access::ReadOnly => CapSet::read_only(),
        Access::Full => CapSet::full(),
    }
}

fn info(m: &Member) -> WorkerInfo<'_> {
    WorkerInfo::from_member(m, None)
}

impl Engine {
    /// Loads team `name` from the repository's and the user's team directories.
    pub async fn load_team(&self, name: &str) -> Result<Team, EngineError> {
        let repo = self.repo.clone();
        let teams = tokio::task::spawn_blocking(move || crate::team::discover(&repo))
            .await
            .map_err(|e| EngineError::Config(format!("loading teams: {e}")))?
            .map_err(|e| EngineError::Config(e.to_string()))?;
        let known: Vec<&str> = teams.iter().map(|t| t.name.as_str()).collect();
        match teams.iter().find(|t| t.name.eq_ignore_ascii_case(name)) {
            Some(team) => Ok(team.clone()),
            None if known.is_empty() => Err(EngineError::Config(format!(
                "unknown team `{name}`: no teams are defined (add .crewbox/teams/{name}.toml)"
            ))),
            None => Err(EngineError::Config(format!(
                "unknown team `{name}` (known: {})",
                known.join(", ")
            ))),
        }
    }

    /// Checks that `req`'s mode can run `team` and resolves each member's model. With a
    /// script every agent shares the run's scripted provider (one script, one state).
    pub async fn team_context(
        &self,
        req: &RunRequest,
        team: Team,
        run_provider: &Arc<dyn Provider>,
    ) -> Result<TeamContext, EngineError> {
        match req.mode {
            Some(Mode::Broadcast | Mode::Sequential | Mode::Orchestrate) => {}
            Some(Mode::Reflect) => return Err(EngineError::Unsupported(Mode::Reflect)),
            Some(other) => {
                return Err(EngineError::Config(format!(
                    "team `{}` cannot run in mode `{other}` (broadcast, sequential or orchestrate)",
                    team.name
                )));
            }
            None => {}
        }
        let build = |provider: Option<&String>, model: Option<&String>| {
            if req.script.is_some() || (provider.is_none() && model.is_none()) {
                return Ok(run_provider.clone());
            }
            let sub = RunRequest {
                provider: provider.cloned().or_else(|| req.provider.clone()),
                model: model.cloned().or_else(|| req.model.clone()),
                ..RunRequest::default()
            };
            self.provider(&sub).map(|(_, p)| p)
        };
        let mut providers = HashMap::new();
        for m in &team.members {
            providers.insert(
                m.name.clone(),
                build(m.provider.as_ref(), m.model.as_ref())?,
            );
        }
        let orchestrator = match &team.orchestrator {
            Some(o) => build(o.provider.as_ref(), o.model.as_ref())?,
            None => run_provider.clone(),
        };
        // Validators are loaded now, so a bad name fails before the run starts.
        let mut validators = HashMap::new();
        for m in &team.members {
            let names: Vec<String> = team
                .validators
                .iter()
                .chain(&m.validators)
                .cloned()
                .collect();
            validators.insert(m.name.clone(), self.load_validators(&names).await?);
        }
        Ok(TeamContext {
            team,
            providers,
            orchestrator,
            validators,
        })
    }

    fn member_spec(
        &self,
        ctx: &ModeContext,
        tc: &TeamContext,
        m: &Member,
        task: &str,
    ) -> AgentSpec {
        let mut spec = self.agent_spec(ctx, &m.name, &m.role, task, caps_for(m.access));
        spec.provider = tc.provider(&m.name, &ctx.provider);
        spec
    }

    fn member_opts(ctx: &ModeContext, tc: &TeamContext, m: &Member, join: &str) -> ExecOptions {
        let mut validators = ctx.validators.clone();
        validators.extend(tc.validators.get(&m.name).into_iter().flatten().cloned());
        ExecOptions {
            isolation: ctx.isolation(),
            validators,
            max_fix_rounds: ctx.max_fix_rounds(),
            join: Some(join.to_owned()),
        }
    }

    /// Submits `specs` as one group through the spawn batcher, flushes, and awaits each
    /// result (at most `timeout` each). A member that could not run is an `Err`.
    async fn run_group(
        &self,
        ctx: &ModeContext,
        specs: Vec<(AgentSpec, ExecOptions)>,
        timeout: Option<Duration>,
    ) -> Result<Vec<MemberRun>, EngineError> {
        let join = if specs.len() >= 2 {
            JoinMode::Group(GroupId::new(ctx.run_id.as_str()))
        } else {
            JoinMode::Individual
        };
        let mut pending = Vec::with_capacity(specs.len());
        for (spec, opts) in specs {
            let id = spec.id.clone();
            let rx = self.submit(spec, opts, join.clone()).await?;
            pending.push((id, rx));
        }
        self.flush_spawns().await?;
        let mut group = match &join {
            JoinMode::Group(id) => Some(
                GroupJoin::new(
                    id.clone(),
                    pending.iter().map(|(a, _)| a.clone()),
                    ctx.team
                        .as_ref()
                        .map(|t| t.team.delivery)
                        .unwrap_or_default(),
                )
                .map_err(|e| EngineError::Config(e.to_string()))?,
            ),
            _ => None,
        };
        let mut waits: FuturesUnordered<_> = pending
            .into_iter()
            .enumerate()
            .map(|(i, (id, rx))| async move {
                let started = Instant::now();
                let result = match timeout {
                    Some(t) => tokio::time::timeout(t, rx).await.ok(),
                    None => Some(rx.await),
                };
                let result = match result {
                    None => {
                        self.manager.stop(id.as_str());
                        MemberOutcome::TimedOut
                    }
                    Some(Ok(Ok(r))) => MemberOutcome::Ran(Box::new(r)),
                    Some(Ok(Err(e))) => MemberOutcome::Error(e.to_string()),
                    Some(Err(_)) => {
                        MemberOutcome::Error("the spawn queue dropped the agent".into())
                    }
                };
                let run = MemberRun {
                    agent_id: id.to_string(),
                    duration: started.elapsed(),
                    result,
                };
                (i, id, run)
            })
            .collect();
        let mut runs: Vec<(usize, MemberRun)> = Vec::new();
        let mut sink = StoreDelivery {
            store: self.store.clone(),
            run_id: ctx.run_id.clone(),
        };
        // The group join hands the results on (all at once by default, or in waves); a
        // delivery that fails is retried with backoff, then recorded as an error, never
        // dropped.
        loop {
            let wave = group.as_ref().and_then(GroupJoin::next_deadline);
            let delivery = tokio::select! {
                next = waits.next() => {
                    let Some((i, id, run)) = next else { break };
                    let summary = json!({ "agent": run.agent_id, "state": run.state() });
                    runs.push((i, run));
                    match group.as_mut().map(|g| g.complete(id, summary, tokio::time::Instant::now())) {
                        Some(Ok(d)) => d,
                        Some(Err(e)) => {
                            tracing::warn!(error = %e, "group join refused a completion");
                            None
                        }
                        None => None,
                    }
                }
                _ = async { tokio::time::sleep_until(wave.unwrap_or_else(tokio::time::Instant::now)).await }, if wave.is_some() => {
                    group.as_mut().and_then(|g| g.tick(tokio::time::Instant::now()))
                }
            };
            if let Some(delivery) = delivery
                && let Err(failed) =
                    deliver_with_retry(&mut sink, delivery, &RetryPolicy::default()).await
            {
                self.store.log_event(
                    &ctx.run_id,
                    None,
                    "group.delivery-failed",
                    json!({ "group": failed.group.as_str(), "attempts": failed.attempts, "errors": failed.errors }),
                );
            }
        }
        runs.sort_by_key(|(i, _)| *i);
        Ok(runs.into_iter().map(|(_, r)| r).collect())
    }

    fn team<'a>(&self, ctx: &'a ModeContext) -> Result<&'a TeamContext, EngineError> {
        ctx.team
            .as_ref()
            .ok_or_else(|| EngineError::Config("this mode runs a team: pass --team NAME".into()))
    }

    /// Broadcast: every member answers the request in parallel.
    pub(super) async fn run_broadcast(&self, ctx: &ModeContext) -> Result<ModeResult, EngineError> {
        let tc = self.team(ctx)?;
        let team = &tc.team;
        let names: Vec<&str> = team.members.iter().map(|m| m.name.as_str()).collect();
        let specs = team
            .members
            .iter()
            .map(|m| {
                let others: Vec<&str> = names.iter().copied().filter(|n| *n != m.name).collect();
                let prompt = broadcast_prompt(
                    &info(m),
                    &others,
                    m.charter.as_deref(),
                    team.shared_context.as_deref(),
                    &ctx.req.prompt,
                );
                (
                    self.member_spec(ctx, tc, m, &prompt),
                    Self::member_opts(ctx, tc, m, "broadcast"),
                )
            })
            .collect();
        let runs = self.run_group(ctx, specs, None).await?;
        Ok(collect_replies(team, &runs))
    }

    /// Sequential: members one at a time, each seeing the earlier replies.
    pub(super) async fn run_sequential(
        &self,
        ctx: &ModeContext,
    ) -> Result<ModeResult, EngineError> {
        let tc = self.team(ctx)?;
        let team = &tc.team;
        let mut runs: Vec<MemberRun> = Vec::with_capacity(team.members.len());
        for m in &team.members {
            let replies: Vec<String> = runs.iter().map(MemberRun::reply).collect();
            let earlier: Vec<EarlierReply<'_>> = team
                .members
                .iter()
                .zip(&replies)
                .map(|(m, r)| EarlierReply {
                    name: &m.name,
                    reply: r,
                })
                .collect();
            let prompt = sequential_prompt(
                &info(m),
                m.charter.as_deref(),
                team.shared_context.as_deref(),
                &ctx.req.prompt,
                &earlier,
            );
            let spec = self.member_spec(ctx, tc, m, &prompt);
            let mut one = self
                .run_group(
                    ctx,
                    vec![(spec, Self::member_opts(ctx, tc, m, "sequential"))],
                    None,
                )
                .await?;
            runs.append(&mut one);
        }
        Ok(collect_replies(team, &runs))
    }

    /// Orchestrate: plan (with one nudge), workers in parallel, synthesis.
    pub(super) async fn run_orchestrate(
        &self,
        ctx: &ModeContext,
    ) -> Result<ModeResult, EngineError> {
        let tc = self.team(ctx)?;
        let team = &tc.team;
        let names: Vec<&str> = team.members.iter().map(|m| m.name.as_str()).collect();
        let summaries: Vec<Option<String>> = team.members.iter().map(Member::summary).collect();
        let workers: Vec<WorkerInfo<'_>> = team
            .members
            .iter()
            .zip(&summaries)
            .map(|(m, s)| WorkerInfo::from_member(m, s.as_deref()))
            .collect();
        let instructions = team
            .orchestrator
            .as_ref()
            .and_then(|o| o.instructions.as_deref());
        let plan_prompt = planning_prompt(&PlanningInput {
            request: &ctx.req.prompt,
            workers: &workers,
            routing: team.routing.as_deref(),
            instructions,
            last_evaluation: None,
        });
        let mut details = serde_json::Map::new();
        let orchestrator_spec = |task: &str| {
            let mut spec = self.agent_spec(
                ctx,
                "orchestrator",
                "orchestrator",
                task,
                CapSet::read_only(),
            );
            spec.provider = tc.orchestrator.clone();
            spec
        };
        let plan = self
            .run_agent(
                orchestrator_spec(&plan_prompt),
                &ExecOptions::default(),
                None,
                None,
            )
            .await?;
        if !plan.outcome.state.is_success() {
            return Ok(failed(
                format!(
                    "the orchestrator ended {}: {}",
                    plan.outcome.state,
                    plan.outcome.error.unwrap_or_default()
                ),
                details,
            ));
        }
        let mut answer = plan.outcome.result.clone();
        let mut assignments = parse_assignments(&answer, &names);
        let mut unknown = assignments.unknown.clone();
        if assignments.tasks.is_empty() {
            let nudge = nudge_prompt(&names);
            let mut history = plan.outcome.history.clone();
            history.push(Message::user(nudge.clone()));
            let again = self
                .run_agent(
                    orchestrator_spec(&nudge),
                    &ExecOptions::default(),
                    None,
                    Some(history),
                )
                .await?;
            details.insert("nudged".into(), json!(true));
            if again.outcome.state.is_success() {
                answer = again.outcome.result.clone();
                assignments = parse_assignments(&answer, &names);
                unknown.extend(assignments.unknown.iter().cloned());
            }
        }
        let mut seen = std::collections::HashSet::new();
        unknown.retain(|n| seen.insert(n.to_ascii_lowercase()));
        if !unknown.is_empty() {
            details.insert("unknown_workers".into(), json!(unknown));
            self.store.log_event(
                &ctx.run_id,
                None,
                "orchestrate.unknown_workers",
                json!({ "names": unknown }),
            );
        }
        if assignments.tasks.is_empty() {
            details.insert("workers_used".into(), json!(0));
            return Ok(ModeResult {
                status: RunStatus::Completed,
                reason: ExitReason::GoalMet,
                result: answer,
                details,
            });
        }

        // Workers in parallel, each bounded by the timeout.
        let mut specs = Vec::with_capacity(assignments.tasks.len());
        let mut assigned: Vec<(&Member, &str)> = Vec::with_capacity(assignments.tasks.len());
        for (worker, task) in &assignments.tasks {
            let Some(m) = team.member(worker) else {
                continue;
            };
            let prompt = worker_prompt(
                m.charter.as_deref(),
                team.shared_context.as_deref(),
                &ctx.req.prompt,
                task,
            );
            specs.push((
                self.member_spec(ctx, tc, m, &prompt),
                Self::member_opts(ctx, tc, m, "orchestrate"),
            ));
            assigned.push((m, task.as_str()));
        }
        details.insert("workers_used".into(), json!(assigned.len()));
        let runs = self.run_group(ctx, specs, Some(WORKER_TIMEOUT)).await?;
        let outputs: Vec<(WorkerStatus, String)> = runs
            .iter()
            .map(|r| (r.worker_status(), r.reply()))
            .collect();
        details.insert(
            "assignments".into(),
            json!(
                assigned
                    .iter()
                    .zip(&runs)
                    .zip(&outputs)
                    .map(|(((m, task), run), (status, _))| json!({
                        "worker": m.name,
                        "task": task,
                        "agent_id": run.agent_id,
                        "status": status,
                        "duration_ms": run.duration.as_millis() as u64,
                    }))
                    .collect::<Vec<_>>()
            ),
        );
        let results: Vec<WorkerResult<'_>> = assigned
            .iter()
            .zip(&runs)
            .zip(&outputs)
            .map(|(((m, _), run), (status, output))| WorkerResult {
                name: &m.name,
                status: *status,
                duration: run.duration,
                output,
            })
            .collect();
        let synth_prompt = synthesis_prompt(&ctx.req.prompt, &results, instructions);
        let mut synth_spec = orchestrator_spec(&synth_prompt);
        synth_spec.name = "synthesis".into();
        let synth = self
            .run_agent(synth_spec, &ExecOptions::default(), None, None)
            .await?;
        if !synth.outcome.state.is_success() {
            return Ok(failed(
                format!(
                    "the synthesis ended {}: {}",
                    synth.outcome.state,
                    synth.outcome.error.unwrap_or_default()
                ),
                details,
            ));
        }
        Ok(ModeResult {
            status: RunStatus::Completed,
            reason: ExitReason::GoalMet,
            result: synth.outcome.result,
            details,
        })
    }
}

/// How one member's agent ended, as the team modes see it.
enum MemberOutcome {
    /// It ran (to any end state).
    Ran(Box<ExecResult>),
    /// It could not be run.
    Error(String),
    /// It outlived its timeout and was stopped.
    TimedOut,
}

/// One member's agent and how long it was awaited.
struct MemberRun {
    agent_id: String,
    duration: Duration,
    result: MemberOutcome,
}

impl MemberRun {
    fn state(&self) -> AgentState {
        match &self.result {
            MemberOutcome::Ran(r) => r.outcome.state,
            MemberOutcome::Error(_) => AgentState::Error,
            MemberOutcome::TimedOut => AgentState::Stopped,
        }
    }

    fn succeeded(&self) -> bool {
        matches!(&self.result, MemberOutcome::Ran(r) if r.outcome.state.is_success())
    }

    fn worker_status(&self) -> WorkerStatus {
        match &self.result {
            MemberOutcome::TimedOut => WorkerStatus::TimedOut,
            _ if self.succeeded() => WorkerStatus::Completed,
            _ => WorkerStatus::Failed,
        }
    }

    /// Its reply, or why there is none.
    fn reply(&self) -> String {
        match &self.result {
            MemberOutcome::Ran(r) if r.outcome.state.is_success() => r.outcome.result.clone(),
            MemberOutcome::Ran(r) => format!(
                "(ended {}: {})",
                r.outcome.state,
                r.outcome.error.clone().unwrap_or_default()
            ),
            MemberOutcome::Error(e) => format!("(could not run: {e})"),
            MemberOutcome::TimedOut => "(timed out)".into(),
        }
    }
}

fn failed(result: String, details: serde_json::Map<String, serde_json::Value>) -> ModeResult {
    ModeResult {
        status: RunStatus::Failed,
        reason: ExitReason::Failed,
        result,
        details,
    }
}

/// Every member's reply under a heading; the run completes when every member did.
fn collect_replies(team: &Team, runs: &[MemberRun]) -> ModeResult {
    let mut result = String::new();
    for (m, r) in team.members.iter().zip(runs) {
        result.push_str(&format!("## {} ({}, {})\n", m.name, m.role, r.state()));
        result.push_str(r.reply().trim());
        result.push_str("\n\n");
    }
    let mut details = serde_json::Map::new();
    details.insert(
        "members".into(),
        json!(
            team.members
                .iter()
                .zip(runs)
                .map(|(m, r)| json!({ "name": m.name, "agent_id": r.agent_id, "state": r.state() }))
                .collect::<Vec<_>>()
        ),
    );
    let all_ok = runs.iter().all(MemberRun::succeeded);
    ModeResult {
        status: if all_ok {
            RunStatus::Completed
        } else {
            RunStatus::Failed
        },
        reason: if all_ok {
            ExitReason::GoalMet
        } else {
            ExitReason::Failed
        },
        result,
        details,
    }
}

/// Hands a group's joined results on by recording them in the store.
struct StoreDelivery {
    store: crate::store::Store,
    run_id: crate::ids::RunId,
}

impl Deliver<serde_json::Value> for StoreDelivery {
    type Error = crate::store::StoreError;

    fn deliver(
        &mut self,
        delivery: &Delivery<serde_json::Value>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        let data = json!({
            "group": delivery.group.as_str(),
            "kind": format!("{:?}", delivery.kind),
            "results": delivery.results.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(),
            "counts": { "total": delivery.counts.total, "completed": delivery.counts.completed, "delivered": delivery.counts.delivered },
        });
        let (store, run) = (self.store.clone(), self.run_id.clone());
        async move { store.append_event(&run, None, "group.delivery", data).await }
    }
}

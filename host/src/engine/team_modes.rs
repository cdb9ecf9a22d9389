//! What every team mode shares (the loaded team, member agents, running a group of
//! members with its journal) and the two simplest modes: `broadcast` (every member at
//! once) and `sequential` (one after another, each seeing the earlier replies).
//! `orchestrate` is in [`super::orchestrate_mode`], `reflect` in
//! [`super::reflect_mode`]; prompts and parsing are in [`super::orchestrate`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::json;

use super::execute::{ExecOptions, ExecResult};
use super::orchestrate::{
    EarlierReply, WorkerInfo, WorkerStatus, broadcast_prompt, sequential_prompt,
};
use super::run::{Engine, EngineError, ModeContext, ModeResult, RunRequest};
use super::{ExitReason, Mode, RunStatus};
use crate::agent::AgentState;
use crate::agent::permissions::CapSet;
use crate::agent::runner::AgentSpec;
use crate::batch::{
    Deliver, Delivery, GroupId, GroupJoin, JoinMode, RetryPolicy, deliver_with_retry,
};
use crate::ids::AgentId;
use crate::provider::Provider;
use crate::team::{Access, Member, Team};
use serde::{Deserialize, Serialize};

/// A loaded team with the model each of its agents uses.
pub struct TeamContext {
    /// The team definition.
    pub team: Team,
    /// Member name → its provider (the run's unless the member names another).
    pub providers: HashMap<String, Arc<dyn Provider>>,
    /// The orchestrator's provider (orchestrate and reflect).
    pub orchestrator: Arc<dyn Provider>,
    /// The reflect evaluator's provider: the team's `[evaluator]`, else the
    /// orchestrator's (which then judges its own work by the sentinels).
    pub evaluator: Arc<dyn Provider>,
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
    /// Loads team `name` from the repository's and the user's team directories, with
    /// the repository's ceiling applied (see `team/limits.rs`).
    pub async fn load_team(&self, name: &str) -> Result<Team, EngineError> {
        let repo = self.repo.clone();
        let policy = self.config.team_policy();
        let found = tokio::task::spawn_blocking(move || crate::team::discover(&repo, &policy))
            .await
            .map_err(|e| EngineError::Config(format!("loading teams: {e}")))?;
        let team = found.find(name).map_err(EngineError::Config)?.clone();
        for w in &team.warnings {
            tracing::warn!(team = %team.name, "{w}");
        }
        Ok(team)
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
            Some(Mode::Broadcast | Mode::Sequential | Mode::Orchestrate | Mode::Reflect) => {}
            Some(other) => {
                return Err(EngineError::Config(format!(
                    "team `{}` cannot run in mode `{other}` (broadcast, sequential, orchestrate or reflect)",
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
        // A pack's model (`sonnet`, `claude-sonnet-4.6`) is used when the provider can
        // serve it; otherwise the provider's default, with a warning.
        let env = |var: &str| std::env::var(var).ok();
        let run_config = self
            .config
            .choose_provider(req.provider.as_deref(), None, &env)
            .ok()
            .map(|c| c.config);
        let mut providers = HashMap::new();
        for m in &team.members {
            let model = match (&m.model, &run_config) {
                (Some(declared), Some(cfg)) if team.format.is_pack() && req.script.is_none() => {
                    crate::team::pack::models::resolve(declared, cfg, &self.config.pack_models)
                        .map_err(|why| tracing::warn!(team = %team.name, member = %m.name, "{why}"))
                        .ok()
                }
                _ => m.model.clone(),
            };
            providers.insert(m.name.clone(), build(m.provider.as_ref(), model.as_ref())?);
        }
        let orchestrator = match &team.orchestrator {
            Some(o) => build(o.provider.as_ref(), o.model.as_ref())?,
            None => run_provider.clone(),
        };
        let evaluator = match &team.evaluator {
            Some(e) if e.provider.is_some() || e.model.is_some() => {
                build(e.provider.as_ref(), e.model.as_ref())?
            }
            _ => orchestrator.clone(),
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
            evaluator,
            validators,
        })
    }

    pub(super) fn member_spec(
        &self,
        ctx: &ModeContext,
        tc: &TeamContext,
        m: &Member,
        task: &str,
    ) -> AgentSpec {
        let mut spec = self.agent_spec(ctx, &m.name, &m.role, task, caps_for(m.access));
        spec.provider = tc.provider(&m.name, &ctx.provider);
        // The charter is the member's system prompt, naming the file it came from.
        let from = m.file.as_deref().map(|f| {
            f.strip_prefix(&self.repo)
                .unwrap_or(f)
                .display()
                .to_string()
        });
        spec.system_prompt
            .push_str(&super::orchestrate::charter_section(
                m.charter.as_deref(),
                from.as_deref(),
            ));
        // A definition may lower the turn limit, never raise it.
        if let Some(n) = m.max_turns {
            spec.quotas.max_turns = spec.quotas.max_turns.min(n);
        }
        spec
    }

    pub(super) fn member_opts(
        ctx: &ModeContext,
        tc: &TeamContext,
        m: &Member,
        join: &str,
    ) -> ExecOptions {
        let mut validators = ctx.validators.clone();
        validators.extend(tc.validators.get(&m.name).into_iter().flatten().cloned());
        ExecOptions {
            isolation: ctx.isolation(),
            validators,
            max_fix_rounds: ctx.max_fix_rounds(),
            join: Some(join.to_owned()),
        }
    }

    /// Runs `items` as one group through the spawn batcher and awaits each result (at
    /// most `timeout` each). A member whose step is stored as done in the run's
    /// journal is read back, not run again; every fresh result is stored as it arrives.
    pub(super) async fn run_group(
        &self,
        ctx: &ModeContext,
        items: Vec<GroupItem>,
        timeout: Option<Duration>,
    ) -> Result<Vec<MemberRun>, EngineError> {
        let mut runs: Vec<(usize, MemberRun)> = Vec::with_capacity(items.len());
        let mut fresh = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            match ctx.journal.done::<MemberRun>(&item.key) {
                Some(stored) => runs.push((i, stored)),
                None => fresh.push((i, item)),
            }
        }
        let join = if fresh.len() >= 2 {
            JoinMode::Group(GroupId::new(ctx.run_id.as_str()))
        } else {
            JoinMode::Individual
        };
        let mut pending = Vec::with_capacity(fresh.len());
        for (i, item) in fresh {
            let id = item.spec.id.clone();
            ctx.journal
                .begin(
                    &item.key,
                    Some(id.as_str()),
                    json!({ "name": item.spec.name, "task": item.assigned }),
                )
                .await?;
            let rx = self.submit(item.spec, item.opts, join.clone()).await?;
            pending.push((i, item.key, id, rx, item.assigned));
        }
        self.flush_spawns().await?;
        let mut group = match &join {
            JoinMode::Group(id) => Some(
                GroupJoin::new(
                    id.clone(),
                    pending.iter().map(|(_, _, a, _, _)| a.clone()),
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
            .map(|(i, key, id, rx, task)| async move {
                let started = Instant::now();
                let result = match timeout {
                    Some(t) => tokio::time::timeout(t, rx).await.ok(),
                    None => Some(rx.await),
                };
                let run = match result {
                    None => {
                        self.manager.stop(id.as_str());
                        MemberRun::timed_out(&id, started.elapsed())
                    }
                    Some(Ok(Ok(r))) => MemberRun::ran(&id, started.elapsed(), &r),
                    Some(Ok(Err(e))) => MemberRun::error(&id, started.elapsed(), e.to_string()),
                    Some(Err(_)) => MemberRun::error(
                        &id,
                        started.elapsed(),
                        "the spawn queue dropped the agent".into(),
                    ),
                };
                (i, key, id, MemberRun { task, ..run })
            })
            .collect();
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
                    let Some((i, key, id, run)) = next else { break };
                    // Stored before anything else looks at it: from here on a resume
                    // reads this result back instead of running the member again.
                    ctx.journal.finish(&key, Some(id.as_str()), &run, Vec::new()).await?;
                    let summary = json!({ "agent": run.agent_id, "state": run.state });
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

    pub(super) fn team<'a>(&self, ctx: &'a ModeContext) -> Result<&'a TeamContext, EngineError> {
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
                    team.shared_context.as_deref(),
                    &ctx.req.prompt,
                );
                GroupItem {
                    key: member_key(m),
                    spec: self.member_spec(ctx, tc, m, &prompt),
                    opts: Self::member_opts(ctx, tc, m, "broadcast"),
                    assigned: ctx.req.prompt.clone(),
                }
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
            let replies: Vec<String> = runs.iter().map(|r| r.reply.clone()).collect();
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
                team.shared_context.as_deref(),
                &ctx.req.prompt,
                &earlier,
            );
            let item = GroupItem {
                key: member_key(m),
                spec: self.member_spec(ctx, tc, m, &prompt),
                opts: Self::member_opts(ctx, tc, m, "sequential"),
                assigned: ctx.req.prompt.clone(),
            };
            let mut one = self.run_group(ctx, vec![item], None).await?;
            runs.append(&mut one);
        }
        Ok(collect_replies(team, &runs))
    }
}

/// The journal key of a broadcast or sequential member's reply.
fn member_key(m: &Member) -> String {
    format!("member/{}", m.name.to_ascii_lowercase())
}

/// One member to run in a group: its journal key, agent and options.
pub(super) struct GroupItem {
    /// Unique within the run, e.g. `member/alice` or `it2/worker/bob`.
    pub key: String,
    /// The agent.
    pub spec: AgentSpec,
    /// How it executes.
    pub opts: ExecOptions,
    /// The task it was given (stored with the step; the prompt wraps it).
    pub assigned: String,
}

/// How one member's agent ended, as the team modes see it (and the journal stores it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct MemberRun {
    /// The agent.
    pub agent_id: String,
    /// How long it was awaited.
    pub duration_ms: u64,
    /// Its end state.
    pub state: AgentState,
    /// How its part ended.
    pub status: WorkerStatus,
    /// Its reply, or why there is none.
    pub reply: String,
    /// The task it was given.
    #[serde(default)]
    pub task: String,
}

impl MemberRun {
    fn ran(id: &AgentId, elapsed: Duration, r: &ExecResult) -> Self {
        let o = &r.outcome;
        // [plugin helper, issue 13] Work that failed validation is a failed result.
        let ok = o.state.is_success() && r.validation.accepts();
        Self {
            agent_id: id.to_string(),
            duration_ms: elapsed.as_millis() as u64,
            state: o.state,
            status: if ok {
                WorkerStatus::Completed
            } else {
                WorkerStatus::Failed
            },
            reply: if ok {
                o.result.clone()
            } else if o.state.is_success() {
                format!("(its work did not pass validation)\n{}", o.result)
            } else {
                format!(
                    "(ended {}: {})",
                    o.state,
                    o.error.clone().unwrap_or_default()
                )
            },
            task: String::new(),
        }
    }

    fn error(id: &AgentId, elapsed: Duration, e: String) -> Self {
        Self {
            agent_id: id.to_string(),
            duration_ms: elapsed.as_millis() as u64,
            state: AgentState::Error,
            status: WorkerStatus::Failed,
            reply: format!("(could not run: {e})"),
            task: String::new(),
        }
    }

    fn timed_out(id: &AgentId, elapsed: Duration) -> Self {
        Self {
            agent_id: id.to_string(),
            duration_ms: elapsed.as_millis() as u64,
            state: AgentState::Stopped,
            status: WorkerStatus::TimedOut,
            reply: "(timed out)".into(),
            task: String::new(),
        }
    }

    /// It finished with a reply.
    pub fn succeeded(&self) -> bool {
        self.status == WorkerStatus::Completed
    }

    /// How long it ran.
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }
}

pub(super) fn failed(
    result: String,
    details: serde_json::Map<String, serde_json::Value>,
) -> ModeResult {
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
        result.push_str(&format!("## {} ({}, {})\n", m.name, m.role, r.state));
        result.push_str(r.reply.trim());
        result.push_str("\n\n");
    }
    let mut details = serde_json::Map::new();
    details.insert(
        "members".into(),
        json!(
            team.members
                .iter()
                .zip(runs)
                .map(|(m, r)| json!({ "name": m.name, "agent_id": r.agent_id, "state": r.state }))
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

//! The team modes — `broadcast`, `sequential`, `orchestrate`, `reflect` — and what
//! they share: the loaded team with each member's model and validators, member agents,
//! and running a group of members through the spawn queue and the one join loop, with
//! each member's result journaled as it arrives. Prompts, the assignment parser,
//! evaluation and the reflect loop's decisions are pure modules beside them.

pub(crate) mod broadcast;
pub mod eval;
mod memory;
pub(crate) mod orchestrate;
pub mod parse;
pub mod prompts;
pub(crate) mod reflect;
pub mod reflect_loop;
pub(crate) mod sequential;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use self::prompts::WorkerStatus;
use super::ModeOutcome;
use crate::agent::runner::AgentSpec;
use crate::batch::{
    Deliver, Delivery, GroupId, GroupJoin, JoinMode, RetryPolicy, deliver_with_retry,
};
use crate::engine::context::{RunContext, received};
use crate::engine::error::{EngineError, UsageError};
use crate::engine::executor::{ExecOptions, ExecResult};
use crate::engine::join::{GroupRule, Members, Step};
use crate::engine::journal::{StepInput, StepKey};
use crate::engine::providers;
use crate::engine::report::{MemberEntry, MembersDetails, ModeDetails};
use crate::engine::request::RunRequest;
use crate::engine::services::Services;
use crate::engine::validate::ValidatorEntry;
use crate::engine::workspace::StageWork;
use crate::event::{Event, MemberSummary};
use crate::ids::AgentId;
use crate::provider::Provider;
use crate::team::{Member, Team};
use crate::vocab::{AgentState, ExitReason, ModeChoice, RunStatus};
use crate::worktree::{BranchArtifact, MergeOutcome};

/// A loaded team with the model each of its agents uses.
pub(crate) struct TeamContext {
    /// The team definition.
    pub team: Team,
    /// Member name → its provider (the run's unless the member names another).
    providers: HashMap<String, Arc<dyn Provider>>,
    /// The orchestrator's provider (orchestrate and reflect).
    pub orchestrator: Arc<dyn Provider>,
    /// The reflect evaluator's provider: the team's `[evaluator]`, else the
    /// orchestrator's (which then judges its own work by the sentinels).
    pub evaluator: Arc<dyn Provider>,
    /// Member name → the team's and its own validators, loaded.
    validators: HashMap<String, Vec<ValidatorEntry>>,
    /// Each member's latest conversation in this run.
    memory: memory::Memory,
}

/// Loads team `name` from the repository's and the user's team directories, with the
/// repository's ceiling applied (see `team/limits.rs`).
pub(crate) async fn load_team(services: &Services, name: &str) -> Result<Team, EngineError> {
    let repo = services.repo().to_path_buf();
    let policy = services.config().team_policy();
    let found = tokio::task::spawn_blocking(move || crate::team::discover(&repo, &policy))
        .await
        .map_err(|e| EngineError::Internal(format!("loading teams: {e}")))?;
    let mut team = found.find(name)?.clone();
    team.warnings
        .extend(services.config().withheld_team_network(&team));
    for w in &team.warnings {
        tracing::warn!(team = %team.name, "{w}");
    }
    Ok(team)
}

impl TeamContext {
    /// Checks that `req`'s mode can run `team` and resolves each member's model and
    /// validators. With a script every agent shares the run's scripted provider (one
    /// script, one state).
    pub(crate) async fn load(
        services: &Services,
        req: &RunRequest,
        team: Team,
        run_provider: &Arc<dyn Provider>,
    ) -> Result<Self, EngineError> {
        match req.mode {
            Some(ModeChoice::Mode(mode)) if !mode.runs_a_team() => {
                return Err(UsageError::NotATeamMode {
                    team: team.name.clone(),
                    mode,
                }
                .into());
            }
            Some(ModeChoice::Mode(_) | ModeChoice::Auto) | None => {}
        }
        let build = |provider: Option<&String>, model: Option<&String>| {
            // A replay answers every agent of the run from the one recording.
            let shared = req.script.is_some() || run_provider.replay().is_some();
            if shared || (provider.is_none() && model.is_none()) {
                return Ok(run_provider.clone());
            }
            let sub = RunRequest {
                provider: provider.cloned().or_else(|| req.provider.clone()),
                model: model.cloned().or_else(|| req.model.clone()),
                ..RunRequest::default()
            };
            providers::build(services, &sub).map(|b| b.provider)
        };
        // A pack's model (`sonnet`, `claude-sonnet-4.6`) is used when the provider can
        // serve it; otherwise the provider's default, with a warning.
        let config = services.config();
        let env = |var: &str| std::env::var(var).ok();
        let run_config = config
            .choose_provider(req.provider.as_deref(), None, &env)
            .ok()
            .map(|c| c.config);
        let mut by_member = HashMap::new();
        for m in &team.members {
            let model = match (&m.model, &run_config) {
                (Some(declared), Some(cfg)) if team.format.is_pack() && req.script.is_none() => {
                    crate::team::pack::models::resolve(declared, cfg, &config.pack_models)
                        .map_err(|why| tracing::warn!(team = %team.name, member = %m.name, "{why}"))
                        .ok()
                }
                (Some(_) | None, Some(_) | None) => m.model.clone(),
            };
            by_member.insert(m.name.clone(), build(m.provider.as_ref(), model.as_ref())?);
        }
        let orchestrator = match &team.orchestrator {
            Some(o) => build(o.provider.as_ref(), o.model.as_ref())?,
            None => run_provider.clone(),
        };
        let evaluator = match &team.evaluator {
            Some(e) if e.provider.is_some() || e.model.is_some() => {
                build(e.provider.as_ref(), e.model.as_ref())?
            }
            Some(_) | None => orchestrator.clone(),
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
            validators.insert(m.name.clone(), services.plugins().validators(&names).await?);
        }
        Ok(Self {
            team,
            providers: by_member,
            orchestrator,
            evaluator,
            validators,
            memory: memory::Memory::default(),
        })
    }

    /// Member `m`'s agent for `task`: its access, its model, its charter as part of its
    /// system prompt (naming the file it came from), its turn limit under the run's.
    pub(crate) fn member_spec(&self, ctx: &RunContext, m: &Member, task: &str) -> AgentSpec {
        let mut spec = ctx.agent_spec(&m.name, &m.role, task, m.access);
        for n in &m.mcp {
            if !spec.mcp.contains(n) {
                spec.mcp.push(n.clone());
            }
        }
        if let Some(p) = self.providers.get(&m.name) {
            spec.provider = p.clone();
        }
        let repo = ctx.services().repo();
        let from = m
            .file
            .as_deref()
            .map(|f| f.strip_prefix(repo).unwrap_or(f).display().to_string());
        spec.system_prompt.push_str(&prompts::charter_section(
            m.charter.as_deref(),
            from.as_deref(),
        ));
        // A definition may lower the turn limit, never raise it.
        if let Some(n) = m.max_turns {
            spec.quotas.max_turns = spec.quotas.max_turns.min(n);
        }
        spec
    }

    /// How member `m` executes: the run's options plus its own validators.
    pub(crate) fn member_options(&self, ctx: &RunContext, m: &Member) -> ExecOptions {
        let own = self
            .validators
            .get(&m.name)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        ctx.exec_options(own)
    }

    /// An orchestrator-side agent (planner, synthesis, evaluator): read-only, on
    /// `provider`.
    pub(crate) fn orchestrator_spec(
        ctx: &RunContext,
        name: &str,
        task: &str,
        provider: &Arc<dyn Provider>,
    ) -> AgentSpec {
        let mut spec = ctx.agent_spec(name, name, task, crate::vocab::Access::ReadOnly);
        spec.provider = provider.clone();
        spec
    }
}

/// One member to run in a group: its journal step, agent and options.
pub(crate) struct GroupItem {
    /// Unique within the run.
    pub key: StepKey,
    /// The agent.
    pub spec: AgentSpec,
    /// How it executes.
    pub opts: ExecOptions,
    /// The task it was given (stored with the step; the prompt wraps it).
    pub assigned: String,
}

/// How one member's agent ended, as the team modes see it (and the journal stores it).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct MemberRun {
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
    /// Its branch, when it changed something in its worktree.
    #[serde(default)]
    pub branch: Option<BranchArtifact>,
}

impl MemberRun {
    fn ran(id: &AgentId, elapsed: Duration, r: &ExecResult) -> Self {
        let o = &r.outcome;
        // Work that failed validation is a failed result.
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
            // Work that did not pass validation is not carried forward.
            branch: if ok { r.branch.clone() } else { None },
        }
    }

    fn error(id: &AgentId, elapsed: Duration, e: &EngineError) -> Self {
        Self {
            agent_id: id.to_string(),
            duration_ms: elapsed.as_millis() as u64,
            state: AgentState::Error,
            status: WorkerStatus::Failed,
            reply: format!("(could not run: {e})"),
            task: String::new(),
            branch: None,
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
            branch: None,
        }
    }

    /// It finished with a reply.
    pub(crate) fn succeeded(&self) -> bool {
        self.status == WorkerStatus::Completed
    }
}

/// How long a stored agent ran (from its row).
async fn ran_for(ctx: &RunContext, id: &AgentId) -> Result<Duration, EngineError> {
    let agent = ctx.services().store().agent(id).await?;
    let ms = agent
        .and_then(|a| Some(a.finished_at? - a.started_at?))
        .unwrap_or(0);
    Ok(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

/// How often a member still waiting for a slot is looked at again.
const QUEUED_RECHECK: Duration = Duration::from_millis(250);

/// The result `rx` brings, or `None` once agent `id` has *run* for `limit`: the time it
/// waited for a slot (`max_concurrent`) does not count (a worker was timed out after
/// running half a second of a 2 s limit, its work dropped).
async fn within_run_time(
    store: &crate::store::Store,
    id: &AgentId,
    limit: Duration,
    mut rx: crate::engine::spawn::ResultRx,
) -> Option<Result<Result<ExecResult, EngineError>, tokio::sync::oneshot::error::RecvError>> {
    let mut wait = limit;
    loop {
        if let Ok(r) = tokio::time::timeout(wait, &mut rx).await {
            return Some(r);
        }
        // When it started, from its row (a row that cannot be read: the limit is over,
        // as counted from its submission).
        let started = match store.agent(id).await {
            Ok(Some(a)) => a.started_at,
            Ok(None) | Err(_) => return None,
        };
        wait = match started {
            None => QUEUED_RECHECK,
            Some(at) => {
                let ran = Duration::from_millis(
                    u64::try_from(crate::store::now_ms().saturating_sub(at)).unwrap_or(0),
                );
                limit.checked_sub(ran).filter(|d| !d.is_zero())?
            }
        };
    }
}

/// Runs `items` as one group through the spawn queue and awaits each result (at most
/// `timeout` each). A member whose step is stored as done in the run's journal is read
/// back, not run again; every fresh result is stored as it arrives, before the group's
/// join sees it. Results come back in item order.
pub(crate) async fn run_group(
    ctx: &RunContext,
    tc: &TeamContext,
    items: Vec<GroupItem>,
    timeout: Option<Duration>,
) -> Result<Vec<MemberRun>, EngineError> {
    let mut runs: Vec<Option<MemberRun>> = vec![None; items.len()];
    let mut fresh = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match ctx.journal.done::<MemberRun>(&item.key) {
            Some(stored) => {
                // A resumed run rebuilds what its members remember from their steps.
                if stored.state.is_success()
                    && let Some(conversation) = ctx.journal.conversation(&item.key)
                {
                    tc.memory.remember(&item.spec.name, conversation);
                }
                runs[i] = Some(stored);
            }
            None => match ctx.recover(&item.key).await? {
                // Completed before the kill, its step not recorded: finished from the
                // store, not run again.
                Some(r) => {
                    let elapsed = ran_for(ctx, &r.agent_id).await?;
                    let run = MemberRun {
                        task: item.assigned.clone(),
                        ..MemberRun::ran(&r.agent_id, elapsed, &r)
                    };
                    let conversation = r.outcome.history;
                    ctx.journal
                        .finish_agent(&item.key, &r.agent_id, &run, &conversation)
                        .await?;
                    if run.state.is_success() {
                        tc.memory.remember(&item.spec.name, conversation);
                    }
                    runs[i] = Some(run);
                }
                None => fresh.push((i, item)),
            },
        }
    }
    let join = if fresh.len() >= 2 {
        JoinMode::Group(GroupId::new(ctx.run_id.as_str()))
    } else {
        JoinMode::Individual
    };
    // Every step is recorded as begun before any member starts; the writer commits
    // them together.
    futures::future::try_join_all(fresh.iter().map(|(_, item)| {
        let input = StepInput {
            name: &item.spec.name,
            task: Some(&item.assigned),
        };
        async move {
            ctx.journal
                .begin(&item.key, Some(&item.spec.id), &input)
                .await
        }
    }))
    .await?;
    let mut pending = Vec::with_capacity(fresh.len());
    let mut members = Vec::with_capacity(fresh.len());
    for (i, item) in fresh {
        let id = item.spec.id.clone();
        let name = item.spec.name.clone();
        let mut job = ctx.job(item.spec, item.opts);
        // A member that worked earlier in this run continues its own conversation.
        job.history = tc.memory.carried(&job.spec);
        // A member a retry reopened continues its dead attempt's conversation.
        ctx.apply_retry(&item.key, &mut job).await?;
        let rx = ctx.submit(job, join.clone()).await?;
        members.push((i, id.clone()));
        let manager = ctx.services().manager();
        let store = ctx.services().store();
        let journal = &ctx.journal;
        let memory = &tc.memory;
        let (key, task) = (item.key, item.assigned);
        let index = pending.len();
        pending.push(async move {
            let started = Instant::now();
            let result = match timeout {
                Some(t) => within_run_time(store, &id, t, rx).await,
                None => Some(rx.await),
            };
            let (run, conversation) = match result.map(received) {
                None => {
                    manager.stop(id.as_str());
                    (MemberRun::timed_out(&id, started.elapsed()), None)
                }
                Some(Ok(r)) => (
                    MemberRun::ran(&id, started.elapsed(), &r),
                    Some(r.outcome.history),
                ),
                Some(Err(e)) => (MemberRun::error(&id, started.elapsed(), &e), None),
            };
            let run = MemberRun { task, ..run };
            // Stored (with the member's conversation) before the join sees it: from
            // here on a resume reads this result back instead of running it again.
            let stored = match conversation {
                Some(conversation) => {
                    let stored = journal.finish_agent(&key, &id, &run, &conversation).await;
                    if run.state.is_success() {
                        memory.remember(&name, conversation);
                    }
                    stored
                }
                None => journal.finish(&key, Some(&id), &run, Vec::new()).await,
            };
            (index, stored.map(|()| run))
        });
    }
    ctx.flush().await?;
    let rule = match &join {
        JoinMode::Group(group) => {
            let ids: Vec<AgentId> = members.iter().map(|(_, id)| id.clone()).collect();
            let join = GroupJoin::new(group.clone(), ids.clone(), tc.team.delivery)
                .map_err(|e| EngineError::Internal(e.to_string()))?;
            GroupRule::Group(join, ids)
        }
        JoinMode::Individual | JoinMode::Swarm(_) => GroupRule::Alone,
    };
    let mut sink = StoreDelivery {
        services: ctx.services(),
        run_id: &ctx.run_id,
    };
    let mut waiting = Members::new(pending, rule);
    // The group join hands the results on (all at once by default, or in waves); a
    // delivery that fails is retried with backoff, then recorded as an error, never
    // dropped.
    while let Some(step) = waiting.next().await {
        match step {
            Step::Completed(index, run) => {
                if let Some((i, _)) = members.get(index) {
                    runs[*i] = Some(run?);
                }
            }
            Step::Deliver(delivery) => {
                let delivery = summarise(delivery, &members, &runs);
                if let Err(failed) =
                    deliver_with_retry(&mut sink, delivery, &RetryPolicy::default()).await
                {
                    ctx.emit(
                        None,
                        Event::GroupDeliveryFailed {
                            group: failed.group.to_string(),
                            attempts: failed.attempts,
                            errors: failed.errors,
                        },
                    );
                }
            }
        }
    }
    runs.into_iter()
        .map(|r| r.ok_or_else(|| EngineError::Internal("a group member never completed".into())))
        .collect()
}

/// Merges the branches of a finished stage's members (`runs`, with their member
/// names) into the run's integration branch, in team order. A member whose branch
/// conflicts is marked `merge-conflict` and its reply says which files, so the
/// synthesis, the evaluator and the report see it. Without a workspace (no worktrees)
/// there is nothing to merge.
pub(crate) async fn integrate(
    ctx: &RunContext,
    tc: &TeamContext,
    stage: &str,
    runs: &mut [(&str, &mut MemberRun)],
) -> Result<(), EngineError> {
    let Some(ws) = ctx.workspace() else {
        return Ok(());
    };
    let order = |name: &str| {
        tc.team
            .members
            .iter()
            .position(|m| m.name.eq_ignore_ascii_case(name))
            .unwrap_or(usize::MAX)
    };
    runs.sort_by_key(|(name, _)| order(name));
    let work: Vec<StageWork<'_>> = runs
        .iter()
        .map(|(name, run)| StageWork {
            member: name,
            agent_id: &run.agent_id,
            branch: run.branch.as_ref(),
        })
        .collect();
    let records = ws
        .merge_stage(&ctx.journal, &ctx.run_id, stage, &work)
        .await?;
    for record in records {
        let MergeOutcome::Conflict { files } = &record.outcome else {
            continue;
        };
        let Some((_, run)) = runs.iter_mut().find(|(_, r)| r.agent_id == record.agent_id) else {
            continue;
        };
        run.status = WorkerStatus::MergeConflict;
        run.reply.push_str(&format!(
            "\n\n(merge-conflict: its branch `{}` conflicts with the run's integration \
             branch in {}; the branch is kept, its work is not in the integration branch)",
            record.branch,
            files.join(", ")
        ));
        ctx.emit(
            None,
            Event::MergeConflict {
                member: record.member.clone(),
                branch: record.branch.clone(),
                files: files.clone(),
            },
        );
    }
    Ok(())
}

/// A delivery of member indexes as the members' summaries.
fn summarise(
    d: Delivery<usize>,
    members: &[(usize, AgentId)],
    runs: &[Option<MemberRun>],
) -> Delivery<MemberSummary> {
    let results = d
        .results
        .into_iter()
        .map(|(agent, index)| {
            let state = members
                .get(index)
                .and_then(|(i, ..)| runs.get(*i))
                .and_then(Option::as_ref)
                .map_or(AgentState::Error, |r| r.state);
            (agent.clone(), MemberSummary { agent, state })
        })
        .collect();
    Delivery {
        group: d.group,
        kind: d.kind,
        results,
        counts: d.counts,
    }
}

/// Hands a group's joined results on by recording them in the store.
struct StoreDelivery<'a> {
    services: &'a Services,
    run_id: &'a crate::ids::RunId,
}

impl Deliver<MemberSummary> for StoreDelivery<'_> {
    type Error = crate::store::StoreError;

    fn deliver(
        &mut self,
        delivery: &Delivery<MemberSummary>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        let event = Event::GroupDelivery {
            group: delivery.group.to_string(),
            kind: delivery.kind,
            results: delivery.results.iter().map(|(_, r)| r.clone()).collect(),
            counts: delivery.counts,
        };
        let (store, run) = (self.services.store().clone(), self.run_id.clone());
        async move { store.append_event(&run, None, event).await }
    }
}

/// Every member's reply under a heading; the run completes when every member did.
pub(crate) fn collect_replies(team: &Team, runs: &[MemberRun]) -> ModeOutcome {
    let mut result = String::new();
    for (m, r) in team.members.iter().zip(runs) {
        result.push_str(&format!("## {} ({}, {})\n", m.name, m.role, r.state));
        result.push_str(r.reply.trim());
        result.push_str("\n\n");
    }
    let details = MembersDetails {
        members: team
            .members
            .iter()
            .zip(runs)
            .map(|(m, r)| MemberEntry {
                name: m.name.clone(),
                agent_id: r.agent_id.clone(),
                state: r.state,
            })
            .collect(),
    };
    let ended = if runs.iter().all(MemberRun::succeeded) {
        (RunStatus::Completed, ExitReason::GoalMet)
    } else {
        (RunStatus::Failed, ExitReason::Failed)
    };
    ModeOutcome::new(ended, result, ModeDetails::Members(details))
}

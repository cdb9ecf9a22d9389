//! Starting, driving and finishing a run: the part every mode shares. Everything that
//! can be wrong with a request is resolved before the run is recorded; the decision is
//! journaled; the mode runs; how it ended is stored, always, and read back as the
//! report. A stop request ends the run `cancelled`; a shutdown leaves it resumable.

use std::time::Duration;

use tracing::Instrument;

use super::Inner;
use super::context::{RunContext, RunHead, RunParts};
use super::dispatch::{self, Decision};
use super::error::{EngineError, UsageError};
use super::executor::Stop;
use super::journal::{Journal, StepKey};
use super::modes::team::{self, TeamContext};
use super::modes::{self, ModeOutcome};
use super::providers;
use super::report::{RunDetails, RunFault, RunReport};
use super::request::{RunRequest, RunSpec};
use super::workspace::RunWorkspace;
use crate::event::Event;
use crate::ids::RunId;
use crate::observe::spans;
use crate::store::{RunRecord, StoreError};
use crate::vocab::{AgentState, ExitReason, FailReason, Isolation, Mode, ModeChoice, RunStatus};

/// How long a stopped or interrupted run waits for its agents to record their end.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Runs a request to the end: decide the mode, record the decision, run the mode,
/// record how it ended.
pub(super) async fn start(
    engine: &Inner,
    req: RunRequest,
    started: Option<tokio::sync::oneshot::Sender<RunId>>,
    id: Option<RunId>,
) -> Result<RunReport, EngineError> {
    let span = spans::run(None);
    let result = start_in(engine, req, span.clone(), started, id)
        .instrument(span.clone())
        .await;
    ended(&span, &result);
    result
}

/// Records on the run's span how it ended (the status and, on failure, its reason).
fn ended(span: &tracing::Span, result: &Result<RunReport, EngineError>) {
    match result {
        Ok(report) => {
            let failed = report
                .exit_reason
                .filter(|_| report.status != RunStatus::Completed);
            spans::run_ended(span, report.status.as_str(), failed.map(ExitReason::as_str));
        }
        Err(EngineError::Interrupted(_)) => spans::run_ended(span, "interrupted", None),
        Err(_) => spans::run_ended(span, "error", Some("error")),
    }
}

async fn start_in(
    engine: &Inner,
    mut req: RunRequest,
    span: tracing::Span,
    started: Option<tokio::sync::oneshot::Sender<RunId>>,
    id: Option<RunId>,
) -> Result<RunReport, EngineError> {
    let services = &engine.services;
    // Nothing to do is no run (`schedule add` and the MCP `run` tool refused it already).
    if req.prompt.trim().is_empty() {
        return Err(UsageError::EmptyPrompt.into());
    }
    for name in &req.mcp {
        if !services.config().mcp.servers.contains_key(name) {
            let known: Vec<String> = services.config().mcp.servers.keys().cloned().collect();
            return Err(UsageError::UnknownMcpServer {
                name: name.clone(),
                known,
            }
            .into());
        }
    }
    let team = match &req.team {
        Some(name) => {
            let team = team::load_team(services, name).await?;
            req.mode.get_or_insert(ModeChoice::Mode(team.mode));
            Some(team)
        }
        None => None,
    };
    if req.read_only {
        // A read-only run's agents reach only the servers marked `read_only = true`:
        // say which granted ones they will not see, rather than leave the model to
        // find their tools missing.
        let config = services.config();
        let team_mcp = team.as_ref().map(|t| t.mcp.as_slice()).unwrap_or(&[]);
        for name in super::context::mcp_grant(&config.mcp.default, &req.mcp, team_mcp) {
            if config.mcp.servers.get(&name).is_some_and(|s| !s.read_only) {
                tracing::warn!(
                    server = %name,
                    "MCP server `{name}` is left out of this read-only run: only servers \
                     marked `read_only = true` in your config reach read-only agents"
                );
            }
        }
    }
    // Resolve everything that can be wrong before anything is recorded.
    let (provider_name, parts) = prepare(engine, &req, team).await?;
    let choice = req.mode.unwrap_or(services.config().default_mode);
    let decision = dispatch::decide(services, choice, &req.prompt).await?;
    if decision.mode.runs_a_team() && parts.team.is_none() {
        return Err(UsageError::TeamModeWithoutTeam(decision.mode).into());
    }
    in_place_one_writer_at_a_time(&req, &decision, parts.team.as_ref())?;
    let spec = RunSpec {
        request: req.clone(),
        provider: provider_name.clone(),
    };
    let mut run = RunRecord::started(
        decision.mode,
        req.prompt.clone(),
        serde_json::to_value(&spec).unwrap_or_default(),
    );
    run.team = parts.team.as_ref().map(|t| t.team.name.clone());
    if let Some(id) = id {
        run.id = id;
    }
    let run_id = run.id.clone();
    // A new id (or one chosen for it, which the store refuses twice): no one else in
    // this process drives it.
    let _driving = Driving::take_or_busy(&run_id)?;
    // One reflect loop per team: refused before the run is recorded.
    if decision.mode == Mode::Reflect
        && let Some(team) = &run.team
    {
        services.store().claim_team(team, &run_id).await?;
    }
    services
        .store()
        .start_run(
            &run,
            Event::RunStarted {
                mode: decision.mode,
                provider: provider_name,
            },
        )
        .await?;
    if let Some(started) = started {
        // Nobody listening any more is fine: the run goes on.
        let _ = started.send(run_id.clone());
    }
    span.record("run_id", tracing::field::display(&run_id));
    span.record("mode", decision.mode.as_str());
    dispatch::record(services, Some(&run_id), &req.prompt, &decision).await?;
    let journal = Journal::fresh(services.store().clone(), run_id.clone());
    journal
        .finish(&StepKey::Decision, None, &decision, Vec::new())
        .await?;
    drive(engine, run_id, req, decision, journal, parts).await
}

/// Finishes a run a crashed or interrupted process left unfinished: stored steps are
/// read back, only the rest runs again. Refused while a live process drives it.
pub(super) async fn resume(
    engine: &Inner,
    id: &RunId,
    claimed: Option<tokio::sync::oneshot::Sender<RunId>>,
) -> Result<RunReport, EngineError> {
    resume_driving(engine, id, claimed, None).await
}

/// [`resume`], this process already holding the run (`driving`: a retry takes it
/// before it records anything).
pub(super) async fn resume_driving(
    engine: &Inner,
    id: &RunId,
    claimed: Option<tokio::sync::oneshot::Sender<RunId>>,
    driving: Option<Driving>,
) -> Result<RunReport, EngineError> {
    let span = spans::run(Some(id));
    let result = resume_in(engine, id, span.clone(), claimed, driving)
        .instrument(span.clone())
        .await;
    ended(&span, &result);
    result
}

async fn resume_in(
    engine: &Inner,
    id: &RunId,
    span: tracing::Span,
    claimed: Option<tokio::sync::oneshot::Sender<RunId>>,
    driving: Option<Driving>,
) -> Result<RunReport, EngineError> {
    let services = &engine.services;
    let store = services.store();
    let not_resumable = |reason: String| EngineError::NotResumable {
        run: id.clone(),
        reason,
    };
    let run = store
        .run(id)
        .await?
        .ok_or_else(|| not_resumable("no such run".into()))?;
    let spec: RunSpec = serde_json::from_value(run.spec.clone())
        .map_err(|e| not_resumable(format!("its stored request does not read ({e})")))?;
    // The store's claim tells drivers apart by pid; within this process (`mcp serve`
    // and the daemon drive many runs), this does.
    let _driving = match driving {
        Some(held) => held,
        None => Driving::take_or_busy(id)?,
    };
    store.claim_run(id).await.map_err(|e| match e {
        StoreError::NoSuchRun { .. } | StoreError::RunFinished { .. } => {
            not_resumable(e.to_string())
        }
        other => other.into(),
    })?;
    if let Some(tx) = claimed {
        let _ = tx.send(id.clone());
    }
    let mut req = spec.request;
    let team = match &req.team {
        Some(name) => Some(
            team::load_team(services, name)
                .await
                .map_err(|e| not_resumable(e.to_string()))?,
        ),
        None => None,
    };
    req.mode.get_or_insert(ModeChoice::Mode(run.mode));
    let (_, parts) = prepare(engine, &req, team).await?;
    let journal = Journal::load(store.clone(), id.clone()).await?;
    let decision = journal
        .done::<Decision>(&StepKey::Decision)
        .unwrap_or_else(|| Decision::explicit(run.mode));
    span.record("mode", decision.mode.as_str());
    if decision.mode == Mode::Reflect
        && let Some(team) = &run.team
    {
        store.claim_team(team, id).await?;
    }
    // Agents the dead process left queued or running never finish on their own.
    let mut interrupted = 0;
    for agent in store.agents(id).await? {
        if !agent.state.is_terminal() {
            store.finish_interrupted(&agent.id, agent.stats).await?;
            // Its end, told as every agent's is: a follower of the events saw it
            // `running` last, then only the run's resumption.
            store
                .append_event(
                    id,
                    Some(&agent.id),
                    Event::AgentState {
                        state: AgentState::Error,
                        error: Some(crate::store::INTERRUPTED_ERROR.to_owned()),
                        exceeded: None,
                        reason: Some(FailReason::Interrupted),
                    },
                )
                .await?;
            interrupted += 1;
        }
    }
    store
        .append_event(
            id,
            None,
            Event::RunResumed {
                pid: std::process::id(),
                interrupted_agents: interrupted,
            },
        )
        .await?;
    drive(engine, id.clone(), req, decision, journal, parts).await
}

/// Checks the request and builds what its mode needs (providers, team, validators).
async fn prepare(
    engine: &Inner,
    req: &RunRequest,
    team: Option<crate::team::Team>,
) -> Result<(String, RunParts), EngineError> {
    let services = &engine.services;
    let built = providers::build(services, req)?;
    let team = match team {
        Some(team) => Some(TeamContext::load(services, req, team, &built.provider).await?),
        None => match req.mode {
            Some(ModeChoice::Mode(mode)) if mode.runs_a_team() => {
                return Err(UsageError::TeamModeWithoutTeam(mode).into());
            }
            Some(ModeChoice::Mode(_) | ModeChoice::Auto) | None => None,
        },
    };
    let validators = services.plugins().validators(&req.validators).await?;
    if req.isolation() == Isolation::Worktree && services.worktrees().is_none() {
        return Err(UsageError::NoWorktrees {
            repo: services.repo().to_path_buf(),
        }
        .into());
    }
    Ok((
        built.name,
        RunParts {
            provider: built.provider,
            prices: built.prices,
            validators,
            team,
        },
    ))
}

/// Refuses a run that would have agents write the user's checkout side by side
/// (`--isolation none` with a swarm, or a broadcast, orchestrate or reflect team with
/// more than one writing member): nothing would see one overwrite another's file.
fn in_place_one_writer_at_a_time(
    req: &RunRequest,
    decision: &Decision,
    team: Option<&TeamContext>,
) -> Result<(), EngineError> {
    let mode = decision.mode;
    if req.isolation() != Isolation::None || req.read_only {
        return Ok(());
    }
    let writers = match mode {
        Mode::Swarm => modes::swarm::size(req, decision),
        Mode::Broadcast | Mode::Orchestrate | Mode::Reflect => team.map_or(0, |t| {
            t.team
                .members
                .iter()
                .filter(|m| m.access == crate::vocab::Access::Full)
                .count()
        }),
        Mode::Single | Mode::Crew | Mode::Sequential => 0,
    };
    if writers > 1 {
        return Err(UsageError::InPlaceSideBySide { mode, writers }.into());
    }
    Ok(())
}

/// Runs a recorded run's mode to its end and records how it ended. A stop request
/// ends it `cancelled`; a shutdown (Ctrl-C, SIGTERM) leaves it unfinished and
/// resumable. Either way the run's agents have recorded their own end first.
async fn drive(
    engine: &Inner,
    run_id: RunId,
    req: RunRequest,
    decision: Decision,
    journal: Journal,
    parts: RunParts,
) -> Result<RunReport, EngineError> {
    let services = &engine.services;
    let manager = services.manager();
    let stop_requested = manager.register_run(&run_id);
    let stop = Stop::new(stop_requested.clone(), engine.shutdown.clone());
    // Picks up `crewbox stop`/`steer` aimed at this run from other processes; aborted
    // when this function returns, however it returns.
    let _controls = AbortOnDrop(tokio::spawn({
        let manager = manager.clone();
        let run = run_id.clone();
        let stop = engine.shutdown.child_token();
        async move { manager.control_loop(vec![run], stop).await }
    }));
    let workspace = if decision.mode.runs_a_team() && req.isolation() == Isolation::Worktree {
        RunWorkspace::open(services, &journal, &run_id, req.base.as_deref()).await?
    } else {
        None
    };
    let head = RunHead {
        run_id: run_id.clone(),
        req,
        decision,
        journal,
        workspace,
    };
    let run_provider = parts.provider.clone();
    let ctx = RunContext::new(head, parts, stop, services.clone(), engine.spawns.clone());
    let mode = modes::mode(ctx.decision.mode);
    let result = tokio::select! {
        result = mode.run(&ctx) => Some(result),
        _ = stop_requested.cancelled() => Some(Err(EngineError::Stopped(run_id.clone()))),
        _ = engine.shutdown.cancelled() => None,
    };
    manager.unregister_run(&run_id);
    // A mode refused new agents because the process is shutting down: interrupted,
    // not cancelled, so the run stays resumable.
    let result = match result {
        Some(Err(EngineError::Stopped(_))) if engine.shutdown.is_cancelled() => None,
        other => other,
    };
    let Some(result) = result else {
        manager.stop(run_id.as_str());
        settle(engine, &run_id).await;
        services.store().release_run(&run_id).await?;
        services
            .store()
            .append_event(&run_id, None, Event::RunInterrupted {})
            .await?;
        return Err(EngineError::Interrupted(run_id));
    };
    // A run that ended is always finished in the store, even when the mode failed.
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(EngineError::Stopped(_)) => {
            manager.stop(run_id.as_str());
            settle(engine, &run_id).await;
            ModeOutcome {
                status: RunStatus::Cancelled,
                reason: ExitReason::Cancelled,
                result: "stopped on request".into(),
                details: None,
                fault: None,
            }
        }
        Err(e) => ModeOutcome {
            status: RunStatus::Failed,
            reason: ExitReason::Failed,
            result: format!("the run failed: {e}"),
            details: None,
            fault: if let EngineError::PluginFault { step, fault } = &e {
                Some(RunFault {
                    step: step.to_string(),
                    fault: fault.to_string(),
                })
            } else {
                None
            },
        },
    };
    // A replay whose requests stopped matching its recording ended `diverged`, however
    // its mode took the failed agent.
    let replay = run_provider.replay();
    let outcome = match replay.as_ref().and_then(|r| r.divergence.as_ref()) {
        Some(d) => ModeOutcome {
            status: RunStatus::Diverged,
            reason: ExitReason::Diverged,
            result: format!("replay diverged: {d}"),
            ..outcome
        },
        None => outcome,
    };
    let integration = match ctx.workspace() {
        Some(ws) => ws.report(&run_id).await?,
        None => None,
    };
    let details = RunDetails {
        decision: Some(ctx.decision.clone()),
        resumed_steps: ctx.journal.is_resumed().then(|| ctx.journal.replayed()),
        fault: outcome.fault,
        integration,
        replay,
        mode: outcome.details,
    };
    let store = services.store();
    store
        .set_run_details(&run_id, &serde_json::to_value(&details).unwrap_or_default())
        .await?;
    store
        .finish_run(
            &run_id,
            outcome.status,
            outcome.reason,
            Some(&outcome.result),
        )
        .await?;
    let run = store
        .run(&run_id)
        .await?
        .ok_or_else(|| EngineError::Internal(format!("run {run_id} vanished from the store")))?;
    Ok(RunReport::load(store, run).await?)
}

/// Waits until every agent the run started has recorded its end (bounded).
async fn settle(engine: &Inner, run: &RunId) {
    if tokio::time::timeout(STOP_GRACE, engine.spawns.wait_idle(run))
        .await
        .is_err()
    {
        tracing::warn!(run_id = %run, "agents of the stopped run did not end in time");
    }
}

/// The runs this process drives (started or resumed, until `drive` returns): a
/// second driver in the same process is refused as one in another process is.
static DRIVEN: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<RunId>>> =
    std::sync::LazyLock::new(Default::default);

/// This process drives a run while one of these lives.
pub(super) struct Driving(RunId);

impl Driving {
    /// `None` when this process drives `id` already.
    fn take(id: &RunId) -> Option<Self> {
        let mut driven = DRIVEN.lock().unwrap_or_else(|p| p.into_inner());
        driven.insert(id.clone()).then(|| Self(id.clone()))
    }

    /// [`Self::take`], or the error a second driver gets.
    pub(super) fn take_or_busy(id: &RunId) -> Result<Self, StoreError> {
        Self::take(id).ok_or_else(|| StoreError::RunBusy {
            id: id.to_string(),
            pid: std::process::id(),
        })
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        DRIVEN
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.0);
    }
}

/// Aborts a task when dropped, so a helper task never outlives its owner.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

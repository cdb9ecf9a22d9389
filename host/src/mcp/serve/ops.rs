//! Each tool on the library the CLI commands use: the same lookups, the same
//! requests through the store, the same sentences (a usage error is the tool's error
//! with the text the CLI prints after `crewbox: `).

use rmcp::model::{CallToolResult, RequestMetaObject};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::tools::{self, ToolName};
use super::{Server, tool_error, tool_json};
use crate::control;
use crate::engine::{RunReport, RunRequest};
use crate::event::Artifact;
use crate::store::{RunRecord, Store, StoreError};
use crate::vocab::ModeChoice;
use crate::worktree::{BranchArtifact, WorktreeError};

/// What went wrong serving a tool call; every variant becomes the tool's error.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The call cannot be carried out as asked (the CLI's usage errors).
    #[error("{0}")]
    Usage(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Git failed.
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
    /// A blocking task was lost.
    #[error("internal task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

type OpResult = Result<CallToolResult, OpError>;

/// `Ok(value)` or a usage error.
fn usage<T, E: std::fmt::Display>(r: Result<T, E>) -> Result<T, OpError> {
    r.map_err(|e| OpError::Usage(e.to_string()))
}

/// `value` of argument `name` of `tool`, checked against the `1..=max` its input
/// schema declares (clamping it silently answered `limit: 0` with a full page).
fn in_range<T>(tool: ToolName, name: &str, value: Option<T>, max: T) -> Result<Option<T>, OpError>
where
    T: Copy + PartialOrd + From<u8> + std::fmt::Display,
{
    match value {
        Some(v) if v < T::from(1) || v > max => Err(OpError::Usage(format!(
            "`{}`: `{name}` must be 1..={max} (got {v})",
            tool.as_str()
        ))),
        v => Ok(v),
    }
}

/// Serves one call of `tool` with `args`.
pub async fn call(
    server: &Server,
    tool: ToolName,
    args: Value,
    meta: &Option<RequestMetaObject>,
    context: RequestContext<RoleServer>,
) -> OpResult {
    let store = server.engine().store();
    match tool {
        ToolName::Run => run(server, usage(tools::parse(tool, args))?, meta, context).await,
        ToolName::Status => status(store, usage(tools::parse(tool, args))?).await,
        ToolName::Events => events(store, usage(tools::parse(tool, args))?).await,
        ToolName::Tree => tree(store, usage(tools::parse(tool, args))?).await,
        ToolName::Steer => steer(store, usage(tools::parse(tool, args))?).await,
        ToolName::Stop => {
            let a: tools::StopArgs = usage(tools::parse(tool, args))?;
            let found = usage(control::find_stoppable(store, &a.target).await?)?;
            let ack = usage(control::stop_target(store, found.target()).await?)?;
            Ok(acknowledged(&ack, "stop", found.id()))
        }
        ToolName::Send => {
            let a: tools::SendArgs = usage(tools::parse(tool, args))?;
            let ack = usage(control::queue_team_message(Some(store), &a.team, &a.message).await?)?;
            Ok(acknowledged(&ack, "message", &a.team))
        }
        ToolName::Resume => {
            let a: tools::ResumeArgs = usage(tools::parse(tool, args))?;
            let run = usage(control::find_run(store, &a.run_id).await?)?;
            let engine = server.engine().clone();
            let id = run.id.clone();
            // Known once this process holds the run: a resume refused before (the run
            // finished, a live process drives it) answers with the refusal, with or
            // without `wait`.
            let (tx, rx) = tokio::sync::oneshot::channel();
            let work = async move { engine.resume_announced(&id, tx).await };
            Ok(super::runs::launch(server, work, rx, a.wait, meta, context).await)
        }
        ToolName::Branches => {
            let a: tools::BranchesArgs = usage(tools::parse(tool, args))?;
            let root = server.repo().root().to_path_buf();
            let all = tokio::task::spawn_blocking(move || crate::worktree::branches::list(&root))
                .await??;
            let shown: Vec<_> = all.iter().filter(|b| !a.merged || b.merged).collect();
            Ok(tool_json(&json!({ "branches": shown })))
        }
        ToolName::Diff => diff(server, usage(tools::parse(tool, args))?).await,
    }
}

/// What `--json` acknowledgements of `steer`, `stop` and `send` say.
fn acknowledged(ack: &str, kind: &str, target: &str) -> CallToolResult {
    tool_json(&json!({ "queued": true, "kind": kind, "target": target, "message": ack }))
}

/// The request a `run` call makes, checked as the CLI checks its flags.
pub fn request(a: tools::RunArgs) -> Result<RunRequest, String> {
    let mode = a.mode.as_deref().map(ModeChoice::parse_named).transpose()?;
    if let Some(team) = &a.team
        && !crate::team::valid_name(team)
    {
        return Err(format!(
            "`{}` is not a team name (letters, digits, `.`, `_` and `-`, at most {} characters)",
            crate::text::escape(&tools::shown(team)),
            crate::team::MAX_NAME_LEN
        ));
    }
    if a.prompt.trim().is_empty() {
        return Err("the prompt is empty".into());
    }
    if a.max_turns == Some(0) {
        return Err("max_turns must be at least 1".into());
    }
    if let Some(model) = &a.model {
        crate::engine::check_model_name(model).map_err(|why| format!("`model`: {why}"))?;
    }
    Ok(RunRequest {
        prompt: a.prompt,
        mode,
        provider: a.provider,
        model: a.model,
        team: a.team,
        network: a.network,
        read_only: a.read_only,
        max_turns: a.max_turns,
        ..RunRequest::default()
    })
}

async fn run(
    server: &Server,
    a: tools::RunArgs,
    meta: &Option<RequestMetaObject>,
    context: RequestContext<RoleServer>,
) -> OpResult {
    let wait = a.wait;
    if a.network && !server.allows_network() {
        return Err(OpError::Usage(
            "`network: true` is refused: this server was not started with `crewbox mcp serve \
             --allow-network` (whether agents' commands may reach the network is the user's \
             choice, not a client's; your `[sandbox] network` setting still applies)"
                .into(),
        ));
    }
    let req = usage(request(a))?;
    let engine = server.engine().clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let work = async move { engine.run_announced(req, tx).await };
    Ok(super::runs::launch(server, work, rx, wait, meta, context).await)
}

async fn status(store: &Store, a: tools::StatusArgs) -> OpResult {
    if let Some(id) = &a.run_id {
        let run = usage(control::find_run(store, id).await?)?;
        let report = RunReport::load(store, run).await?;
        return Ok(tool_json(&report_json(store, &report).await?));
    }
    let limit =
        in_range(ToolName::Status, "limit", a.limit, tools::MAX_STATUS_LIMIT)?.unwrap_or(10);
    let runs = store.recent_runs_in(None, limit).await?;
    let runs: Vec<Value> = runs.iter().map(RunRecord::summary).collect();
    Ok(tool_json(
        &json!({ "runs": runs, "agents": store.agent_counts().await? }),
    ))
}

/// A report as `crewbox status RUN --json` prints it (with the workers it ran on).
pub async fn report_json(store: &Store, report: &RunReport) -> Result<Value, StoreError> {
    let mut value = serde_json::to_value(report).unwrap_or_default();
    let workers = store.agent_workers(&report.run_id).await?;
    if !workers.is_empty() {
        value["workers"] = serde_json::to_value(&workers).unwrap_or_default();
    }
    Ok(value)
}

/// A page of a run's events after `since`, and whether more follow.
pub async fn events_page(
    store: &Store,
    run: &crate::ids::RunId,
    since: i64,
    limit: u32,
) -> Result<Value, StoreError> {
    let limit = limit.clamp(1, tools::MAX_EVENTS_PAGE);
    let mut page = store.events(Some(run), since, limit + 1).await?;
    let more = page.len() > limit as usize;
    page.truncate(limit as usize);
    let next = page.last().map_or(since, |e| e.seq);
    Ok(json!({ "run_id": run, "events": page, "next_since": next, "more": more }))
}

async fn events(store: &Store, a: tools::EventsArgs) -> OpResult {
    let limit = in_range(ToolName::Events, "limit", a.limit, tools::MAX_EVENTS_PAGE)?;
    let run = usage(control::find_run(store, &a.run_id).await?)?;
    let since = i64::try_from(a.since).unwrap_or(i64::MAX);
    let page = events_page(store, &run.id, since, limit.unwrap_or(100)).await?;
    Ok(tool_json(&page))
}

async fn tree(store: &Store, a: tools::TreeArgs) -> OpResult {
    let run = match &a.run_id {
        Some(id) => usage(control::find_run(store, id).await?)?,
        None => match store.recent_runs(1).await?.into_iter().next() {
            Some(run) => run,
            None => return Ok(tool_error("no runs recorded yet")),
        },
    };
    let agents = store.agent_nodes(&run.id).await?;
    let text = crate::observe::tree::AgentTree::build(agents).to_json(run.id.as_str());
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Ok(tool_json(&value))
}

async fn steer(store: &Store, a: tools::SteerArgs) -> OpResult {
    let agent = match (&a.agent, &a.run) {
        (Some(agent), None) => usage(control::find_agent(store, agent).await?)?,
        (None, Some(run)) => {
            let run = usage(control::find_run(store, run).await?)?;
            let running = store
                .agents(&run.id)
                .await?
                .into_iter()
                .find(|a| !a.state.is_terminal());
            usage(running.ok_or_else(|| format!("run {} has no running agent", run.id)))?
        }
        _ => return Ok(tool_error("`steer`: give exactly one of `agent` and `run`")),
    };
    let ack = usage(control::steer_agent(store, &agent, &a.message).await?)?;
    Ok(acknowledged(&ack, "steer", agent.id.as_str()))
}

/// An agent's branch, if it left one.
fn branch_of(agent: &crate::engine::AgentReport) -> Option<&BranchArtifact> {
    agent.branch.as_ref().map(|Artifact::Branch(b)| b)
}

/// The branch a run's change is on: its integration branch (team runs), else the
/// last writing agent's.
fn run_branch(report: &RunReport) -> Option<&BranchArtifact> {
    if let Some(b) = report
        .details
        .integration
        .as_ref()
        .and_then(|i| i.branch.as_ref())
    {
        return Some(b);
    }
    report.agents.iter().rev().find_map(branch_of)
}

async fn diff(server: &Server, a: tools::DiffArgs) -> OpResult {
    let max = in_range(
        ToolName::Diff,
        "max_bytes",
        a.max_bytes,
        tools::DIFF_MAX_BYTES,
    )?
    .unwrap_or(tools::DIFF_DEFAULT_BYTES);
    let store = server.engine().store();
    let run = usage(control::find_run(store, &a.run_id).await?)?;
    let report = RunReport::load(store, run).await?;
    let branch = match &a.agent {
        Some(text) => {
            let agent = usage(control::find_agent(store, text).await?)?;
            let found = report.agents.iter().find(|r| r.id == agent.id);
            found.and_then(branch_of)
        }
        None => run_branch(&report),
    };
    let Some(branch) = branch.cloned() else {
        return Ok(tool_json(&json!({
            "run_id": report.run_id, "status": report.status, "branch": null, "diff": "",
            "note": "this run left no branch (nothing changed, or it has not finished)",
        })));
    };
    let root = server.repo().root().to_path_buf();
    let b = branch.clone();
    let text = tokio::task::spawn_blocking(move || crate::worktree::branches::diff(&root, &b, max))
        .await??;
    Ok(tool_json(&json!({
        "run_id": report.run_id, "status": report.status, "branch": branch.branch,
        "base": branch.base, "commits": branch.commits, "diff": text,
    })))
}

//! What a mode sees of its run: the request, the decision, the run's model, its
//! validators and team, the journal, and a narrow way to start agents — every agent
//! goes through the spawn queue (and so the batcher), also single and crew agents.

use std::sync::Arc;

use super::dispatch::Decision;
use super::error::{EngineError, UsageError};
use super::executor::{ExecOptions, ExecResult, Job, Placement, Stop};
use super::journal::Journal;
use super::modes::team::TeamContext;
use super::request::RunRequest;
use super::services::Services;
use super::spawn::{ResultRx, SpawnQueue};
use super::validate::ValidatorEntry;
use super::workspace::RunWorkspace;
use crate::agent::permissions::{CapSet, Permissions};
use crate::agent::runner::AgentSpec;
use crate::batch::JoinMode;
use crate::event::Event;
use crate::ids::{AgentId, RunId};
use crate::provider::Provider;
use crate::provider::config::Prices;
use crate::vocab::{Access, Capability, Isolation};

/// Everything a mode needs to run.
pub(crate) struct RunContext {
    /// The run.
    pub run_id: RunId,
    /// The request.
    pub req: RunRequest,
    /// How the mode was chosen.
    pub decision: Decision,
    /// The run's journal: stored steps are read back on resume.
    pub journal: Journal,
    /// Team runs in worktrees: the integration branch.
    workspace: Option<RunWorkspace>,
    /// The run's model.
    provider: Arc<dyn Provider>,
    prices: Option<Prices>,
    /// Validators of the request, for writing agents.
    validators: Vec<ValidatorEntry>,
    team: Option<TeamContext>,
    stop: Stop,
    services: Arc<Services>,
    spawns: Arc<SpawnQueue>,
}

/// A recorded run: its id, request, decision and journal.
pub(crate) struct RunHead {
    /// The run.
    pub run_id: RunId,
    /// The request.
    pub req: RunRequest,
    /// How the mode was chosen.
    pub decision: Decision,
    /// Its journal.
    pub journal: Journal,
    /// Its integration branch (team runs in worktrees).
    pub workspace: Option<RunWorkspace>,
}

/// The parts a run context is made of, resolved before the run starts.
pub(crate) struct RunParts {
    /// The run's model.
    pub provider: Arc<dyn Provider>,
    /// Its prices.
    pub prices: Option<Prices>,
    /// The request's validators, loaded.
    pub validators: Vec<ValidatorEntry>,
    /// The team, for team modes.
    pub team: Option<TeamContext>,
}

impl RunContext {
    /// The context of run `head`, starting agents through `spawns`.
    pub(crate) fn new(
        head: RunHead,
        parts: RunParts,
        stop: Stop,
        services: Arc<Services>,
        spawns: Arc<SpawnQueue>,
    ) -> Self {
        Self {
            run_id: head.run_id,
            req: head.req,
            decision: head.decision,
            journal: head.journal,
            workspace: head.workspace,
            provider: parts.provider,
            prices: parts.prices,
            validators: parts.validators,
            team: parts.team,
            stop,
            services,
            spawns,
        }
    }

    /// The engine's services.
    pub(crate) fn services(&self) -> &Services {
        &self.services
    }

    /// The team, for team modes.
    pub(crate) fn team(&self) -> Result<&TeamContext, EngineError> {
        self.team
            .as_ref()
            .ok_or_else(|| UsageError::TeamModeWithoutTeam(self.decision.mode).into())
    }

    /// The integration branch, for team runs whose agents work in worktrees.
    pub(crate) fn workspace(&self) -> Option<&RunWorkspace> {
        self.workspace.as_ref()
    }

    /// The run's stop signal.
    pub(crate) fn stop(&self) -> &Stop {
        &self.stop
    }

    /// A root agent of this run with the engine's defaults and the tools `access` grants.
    pub(crate) fn agent_spec(
        &self,
        name: &str,
        role: &str,
        task: &str,
        access: Access,
    ) -> AgentSpec {
        // A run-level read-only limit lowers every agent's tools again.
        let caps = match self.req.read_only {
            true => CapSet::from(access).intersection(CapSet::read_only()),
            false => CapSet::from(access),
        };
        let mcp = self.mcp_grant();
        AgentSpec {
            id: AgentId::new(),
            run_id: self.run_id.clone(),
            parent: None,
            name: name.to_owned(),
            role: role.to_owned(),
            task: task.to_owned(),
            system_prompt: system_prompt(role, &crate::agent::prompt_caps(caps, &mcp)),
            perms: Permissions::root(caps),
            workspace: self.services.repo().to_path_buf(),
            quotas: self.quotas(),
            provider: self.provider.clone(),
            prices: self.prices,
            // The network is the user's to grant: the command line or their config, for
            // the team they defined (never a repository's team of the same name).
            network: self.req.network
                || self
                    .services
                    .config()
                    .team_network(self.team.as_ref().map(|t| &t.team)),
            mcp,
        }
    }

    /// The user's quotas, with `max_turns` lowered when the request asks for fewer.
    fn quotas(&self) -> crate::config::Quotas {
        let mut quotas = self.services.config().quotas.clone();
        if let Some(n) = self.req.max_turns {
            quotas.max_turns = quotas.max_turns.min(n);
        }
        quotas
    }

    /// The MCP servers of the run's agents: the user's `[mcp] default`, the request's
    /// `--mcp` and the team's `mcp`, each once.
    fn mcp_grant(&self) -> Vec<String> {
        let team = self
            .team
            .as_ref()
            .map(|t| t.team.mcp.as_slice())
            .unwrap_or(&[]);
        mcp_grant(&self.services.config().mcp.default, &self.req.mcp, team)
    }

    /// How the run's writing agents execute: the request's isolation, validators and
    /// fix rounds, plus `extra` validators (a team member's own). The one place run
    /// agents' options are made.
    pub(crate) fn exec_options(&self, extra: &[ValidatorEntry]) -> ExecOptions {
        let mut validators = self.validators.clone();
        validators.extend(extra.iter().cloned());
        ExecOptions {
            isolation: self.req.isolation(),
            validators,
            max_fix_rounds: self.req.fix_rounds(),
        }
    }

    /// A job for `spec` with `opts`, stopped with this run.
    pub(crate) fn job(&self, spec: AgentSpec, opts: ExecOptions) -> Job {
        Job::new(spec, opts, self.stop.clone())
    }

    /// Queues `job` to be joined as `join`; call [`RunContext::flush`] before awaiting.
    pub(crate) async fn submit(&self, job: Job, join: JoinMode) -> Result<ResultRx, EngineError> {
        if self.stop.is_stopped() {
            return Err(EngineError::Stopped(self.run_id.clone()));
        }
        let job = self.place(job).await;
        self.spawns.submit(job, join).await
    }

    /// In a team run, an agent that would start at HEAD starts at the integration
    /// head instead: a writer in its own worktree there, a reader in a checkout of it
    /// once work has been merged (before that, HEAD and the head are the same tree).
    async fn place(&self, mut job: Job) -> Job {
        let Some(ws) = &self.workspace else {
            // Outside a team, the run's own start (a replay's recorded one) stands in
            // for HEAD.
            if let (Placement::Isolated { base: base @ None }, Some(start)) =
                (&mut job.placement, &self.req.base)
            {
                *base = Some(start.clone());
            }
            return job;
        };
        if let Placement::Isolated { base: None } = &job.placement {
            let writes = job.opts.isolation == Isolation::Worktree
                && job.spec.perms.caps.contains(Capability::Write);
            if writes {
                job.placement = Placement::Isolated {
                    base: Some(ws.head().await),
                };
            } else if let Some(head) = ws.moved_head().await {
                job.placement = Placement::Reader { base: head };
            }
        }
        job
    }

    /// Finalises the pending batch now.
    pub(crate) async fn flush(&self) -> Result<(), EngineError> {
        self.spawns.flush().await
    }

    /// Runs one agent on its own (through the queue) and waits for it.
    pub(crate) async fn execute(&self, job: Job) -> Result<ExecResult, EngineError> {
        let rx = self.submit(job, JoinMode::Individual).await?;
        self.flush().await?;
        received(rx.await)
    }

    /// Logs an event of this run (not awaited; order is kept).
    pub(crate) fn emit(&self, agent: Option<&AgentId>, event: Event) {
        self.services.store().log_event(&self.run_id, agent, event);
    }
}

/// A queued agent's result, or why the queue gave none.
pub(crate) fn received(
    r: Result<Result<ExecResult, EngineError>, tokio::sync::oneshot::error::RecvError>,
) -> Result<ExecResult, EngineError> {
    r.unwrap_or_else(|_| {
        Err(EngineError::Internal(
            "the spawn queue dropped the agent".into(),
        ))
    })
}

/// The system prompt for a role with these tools.
pub(crate) fn system_prompt(role: &str, caps: &CapSet) -> String {
    format!(
        "You are a crewbox coding agent with role `{role}`, working in a git repository. \
         Your tools allow: {}. Paths are relative to the repository root. Work step by step: \
         inspect, change, verify. When you are done, reply with a short summary and a JSON \
         handoff block (```json {{\"status\": \"success\", \"summary\": \"…\", \"findings\": [\"…\"]}} ```), \
         or call `finish`.",
        crate::agent::cap_names(*caps).join(", ")
    )
}

/// The MCP servers granted to a run's agents: the user's `[mcp] default`, then the
/// request's `--mcp`, then the team's `mcp`, each once.
pub(crate) fn mcp_grant(default: &[String], requested: &[String], team: &[String]) -> Vec<String> {
    let mut names = default.to_vec();
    for n in requested.iter().chain(team) {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    names
}

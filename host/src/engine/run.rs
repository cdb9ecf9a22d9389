//! Starting, driving and finishing a run: the part every mode shares.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::journal::Journal;
use super::report::RunReport;
use super::validate::ValidatorEntry;
use super::{ExitReason, Mode, RunStatus};
use crate::agent::AgentState;
use crate::agent::manager::Manager;
use crate::agent::permissions::{CapSet, Permissions};
use crate::agent::runner::AgentSpec;
use crate::config::Config;
use crate::ids::{AgentId, RunId};
use crate::provider::breaker::Breakers;
use crate::provider::config::BuildContext;
use crate::provider::{Provider, ProviderError};
use crate::store::{RunRecord, Store, StoreError};

/// The scripted demo conversation embedded in the binary.
pub const DEMO_SCRIPT: &str = include_str!("../../assets/demo/script.toml");

/// Why a run could not be carried out (agents failing is not an error: it is a result).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request or configuration is wrong (unknown provider, bad script…).
    #[error("{0}")]
    Config(String),
    /// A provider could not be built. (Its error names the provider already.)
    #[error("{source}")]
    Provider {
        /// The provider's name.
        name: String,
        /// Why.
        source: ProviderError,
    },
    /// The store failed; nothing already stored is lost.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The mode is not available for this request.
    #[error("mode `{0}` is not available here yet")]
    Unsupported(Mode),
    /// Something else holds what the run needs (its team's loop, or the run itself).
    #[error("{0}")]
    Busy(String),
    /// The process was asked to stop; the run is left unfinished and resumable.
    #[error("run {0} was interrupted; finish it with `crewbox resume {0}`")]
    Interrupted(RunId),
}

/// Store refusals that mean "someone else has it" become [`EngineError::Busy`].
fn busy(e: StoreError) -> EngineError {
    match e {
        StoreError::TeamBusy { .. } | StoreError::RunBusy { .. } => {
            EngineError::Busy(e.to_string())
        }
        StoreError::NoSuchRun { .. } | StoreError::RunFinished { .. } => {
            EngineError::Config(e.to_string())
        }
        other => EngineError::Store(other),
    }
}

/// The journal key of the stored dispatch decision.
const DECISION_STEP: &str = "decision";

/// What [`Engine::prepare`] resolved.
struct Prepared {
    provider_name: String,
    provider: Arc<dyn Provider>,
    prices: Option<crate::provider::config::Prices>,
    validators: Vec<ValidatorEntry>,
    team: Option<super::team_modes::TeamContext>,
}

impl Prepared {
    fn into_context(
        self,
        run_id: RunId,
        req: RunRequest,
        decision: super::dispatch::Decision,
        journal: Journal,
    ) -> ModeContext {
        ModeContext {
            run_id,
            req,
            provider: self.provider,
            prices: self.prices,
            validators: self.validators,
            decision,
            team: self.team,
            journal: Arc::new(journal),
            cancel: CancellationToken::new(),
        }
    }
}

/// What the user asked for.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunRequest {
    /// The prompt.
    pub prompt: String,
    /// The mode (`None`: the configured default).
    pub mode: Option<Mode>,
    /// The provider's name (`None`: the configured default).
    pub provider: Option<String>,
    /// Overrides the provider's model.
    pub model: Option<String>,
    /// Uses the scripted provider with this script.
    pub script: Option<PathBuf>,
    /// Validators (`NAME[=CRITERION]`, built-in name or `.wasm` path) run after each
    /// writing agent completes.
    #[serde(default)]
    pub validators: Vec<String>,
    /// Most validator fix rounds (default 2).
    #[serde(default)]
    pub max_fix_rounds: Option<u32>,
    /// Where writing agents work (default: their own worktree).
    #[serde(default)]
    pub isolation: Option<super::execute::Isolation>,
    /// Swarm size (2..=5, default 3).
    #[serde(default)]
    pub swarm_size: Option<u32>,
    /// How swarm results are joined (default merge).
    #[serde(default)]
    pub strategy: Option<super::swarm::Strategy>,
    /// Crew: most executor revisions after a FAIL review (0..=3, default 1).
    #[serde(default)]
    pub max_revisions: Option<u32>,
    /// Single: a handoff that lists `next_steps` starts a follow-up agent.
    #[serde(default)]
    pub chain: bool,
    /// Most follow-ups in a chain (default 3).
    #[serde(default)]
    pub chain_depth: Option<u32>,
    /// The team (from `.crewbox/teams/NAME.toml`) a team mode runs.
    #[serde(default)]
    pub team: Option<String>,
    /// Reflect: most iterations (default 5).
    #[serde(default)]
    pub max_iterations: Option<u32>,
    /// Agents' commands share the host's network (the CLI is the user; a repository
    /// cannot ask for it).
    #[serde(default)]
    pub network: bool,
    /// Every agent of the run is read-only (no write, no exec), whatever its team,
    /// pack or mode asks for.
    #[serde(default)]
    pub read_only: bool,
}

/// The stored, resumable description of a run: never secrets, only names.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunSpec {
    /// The request as given.
    pub request: RunRequest,
    /// The provider actually used.
    pub provider: String,
}

/// Everything runs need: store, manager, configuration, providers, the repository.
#[derive(Clone)]
pub struct Engine {
    /// The store.
    pub store: Store,
    /// The agent manager.
    pub manager: Manager,
    /// The merged configuration.
    pub config: Arc<Config>,
    /// The directory agents work in.
    pub repo: PathBuf,
    /// Circuit breakers shared by every provider built here.
    pub breakers: Breakers,
    /// Loaded plugins.
    pub plugins: super::plugins::PluginSet,
    /// Worktrees of the repository (None when it is not a git repository with a commit).
    pub worktrees: Option<crate::worktree::WorktreeManager>,
    /// The spawn batcher (None: agents are executed directly).
    pub spawns: Option<Arc<super::spawn::SpawnQueue>>,
    /// Cancelled when the process is asked to stop.
    pub shutdown: CancellationToken,
}

impl Engine {
    /// Builds the provider named by the request (or the default), with overrides applied.
    pub fn provider(&self, req: &RunRequest) -> Result<(String, Arc<dyn Provider>), EngineError> {
        let env = |var: &str| std::env::var(var).ok();
        // Which provider: decided in one place (config/provider.rs).
        let choice = self
            .config
            .choose_provider(req.provider.as_deref(), req.script.as_deref(), &env)
            .map_err(|e| EngineError::Config(e.to_string()))?;
        let (name, mut cfg) = (choice.name, choice.config);
        if let Some(model) = &req.model {
            cfg.set_model(model);
        }
        let base_dir = choice.base_dir.unwrap_or_else(|| self.repo.clone());
        let ctx = BuildContext {
            breakers: &self.breakers,
            base_dir: &base_dir,
            env: &env,
            default_script: DEMO_SCRIPT,
            sandbox: self.manager.sandbox(),
        };
        let provider = crate::provider::config::build(&name, &cfg, &ctx).map_err(|source| {
            EngineError::Provider {
                name: name.clone(),
                source,
            }
        })?;
        Ok((name, provider))
    }

    /// Records how a run ended and returns its report.
    pub async fn finish_run(
        &self,
        id: &RunId,
        status: RunStatus,
        reason: ExitReason,
        result: &str,
    ) -> Result<RunReport, EngineError> {
        self.store
            .finish_run(id, status, reason, Some(result))
            .await?;
        self.store
            .append_event(
                id,
                None,
                "run.finished",
                json!({ "status": status, "exit_reason": reason }),
            )
            .await?;
        let run = self
            .store
            .run(id)
            .await?
            .ok_or_else(|| EngineError::Config(format!("run {id} vanished")))?;
        Ok(RunReport::load(&self.store, run).await?)
    }

    /// A root agent's spec with the engine's defaults.
    pub fn agent_spec(
        &self,
        ctx: &ModeContext,
        name: &str,
        role: &str,
        task: &str,
        caps: CapSet,
    ) -> AgentSpec {
        // A run-level read-only limit lowers every agent's tools again.
        let caps = if ctx.req.read_only {
            caps.intersection(CapSet::read_only())
        } else {
            caps
        };
        AgentSpec {
            id: AgentId::new(),
            run_id: ctx.run_id.clone(),
            parent: None,
            name: name.to_owned(),
            role: role.to_owned(),
            task: task.to_owned(),
            system_prompt: system_prompt(role, &caps),
            perms: Permissions::root(caps),
            workspace: self.repo.clone(),
            quotas: self.config.quotas.clone(),
            provider: ctx.provider.clone(),
            prices: ctx.prices,
            network: ctx.req.network
                || self
                    .config
                    .sandbox
                    .network_for(ctx.team.as_ref().map(|t| t.team.name.as_str())),
        }
    }

    /// Runs a request to the end: decide the mode, record the decision, run the mode,
    /// record how it ended.
    pub async fn run(&self, req: RunRequest) -> Result<RunReport, EngineError> {
        let span = tracing::info_span!(
            "run",
            run_id = tracing::field::Empty,
            mode = tracing::field::Empty
        );
        self.run_inner(req, span.clone()).instrument(span).await
    }

    async fn run_inner(
        &self,
        mut req: RunRequest,
        span: tracing::Span,
    ) -> Result<RunReport, EngineError> {
        let team = match &req.team {
            Some(name) => {
                let team = self.load_team(name).await?;
                if req.mode.is_none() {
                    req.mode = Some(team.mode.into());
                }
                Some(team)
            }
            None => None,
        };
        // Resolve everything that can be wrong before anything is recorded.
        let prepared = self.prepare(&req, team).await?;
        let decision = self.decide(&req).await?;
        let spec = RunSpec {
            request: req.clone(),
            provider: prepared.provider_name.clone(),
        };
        let mut run = RunRecord::started(
            decision.mode,
            req.prompt.clone(),
            serde_json::to_value(&spec).unwrap_or_else(|_| json!({})),
        );
        run.team = prepared.team.as_ref().map(|t| t.team.name.clone());
        let run_id = run.id.clone();
        // One reflect loop per team: refused before the run is recorded.
        if decision.mode == Mode::Reflect
            && let Some(team) = &run.team
        {
            self.claim_team(team, &run_id).await?;
        }
        self.store.insert_run(&run).await?;
        self.store.log_event(
            &run_id,
            None,
            "run.started",
            json!({ "mode": decision.mode, "provider": prepared.provider_name }),
        );
        span.record("run_id", tracing::field::display(&run_id));
        span.record("mode", decision.mode.as_str());
        self.record_decision(Some(&run_id), &req.prompt, &decision)
            .await?;
        let journal = Journal::fresh(self.store.clone(), run_id.clone());
        journal
            .finish(DECISION_STEP, None, &decision, Vec::new())
            .await?;
        self.drive(prepared.into_context(run_id, req, decision, journal))
            .await
    }

    /// Finishes a run a crashed or interrupted process left unfinished: stored steps
    /// are read back, only the rest runs again. Refused while a live process drives it.
    pub async fn resume(&self, id: &RunId) -> Result<RunReport, EngineError> {
        let span = tracing::info_span!("run", run_id = %id, mode = tracing::field::Empty);
        self.resume_inner(id, span.clone()).instrument(span).await
    }

    async fn resume_inner(
        &self,
        id: &RunId,
        span: tracing::Span,
    ) -> Result<RunReport, EngineError> {
        let run = self
            .store
            .run(id)
            .await?
            .ok_or_else(|| EngineError::Config(format!("no run `{id}`")))?;
        let spec: RunSpec = serde_json::from_value(run.spec.clone()).map_err(|e| {
            EngineError::Config(format!(
                "run {id} cannot be resumed: its stored request does not read ({e})"
            ))
        })?;
        self.store.claim_run(id).await.map_err(busy)?;
        let mut req = spec.request;
        let team =
            match &req.team {
                Some(name) => Some(self.load_team(name).await.map_err(|e| {
                    EngineError::Config(format!("run {id} cannot be resumed: {e}"))
                })?),
                None => None,
            };
        if req.mode.is_none() {
            req.mode = Some(run.mode);
        }
        let prepared = self.prepare(&req, team).await?;
        let journal = Journal::load(self.store.clone(), id.clone()).await?;
        let decision = journal
            .done::<super::dispatch::Decision>(DECISION_STEP)
            .unwrap_or_else(|| super::dispatch::Decision::explicit(run.mode));
        span.record("mode", decision.mode.as_str());
        if decision.mode == Mode::Reflect
            && let Some(team) = &run.team
        {
            self.claim_team(team, id).await?;
        }
        // Agents the dead process left queued or running never finish on their own.
        let mut interrupted = 0;
        for agent in self.store.agents(id).await? {
            if !agent.state.is_terminal() {
                self.store
                    .finish_agent(
                        &agent.id,
                        AgentState::Error,
                        agent.stats,
                        None,
                        Some("interrupted: the process driving its run stopped"),
                    )
                    .await?;
                interrupted += 1;
            }
        }
        self.store
            .append_event(
                id,
                None,
                "run.resumed",
                json!({ "pid": std::process::id(), "interrupted_agents": interrupted }),
            )
            .await?;
        self.drive(prepared.into_context(id.clone(), req, decision, journal))
            .await
    }

    async fn claim_team(&self, team: &str, run_id: &RunId) -> Result<(), EngineError> {
        self.store.claim_team(team, run_id).await.map_err(busy)
    }

    /// Checks the request and builds what its mode needs (providers, team, validators).
    async fn prepare(
        &self,
        req: &RunRequest,
        team: Option<crate::team::Team>,
    ) -> Result<Prepared, EngineError> {
        let (provider_name, provider) = self.provider(req)?;
        let team = match team {
            Some(team) => Some(self.team_context(req, team, &provider).await?),
            None => {
                if let Some(
                    mode @ (Mode::Broadcast | Mode::Sequential | Mode::Orchestrate | Mode::Reflect),
                ) = req.mode
                {
                    return Err(EngineError::Config(format!(
                        "mode `{mode}` runs a team: pass --team NAME"
                    )));
                }
                None
            }
        };
        let prices = self
            .config
            .providers
            .get(&provider_name)
            .and_then(|p| p.prices());
        let validators = self.load_validators(&req.validators).await?;
        if req.isolation.unwrap_or_default() == super::execute::Isolation::Worktree
            && self.worktrees.is_none()
        {
            return Err(EngineError::Config(format!(
                "{} is not a git repository with a commit, so agents cannot get worktrees; \
                 commit something first, or pass --isolation none to work in place",
                self.repo.display()
            )));
        }
        Ok(Prepared {
            provider_name,
            provider,
            prices,
            validators,
            team,
        })
    }

    /// Runs a recorded run's mode to its end and records how it ended. A shutdown
    /// (Ctrl-C, SIGTERM) leaves the run unfinished and resumable instead.
    async fn drive(&self, mut ctx: ModeContext) -> Result<RunReport, EngineError> {
        let run_id = ctx.run_id.clone();
        ctx.cancel = self.manager.register_run(&run_id);
        let controls = tokio::spawn({
            let manager = self.manager.clone();
            let run = run_id.clone();
            let stop = self.shutdown.child_token();
            async move { manager.control_loop(vec![run], stop).await }
        });
        let result = tokio::select! {
            result = self.run_mode(&ctx) => Some(result),
            _ = ctx.cancel.cancelled() => {
                // Agents record their own stop; give them the chance to.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                Some(Ok(ModeResult {
                    status: RunStatus::Cancelled,
                    reason: ExitReason::Cancelled,
                    result: "stopped on request".into(),
                    details: serde_json::Map::new(),
                }))
            }
            _ = self.shutdown.cancelled() => None,
        };
        controls.abort();
        self.manager.unregister_run(&run_id);
        let Some(result) = result else {
            self.manager.stop(run_id.as_str());
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            self.store.release_run(&run_id).await?;
            self.store
                .append_event(&run_id, None, "run.interrupted", json!({}))
                .await?;
            return Err(EngineError::Interrupted(run_id));
        };
        // A run that ended is always finished in the store, even when the mode failed.
        let mut outcome = result.unwrap_or_else(|e| ModeResult {
            status: RunStatus::Failed,
            reason: ExitReason::Failed,
            result: format!("the run failed: {e}"),
            details: serde_json::Map::new(),
        });
        outcome.details.insert(
            "decision".into(),
            serde_json::to_value(&ctx.decision).unwrap_or_default(),
        );
        if ctx.journal.is_resumed() {
            outcome
                .details
                .insert("resumed_steps".into(), json!(ctx.journal.replayed()));
        }
        self.store
            .set_run_details(&run_id, &serde_json::Value::Object(outcome.details))
            .await?;
        self.finish_run(&run_id, outcome.status, outcome.reason, &outcome.result)
            .await
    }

    async fn run_mode(&self, ctx: &ModeContext) -> Result<ModeResult, EngineError> {
        match ctx.decision.mode {
            Mode::Single | Mode::Auto => self.run_single(ctx).await,
            Mode::Swarm => self.run_swarm(ctx).await,
            Mode::Crew => self.run_crew(ctx).await,
            Mode::Broadcast => self.run_broadcast(ctx).await,
            Mode::Sequential => self.run_sequential(ctx).await,
            Mode::Orchestrate => self.run_orchestrate(ctx).await,
            Mode::Reflect => self.run_reflect(ctx).await,
        }
    }

    /// Loads the validators named on the command line (or by a team/role).
    pub async fn load_validators(
        &self,
        args: &[String],
    ) -> Result<Vec<ValidatorEntry>, EngineError> {
        let mut out = Vec::new();
        for (name, criteria) in super::plugins::parse_validator_args(args) {
            let plugin = self
                .plugins
                .get(&name, crate::plugin::PluginKind::Validator)
                .await?;
            out.push(ValidatorEntry { plugin, criteria });
        }
        Ok(out)
    }

    /// The model a validator of `spec` may use (through the same provider).
    pub fn validator_model(&self, spec: &AgentSpec) -> Option<Arc<dyn crate::plugin::ModelAccess>> {
        let label = crate::provider::AgentLabel {
            id: format!("{}-validator", spec.id),
            name: "validator".into(),
            role: "validator".into(),
        };
        Some(Arc::new(super::model_access::ProviderModel::new(
            spec.provider.clone(),
            label,
        )))
    }
}

/// Everything a mode needs to run.
pub struct ModeContext {
    /// The run.
    pub run_id: RunId,
    /// The request.
    pub req: RunRequest,
    /// The model.
    pub provider: Arc<dyn Provider>,
    /// Prices for cost budgets.
    pub prices: Option<crate::provider::config::Prices>,
    /// Validators for writing agents.
    pub validators: Vec<ValidatorEntry>,
    /// How the mode was chosen.
    pub decision: super::dispatch::Decision,
    /// The team, for team modes.
    pub team: Option<super::team_modes::TeamContext>,
    /// The run's journal: stored steps are read back on resume.
    pub journal: Arc<Journal>,
    /// Cancelled when the run is stopped on request.
    pub cancel: CancellationToken,
}

impl ModeContext {
    /// Fix rounds validators may ask for (default 2).
    pub fn max_fix_rounds(&self) -> u32 {
        self.req.max_fix_rounds.unwrap_or(2)
    }

    /// Where writing agents work.
    pub fn isolation(&self) -> super::execute::Isolation {
        self.req.isolation.unwrap_or_default()
    }
}

/// How a mode ended.
pub struct ModeResult {
    /// Run status.
    pub status: RunStatus,
    /// Why.
    pub reason: ExitReason,
    /// The final text.
    pub result: String,
    /// Mode-specific report fields (merged into the report's top level).
    pub details: serde_json::Map<String, serde_json::Value>,
}

/// Run status and exit reason for a finished agent whose work is the run's result.
pub fn status_of(
    state: AgentState,
    validation: super::validate::ValidationStatus,
) -> (RunStatus, ExitReason) {
    use super::validate::ValidationStatus as V;
    match (state, validation) {
        (AgentState::Completed | AgentState::Steered, V::Passed | V::Skipped) => {
            (RunStatus::Completed, ExitReason::GoalMet)
        }
        (AgentState::Completed | AgentState::Steered, _) => (RunStatus::Failed, ExitReason::Failed),
        (AgentState::Stopped, _) => (RunStatus::Cancelled, ExitReason::Cancelled),
        _ => (RunStatus::Failed, ExitReason::Failed),
    }
}

/// The system prompt for a role with these tools.
pub fn system_prompt(role: &str, caps: &CapSet) -> String {
    format!(
        "You are a crewbox coding agent with role `{role}`, working in a git repository. \
         Your tools allow: {}. Paths are relative to the repository root. Work step by step: \
         inspect, change, verify. When you are done, reply with a short summary and a JSON \
         handoff block (```json {{\"status\": \"success\", \"summary\": \"…\", \"findings\": [\"…\"]}} ```), \
         or call `finish`.",
        crate::agent::cap_names(*caps).join(", ")
    )
}

//! Starting, driving and finishing a run: the part every mode shares.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::report::RunReport;
use super::{ExitReason, Mode, RunStatus};
use crate::agent::AgentState;
use crate::agent::manager::{Manager, SpawnOptions};
use crate::agent::permissions::{CapSet, Permissions};
use crate::agent::runner::AgentSpec;
use crate::config::Config;
use crate::ids::{AgentId, RunId};
use crate::provider::breaker::Breakers;
use crate::provider::config::{BuildContext, ProviderConfig};
use crate::provider::{Provider, ProviderError};
use crate::store::{RunRecord, Store, StoreError, now_ms};

/// The scripted demo conversation embedded in the binary.
pub const DEMO_SCRIPT: &str = include_str!("../../assets/demo/script.toml");

/// Why a run could not be carried out (agents failing is not an error: it is a result).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request or configuration is wrong (unknown provider, bad script…).
    #[error("{0}")]
    Config(String),
    /// A provider could not be built.
    #[error("provider `{name}`: {source}")]
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
    /// Cancelled when the process is asked to stop.
    pub shutdown: CancellationToken,
}

impl Engine {
    /// Builds the provider named by the request (or the default), with overrides applied.
    pub fn provider(&self, req: &RunRequest) -> Result<(String, Arc<dyn Provider>), EngineError> {
        let (name, mut cfg) = if let Some(script) = &req.script {
            ("scripted".to_owned(), ProviderConfig::scripted_file(script.clone()))
        } else {
            let name = req.provider.clone().unwrap_or_else(|| self.config.default_provider.clone());
            let cfg = self.config.providers.get(&name).cloned().ok_or_else(|| {
                let known: Vec<&str> = self.config.providers.keys().map(String::as_str).collect();
                EngineError::Config(format!("unknown provider `{name}` (configured: {})", known.join(", ")))
            })?;
            (name, cfg)
        };
        if let Some(model) = &req.model {
            cfg.set_model(model);
        }
        let base_dir = self.config.provider_dirs.get(&name).cloned().unwrap_or_else(|| self.repo.clone());
        let env = |var: &str| std::env::var(var).ok();
        let ctx = BuildContext { breakers: &self.breakers, base_dir: &base_dir, env: &env, default_script: DEMO_SCRIPT };
        let provider = crate::provider::config::build(&name, &cfg, &ctx)
            .map_err(|source| EngineError::Provider { name: name.clone(), source })?;
        Ok((name, provider))
    }

    /// Records a new run before anything of it starts.
    pub async fn create_run(&self, req: &RunRequest, mode: Mode, provider: &str) -> Result<RunId, EngineError> {
        let id = RunId::new();
        let spec = RunSpec { request: req.clone(), provider: provider.to_owned() };
        self.store
            .insert_run(&RunRecord {
                id: id.clone(),
                mode,
                prompt: req.prompt.clone(),
                team: None,
                status: RunStatus::Running,
                exit_reason: None,
                result: None,
                spec: serde_json::to_value(&spec).unwrap_or_else(|_| json!({})),
                pid: Some(std::process::id()),
                created_at: now_ms(),
                finished_at: None,
                details: None,
            })
            .await?;
        self.store.log_event(&id, None, "run.started", json!({ "mode": mode, "provider": provider }));
        Ok(id)
    }

    /// Records how a run ended and returns its report.
    pub async fn finish_run(
        &self,
        id: &RunId,
        status: RunStatus,
        reason: ExitReason,
        result: &str,
    ) -> Result<RunReport, EngineError> {
        self.store.finish_run(id, status, reason, Some(result)).await?;
        self.store.append_event(id, None, "run.finished", json!({ "status": status, "exit_reason": reason })).await?;
        let run = self.store.run(id).await?.ok_or_else(|| EngineError::Config(format!("run {id} vanished")))?;
        Ok(RunReport::load(&self.store, run).await?)
    }

    /// A root agent's spec with the engine's defaults.
    pub fn agent_spec(
        &self,
        run_id: &RunId,
        name: &str,
        role: &str,
        task: &str,
        caps: CapSet,
        provider: Arc<dyn Provider>,
        prices: Option<crate::provider::config::Prices>,
    ) -> AgentSpec {
        AgentSpec {
            id: AgentId::new(),
            run_id: run_id.clone(),
            parent: None,
            name: name.to_owned(),
            role: role.to_owned(),
            task: task.to_owned(),
            system_prompt: system_prompt(role, &caps),
            perms: Permissions::root(caps),
            workspace: self.repo.clone(),
            quotas: self.config.quotas.clone(),
            provider,
            prices,
        }
    }

    /// Runs a request to the end.
    pub async fn run(&self, req: RunRequest) -> Result<RunReport, EngineError> {
        let mode = match req.mode.unwrap_or(self.config.default_mode) {
            // Until the dispatcher is wired in, `auto` runs one agent.
            Mode::Auto | Mode::Single => Mode::Single,
            other => return Err(EngineError::Unsupported(other)),
        };
        let (provider_name, provider) = self.provider(&req)?;
        let prices = self.config.providers.get(&provider_name).and_then(|p| p.prices());
        let run_id = self.create_run(&req, mode, &provider_name).await?;
        let spec = self.agent_spec(&run_id, "agent", "executor", &req.prompt, CapSet::full(), provider, prices);
        let controls = tokio::spawn({
            let manager = self.manager.clone();
            let run = run_id.clone();
            let stop = self.shutdown.child_token();
            async move { manager.control_loop(vec![run], stop).await }
        });
        let handle = self.manager.spawn(spec, SpawnOptions::default()).await?;
        let outcome = tokio::select! {
            outcome = handle.wait() => outcome,
            _ = self.shutdown.cancelled() => {
                self.manager.stop(run_id.as_str());
                // The agent records its own stop; give it the chance to.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                controls.abort();
                return Err(EngineError::Config("interrupted; the run is stored and can be resumed".into()));
            }
        };
        controls.abort();
        let (status, reason) = match outcome.state {
            AgentState::Completed | AgentState::Steered => (RunStatus::Completed, ExitReason::GoalMet),
            AgentState::Stopped => (RunStatus::Cancelled, ExitReason::Cancelled),
            _ => (RunStatus::Failed, ExitReason::Failed),
        };
        self.finish_run(&run_id, status, reason, &outcome.result).await
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

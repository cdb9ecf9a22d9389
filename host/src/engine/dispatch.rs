//! Choosing a mode: explicit from the request, or `auto` through the dispatcher plugin
//! (the built-in `heuristic`, or `dispatcher = "path/to.wasm"` in config). Every decision
//! is recorded in the dispatch history.

use serde::{Deserialize, Serialize};

use super::error::{EngineError, PluginStep};
use super::plugins::PluginSet;
use super::services::Services;
use crate::config::Config;
use crate::ids::RunId;
use crate::plugin::{DispatchDecision, DispatchRequest, PluginKind};
use crate::store::{DispatchRecord, now_ms};
use crate::vocab::{DecisionSource, Mode, ModeChoice};

/// A mode decision with its reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The mode to run.
    pub mode: Mode,
    /// A reason code (`explicit`, `review-requested`, …).
    pub reason: String,
    /// Explicit or auto.
    pub source: DecisionSource,
    /// What the dispatcher saw (`name: detail`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<String>,
    /// Swarm size suggested by the dispatcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swarm_size: Option<u32>,
}

impl Decision {
    /// The decision for a mode the user (or a stored run) names.
    pub fn explicit(mode: Mode) -> Self {
        Self {
            mode,
            reason: "explicit".into(),
            source: DecisionSource::Explicit,
            signals: Vec::new(),
            swarm_size: None,
        }
    }
}

/// The modes `auto` may pick without a team.
const AUTO_MODES: &[crate::plugin::Mode] = &[
    crate::plugin::Mode::Single,
    crate::plugin::Mode::Swarm,
    crate::plugin::Mode::Crew,
];

/// Decides the mode `choice` stands for: itself when concrete, the dispatcher's pick
/// for `auto`.
pub(crate) async fn decide(
    services: &Services,
    choice: ModeChoice,
    prompt: &str,
) -> Result<Decision, EngineError> {
    if let ModeChoice::Mode(mode) = choice {
        return Ok(Decision::explicit(mode));
    }
    Ok(auto(services.plugins(), services.config(), prompt)
        .await?
        .decision)
}

/// What the `auto` dispatcher answered, and the decision a run takes from it.
#[derive(Clone, Debug)]
pub struct AutoDecision {
    /// The dispatcher asked: the configured one (`dispatcher` in the user's config or a
    /// trusted repository's), else the built-in `heuristic`.
    pub dispatcher: String,
    /// Its answer as given (tasks, signals).
    pub answer: DispatchDecision,
    /// The decision a run takes (a team mode without a team becomes `single`).
    pub decision: Decision,
}

/// The dispatcher `auto` uses under `config`.
pub fn dispatcher_name(config: &Config) -> &str {
    config.dispatcher.as_deref().unwrap_or("heuristic")
}

/// Asks the dispatcher a run under `config` would ask, loaded from `plugins` the way a
/// run loads it, offering the modes `auto` offers: one answer for `crewbox run` and
/// `crewbox dispatch explain`.
pub async fn auto(
    plugins: &PluginSet,
    config: &Config,
    prompt: &str,
) -> Result<AutoDecision, EngineError> {
    let name = dispatcher_name(config);
    let plugin = plugins.get(name, PluginKind::Dispatcher).await?;
    let request = DispatchRequest {
        prompt: prompt.to_owned(),
        team: None,
        available_modes: AUTO_MODES.to_vec(),
    };
    let answer = plugin
        .decide(&request)
        .await
        .map_err(|fault| EngineError::PluginFault {
            step: PluginStep::Dispatch,
            fault,
        })?;
    let mut mode = Mode::from(answer.mode);
    let mut reason = answer.reason.clone();
    if mode.runs_a_team() {
        // Team modes need a team; a dispatcher asking for one without it gets single.
        reason = format!("{reason} (team mode {mode} needs --team; ran single)");
        mode = Mode::Single;
    }
    let decision = Decision {
        mode,
        reason,
        source: DecisionSource::Auto,
        signals: answer
            .signals
            .iter()
            .map(|s| format!("{}: {}", s.name, s.detail))
            .collect(),
        swarm_size: answer.swarm_size,
    };
    Ok(AutoDecision {
        dispatcher: name.to_owned(),
        answer,
        decision,
    })
}

/// Stores a decision in the dispatch history (keeping the newest configured number).
pub(crate) async fn record(
    services: &Services,
    run: Option<&RunId>,
    prompt: &str,
    d: &Decision,
) -> Result<(), EngineError> {
    let record = DispatchRecord {
        run_id: run.cloned(),
        at: now_ms(),
        kind: d.mode,
        source: d.source.as_str().into(),
        prompt_len: prompt.chars().count() as u64,
        reason: d.reason.clone(),
    };
    Ok(services
        .store()
        .record_dispatch(&record, services.config().dispatch_history)
        .await?)
}

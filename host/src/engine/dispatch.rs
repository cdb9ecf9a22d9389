//! Choosing a mode: explicit from the request, or `auto` through the dispatcher plugin
//! (the built-in `heuristic`, or `dispatcher = "path/to.wasm"` in config). Every decision
//! is recorded in the dispatch history.

use serde::{Deserialize, Serialize};

use super::error::{EngineError, PluginStep};
use super::services::Services;
use crate::ids::RunId;
use crate::plugin::{DispatchRequest, PluginKind};
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
    let name = services
        .config()
        .dispatcher
        .as_deref()
        .unwrap_or("heuristic");
    let plugin = services.plugins().get(name, PluginKind::Dispatcher).await?;
    let request = DispatchRequest {
        prompt: prompt.to_owned(),
        team: None,
        available_modes: AUTO_MODES.to_vec(),
    };
    let d = plugin
        .decide(&request)
        .await
        .map_err(|fault| EngineError::PluginFault {
            step: PluginStep::Dispatch,
            fault,
        })?;
    let mut mode = Mode::from(d.mode);
    let mut reason = d.reason;
    if mode.runs_a_team() {
        // Team modes need a team; a dispatcher asking for one without it gets single.
        reason = format!("{reason} (team mode {mode} needs --team; ran single)");
        mode = Mode::Single;
    }
    Ok(Decision {
        mode,
        reason,
        source: DecisionSource::Auto,
        signals: d
            .signals
            .into_iter()
            .map(|s| format!("{}: {}", s.name, s.detail))
            .collect(),
        swarm_size: d.swarm_size,
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

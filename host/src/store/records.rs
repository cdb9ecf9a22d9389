//! Rows as typed records.

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, RunId};
use crate::vocab::{AgentState, ExitReason, Mode, RunStatus};

pub use crate::vocab::AgentStats;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// One run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id.
    pub id: RunId,
    /// The mode it runs in (after dispatch).
    pub mode: Mode,
    /// The user's prompt.
    pub prompt: String,
    /// The team, for team modes.
    pub team: Option<String>,
    /// Where it is.
    pub status: RunStatus,
    /// Why it ended.
    pub exit_reason: Option<ExitReason>,
    /// The final result text.
    pub result: Option<String>,
    /// Everything needed to resume it (provider, quotas, options), as JSON. Never secrets.
    pub spec: serde_json::Value,
    /// The process running it, while it runs.
    pub pid: Option<u32>,
    /// Who that process is beyond its pid ([`crate::process::identity`]), when known.
    pub pid_identity: Option<String>,
    /// Creation time (ms).
    pub created_at: i64,
    /// End time (ms).
    pub finished_at: Option<i64>,
    /// Mode-specific facts for the report (decision, crew verdict, swarm deliveries).
    pub details: Option<serde_json::Value>,
}

impl RunRecord {
    /// A new running run driven by this process.
    pub fn started(mode: Mode, prompt: impl Into<String>, spec: serde_json::Value) -> Self {
        Self {
            id: RunId::new(),
            mode,
            prompt: prompt.into(),
            team: None,
            status: RunStatus::Running,
            exit_reason: None,
            result: None,
            spec,
            pid: Some(std::process::id()),
            pid_identity: None,
            created_at: now_ms(),
            finished_at: None,
            details: None,
        }
    }
}

impl RunRecord {
    /// The run as `crewbox status --json` and the MCP `runs` tool list it.
    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "run_id": self.id, "mode": self.mode, "status": self.status,
            "exit_reason": self.exit_reason, "prompt": self.prompt,
            "created_at": self.created_at, "finished_at": self.finished_at,
            "team": self.team, "interrupted": self.is_interrupted(),
        })
    }

    /// Unfinished, and no live process drives it (another process's pid is gone, or
    /// none is recorded): `crewbox resume` may take it over.
    pub fn is_interrupted(&self) -> bool {
        self.status == RunStatus::Running && driver_gone(self.pid, self.pid_identity.as_deref())
    }
}

/// Whether the process a `running` run names as its driver (`pid`, with its start
/// identity) is gone: none named, or not this process and no longer alive.
pub(crate) fn driver_gone(pid: Option<u32>, identity: Option<&str>) -> bool {
    pid.is_none_or(|pid| pid != std::process::id() && !crate::process::still_running(pid, identity))
}

/// One dispatch decision, explicit or automatic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DispatchRecord {
    /// The run it started, if any.
    pub run_id: Option<RunId>,
    /// Time (ms).
    pub at: i64,
    /// The mode chosen.
    pub kind: Mode,
    /// `explicit` or `auto`.
    pub source: String,
    /// Length of the prompt in characters.
    pub prompt_len: u64,
    /// The reason code.
    pub reason: String,
}

/// One agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    /// The agent's id.
    pub id: AgentId,
    /// Its run.
    pub run_id: RunId,
    /// The agent that spawned it.
    pub parent: Option<AgentId>,
    /// Its name (role name or team member name).
    pub name: String,
    /// Its role.
    pub role: String,
    /// Its task.
    pub task: String,
    /// Its effective capabilities.
    pub caps: Vec<String>,
    /// Depth in the agent tree (root agents are 0).
    pub depth: u32,
    /// How it is joined (`group:ID`, `swarm:ID`), if batched.
    pub join: Option<String>,
    /// Where it is.
    pub state: AgentState,
    /// Counters.
    pub stats: AgentStats,
    /// Its final reply.
    pub result: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// Creation time (ms).
    pub created_at: i64,
    /// Start time (ms).
    pub started_at: Option<i64>,
    /// End time (ms).
    pub finished_at: Option<i64>,
}

#[cfg(test)]
impl AgentRecord {
    /// A running agent `a` of `run` for unit tests: a depth-1 sub-agent when it has a
    /// `parent`.
    pub(crate) fn running(id: &AgentId, run: &RunId, parent: Option<&AgentId>) -> Self {
        Self {
            id: id.clone(),
            run_id: run.clone(),
            parent: parent.cloned(),
            name: "a".into(),
            role: "r".into(),
            task: "t".into(),
            caps: Vec::new(),
            depth: u32::from(parent.is_some()),
            join: None,
            state: AgentState::Running,
            stats: AgentStats::default(),
            result: None,
            error: None,
            created_at: 0,
            started_at: None,
            finished_at: None,
        }
    }
}

/// What a control message asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ControlKind {
    /// Deliver a message to a running agent before its next model call.
    Steer,
    /// Stop the agent or run.
    Stop,
    /// A message for a team's running reflect loop (target `team:NAME`), delivered at
    /// the start of its next iteration.
    Message,
}

impl ControlKind {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steer => "steer",
            Self::Stop => "stop",
            Self::Message => "message",
        }
    }
}

/// A pending steer or stop request, sent from another process through the store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlRecord {
    /// Position (assigned by the store).
    pub seq: i64,
    /// An agent id or a run id.
    pub target: String,
    /// Steer or stop.
    pub kind: ControlKind,
    /// The steering message.
    pub message: Option<String>,
}

/// The part of an agent a tree needs: cheap to read for runs of many thousands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentNode {
    /// The agent's id.
    pub id: AgentId,
    /// The agent that spawned it.
    pub parent: Option<AgentId>,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// Where it is.
    pub state: AgentState,
    /// How it is joined, if batched.
    pub join: Option<String>,
    /// Creation time (ms).
    pub created_at: i64,
}

impl From<AgentRecord> for AgentNode {
    fn from(a: AgentRecord) -> Self {
        Self {
            id: a.id,
            parent: a.parent,
            name: a.name,
            role: a.role,
            state: a.state,
            join: a.join,
            created_at: a.created_at,
        }
    }
}

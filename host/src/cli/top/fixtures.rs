//! Rows the dashboard's tests build models from.

use crewbox::types::{AgentRow, AgentState, RunRow};
use crewbox::vocab::AgentStats;
use crewbox::{AgentId, Mode, RunId, RunStatus};

/// A running team run of `mode` driven by this (live) process.
pub fn team_run(id: &str, mode: Mode) -> RunRow {
    RunRow {
        id: RunId::from_string(id),
        mode,
        prompt: "build a queue".into(),
        team: Some("duo".into()),
        status: RunStatus::Running,
        exit_reason: None,
        pid: Some(std::process::id()),
        pid_identity: None,
        created_at: 0,
        finished_at: None,
        agents: 0,
        running: 0,
        tokens: (0, 0),
        cost: None,
    }
}

/// An agent that started at `at` and has taken two turns.
pub fn agent(id: &str, name: &str, parent: Option<&str>, state: AgentState, at: i64) -> AgentRow {
    AgentRow {
        id: AgentId::from_string(id),
        parent: parent.map(AgentId::from_string),
        name: name.into(),
        role: "worker".into(),
        state,
        stats: AgentStats {
            turns: 2,
            tool_calls: 1,
            tokens_in: 1500,
            tokens_out: 20,
            cost: None,
        },
        error: None,
        created_at: at,
        started_at: Some(at),
        finished_at: None,
    }
}

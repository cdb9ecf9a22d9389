//! The run report: what `crewbox run --json` prints, built from the store (the single
//! source of truth), so a resumed or inspected run reports the same way.

use serde::Serialize;

use super::{ExitReason, Mode, RunStatus};
use crate::agent::AgentState;
use crate::ids::{AgentId, RunId};
use crate::store::{AgentRecord, RunRecord, Store, StoreError};

/// Token counts of an agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
}

/// One agent in the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AgentReport {
    /// Its id.
    pub id: AgentId,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// Who spawned it.
    pub parent: Option<AgentId>,
    /// Its task.
    pub task: String,
    /// The task an orchestrator assigned it (team workers; `task` wraps it with the
    /// charter, shared context and request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assigned_task: Option<String>,
    /// Its state.
    pub state: AgentState,
    /// Turns taken.
    pub turns: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Tokens used.
    pub tokens: Tokens,
    /// Cost, when prices are configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
    /// Run time in milliseconds (0 if it never started).
    pub duration_ms: i64,
    /// Its final text.
    pub result: Option<String>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How it was joined.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub join: Option<String>,
    /// Its `branch` artifact, when it changed files in a worktree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<serde_json::Value>,
    /// How validation ended (passed, validation-failed, faulted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<serde_json::Value>,
    /// Every validator verdict, round by round.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<serde_json::Value>,
    /// The typed handoff v2 parsed from its result (the last fenced JSON block), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff: Option<crewbox_handoff::Handoff>,
}

impl From<AgentRecord> for AgentReport {
    fn from(a: AgentRecord) -> Self {
        let duration_ms = match (a.started_at, a.finished_at) {
            (Some(s), Some(f)) => (f - s).max(0),
            _ => 0,
        };
        let handoff = a
            .result
            .as_deref()
            .and_then(|r| crewbox_handoff::parse(r).ok());
        Self {
            handoff,
            id: a.id,
            name: a.name,
            role: a.role,
            parent: a.parent,
            task: a.task,
            assigned_task: None,
            state: a.state,
            turns: a.stats.turns,
            tool_calls: a.stats.tool_calls,
            tokens: Tokens {
                input: a.stats.tokens_in,
                output: a.stats.tokens_out,
            },
            cost: a.stats.cost,
            duration_ms,
            result: a.result,
            error: a.error,
            join: a.join,
            branch: None,
            validation: None,
            verdicts: Vec::new(),
        }
    }
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// The run.
    pub run_id: RunId,
    /// The mode it ran in.
    pub mode: Mode,
    /// The team it ran (team modes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    /// completed, failed or cancelled (running if it has not ended).
    pub status: RunStatus,
    /// Why it ended.
    pub exit_reason: Option<ExitReason>,
    /// The final text.
    pub result: Option<String>,
    /// Every agent, in creation order.
    pub agents: Vec<AgentReport>,
    /// Mode-specific fields: `decision` always; `verdict`, `revisions`, `plan` for crew;
    /// `strategy`, `deliveries`, `conflicts`, `groups`, `winner` for swarm; `branch`,
    /// `validation` for single.
    #[serde(flatten)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl RunReport {
    /// Builds the report of a stored run.
    pub async fn load(store: &Store, run: RunRecord) -> Result<Self, StoreError> {
        let mut agents: Vec<AgentReport> = store
            .agents(&run.id)
            .await?
            .into_iter()
            .map(AgentReport::from)
            .collect();
        let facts = store
            .events_of_kinds(
                &run.id,
                &["agent.artifact", "agent.validation", "validator.verdict"],
            )
            .await?;
        for e in facts {
            let Some(agent) = agents
                .iter_mut()
                .find(|a| Some(&a.id) == e.agent_id.as_ref())
            else {
                continue;
            };
            match e.kind.as_str() {
                "agent.artifact" => agent.branch = Some(e.data),
                "agent.validation" => agent.validation = Some(e.data["status"].clone()),
                _ => agent.verdicts.push(e.data),
            }
        }
        // Team members' assigned tasks, from the run's journal (begun or done steps).
        let index: std::collections::HashMap<String, usize> = agents
            .iter()
            .enumerate()
            .map(|(i, a)| (a.id.to_string(), i))
            .collect();
        for step in store.steps(&run.id).await? {
            if let (Some(agent), Some(task)) = (&step.agent_id, step.data["task"].as_str())
                && let Some(&i) = index.get(agent)
            {
                agents[i].assigned_task = Some(task.to_owned());
            }
        }
        let details = match run.details {
            Some(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        Ok(Self {
            run_id: run.id,
            mode: run.mode,
            team: run.team,
            status: run.status,
            exit_reason: run.exit_reason,
            result: run.result,
            agents,
            details,
        })
    }

    /// A human-readable rendering for terminals.
    pub fn render_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let reason = self.exit_reason.map(|r| r.as_str()).unwrap_or("-");
        let _ = writeln!(
            s,
            "run {}  mode {}  status {}  ({reason})",
            self.run_id, self.mode, self.status
        );
        // Plugin text (a dispatcher's reason, validators' words, review findings) is
        // escaped: it must not drive the terminal or forge lines of the report.
        use crate::plugin::text::escape;
        if let Some(d) = self.details.get("decision") {
            let _ = writeln!(
                s,
                "decision: {} ({}, {})",
                d["mode"].as_str().unwrap_or("?"),
                d["source"].as_str().unwrap_or("?"),
                escape(d["reason"].as_str().unwrap_or("?"))
            );
        }
        for a in &self.agents {
            let _ = writeln!(
                s,
                "  {} {:<10} {:<9} turns {:>2}  tools {:>3}  tokens {}/{}  {} ms{}",
                a.id,
                a.name,
                a.state.as_str(),
                a.turns,
                a.tool_calls,
                a.tokens.input,
                a.tokens.output,
                a.duration_ms,
                a.error
                    .as_deref()
                    .map(|e| format!("  error: {e}"))
                    .unwrap_or_default()
            );
        }
        for a in &self.agents {
            for v in &a.verdicts {
                let outcome = v["outcome"].as_str().unwrap_or("?");
                let validator = match v["source"].as_str() {
                    Some("builtin") | None => escape(v["validator"].as_str().unwrap_or("?")),
                    Some(source) => format!(
                        "{} ({})",
                        escape(v["validator"].as_str().unwrap_or("?")),
                        escape(source)
                    )
                    .into(),
                };
                let _ = writeln!(
                    s,
                    "  verdict  {:<12} round {} {:<15} {}",
                    a.name, v["round"], validator, outcome
                );
                for c in v["verdict"]["results"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| c["passed"] == false)
                {
                    let _ = writeln!(
                        s,
                        "           ✗ {}: {}",
                        escape(c["criterion"].as_str().unwrap_or("?")),
                        escape(c["detail"].as_str().unwrap_or(""))
                    );
                }
            }
            if let Some(b) = &a.branch {
                let _ = writeln!(
                    s,
                    "  branch   {:<12} {} ({} commit(s))",
                    a.name,
                    b["branch"].as_str().unwrap_or("?"),
                    b["commits"].as_array().map_or(0, Vec::len)
                );
            }
        }
        if let Some(v) = self.details.get("verdict").filter(|v| !v.is_null()) {
            let revisions = self
                .details
                .get("revisions")
                .and_then(|r| r.as_u64())
                .unwrap_or(0);
            let _ = writeln!(
                s,
                "review: {} after {revisions} revision(s)",
                v["verdict"].as_str().unwrap_or("?")
            );
            for f in v["findings"].as_array().into_iter().flatten() {
                let _ = writeln!(s, "  - {}", escape(f.as_str().unwrap_or("")));
            }
        }
        if let Some(c) = self
            .details
            .get("conflicts")
            .and_then(|c| c.as_array())
            .filter(|c| !c.is_empty())
        {
            let files: Vec<&str> = c.iter().filter_map(|f| f.as_str()).collect();
            let _ = writeln!(s, "conflicts: {}", files.join(", "));
        }
        if let Some(result) = &self.result {
            let _ = writeln!(s, "\nresult:\n{}", result.trim_end());
        }
        s
    }
}

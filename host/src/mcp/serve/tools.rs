//! The tools `crewbox mcp serve` offers: names, input schemas, descriptions written
//! for a model, annotations (read tools are `readOnlyHint`), and their arguments,
//! parsed strictly (unknown keys and wrong types are errors naming the tool).

use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Most events one `events` call returns.
pub const MAX_EVENTS_PAGE: u32 = 500;
/// Most runs one `status` call lists.
pub const MAX_STATUS_LIMIT: u32 = 100;
/// The default and the largest `diff`, in bytes.
pub const DIFF_DEFAULT_BYTES: usize = 64 * 1024;
/// The largest `diff` a call may ask for, in bytes.
pub const DIFF_MAX_BYTES: usize = 512 * 1024;

/// A tool of the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolName {
    /// Start a run.
    Run,
    /// Recent runs, or one run's report.
    Status,
    /// A page of a run's events.
    Events,
    /// A run's agent tree.
    Tree,
    /// Steer an agent.
    Steer,
    /// Stop an agent or a run.
    Stop,
    /// A message for a team's reflect loop.
    Send,
    /// Finish an interrupted run.
    Resume,
    /// crewbox's branches.
    Branches,
    /// A run's change against its base.
    Diff,
}

impl ToolName {
    /// Every tool, in the order listed.
    pub const ALL: [Self; 10] = [
        Self::Run,
        Self::Status,
        Self::Events,
        Self::Tree,
        Self::Diff,
        Self::Steer,
        Self::Stop,
        Self::Send,
        Self::Resume,
        Self::Branches,
    ];

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Run => "run",
            Self::Status => "status",
            Self::Events => "events",
            Self::Tree => "tree",
            Self::Steer => "steer",
            Self::Stop => "stop",
            Self::Send => "send",
            Self::Resume => "resume",
            Self::Branches => "branches",
            Self::Diff => "diff",
        }
    }

    /// The tool called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// Whether it changes nothing (`readOnlyHint`).
    pub fn read_only(self) -> bool {
        matches!(
            self,
            Self::Status | Self::Events | Self::Tree | Self::Branches | Self::Diff
        )
    }

    fn description(self) -> &'static str {
        match self {
            Self::Run => {
                "Hand a coding task to a crew of sandboxed agents working on this git repository. \
                 Returns the run_id at once (poll `status`), or with wait=true waits and returns the \
                 report (progress notifications carry agent states and the phase). mode: auto \
                 (default: the dispatcher picks), single, crew (plan, execute, review), swarm, \
                 broadcast, sequential, orchestrate, reflect; team: a team the user defined. The \
                 work lands on a `crewbox/...` branch; review it with `diff` before merging."
            }
            Self::Status => {
                "Without run_id: the recent runs of this repository (id, mode, status, prompt). \
                 With run_id (an id, or a unique prefix or tail): that run's full report (agents, \
                 results, branches, review verdict)."
            }
            Self::Events => {
                "A page of a run's stored events, oldest first, after sequence number `since` \
                 (0: from the start). Pass the last `seq` you got as the next `since`; \
                 `more` says whether another page follows."
            }
            Self::Tree => "The agent tree of a run (who spawned whom), as nested JSON.",
            Self::Steer => {
                "Send a message to a running agent (`agent`), delivered before its next model \
                 call; or to the first running agent of a run (`run`)."
            }
            Self::Stop => {
                "Stop a running agent or a whole run (`target`: an agent or run id, prefix or \
                 tail). The run ends `cancelled`; its work so far stays on its branches."
            }
            Self::Send => {
                "Send a message to a team's running reflect loop; it is read at the start of \
                 the loop's next iteration."
            }
            Self::Resume => {
                "Finish a run that a crash or a signal left unfinished (steps already stored are \
                 not run again). With wait=false returns at once."
            }
            Self::Branches => {
                "crewbox's branches in this repository (`crewbox/...`): tip, subject, whether \
                 merged into HEAD and whether checked out."
            }
            Self::Diff => {
                "The change a run made: its integration branch, or its writing agent's branch, \
                 against the commit it started from, as a unified diff (cut at max_bytes, the cut \
                 marked). `agent` picks one agent's branch instead."
            }
        }
    }

    fn schema(self) -> Value {
        let run_id = json!({"type": "string", "description": "A run id, or a unique prefix or tail of one."});
        let (properties, required): (Value, &[&str]) = match self {
            Self::Run => (
                json!({
                    "prompt": {"type": "string", "description": "What the agents should do."},
                    "mode": {"type": "string", "enum": crate::vocab::ModeChoice::all().map(crate::vocab::ModeChoice::as_str).collect::<Vec<_>>(), "description": "Orchestration mode (default: the team's, else the user's configured default, else auto)."},
                    "team": {"type": "string", "description": "A team the user or repository defined (see the team files); team modes need one."},
                    "provider": {"type": "string", "description": "A provider from the user's config (default: the configured one)."},
                    "model": {"type": "string", "description": "A model instead of the provider's configured one."},
                    "read_only": {"type": "boolean", "description": "Every agent read-only (no writes, no commands)."},
                    "network": {"type": "boolean", "description": "Let agents' commands use the network (off by default; refused unless the user started this server with --allow-network)."},
                    "max_turns": {"type": "integer", "minimum": 1, "description": "Lower the user's per-agent turn limit for this run (never raises it)."},
                    "wait": {"type": "boolean", "description": "Wait for the run to end and return its report (default false: return the run_id at once)."}
                }),
                &["prompt"],
            ),
            Self::Status => (
                json!({
                    "run_id": run_id,
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_STATUS_LIMIT, "description": "How many recent runs to list (default 10)."}
                }),
                &[],
            ),
            Self::Events => (
                json!({
                    "run_id": run_id,
                    "since": {"type": "integer", "minimum": 0, "description": "Return events after this sequence number (default 0)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_EVENTS_PAGE, "description": "Most events in the page (default 100)."}
                }),
                &["run_id"],
            ),
            Self::Tree => (json!({"run_id": run_id}), &[]),
            Self::Steer => (
                json!({
                    "agent": {"type": "string", "description": "The running agent (id, prefix or tail)."},
                    "run": {"type": "string", "description": "Or a run: its first running agent is steered."},
                    "message": {"type": "string", "description": "The message."}
                }),
                &["message"],
            ),
            Self::Stop => (
                json!({"target": {"type": "string", "description": "An agent or a run (id, prefix or tail)."}}),
                &["target"],
            ),
            Self::Send => (
                json!({
                    "team": {"type": "string", "description": "The team whose reflect loop gets the message."},
                    "message": {"type": "string", "description": "The message (at most 16 KiB)."}
                }),
                &["team", "message"],
            ),
            Self::Resume => (
                json!({
                    "run_id": run_id,
                    "wait": {"type": "boolean", "description": "Wait for the run to end (default true)."}
                }),
                &["run_id"],
            ),
            Self::Branches => (
                json!({"merged": {"type": "boolean", "description": "Only branches already merged into HEAD."}}),
                &[],
            ),
            Self::Diff => (
                json!({
                    "run_id": run_id,
                    "agent": {"type": "string", "description": "One agent's branch instead of the run's (id, prefix or tail)."},
                    "max_bytes": {"type": "integer", "minimum": 1, "maximum": DIFF_MAX_BYTES, "description": "Cut the diff here (default 65536)."}
                }),
                &["run_id"],
            ),
        };
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// Its MCP definition.
    pub fn tool(self) -> Tool {
        let schema = match self.schema() {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let annotations = ToolAnnotations::new()
            .read_only(self.read_only())
            .destructive(matches!(self, Self::Stop))
            .open_world(false);
        Tool::new(self.as_str(), self.description(), Arc::new(schema)).annotate(annotations)
    }
}

/// Every tool's definition.
pub fn list() -> Vec<Tool> {
    ToolName::ALL.into_iter().map(ToolName::tool).collect()
}

/// A name a client sent, cut for an error message.
pub fn shown(name: &str) -> String {
    let mut cut: String = name.chars().take(64).collect();
    if cut.len() < name.len() {
        cut.push('…');
    }
    cut
}

/// The arguments of `tool`, or an error naming the tool and what is wrong.
pub fn parse<T: DeserializeOwned>(tool: ToolName, args: Value) -> Result<T, String> {
    serde_json::from_value(args).map_err(|e| format!("`{}`: invalid arguments: {e}", tool.as_str()))
}

/// `run`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunArgs {
    /// The prompt.
    pub prompt: String,
    /// The mode.
    pub mode: Option<String>,
    /// The team.
    pub team: Option<String>,
    /// The provider.
    pub provider: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// Every agent read-only.
    #[serde(default)]
    pub read_only: bool,
    /// Network for agents' commands.
    #[serde(default)]
    pub network: bool,
    /// Lower the turn limit.
    pub max_turns: Option<u32>,
    /// Wait for the report.
    #[serde(default)]
    pub wait: bool,
}

/// `status`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// One run.
    pub run_id: Option<String>,
    /// How many runs.
    pub limit: Option<u32>,
}

/// `events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsArgs {
    /// The run.
    pub run_id: String,
    /// After this sequence number.
    #[serde(default)]
    pub since: u64,
    /// Page size.
    pub limit: Option<u32>,
}

/// `tree`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeArgs {
    /// The run (default: the latest).
    pub run_id: Option<String>,
}

/// `steer`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerArgs {
    /// The agent.
    pub agent: Option<String>,
    /// Or a run.
    pub run: Option<String>,
    /// The message.
    pub message: String,
}

/// `stop`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopArgs {
    /// An agent or a run.
    pub target: String,
}

/// `send`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendArgs {
    /// The team.
    pub team: String,
    /// The message.
    pub message: String,
}

/// `resume`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeArgs {
    /// The run.
    pub run_id: String,
    /// Wait for its end.
    #[serde(default = "yes")]
    pub wait: bool,
}

fn yes() -> bool {
    true
}

/// `branches`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BranchesArgs {
    /// Only merged ones.
    #[serde(default)]
    pub merged: bool,
}

/// `diff`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// The run.
    pub run_id: String,
    /// One agent's branch instead.
    pub agent: Option<String>,
    /// Cut here.
    pub max_bytes: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_and_read_tools_are_read_only() {
        for t in list() {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            let ro = t.annotations.as_ref().and_then(|a| a.read_only_hint);
            let name = ToolName::parse(&t.name).unwrap();
            assert_eq!(ro, Some(name.read_only()), "{}", t.name);
        }
        assert!(!ToolName::Run.read_only() && !ToolName::Stop.read_only());
        assert!(ToolName::Status.read_only() && ToolName::Diff.read_only());
    }

    #[test]
    fn wrong_types_and_unknown_keys_name_the_tool() {
        let e = parse::<RunArgs>(ToolName::Run, json!({"prompt": 3})).unwrap_err();
        assert!(e.starts_with("`run`: invalid arguments"), "{e}");
        let e = parse::<StopArgs>(ToolName::Stop, json!({"target": "x", "y": 1})).unwrap_err();
        assert!(e.contains("unknown field `y`"), "{e}");
    }
}

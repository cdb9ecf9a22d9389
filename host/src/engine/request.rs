//! What a caller asks for ([`RunRequest`]) and what is stored to resume it
//! ([`RunSpec`]: names only, never secrets).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::vocab::{Isolation, ModeChoice, Strategy};

/// Default validator fix rounds per agent.
pub const DEFAULT_FIX_ROUNDS: u32 = 2;
/// Most fix rounds an agent's validators may ask for (the agent's quotas bound them
/// too: its rounds share one budget).
pub const MAX_FIX_ROUNDS: u32 = 10;

/// What the user asked for.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunRequest {
    /// The prompt.
    pub prompt: String,
    /// The mode (`None`: the team's, else the configured default).
    pub mode: Option<ModeChoice>,
    /// The provider's name (`None`: the configured default).
    pub provider: Option<String>,
    /// Overrides the provider's model.
    pub model: Option<String>,
    /// Uses the scripted provider with this script.
    #[serde(
        default,
        serialize_with = "crate::paths::serde_path::serialize_opt",
        deserialize_with = "crate::paths::serde_path::deserialize_opt"
    )]
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
    pub isolation: Option<Isolation>,
    /// Swarm size (2..=5, default 3).
    #[serde(default)]
    pub swarm_size: Option<u32>,
    /// How swarm results are joined (default merge).
    #[serde(default)]
    pub strategy: Option<Strategy>,
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
    /// MCP servers (the user's `[mcp.servers.NAME]`) granted to the run's agents, on
    /// top of `[mcp] default`.
    #[serde(default)]
    pub mcp: Vec<String>,
    /// Lowers `[quotas] max_turns` for the run's agents (never raises it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// The commit the run's worktrees start from instead of HEAD (a replay: the
    /// commit the recorded run started from). Journaled like HEAD would be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
}

/// Checks a model name a user or a client gives: 1 to 256 characters, no whitespace
/// or control characters (it is printed in listings and sent to servers as it is).
pub fn check_model_name(s: &str) -> Result<(), &'static str> {
    if s.is_empty() || s.chars().count() > 256 {
        return Err("a model name has 1 to 256 characters");
    }
    if s.chars()
        .any(|c| c.is_whitespace() || c.is_control() || crate::text::is_unsafe(c))
    {
        return Err("a model name has no spaces or control characters");
    }
    Ok(())
}

impl RunRequest {
    /// A request for `prompt` with every option at its default.
    pub fn new(prompt: impl Into<String>) -> Self {
        Self {
            prompt: prompt.into(),
            ..Self::default()
        }
    }

    /// Fix rounds validators may ask for (at most [`MAX_FIX_ROUNDS`]).
    pub fn fix_rounds(&self) -> u32 {
        self.max_fix_rounds
            .unwrap_or(DEFAULT_FIX_ROUNDS)
            .min(MAX_FIX_ROUNDS)
    }

    /// Where writing agents work.
    pub fn isolation(&self) -> Isolation {
        self.isolation.unwrap_or_default()
    }
}

/// The stored, resumable description of a run: never secrets, only names.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct RunSpec {
    /// The request as given.
    pub request: RunRequest,
    /// The provider actually used.
    pub provider: String,
}

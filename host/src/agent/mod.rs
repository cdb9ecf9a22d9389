//! Agents: lifecycle, permissions, quotas, the turn loop and the manager.

pub mod compaction;
pub mod manager;
pub mod permissions;
pub mod quota;
pub mod runner;
pub mod started;

pub use crate::vocab::AgentState;

/// The capability names of a set, in a fixed order (as stored and shown to models).
pub fn cap_names(caps: permissions::CapSet) -> Vec<String> {
    caps.iter()
        .map(|c| match c {
            crate::vocab::Capability::Read => "read",
            crate::vocab::Capability::Write => "write",
            crate::vocab::Capability::Exec => "exec",
            crate::vocab::Capability::Spawn => "spawn",
            crate::vocab::Capability::Mcp => "mcp",
        })
        .map(str::to_owned)
        .collect()
}

/// The capabilities an agent's prompt names as its tools: `caps`, with `mcp` only when
/// the agent has MCP servers to reach (an agent on a NATS worker has none).
pub fn prompt_caps(caps: permissions::CapSet, mcp: &[String]) -> permissions::CapSet {
    if mcp.is_empty() {
        caps.without(crate::vocab::Capability::Mcp)
    } else {
        caps
    }
}

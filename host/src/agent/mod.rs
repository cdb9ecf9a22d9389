//! Agents: lifecycle, permissions, quotas, the turn loop and the manager.

pub mod compaction;
pub mod lifecycle;
pub mod manager;
pub mod permissions;
pub mod quota;
pub mod runner;

pub use lifecycle::AgentState;

/// The capability names of a set, in a fixed order (as stored and shown to models).
pub fn cap_names(caps: permissions::CapSet) -> Vec<String> {
    caps.iter()
        .map(|c| match c {
            crate::tool::Capability::Read => "read",
            crate::tool::Capability::Write => "write",
            crate::tool::Capability::Exec => "exec",
            crate::tool::Capability::Spawn => "spawn",
            crate::tool::Capability::Mcp => "mcp",
        })
        .map(str::to_owned)
        .collect()
}

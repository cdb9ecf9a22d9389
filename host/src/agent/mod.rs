//! Agents: lifecycle, permissions, quotas, the turn loop and the manager.

pub mod lifecycle;
pub mod permissions;

pub use lifecycle::AgentState;

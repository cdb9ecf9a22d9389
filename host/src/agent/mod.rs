//! Agents: lifecycle, permissions, quotas, the turn loop and the manager.

pub mod lifecycle;

pub use lifecycle::AgentState;

//! Agents: lifecycle, permissions, quotas, the turn loop and the manager.

pub mod compaction;
pub mod lifecycle;
pub mod manager;
pub mod permissions;
pub mod quota;
pub mod runner;

pub use lifecycle::AgentState;

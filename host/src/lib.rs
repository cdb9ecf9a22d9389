//! crewbox runs crews of AI coding agents on a git repository, autonomously and safely.
//!
//! The library holds everything; the `crewbox` binary only parses arguments, calls in
//! here and maps errors to exit codes. Modules mirror the loop (see DESIGN §9).

pub mod agent;
pub mod batch;
pub mod cli;
pub mod config;
pub mod engine;
pub mod ids;
pub mod observe;
pub mod paths;
pub mod plugin;
pub mod process;
pub mod provider;
pub mod redact;
pub mod sandbox;
pub mod schedule;
pub mod store;
pub mod team;
pub mod tool;
pub mod trust;
pub mod worktree;

pub use crewbox_handoff as handoff;

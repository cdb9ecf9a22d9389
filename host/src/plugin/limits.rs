//! Per-call limits: memory, deadline and output sizes, with defaults per kind.

use std::time::Duration;

use serde::Serialize;

use super::kind::PluginKind;

/// The limits every call of a plugin runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// Linear memory cap, in bytes, per instance.
    pub memory_bytes: u64,
    /// Wall-clock deadline for one call, instantiation included.
    pub deadline: Duration,
    /// Cap on any one string returned by the guest, in bytes.
    pub max_string_bytes: u64,
    /// Cap on any one list returned by the guest, in items.
    pub max_list_items: u64,
    /// Cap on log and captured stdout/stderr per call, in bytes.
    pub max_log_bytes: u64,
    /// Cap on one file read through `workspace`, in bytes.
    pub max_read_bytes: u64,
}

impl Limits {
    /// The defaults for a kind: dispatchers are on the prompt's hot path (1 s), roles
    /// build prompts (5 s), validators may read files and call a model (30 s).
    pub fn for_kind(kind: PluginKind) -> Self {
        let deadline = match kind {
            PluginKind::Dispatcher => Duration::from_secs(1),
            PluginKind::Validator => Duration::from_secs(30),
            PluginKind::Role => Duration::from_secs(5),
        };
        Self {
            memory_bytes: 64 << 20,
            deadline,
            max_string_bytes: 1 << 20,
            max_list_items: 4096,
            max_log_bytes: 64 << 10,
            max_read_bytes: 1 << 20,
        }
    }
}

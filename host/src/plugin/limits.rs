//! Per-call limits: memory, deadline and answer sizes, with defaults per kind.

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
    /// Cap on one whole answer (a verdict, a decision, a prompt…) and on the arguments
    /// of one host call: the bytes of all strings plus the host size of all list items
    /// copied out of the guest, however they are laid out in guest memory.
    pub max_answer_bytes: u64,
    /// Cap on log and captured stdout/stderr per call, in bytes.
    pub max_log_bytes: u64,
    /// Cap on one file read through `workspace`, in bytes.
    pub max_read_bytes: u64,
}

impl Limits {
    /// The defaults for a kind: dispatchers are on the prompt's hot path (1 s, answers of
    /// 64 KiB), roles build prompts (5 s, 2 MiB: a prompt carries the diff), validators may
    /// read files and call a model (30 s, 1 MiB).
    pub fn for_kind(kind: PluginKind) -> Self {
        let (deadline, max_answer_bytes) = match kind {
            PluginKind::Dispatcher => (Duration::from_secs(1), 64 << 10),
            PluginKind::Validator => (Duration::from_secs(30), 1 << 20),
            PluginKind::Role => (Duration::from_secs(5), 2 << 20),
        };
        Self {
            memory_bytes: 64 << 20,
            deadline,
            max_string_bytes: 1 << 20,
            max_list_items: 4096,
            max_answer_bytes,
            max_log_bytes: 64 << 10,
            max_read_bytes: 1 << 20,
        }
    }
}

/// How many core instances, memories and tables one plugin's component may create. A
/// component is many core modules; without these caps one plugin could take the whole
/// instance pool, and with it every other plugin's ability to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ComponentCaps {
    /// Core module instances (a Rust component has 3; componentize-py's about 40).
    pub instances: u32,
    /// Linear memories (Rust and componentize-py emit one or two; jco's QuickJS backend
    /// with its WASI stubs three). Each pool slot reserves address space for a whole
    /// memory, so this multiplies the pool's reservation; the memory cap of a call
    /// counts all of them together.
    pub memories: u32,
    /// Tables (toolchains emit one or two).
    pub tables: u32,
}

impl Default for ComponentCaps {
    fn default() -> Self {
        Self {
            instances: 100,
            memories: 3,
            tables: 8,
        }
    }
}

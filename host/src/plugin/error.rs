//! Errors: [`PluginError`] when a plugin cannot be loaded, [`PluginFault`] when a call
//! misbehaves. A guest's own `err(...)` answer is neither; it stays in the call's `Ok`.

use std::path::PathBuf;

use super::grants::Violation;
use super::kind::PluginKind;

/// Why a plugin could not be set up; the plugin is not usable.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The wasmtime engine could not be configured.
    #[error("cannot set up the plugin engine: {0}")]
    Engine(String),
    /// The bytes are not a valid WebAssembly component.
    #[error("plugin `{plugin}` is not a valid component: {reason}")]
    Compile {
        /// The plugin's name.
        plugin: String,
        /// What the compiler said.
        reason: String,
    },
    /// The component is over the compile limits (size, code, compile time or memory).
    #[error("plugin `{plugin}` was refused: {refusal}{}", if *cached { " (remembered from an earlier attempt; `crewbox plugin check FILE` compiles it again)" } else { "" })]
    Refused {
        /// The plugin's name.
        plugin: String,
        /// Which limit it is over.
        refusal: super::compile::CompileRefusal,
        /// Whether the refusal was read from the cache rather than found just now.
        cached: bool,
    },
    /// The component breaks the capability rules; each violation names interface and rule.
    #[error("plugin `{plugin}` cannot load: {}", violations.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Denied {
        /// The plugin's name.
        plugin: String,
        /// Every rule it breaks.
        violations: Vec<Violation>,
    },
    /// The component passed the import rules but its types do not match the WIT contract.
    #[error("plugin `{plugin}` does not match the crewbox:plugin contract: {reason}")]
    Contract {
        /// The plugin's name.
        plugin: String,
        /// What did not match.
        reason: String,
    },
    /// A read-only directory grant names a path that cannot be opened.
    #[error("plugin `{plugin}`: cannot grant read-only directory {}: {reason}", path.display())]
    Grant {
        /// The plugin's name.
        plugin: String,
        /// The directory.
        path: PathBuf,
        /// Why it failed.
        reason: String,
    },
    /// The compile task was cancelled or panicked.
    #[error("plugin `{plugin}`: compilation task failed: {reason}")]
    Task {
        /// The plugin's name.
        plugin: String,
        /// What happened.
        reason: String,
    },
}

/// A plugin call that went wrong in the sandbox. Never a verdict: the host reports it as
/// a fault of the plugin, and the engine decides whether to retry, skip or stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginFault {
    /// The guest trapped (panic, unreachable, out-of-bounds…).
    #[error("plugin `{plugin}` {}", trap_text(said.as_deref(), detail))]
    Trap {
        /// The plugin's name.
        plugin: String,
        /// What the guest said last at error level or on stderr before it trapped (a
        /// Python traceback, a JS error, a Rust panic message), escaped.
        said: Option<String>,
        /// The trap and its backtrace, as wasmtime reports it.
        detail: String,
    },
    /// The call ran past its deadline.
    #[error("plugin `{plugin}` exceeded its {ms} ms deadline")]
    Deadline {
        /// The plugin's name.
        plugin: String,
        /// The deadline in milliseconds.
        ms: u64,
    },
    /// The guest tried to grow its memory past the cap.
    #[error("plugin `{plugin}` exceeded its memory cap of {limit} bytes")]
    MemoryLimit {
        /// The plugin's name.
        plugin: String,
        /// The cap in bytes.
        limit: u64,
    },
    /// The guest returned more than the host accepts.
    #[error("plugin `{plugin}` returned {what} of {size} bytes, over the cap of {limit}")]
    OutputTooLarge {
        /// The plugin's name.
        plugin: String,
        /// Which part of the answer was too large.
        what: &'static str,
        /// Its size in bytes (or items, for lists).
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// One answer (or one host call's arguments) was larger than the cap in total,
    /// however its strings and lists were laid out in guest memory.
    #[error(
        "plugin `{plugin}` moved more than {limit} bytes across the sandbox in one answer or host call"
    )]
    TransferTooLarge {
        /// The plugin's name.
        plugin: String,
        /// The cap in bytes.
        limit: u64,
    },
    /// A fresh instance could not be created (pool exhausted, start function failed…).
    #[error("plugin `{plugin}` could not be instantiated: {detail}")]
    Instantiate {
        /// The plugin's name.
        plugin: String,
        /// What wasmtime said.
        detail: String,
    },
    /// The method called does not belong to the plugin's kind.
    #[error("plugin `{plugin}` is a {actual}, not a {expected}")]
    WrongKind {
        /// The plugin's name.
        plugin: String,
        /// The kind the method needs.
        expected: PluginKind,
        /// The plugin's kind.
        actual: PluginKind,
    },
}

/// A trap as a person reads it: the guest's own words first, then the trap's first line.
fn trap_text(said: Option<&str>, detail: &str) -> String {
    match said {
        Some(said) => {
            // The wasm trap's own words ("wasm `unreachable` instruction executed"),
            // not the backtrace; the detail keeps all of it.
            let trap = detail
                .rsplit_once("wasm trap: ")
                .map_or(detail, |(_, t)| t)
                .split(['\n', '\\'])
                .next()
                .unwrap_or("");
            format!("failed: {said} (then trapped: {trap})")
        }
        None => format!("trapped: {detail}"),
    }
}

impl PluginFault {
    /// The plugin the fault belongs to.
    pub fn plugin(&self) -> &str {
        match self {
            Self::Trap { plugin, .. }
            | Self::Deadline { plugin, .. }
            | Self::MemoryLimit { plugin, .. }
            | Self::OutputTooLarge { plugin, .. }
            | Self::TransferTooLarge { plugin, .. }
            | Self::Instantiate { plugin, .. }
            | Self::WrongKind { plugin, .. } => plugin,
        }
    }
}

//! `crewbox:plugin/log`: guest messages into `tracing`, with the plugin name attached,
//! escaped (a newline cannot forge a log line, an ESC cannot reach a terminal) and under
//! a per-call byte budget so a chatty plugin cannot flood the host log.

use std::sync::Arc;

use crate::plugin::bindings::log::{Host, Level};

/// Longest single message kept; longer ones are cut at a char boundary.
const MAX_MESSAGE_BYTES: usize = 4096;

/// Per-call log state.
pub(crate) struct LogState {
    pub(crate) plugin: Arc<str>,
    /// Bytes still allowed this call (shared budget with captured stdio).
    pub(crate) remaining: u64,
    /// Whether the "budget exhausted" notice was already emitted.
    pub(crate) silenced: bool,
}

impl LogState {
    /// Emits a message if the budget allows it; always cheap for the guest.
    pub(crate) fn emit(&mut self, level: Level, message: &str) {
        if self.silenced {
            return;
        }
        let msg = crate::plugin::text::escape(truncate(message, MAX_MESSAGE_BYTES));
        if msg.len() as u64 > self.remaining {
            self.silenced = true;
            tracing::warn!(plugin = %self.plugin, "plugin log budget used up; further messages this call are dropped");
            return;
        }
        self.remaining -= msg.len() as u64;
        let plugin = &*self.plugin;
        match level {
            Level::Trace => tracing::trace!(plugin, "{msg}"),
            Level::Debug => tracing::debug!(plugin, "{msg}"),
            Level::Info => tracing::info!(plugin, "{msg}"),
            Level::Warn => tracing::warn!(plugin, "{msg}"),
            Level::Error => tracing::error!(plugin, "{msg}"),
        }
    }
}

impl Host for LogState {
    async fn log(&mut self, level: Level, message: String) {
        self.emit(level, &message);
    }
}

/// Cuts `s` to at most `max` bytes on a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

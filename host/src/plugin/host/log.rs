//! `crewbox:plugin/log`: guest messages into `tracing`, with the plugin name attached,
//! escaped (a newline cannot forge a log line, an ESC cannot reach a terminal) and under
//! a per-call byte budget so a chatty plugin cannot flood the host log.

use std::sync::Arc;

use crate::plugin::bindings::log::{Host, Level};

/// Longest single message kept; longer ones are cut at a char boundary.
const MAX_MESSAGE_BYTES: usize = 4096;

/// Lines of what the guest said last at error level or on stderr, kept for a fault.
const RECENT_LINES: usize = 12;
/// Longest line kept for a fault.
const RECENT_LINE_BYTES: usize = 300;

/// Per-call log state.
pub(crate) struct LogState {
    pub(crate) plugin: Arc<str>,
    /// Bytes still allowed this call (shared budget with captured stdio).
    pub(crate) remaining: u64,
    /// Whether the "budget exhausted" notice was already emitted.
    pub(crate) silenced: bool,
    /// The last error-level messages and stderr lines (escaped, bounded): a guest that
    /// then traps (a Python exception, a JS error, a Rust panic) said why in them.
    pub(crate) recent: std::collections::VecDeque<String>,
}

impl LogState {
    /// A fresh state for one call of `plugin` with `budget` bytes of log.
    pub(crate) fn new(plugin: Arc<str>, budget: u64) -> Self {
        Self {
            plugin,
            remaining: budget,
            silenced: false,
            recent: std::collections::VecDeque::new(),
        }
    }

    /// Keeps `line` among the last lines the guest said about a failure, whatever is
    /// left of the log budget.
    pub(crate) fn remember(&mut self, line: &str) {
        let line = crate::text::escape(truncate(line.trim_end(), RECENT_LINE_BYTES));
        if line.trim().is_empty() {
            return;
        }
        if self.recent.len() == RECENT_LINES {
            self.recent.pop_front();
        }
        self.recent.push_back(line.into_owned());
    }

    /// What the guest last said about a failure, its lines joined by ` | ` so the
    /// fault stays one line, if anything.
    pub(crate) fn last_words(&self) -> Option<String> {
        (!self.recent.is_empty()).then(|| Vec::from(self.recent.clone()).join(" | "))
    }

    /// Emits a message if the budget allows it; always cheap for the guest.
    pub(crate) fn emit(&mut self, level: Level, message: &str) {
        if level == Level::Error {
            for line in message.lines() {
                self.remember(line);
            }
        }
        if self.silenced {
            return;
        }
        let msg = crate::text::escape(truncate(message, MAX_MESSAGE_BYTES));
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
    crate::text::within(s, max)
}

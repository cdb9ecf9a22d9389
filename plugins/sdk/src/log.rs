//! Structured logging into the host's log (every world may import it).
//!
//! Messages are size-capped by the host; never log secrets or whole files.

use crate::__bindings::validator::crewbox::plugin::log as raw;

pub use raw::Level;

/// Writes `message` at `level`.
pub fn log(level: Level, message: &str) {
    raw::log(level, message);
}

/// Logs very detailed tracing.
pub fn trace(message: &str) {
    log(Level::Trace, message);
}

/// Logs debugging detail.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Logs normal information.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Logs something unexpected but recoverable.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}

/// Logs a failure.
pub fn error(message: &str) {
    log(Level::Error, message);
}

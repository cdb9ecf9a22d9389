//! Observability: tracing setup (spans run → agent → turn → tool carry the ids), and
//! with the `otlp` feature their export over OTLP/HTTP.

pub mod dashboard;
pub mod history;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod spans;
pub mod telemetry;
pub mod tree;

use std::io::IsTerminal;

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// Installs the global subscriber: log lines on stderr (`RUST_LOG` filters, default
/// `warn`; JSON on request; through the redactor; colour only on a terminal and without
/// `NO_COLOR`), and span export when the user configured an OTLP endpoint (`telemetry`:
/// the user's `[telemetry]` table; the `OTEL_*` variables are read here).
pub fn init_tracing(
    json: bool,
    colour_choice: Option<bool>,
    telemetry: &crate::config::user::TelemetryFile,
) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(colour_choice.unwrap_or_else(|| {
            colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR"),
            )
        }))
        .with_writer(crate::redact::RedactingStderr);
    let fmt: Box<dyn Layer<Registry> + Send + Sync> = if json {
        fmt.json().with_filter(filter).boxed()
    } else {
        fmt.with_filter(filter).boxed()
    };
    let (export, problem) = match telemetry::resolve(telemetry, &|k| std::env::var(k).ok()) {
        Ok(None) => (None, None),
        Ok(Some(target)) => export_layer(&target),
        Err(e) => (None, Some(e.to_string())),
    };
    // One list of layers over the registry, each with its own filter: log lines keep
    // `RUST_LOG`, export takes crewbox's spans whatever the log level.
    let layers: Vec<_> = std::iter::once(fmt).chain(export).collect();
    let _ = tracing_subscriber::registry().with(layers).try_init();
    if let Some(problem) = problem {
        tracing::warn!("telemetry: {problem}; no traces are exported");
    }
}

/// The export layer for `target`, or why there is none.
#[cfg(feature = "otlp")]
fn export_layer(
    target: &telemetry::OtlpTarget,
) -> (
    Option<Box<dyn Layer<Registry> + Send + Sync>>,
    Option<String>,
) {
    match otlp::layer(target) {
        Ok(layer) => (Some(layer), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// Without the feature a configured endpoint is a warning, never silence.
#[cfg(not(feature = "otlp"))]
fn export_layer(
    target: &telemetry::OtlpTarget,
) -> (
    Option<Box<dyn Layer<Registry> + Send + Sync>>,
    Option<String>,
) {
    let problem = format!(
        "an OTLP endpoint is set ({}) but this build has no OTLP support; build with \
         --features otlp",
        target.origin
    );
    (None, Some(problem))
}

/// Sends the spans not yet exported, waiting a bounded time (a no-op without export).
pub fn flush_telemetry() {
    #[cfg(feature = "otlp")]
    otlp::flush();
}

/// Whether log lines may carry colour codes (<https://no-color.org>: any non-empty
/// `NO_COLOR` turns them off).
fn colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use super::colour;
        assert!(colour(true, None));
        assert!(colour(true, Some("".into())));
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None));
    }
}

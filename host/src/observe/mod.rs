//! Observability: tracing setup (spans run → agent → turn → tool carry the ids), and
//! with the `otlp` feature their export over OTLP/HTTP.

pub mod history;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod spans;
pub mod telemetry;
pub mod tree;

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// The log filter without `RUST_LOG`: warnings, none of the MCP SDK's own (they name
/// its Rust types; crewbox says what went wrong with a server itself).
pub const DEFAULT_LOG: &str = "warn,rmcp=off";

/// Installs the global subscriber: log lines on stderr (`RUST_LOG` filters, default
/// [`DEFAULT_LOG`]; JSON on request; through the redactor; colour only on a terminal and without
/// `NO_COLOR`), and span export when the user configured an OTLP endpoint (`telemetry`:
/// the user's `[telemetry]` table; the `OTEL_*` variables are read here).
pub fn init_tracing(
    json: bool,
    colour_choice: Option<bool>,
    telemetry: &crate::config::user::TelemetryFile,
) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG));
    let ansi = !json
        && colour_choice.unwrap_or_else(|| {
            colour(
                crate::text::stderr_is_terminal(),
                std::env::var_os("NO_COLOR"),
            )
        });
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(LogSink { colour: ansi });
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

/// The W3C `traceparent` of `span` while traces are exported (else `None`): what a task
/// sent to a worker carries so the worker's spans join the run's trace.
pub(crate) fn traceparent(span: &tracing::Span) -> Option<String> {
    #[cfg(feature = "otlp")]
    return otlp::traceparent(span);
    #[cfg(not(feature = "otlp"))]
    {
        let _ = span;
        None
    }
}

/// Makes `span` a child of the remote span `traceparent` names, while traces are
/// exported (a no-op otherwise, and for a malformed value).
pub(crate) fn follow(span: &tracing::Span, traceparent: &str) {
    #[cfg(feature = "otlp")]
    otlp::follow(span, traceparent);
    #[cfg(not(feature = "otlp"))]
    let _ = (span, traceparent);
}

/// Sends the spans not yet exported, waiting a bounded time (a no-op without export).
pub fn flush_telemetry() {
    #[cfg(feature = "otlp")]
    otlp::flush();
}

/// The `tracing` writer: log lines go to stderr with every registered secret masked
/// and every terminal control a logged value carried escaped (`crate::text`), keeping
/// only the formatter's own colours.
#[derive(Clone, Copy, Debug)]
struct LogSink {
    colour: bool,
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogSink {
    type Writer = LogSink;
    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The fmt layer hands over one whole formatted event per call, so a secret is
        // never split between two writes.
        let text = String::from_utf8_lossy(buf);
        let text = crate::redact::clean(&text);
        let shown = log_line(&text, self.colour);
        #[allow(clippy::disallowed_methods)] // escaped just above
        let mut err = std::io::stderr().lock();
        err.write_all(shown.as_bytes())?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        #[allow(clippy::disallowed_methods)] // writes nothing
        std::io::stderr().flush()
    }
}

/// A formatted log line as it may reach the terminal: escaped, keeping the formatter's
/// colours when they are on.
/// One event is one line: a line break a logged value carried (an id a hostile MCP
/// server chose, a peer's message) shows as `\n`, so no value can forge a line of its
/// own.
fn log_line(text: &str, colour: bool) -> std::borrow::Cow<'_, str> {
    let layout = match colour {
        true => crate::text::Layout::ColouredLog,
        false => crate::text::Layout::Block,
    };
    let body = text.strip_suffix('\n').unwrap_or(text);
    if !body.contains('\n') {
        return crate::text::escape_as(text, layout);
    }
    let one = body.replace('\n', "\\n");
    let mut shown = crate::text::escape_as(&one, layout).into_owned();
    if body.len() < text.len() {
        shown.push('\n');
    }
    std::borrow::Cow::Owned(shown)
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

    /// Formats one event the way `init_tracing` does, colours on or off, into a buffer.
    fn formatted(colour: bool, json: bool) -> String {
        use tracing_subscriber::layer::SubscriberExt as _;
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = buf.clone();
        let make = move || Capture(sink.clone());
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(colour)
            .with_writer(make);
        let hostile = "x\x1b]0;title\x07 \u{9b}2J \u{202e}rev\rforged\nERROR crewbox: forged line";
        let emit = || {
            let span = tracing::info_span!("agent", agent_name = %hostile);
            let _in = span.enter();
            tracing::warn!(worker = %hostile, "from {hostile}");
        };
        match json {
            true => tracing::subscriber::with_default(
                tracing_subscriber::registry().with(layer.json()),
                emit,
            ),
            false => {
                tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), emit)
            }
        }
        let bytes = buf.lock().unwrap().clone();
        super::log_line(&String::from_utf8(bytes).unwrap(), colour && !json).into_owned()
    }

    struct Capture(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Capture {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn logged_values_cannot_drive_the_terminal_and_colours_stay() {
        for (colour, json) in [(false, false), (true, false), (false, true)] {
            let line = formatted(colour, json);
            let controls: Vec<char> = line
                .chars()
                .filter(|c| crate::text::is_unsafe(*c) && *c != '\n')
                .filter(|c| !(colour && *c == '\x1b'))
                .collect();
            assert!(controls.is_empty(), "{colour} {json}: {line:?}");
            assert!(
                !line.contains("\x1b]") && !line.contains('\u{9b}'),
                "{line:?}"
            );
            assert!(line.contains("rev"), "{line:?}");
            assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
            if colour {
                assert!(
                    line.contains("\x1b[33m"),
                    "the level keeps its colour: {line:?}"
                );
            }
            if json {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                assert!(
                    v["fields"]["message"]
                        .as_str()
                        .unwrap()
                        .contains('\u{202e}')
                );
            }
        }
    }
}

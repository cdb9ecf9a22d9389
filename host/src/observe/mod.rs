//! Observability: tracing setup (spans run → agent → turn → tool carry the ids).

pub mod dashboard;
pub mod history;
pub mod tree;

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber: `RUST_LOG` filters (default `warn`), JSON on request.
/// Lines pass through the redactor; colour only on a terminal and without `NO_COLOR`.
pub fn init_tracing(json: bool, colour_choice: Option<bool>) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour_choice.unwrap_or_else(|| {
            colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR"),
            )
        }))
        .with_writer(crate::redact::RedactingStderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
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

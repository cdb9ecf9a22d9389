//! Observability: tracing setup (spans run → agent → turn → tool carry the ids).

pub mod history;
pub mod tree;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber: `RUST_LOG` filters (default `warn`), JSON on request.
pub fn init_tracing(json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

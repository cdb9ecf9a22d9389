//! OTLP trace export, end to end through the real binary: a local OTLP/HTTP receiver
//! (Python, decoding with the official `opentelemetry-proto` package) gets the spans
//! of a scripted run; a repository cannot point export anywhere; a collector that is
//! down never holds up the CLI; a build without the feature says a configured
//! endpoint is unused.

#[cfg(feature = "otlp")]
pub(crate) mod receiver;

use std::time::{Duration, Instant};

use crate::support::repo::{command, git_repo};

/// A port nothing listens on (bound, then closed).
pub(crate) fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

pub(crate) const SINGLE: &str = r#"
[[reply]]
turn = 1
text = ""
usage = { input = 120, output = 7 }
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }
[[reply.tool_calls]]
name = "read_file"
args = { path = "missing.txt" }

[[reply]]
turn = 2
text = "notes say alpha"
usage = { input = 150, output = 5 }
"#;

/// `crewbox run` with `OTEL_EXPORTER_OTLP_ENDPOINT` at `endpoint`: its output, and
/// how long it took.
fn run_exporting_to(endpoint: &str) -> (std::process::Output, Duration) {
    let dir = git_repo(|_| {});
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SINGLE).unwrap();
    let started = Instant::now();
    let out = command(
        dir.path(),
        &["run", "read the notes", "--mode", "single", "--script"],
    )
    .arg(&script)
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    .output()
    .unwrap();
    (out, started.elapsed())
}

#[test]
fn a_collector_that_is_down_never_holds_up_the_run() {
    let (out, took) = run_exporting_to(&format!("http://127.0.0.1:{}", closed_port()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {stderr}");
    if cfg!(feature = "otlp") {
        assert!(!stderr.contains("no OTLP support"), "{stderr}");
    } else {
        assert!(
            stderr.contains(
                "OTEL_EXPORTER_OTLP_ENDPOINT) but this build has no OTLP support; build with \
                 --features otlp"
            ),
            "a configured endpoint must not be silently unused: {stderr}"
        );
    }
}

/// A collector that accepts connections and never answers: the export's timeout and
/// the bounded flush end the wait.
#[cfg(feature = "otlp")]
#[test]
fn a_collector_that_never_answers_delays_exit_a_bounded_time() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let (out, took) = run_exporting_to(&format!("http://127.0.0.1:{port}"));
    drop(silent);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(took < Duration::from_secs(12), "took {took:?}: {stderr}");
}

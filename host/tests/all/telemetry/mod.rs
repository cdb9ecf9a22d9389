//! OTLP trace export, end to end through the real binary: a local OTLP/HTTP receiver
//! (Python, decoding with the official `opentelemetry-proto` package) gets the spans
//! of a scripted run; a repository cannot point export anywhere; a collector that is
//! down never holds up the CLI; a build without the feature says a configured
//! endpoint is unused.

#[cfg(feature = "otlp")]
mod receiver;

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

#[test]
fn a_collector_that_is_down_never_holds_up_the_run() {
    let dir = git_repo(|_| {});
    std::fs::write(dir.path().join("script.toml"), SINGLE).unwrap();
    let script = dir.path().join("script.toml");
    let started = Instant::now();
    let out = command(
        dir.path(),
        &["run", "read the notes", "--mode", "single", "--script"],
    )
    .arg(&script)
    .env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{}", closed_port()),
    )
    .output()
    .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(took < Duration::from_secs(20), "took {took:?}: {stderr}");
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

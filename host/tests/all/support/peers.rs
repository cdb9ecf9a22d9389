//! Third-party test peers (PyPI tools in the venv `scripts/test-deps.sh` builds, Debian
//! servers). A missing peer skips its test with a loud line on stderr under a plain
//! `cargo test`, and fails it under `scripts/test` (`CREWBOX_REQUIRE_PEERS=1`), so a peer
//! that could not be installed is never a silent pass.

use std::path::PathBuf;

/// Whether missing peers fail their tests (set by `scripts/test`).
pub fn required() -> bool {
    std::env::var_os("CREWBOX_REQUIRE_PEERS").is_some_and(|v| v == "1")
}

/// Reports a missing peer: panics when peers are required, else prints why the test skips.
pub fn missing(peer: &str, why: &str) {
    if required() {
        panic!("test peer `{peer}` is missing ({why}); scripts/test-deps.sh installs it");
    }
    eprintln!("SKIPPED: test peer `{peer}` is missing ({why}); run scripts/test to install it");
}

/// Reports a test that cannot run on this machine (it needs root, a tool or a kernel
/// feature that is not there): under `scripts/test` that fails the test, like a missing
/// peer, so a check that never ran is never counted as passed; a plain `cargo test`
/// skips it with a loud line.
pub fn cannot_run(what: &str, why: &str) {
    if required() {
        panic!("{what} cannot run here: {why}");
    }
    eprintln!("SKIPPED: {what} cannot run here: {why}");
}

/// An executable from the test venv (`$CREWBOX_TEST_VENV/bin/NAME`), else from PATH.
pub fn venv_tool(name: &str) -> Option<PathBuf> {
    if let Some(venv) = std::env::var_os("CREWBOX_TEST_VENV") {
        let p = PathBuf::from(venv).join("bin").join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// An executable of the npm peers (`$CREWBOX_TEST_NODE/node_modules/.bin/NAME`), or
/// `None` after reporting it [`missing`].
pub fn node_tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("CREWBOX_TEST_NODE")
        .map(|d| PathBuf::from(d).join("node_modules/.bin").join(name))
        .filter(|p| p.is_file());
    if found.is_none() {
        missing(name, "not in $CREWBOX_TEST_NODE/node_modules/.bin");
    }
    found
}

/// [`venv_tool`], or `None` after reporting it [`missing`].
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = venv_tool(name);
    if found.is_none() {
        missing(name, "not in $CREWBOX_TEST_VENV/bin nor on PATH");
    }
    found
}

//! The process sandbox for tests: the real `crewbox` binary is the helper (the test
//! binary itself is a harness without the entry point).
//!
//! `CREWBOX_TEST_SANDBOX=off` runs every test with the sandbox turned off, to show that
//! the security tests fail without it.

use std::path::{Path, PathBuf};

use crewbox::unstable::sandbox::layout::HostPaths;
use crewbox::unstable::sandbox::{Helper, Sandbox, SandboxConfig, SandboxMode, SandboxOptions};

/// Whether this test process runs with the sandbox off (see the module doc).
pub fn disabled() -> bool {
    std::env::var("CREWBOX_TEST_SANDBOX").is_ok_and(|v| v == "off")
}

/// For a test that needs the sandbox itself: true (after saying so, or failing under
/// `scripts/test`, see [`crate::support::peers::cannot_run`]) when it is turned off.
pub fn unavailable_for(what: &str) -> bool {
    if !disabled() {
        return false;
    }
    crate::support::peers::cannot_run(
        what,
        "CREWBOX_TEST_SANDBOX=off: commands run without the sandbox",
    );
    true
}

/// The helper binary.
pub fn helper() -> Helper {
    Helper::Path(PathBuf::from(env!("CARGO_BIN_EXE_crewbox")))
}

/// A sandbox keeping its directories in `state`, hiding `state` (and `hide`) from
/// commands, with these settings; the provider key variables are `key_vars`.
pub fn sandbox_with(state: &Path, mut config: SandboxConfig, key_vars: &[&str]) -> Sandbox {
    if disabled() {
        config.mode = SandboxMode::Off;
    }
    std::fs::create_dir_all(state).unwrap();
    Sandbox::new(SandboxOptions {
        config,
        helper: helper(),
        paths: HostPaths::from_env(state, None),
        key_vars: key_vars.iter().map(|s| s.to_string()).collect(),
        user_config: None,
    })
    .unwrap()
}

/// A sandbox with the default settings.
pub fn sandbox(state: &Path) -> Sandbox {
    sandbox_with(state, SandboxConfig::default(), &[])
}

/// A `[sandbox]` table with `lines` for a user config file (turned off under
/// `CREWBOX_TEST_SANDBOX=off`).
pub fn user_config_table(lines: &str) -> String {
    let off = if disabled() { "mode = \"off\"\n" } else { "" };
    format!("[sandbox]\n{off}{lines}")
}

//! Shared helpers for the integration tests.
#![allow(dead_code)]

pub mod agents;
pub mod cli;
pub mod http;
pub mod kill;
pub mod limited;
pub mod nats;
pub mod peers;
pub mod procs;
pub mod repo;
pub mod sandbox;
pub mod script;
pub mod swap;
pub mod wat;
pub mod wire;

use std::path::PathBuf;

/// The `XDG_CACHE_HOME` every spawned `crewbox` gets: one compiled-plugin cache for the
/// whole suite (in the target directory), so each built-in component is compiled once
/// per build rather than once per test.
pub fn shared_cache_home() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache")
}

/// The path of committed test guest `name` (e.g. `hostile-trap.wasm`) in
/// `tests/guests/dist/`, as a string for configs and command lines; a missing file fails
/// the test here, naming the path, not later as a plugin-load error.
pub fn guest_path(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/guests/dist")
        .join(name);
    assert!(path.is_file(), "no test guest at {}", path.display());
    path.to_string_lossy().into_owned()
}

/// The bytes of committed test guest `name` (see [`guest_path`]).
pub fn guest_bytes(name: &str) -> std::sync::Arc<[u8]> {
    let path = guest_path(name);
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .into()
}

/// Embeds a committed test guest from `tests/guests/dist/`; a missing file is a compile
/// error, not a skipped test.
#[macro_export]
macro_rules! guest_wasm {
    ($file:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/guests/dist/",
            $file
        ))
    };
}

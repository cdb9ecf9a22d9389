//! Shared helpers for the integration tests.
#![allow(dead_code)]

pub mod agents;
pub mod http;
pub mod peers;
pub mod procs;
pub mod repo;
pub mod sandbox;
pub mod wire;

use std::path::PathBuf;

/// The `XDG_CACHE_HOME` every spawned `crewbox` gets: one compiled-plugin cache for the
/// whole suite (in the target directory), so each built-in component is compiled once
/// per build rather than once per test.
pub fn shared_cache_home() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xdg-cache")
}

//! The on-disk cache of compiled components.
//!
//! Keyed by the sha256 of the component bytes and wasmtime's own compatibility hash
//! (version, target, compiler settings), so an engine upgrade or config change never
//! loads a stale artifact. A bad entry is recompiled, never an error.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Feeds `Hash` output into sha256, so the engine's compatibility hash is stable.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Where compiled components live, and what engine they are valid for.
#[derive(Debug)]
pub(crate) struct DiskCache {
    dir: PathBuf,
    engine_key: String,
}

/// How a component was obtained, so callers (and tests) can see the cache working.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheOutcome {
    /// Loaded from the disk cache.
    Hit,
    /// Compiled, then stored in the cache.
    Stored,
    /// Compiled; no cache configured or storing failed.
    Compiled,
}

impl DiskCache {
    pub(crate) fn new(dir: PathBuf, engine: &Engine) -> Self {
        let mut h = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_key = hex(&h.0.finalize()[..8]);
        Self { dir, engine_key }
    }

    fn path_for(&self, bytes: &[u8]) -> PathBuf {
        let digest = hex(&Sha256::digest(bytes));
        self.dir.join(format!("{digest}-{}.cwasm", self.engine_key))
    }

    /// Loads or compiles. Blocking: call from `spawn_blocking`.
    pub(crate) fn load_or_compile(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let path = self.path_for(bytes);
        if path.is_file() {
            // SAFETY: the file was written by `Component::serialize` for an engine with the
            // same compatibility hash (in its name) and lives in a directory only crewbox
            // writes; wasmtime still validates the header and falls back to an error.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(c) => return Ok((c, CacheOutcome::Hit)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "corrupt plugin cache entry; recompiling")
                }
            }
        }
        let component = Component::new(engine, bytes)?;
        let outcome = match store(&path, &component) {
            Ok(()) => CacheOutcome::Stored,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot write plugin cache entry");
                CacheOutcome::Compiled
            }
        };
        Ok((component, outcome))
    }
}

/// Writes atomically: a temp file then a rename, so a crash never leaves half an entry.
fn store(path: &Path, component: &Component) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize()?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

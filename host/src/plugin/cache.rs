//! The on-disk cache of compiled components, and of refusals to compile one.
//!
//! Keyed by the sha256 of the component bytes and wasmtime's own compatibility hash
//! (version, target, compiler settings), so an engine upgrade or config change never
//! loads a stale artifact. A bad entry is recompiled, never an error. A refusal (a
//! component over the compile limits) is kept beside, keyed also by the limits, so a
//! hostile component costs its compile time once, not on every run.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::compile::{CompileLimits, CompileRefusal};
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

    fn refusal_path(&self, bytes: &[u8], limits: &CompileLimits) -> PathBuf {
        let digest = hex(&Sha256::digest(bytes));
        self.dir.join(format!(
            "{digest}-{}-{}.refused",
            self.engine_key,
            limits.key()
        ))
    }

    /// The compiled component, if a good entry is cached. Blocking.
    pub(crate) fn load(&self, engine: &Engine, bytes: &[u8]) -> Option<Component> {
        let path = self.path_for(bytes);
        if !path.is_file() {
            return None;
        }
        // SAFETY: the file was written by `Component::serialize` (or the compiler child's
        // `precompile_component`) for an engine with the same compatibility hash (in its
        // name) and lives in a directory only crewbox writes; wasmtime still validates
        // the header and falls back to an error.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "corrupt plugin cache entry; recompiling");
                None
            }
        }
    }

    /// Stores compiled code; returns whether it was stored. Blocking.
    pub(crate) fn store(&self, bytes: &[u8], compiled: &[u8]) -> CacheOutcome {
        let path = self.path_for(bytes);
        match write_atomically(&path, compiled) {
            Ok(()) => CacheOutcome::Stored,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot write plugin cache entry");
                CacheOutcome::Compiled
            }
        }
    }

    /// A refusal cached for these bytes under these limits. Blocking.
    pub(crate) fn refusal(&self, bytes: &[u8], limits: &CompileLimits) -> Option<CompileRefusal> {
        let path = self.refusal_path(bytes, limits);
        let text = std::fs::read(&path).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Remembers a refusal. Blocking.
    pub(crate) fn store_refusal(
        &self,
        bytes: &[u8],
        limits: &CompileLimits,
        refusal: &CompileRefusal,
    ) {
        let path = self.refusal_path(bytes, limits);
        let text = serde_json::to_vec(refusal).unwrap_or_default();
        if let Err(e) = write_atomically(&path, &text) {
            tracing::warn!(path = %path.display(), error = %e, "cannot write plugin refusal entry");
        }
    }

    /// Forgets a refusal (after a fresh compile succeeded). Blocking.
    pub(crate) fn clear_refusal(&self, bytes: &[u8], limits: &CompileLimits) {
        let _ = std::fs::remove_file(self.refusal_path(bytes, limits));
    }
}

/// Writes atomically: a temp file then a rename, so a crash never leaves half an entry.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

//! The on-disk cache of compiled components, and of refusals to compile one.
//!
//! Keyed by the sha256 of the component bytes and wasmtime's own compatibility hash
//! (version, target, compiler settings), so an engine upgrade or config change never
//! loads a stale artifact. A bad entry is recompiled, never an error. A refusal (a
//! component over the compile limits) is kept beside, keyed also by the limits, so a
//! hostile component costs its compile time once, not on every run.
//!
//! The cache is bounded: a hit marks its entry used (its modification time), and after
//! every store the least recently used entries are removed until the directory holds at
//! most the cap. Entries of another engine (an older crewbox) are never read again, so
//! they go first. `crewbox plugin cache` shows the figures; `--prune` applies the rule.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::compile::{CompileLimits, CompileRefusal};
use crate::text::hex;
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
    max_bytes: u64,
}

/// The cache directory in figures (`crewbox plugin cache --json`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CacheUsage {
    /// The directory.
    pub dir: PathBuf,
    /// Entries (compiled components and remembered refusals).
    pub entries: u64,
    /// Their bytes together.
    pub bytes: u64,
    /// Of those, entries compiled by another engine (never read again).
    pub stale_entries: u64,
    /// The cap the cache is pruned to.
    pub max_bytes: u64,
    /// What the last prune removed, when one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed: Option<Removed>,
}

/// What a prune removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Removed {
    /// Entries removed.
    pub entries: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// One file of the cache directory, as the pruner sees it.
struct Entry {
    path: PathBuf,
    bytes: u64,
    used: std::time::SystemTime,
    stale: bool,
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
    pub(crate) fn new(dir: PathBuf, engine: &Engine, max_bytes: u64) -> Self {
        let mut h = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_key = hex(&h.0.finalize()[..8]);
        Self {
            dir,
            engine_key,
            max_bytes,
        }
    }

    /// The cache's files: compiled components, refusals, and the temp files of an
    /// interrupted store. Anything else in the directory is not ours and is left alone.
    fn entries(&self) -> Vec<Entry> {
        let Ok(list) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let ours = |name: &str| {
            name.ends_with(".cwasm") || name.ends_with(".refused") || name.contains(".tmp")
        };
        list.filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let meta = e.metadata().ok()?;
                (meta.is_file() && ours(&name)).then(|| Entry {
                    path: e.path(),
                    bytes: meta.len(),
                    used: meta.modified().unwrap_or(std::time::UNIX_EPOCH),
                    stale: !name.contains(&format!("-{}", self.engine_key))
                        || name.contains(".tmp"),
                })
            })
            .collect()
    }

    /// The directory in figures. Blocking.
    pub(crate) fn usage(&self) -> CacheUsage {
        let entries = self.entries();
        CacheUsage {
            dir: self.dir.clone(),
            entries: entries.len() as u64,
            bytes: entries.iter().map(|e| e.bytes).sum(),
            stale_entries: entries.iter().filter(|e| e.stale).count() as u64,
            max_bytes: self.max_bytes,
            removed: None,
        }
    }

    /// Removes the least recently used entries, stale ones first, until at most the cap
    /// is left, and with `drop_stale` every stale entry even under the cap (another
    /// crewbox version sharing the directory would recompile its own); `keep` (the
    /// entry just stored) is never removed. Blocking.
    pub(crate) fn prune(&self, keep: Option<&Path>, drop_stale: bool) -> Removed {
        let mut entries = self.entries();
        // Stale first, then oldest use first.
        entries.sort_by_key(|e| (!e.stale, e.used));
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        let mut removed = Removed::default();
        for e in entries {
            if total <= self.max_bytes && !(drop_stale && e.stale) {
                break;
            }
            if keep == Some(e.path.as_path()) {
                continue;
            }
            if std::fs::remove_file(&e.path).is_ok() {
                total -= e.bytes;
                removed.entries += 1;
                removed.bytes += e.bytes;
            }
        }
        if removed.entries > 0 {
            tracing::info!(dir = %self.dir.display(), removed = removed.entries, bytes = removed.bytes, "pruned the plugin cache");
        }
        removed
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
            Ok(c) => {
                // Marks the entry used, for the least-recently-used pruning.
                let now = std::time::SystemTime::now();
                if let Ok(f) = std::fs::File::options().append(true).open(&path) {
                    let _ = f.set_modified(now);
                }
                Some(c)
            }
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
            Ok(()) => {
                self.prune(Some(&path), false);
                CacheOutcome::Stored
            }
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

/// Writes atomically through the confined filesystem: a synced temporary file renamed
/// into place, so a crash never leaves half an entry and a link planted in the cache
/// directory is replaced, never written through.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use crate::fs::{Root, Rules, WriteOptions};
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().unwrap_or_default();
    Root::create(dir, 0o755)
        .and_then(|root| root.write(Path::new(name), bytes, WriteOptions::new(Rules::NO_LINKS)))
        .map(drop)
        .map_err(|e| std::io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aged(path: &Path, secs_ago: u64) {
        let t = std::time::SystemTime::now() - std::time::Duration::from_secs(secs_ago);
        std::fs::File::options()
            .append(true)
            .open(path)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    #[test]
    fn prune_drops_stale_then_least_recently_used_down_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::default();
        let cache = DiskCache::new(dir.path().to_owned(), &engine, 250);
        let key = cache.engine_key.clone();
        let file = |name: &str, bytes: usize, age: u64| {
            let p = dir.path().join(name);
            std::fs::write(&p, vec![0u8; bytes]).unwrap();
            aged(&p, age);
            p
        };
        let old = file(&format!("aa-{key}.cwasm"), 100, 300);
        let recent = file(&format!("bb-{key}.cwasm"), 100, 10);
        let newest = file(&format!("cc-{key}.cwasm"), 100, 0);
        let stale = file("dd-0123456789abcdef.cwasm", 10, 0);
        let foreign = file("notes.txt", 1000, 1000);
        let usage = cache.usage();
        assert_eq!(
            (usage.entries, usage.bytes, usage.stale_entries),
            (4, 310, 1)
        );
        let removed = cache.prune(Some(&newest), false);
        assert_eq!(
            removed,
            Removed {
                entries: 2,
                bytes: 110
            }
        );
        assert!(
            !stale.exists() && !old.exists(),
            "stale and oldest go first"
        );
        assert!(recent.exists() && newest.exists() && foreign.exists());
        // A hit marks its entry used: the older of the two is now the newest.
        aged(&recent, 0);
        aged(&newest, 50);
        let cache = DiskCache {
            max_bytes: 150,
            ..cache
        };
        cache.prune(None, false);
        assert!(recent.exists() && !newest.exists());
        // Under the cap a store keeps another engine's entries; `--prune` does not.
        let other = file("ee-fedcba9876543210.cwasm", 10, 0);
        assert_eq!(cache.prune(None, false), Removed::default());
        assert_eq!(
            cache.prune(None, true),
            Removed {
                entries: 1,
                bytes: 10
            }
        );
        assert!(!other.exists() && recent.exists());
    }
}

//! What a plugin author asks outside any run: a component file inspected (`crewbox
//! plugin inspect`) or checked against the rules (`plugin check`), a project scaffolded
//! (`plugin new`) or built (`plugin build`), and the compiled-plugin cache (`plugin
//! cache`). `check` and a build compile the component into the plugin cache exactly as
//! a run's first load would, so that load is a cache hit.
//!
//! Blocking, like [`Plugins::here`] and [`Plugins::list`] (they compile, read files and
//! run toolchains): the binary calls them from `spawn_blocking`. Typed answers, typed
//! errors; the binary only renders them.

use std::path::Path;
use std::time::Duration;

use crate::plugin::file::FileError;
use crate::plugin::{
    CacheOutcome, CacheUsage, Grants, PluginError, PluginKind, PluginRuntime, PluginSource,
    Precompiled, Violation,
};

use super::plugins::{Plugins, PluginsError, runtime};

/// Why a component file could not be inspected ([`Plugins::inspect`]).
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The file cannot be read: missing, not a regular file, or over the component
    /// size cap (each named, with the file).
    #[error(transparent)]
    Unreadable(#[from] FileError),
    /// It is not a component that compiles, or a compile limit refused it.
    #[error(transparent)]
    NotAComponent(#[from] PluginError),
}

/// What a component file declares, and whether it loads under its kind's default
/// grants (the user's grants not counted) ([`Plugins::inspect`]).
#[derive(Clone, Debug)]
pub struct Inspection {
    /// The kind its exports say; None when it exports no single plugin kind.
    pub kind: Option<PluginKind>,
    /// Its imports, versioned (`crewbox:plugin/log@0.1.0`).
    pub imports: Vec<String>,
    /// Its exports, versioned.
    pub exports: Vec<String>,
    /// The component's size in bytes.
    pub size: usize,
    /// Every rule it breaks under its kind's default grants, linking included.
    pub violations: Vec<Violation>,
}

impl Inspection {
    /// Whether it loads under its kind's default grants (it breaks no rule).
    pub fn loads(&self) -> bool {
        self.violations.is_empty()
    }
}

/// What checking a component file against the rules found ([`Plugins::check`]).
#[derive(Clone, Debug)]
pub struct Checked {
    /// The name it was checked under: the file's stem, as a run names a plugin file.
    pub name: String,
    /// Every rule it breaks as the kind asked for (else the kind its exports say),
    /// under the grants a run would give it, linking included; empty means it loads.
    /// A component that does not compile, or that a compile limit refuses, has that
    /// as its one violation.
    pub violations: Vec<Violation>,
    /// What compiling it into the plugin cache did; None when it did not compile (why
    /// is among the violations).
    pub compiled: Option<Compiled>,
}

impl Checked {
    /// Whether it loads and links under the rules (no violation).
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// A component compiled ahead of its first run ([`Plugins::check`],
/// [`precompile_built`]): where its compiled code is now, and how long that took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compiled {
    /// Whether the first run finds it in the plugin cache.
    pub cache: CacheState,
    /// How long it took, the cache lookup included.
    pub elapsed: Duration,
}

/// Where a component compiled ahead of its first run is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheState {
    /// It was in the plugin cache already: loaded, not compiled.
    Hit,
    /// Compiled and stored in the plugin cache: the first run loads it from there.
    Stored,
    /// Compiled, but the plugin cache could not be written: the first run compiles it
    /// again.
    NotStored,
    /// Compiled, but there is no plugin cache (neither `XDG_CACHE_HOME` nor `HOME` is
    /// set): the first run compiles it.
    NoCache,
}

impl Compiled {
    fn of(runtime: &PluginRuntime, done: Precompiled) -> Self {
        let cache = match done.outcome {
            CacheOutcome::Hit => CacheState::Hit,
            CacheOutcome::Stored => CacheState::Stored,
            CacheOutcome::Compiled if runtime.has_disk_cache() => CacheState::NotStored,
            CacheOutcome::Compiled => CacheState::NoCache,
        };
        Self {
            cache,
            elapsed: done.elapsed,
        }
    }
}

/// What compiling a freshly built component into the plugin cache came to
/// ([`precompile_built`]). Only [`Precompile::Refused`] and [`Precompile::Unreadable`]
/// make the build unusable; without a cache, or when the compiler could not run, the
/// first run compiles the component instead.
#[derive(Debug)]
pub enum Precompile {
    /// Compiled (or found in the cache) ahead of the first run.
    Compiled(Compiled),
    /// No plugin cache (neither `XDG_CACHE_HOME` nor `HOME` is set): nothing was
    /// compiled.
    NoCache,
    /// The build left no component a run can use: a compile limit refused it, or it
    /// is not a valid component (the error names the plugin and the limit).
    Refused(PluginError),
    /// The built file cannot be read back (not a regular file, over the component size
    /// cap).
    Unreadable(FileError),
    /// Not compiled through no fault of the component (the compiler child could not
    /// run, the machine was too busy).
    NotCompiled(PluginError),
}

/// There is no compiled-plugin cache to show or prune ([`Plugins::cache_usage`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no plugin cache: neither XDG_CACHE_HOME nor HOME is set")]
pub struct NoCacheDir;

/// Reads a component file named by its author (regular files only, at most the
/// runtime's component size cap), with the name a run gives a plugin file: its stem.
fn read_file(runtime: &PluginRuntime, file: &Path) -> Result<(String, Vec<u8>), FileError> {
    let bytes =
        crate::plugin::file::read_component(file, runtime.compile_limits().max_component_bytes)?;
    let name = file
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    Ok((name, bytes))
}

impl Plugins {
    /// The kind, imports, exports and size of the component in `file`, and every rule
    /// it breaks under its kind's default grants. Blocking (compiles, or loads from the
    /// plugin cache).
    pub fn inspect(&self, file: &Path) -> Result<Inspection, InspectError> {
        let (name, bytes) = read_file(&self.runtime, file)?;
        let info = self.runtime.inspect_named(&name, &bytes)?;
        let grants = info.kind.map(Grants::defaults_for).unwrap_or_default();
        let violations = self.runtime.check(&name, &bytes, None, &grants);
        Ok(Inspection {
            kind: info.kind,
            imports: info.imports,
            exports: info.exports,
            size: info.size,
            violations,
        })
    }

    /// Checks the component in `file` against the rules as a plugin of `kind` (else of
    /// the kind its exports say), under the grants a run would give that file (its
    /// kind's defaults and the user's `[plugins.grants.NAME]`), after compiling it
    /// afresh into the plugin cache as a run's first load would. Only an unreadable file
    /// is an error; everything wrong with the component is a violation. Blocking.
    pub fn check(&self, file: &Path, kind: Option<PluginKind>) -> Result<Checked, FileError> {
        let (name, bytes) = read_file(&self.runtime, file)?;
        let source = PluginSource::File(file.to_owned());
        let (violations, precompiled) =
            self.runtime
                .check_precompiling(&name, &bytes, kind, |detected| {
                    detected
                        .map(|k| {
                            crate::engine::plugins::grants_for(
                                &name,
                                &source,
                                k,
                                &bytes,
                                &self.user_grants,
                            )
                        })
                        .unwrap_or_default()
                });
        // A refusal is among the violations; only a compile is reported beside them.
        let compiled = precompiled
            .ok()
            .map(|done| Compiled::of(&self.runtime, done));
        Ok(Checked {
            name,
            violations,
            compiled,
        })
    }

    /// The compiled-plugin cache in figures (where, how many entries and bytes, how many
    /// of another crewbox version, its cap); `prune` first removes the entries of other
    /// crewbox versions and the least recently used down to the cap. Blocking.
    pub fn cache_usage(&self, prune: bool) -> Result<CacheUsage, NoCacheDir> {
        self.runtime.cache_usage(prune).ok_or(NoCacheDir)
    }
}

/// After [`build_project`](crate::plugins::build_project): compiles the component at `path` into the plugin cache
/// exactly as a run's first load would (the same engine, compile limits, limited
/// compiler child and cache key), so that load is a cache hit. A refusal remembered
/// from before is not trusted: it compiles again. Only a plugin runtime that cannot
/// start is an error. Blocking.
pub fn precompile_built(path: &Path) -> Result<Precompile, PluginsError> {
    let runtime = runtime()?;
    if !runtime.has_disk_cache() {
        return Ok(Precompile::NoCache);
    }
    let (name, bytes) = match read_file(&runtime, path) {
        Ok(read) => read,
        Err(e) => return Ok(Precompile::Unreadable(e)),
    };
    Ok(match runtime.precompile(&name, &bytes) {
        Ok(done) => Precompile::Compiled(Compiled::of(&runtime, done)),
        Err(e @ (PluginError::Refused { .. } | PluginError::Compile { .. })) => {
            Precompile::Refused(e)
        }
        Err(e) => Precompile::NotCompiled(e),
    })
}

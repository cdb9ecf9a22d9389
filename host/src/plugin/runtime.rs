//! The engine: configuration, compilation (cached, off the async runtime), the import
//! rules, and loading a component into a ready-to-call [`Plugin`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use wasmtime::component::{Component, InstancePre};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::cache::{CacheOutcome, CacheUsage, DiskCache};
use super::call::{Exports, Plugin, PluginInner};
use super::compile::{self, CompileLimits, CompileRefusal, Compiler, Failure};
use super::error::PluginError;
use super::grants::{Grants, Rule, Violation, kinds_exported, violations};
use super::host;
use super::kind::PluginKind;
use super::limits::{ComponentCaps, Limits};

/// Where a plugin came from; shown to users and decides how far it may be trusted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "source", content = "path", rename_all = "lowercase")]
pub enum PluginSource {
    /// Embedded in the crewbox binary.
    Builtin,
    /// From the user's config directory.
    User(PathBuf),
    /// From the repository's `.crewbox/plugins/`.
    Repo(PathBuf),
    /// Named on the command line.
    File(PathBuf),
}

impl std::fmt::Display for PluginSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Builtin => f.write_str("builtin"),
            Self::User(p) => write!(f, "user:{}", p.display()),
            Self::Repo(p) => write!(f, "repo:{}", p.display()),
            Self::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

/// Engine-wide settings.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// Directory for compiled components; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// The most bytes the cache directory keeps (least recently used entries go first).
    pub cache_max_bytes: u64,
    /// How many instances may be live at once (pooling allocator slots).
    pub max_instances: u32,
    /// The most memory any plugin may be given (all its memories together); per-plugin
    /// [`Limits`] are clamped to it.
    pub max_memory_bytes: u64,
    /// Core instances, memories and tables one plugin may create.
    pub component_caps: ComponentCaps,
    /// Epoch tick: the resolution of call deadlines.
    pub epoch_tick: Duration,
    /// Limits on compiling an untrusted component.
    pub compile_limits: CompileLimits,
    /// How untrusted components are compiled.
    pub compiler: Compiler,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            cache_dir: default_cache_dir(),
            cache_max_bytes: DEFAULT_CACHE_MAX_BYTES,
            max_instances: 64,
            max_memory_bytes: 64 << 20,
            component_caps: ComponentCaps::default(),
            epoch_tick: Duration::from_millis(5),
            compile_limits: CompileLimits::default(),
            compiler: Compiler::InProcess,
        }
    }
}

/// The default cap of the compiled-plugin cache: room for about ten compiled
/// componentize-py plugins (about 50 MB each) and hundreds of Rust ones.
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 512 << 20;

/// `$XDG_CACHE_HOME/crewbox/plugins`, else `$HOME/.cache/crewbox/plugins`.
pub fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("crewbox").join("plugins"))
}

/// What a component declares, before any rule is applied.
#[derive(Clone, Debug, Serialize)]
pub struct ComponentInfo {
    /// The kind its exports say, if exactly one plugin export is present.
    pub kind: Option<PluginKind>,
    /// Every plugin kind it exports (normally one).
    pub kinds_exported: Vec<PluginKind>,
    /// Import names, versioned, e.g. `crewbox:plugin/log@0.1.0`.
    pub imports: Vec<String>,
    /// Export names, versioned.
    pub exports: Vec<String>,
    /// Size of the component in bytes.
    pub size: usize,
}

/// What compiling a component ahead of its first run did
/// ([`PluginRuntime::precompile`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Precompiled {
    /// Already cached, compiled and stored, or compiled without a cache to keep it.
    pub outcome: CacheOutcome,
    /// How long it took, the cache lookup included.
    pub elapsed: Duration,
}

/// The one violation of a component that does not compile (or was refused).
fn not_a_component(name: &str, kind: Option<PluginKind>, e: &PluginError) -> Violation {
    Violation {
        plugin: name.to_owned(),
        kind,
        interface: String::new(),
        rule: Rule::NotAComponent {
            reason: e.to_string(),
        },
        hint: None,
    }
}

/// Stops the epoch ticker when the last handle to the runtime goes away.
struct Ticker(Arc<AtomicBool>);

impl Drop for Ticker {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

pub(crate) struct RuntimeInner {
    pub(crate) engine: Engine,
    pub(crate) config: RuntimeConfig,
    cache: Option<DiskCache>,
    /// Refusals of this process, for runtimes without a disk cache.
    refused: Mutex<HashMap<Vec<u8>, CompileRefusal>>,
    _ticker: Ticker,
}

/// The plugin runtime: one wasmtime engine, its disk cache and its epoch ticker.
/// Cheap to clone.
#[derive(Clone)]
pub struct PluginRuntime {
    pub(crate) inner: Arc<RuntimeInner>,
}

impl PluginRuntime {
    /// Builds the engine (pooling allocator, epoch interruption) and starts the ticker.
    pub fn new(config: RuntimeConfig) -> Result<Self, PluginError> {
        let mut pool = PoolingAllocationConfig::default();
        let n = config.max_instances.max(1);
        let caps = config.component_caps;
        // Each component instance may take at most its caps from the pool, and the pool
        // holds the caps of every instance, so no plugin can starve another of slots.
        pool.total_component_instances(n)
            .max_core_instances_per_component(caps.instances)
            .max_memories_per_component(caps.memories)
            .max_tables_per_component(caps.tables)
            .total_core_instances(n * caps.instances)
            .total_memories(n * caps.memories)
            .total_tables(n * caps.tables)
            .total_stacks(n)
            .max_memory_size(usize::try_from(config.max_memory_bytes).unwrap_or(usize::MAX));
        let wasm = wasm_config(config.max_memory_bytes, Some(pool));
        let engine = Engine::new(&wasm).map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (tick_engine, tick_stop, tick) = (engine.clone(), stop.clone(), config.epoch_tick);
        std::thread::Builder::new()
            .name("crewbox-plugin-epoch".into())
            .spawn(move || {
                while !tick_stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    tick_engine.increment_epoch();
                }
            })
            .map_err(|e| PluginError::Engine(format!("cannot start the epoch ticker: {e}")))?;
        let cache = config
            .cache_dir
            .clone()
            .map(|dir| DiskCache::new(dir, &engine, config.cache_max_bytes));
        Ok(Self {
            inner: Arc::new(RuntimeInner {
                engine,
                config,
                cache,
                refused: Mutex::default(),
                _ticker: Ticker(stop),
            }),
        })
    }

    /// Compiles (or loads from cache) within the compile limits; `fresh` ignores a cached
    /// refusal and compiles again. Blocking.
    fn compile(
        &self,
        name: &str,
        bytes: &[u8],
        fresh: bool,
    ) -> Result<(Component, CacheOutcome), PluginError> {
        let inner = &*self.inner;
        let limits = inner.config.compile_limits;
        let refused = |refusal: CompileRefusal, cached: bool| match refusal {
            CompileRefusal::Invalid { reason } => PluginError::Compile {
                plugin: name.to_owned(),
                reason,
            },
            refusal => PluginError::Refused {
                plugin: name.to_owned(),
                refusal,
                cached,
            },
        };
        let memo_key = {
            use sha2::{Digest, Sha256};
            let mut k = Sha256::digest(bytes).to_vec();
            k.extend_from_slice(limits.key().as_bytes());
            k
        };
        if !fresh {
            let remembered = (inner.refused.lock().unwrap_or_else(|p| p.into_inner()))
                .get(&memo_key)
                .cloned();
            let cached =
                remembered.or_else(|| inner.cache.as_ref().and_then(|c| c.refusal(bytes, &limits)));
            if let Some(r) = cached {
                return Err(refused(r, true));
            }
        }
        if let Some(component) = inner
            .cache
            .as_ref()
            .and_then(|c| c.load(&inner.engine, bytes))
        {
            return Ok((component, CacheOutcome::Hit));
        }
        let notice = compile::SlowNotice::start(name, bytes.len());
        let compiled = compile::scan(bytes, &limits)
            .map_err(Failure::Refused)
            .and_then(|()| self.compile_now(bytes));
        drop(notice);
        let (component, serialized) = match compiled {
            Ok(done) => done,
            Err(Failure::Refused(r)) => {
                inner
                    .refused
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(memo_key, r.clone());
                if let Some(cache) = &inner.cache {
                    cache.store_refusal(bytes, &limits, &r);
                }
                return Err(refused(r, false));
            }
            Err(Failure::Starved(reason) | Failure::Broken(reason)) => {
                return Err(PluginError::Task {
                    plugin: name.to_owned(),
                    reason,
                });
            }
        };
        inner
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&memo_key);
        let outcome = match &inner.cache {
            Some(cache) => {
                cache.clear_refusal(bytes, &limits);
                match serialized.map_or_else(|| component.serialize(), Ok) {
                    Ok(code) => cache.store(bytes, &code),
                    Err(_) => CacheOutcome::Compiled,
                }
            }
            None => CacheOutcome::Compiled,
        };
        Ok((component, outcome))
    }

    /// Compiles: built-ins in-process, anything else the way the config says. Returns
    /// the serialized code too when it came from the compiler child.
    fn compile_now(&self, bytes: &[u8]) -> Result<(Component, Option<Vec<u8>>), Failure> {
        let inner = &*self.inner;
        let limits = &inner.config.compile_limits;
        if super::builtin::is_builtin(bytes) {
            return Component::new(&inner.engine, bytes)
                .map(|c| (c, None))
                .map_err(|e| Failure::Broken(format!("a built-in failed to compile: {e:#}")));
        }
        match &inner.config.compiler {
            Compiler::InProcess => {
                compile::on_thread(&inner.engine, bytes, limits).map(|c| (c, None))
            }
            Compiler::Child(program) => {
                let code =
                    compile::in_child(program, bytes, limits, inner.config.max_memory_bytes)?;
                // SAFETY: the code was produced by this same program's compiler for an
                // engine configured like this one ([`wasm_config`]); wasmtime checks the
                // header and the compatibility of every setting before using it.
                let component =
                    unsafe { Component::deserialize(&inner.engine, &code) }.map_err(|e| {
                        Failure::Broken(format!("the compiled plugin does not load: {e:#}"))
                    })?;
                Ok((component, Some(code)))
            }
        }
    }

    fn describe(&self, component: &Component, size: usize) -> ComponentInfo {
        let ty = component.component_type();
        let engine = &self.inner.engine;
        let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_owned()).collect();
        let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
        let kinds = kinds_exported(exports.iter().map(String::as_str));
        let kind = (kinds.len() == 1).then(|| kinds[0]);
        ComponentInfo {
            kind,
            kinds_exported: kinds,
            imports,
            exports,
            size,
        }
    }

    /// The disk cache in figures; `prune` first removes stale and least recently used
    /// entries down to the cap. `None` without a cache directory. Blocking.
    pub fn cache_usage(&self, prune: bool) -> Option<CacheUsage> {
        let cache = self.inner.cache.as_ref()?;
        let removed = prune.then(|| cache.prune(None, true));
        Some(CacheUsage {
            removed,
            ..cache.usage()
        })
    }

    /// The compile limits of this runtime (the component size cap bounds file reads).
    pub fn compile_limits(&self) -> &CompileLimits {
        &self.inner.config.compile_limits
    }

    /// Reads a component's kind, imports and exports. Blocking (compiles, or loads from cache).
    pub fn inspect(&self, bytes: &[u8]) -> Result<ComponentInfo, PluginError> {
        self.inspect_named("(inspected)", bytes)
    }

    /// [`PluginRuntime::inspect`] for the plugin `name`, the name a slow compile and
    /// an error say. Blocking.
    pub fn inspect_named(&self, name: &str, bytes: &[u8]) -> Result<ComponentInfo, PluginError> {
        Ok(self.inspect_cached(name, bytes)?.0)
    }

    /// [`PluginRuntime::inspect_named`], also saying whether the compiled code came
    /// from the disk cache or was compiled (and stored) now. Blocking.
    pub fn inspect_cached(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<(ComponentInfo, CacheOutcome), PluginError> {
        let (component, outcome) = self.compile(&super::text::escape(name), bytes, false)?;
        Ok((self.describe(&component, bytes.len()), outcome))
    }

    /// Every rule the component breaks as a plugin of `kind` (or of the kind its
    /// exports say) under `grants`. Empty means it loads. Blocking.
    pub fn check(
        &self,
        name: &str,
        bytes: &[u8],
        kind: Option<PluginKind>,
        grants: &Grants,
    ) -> Vec<Violation> {
        match self.compile(name, bytes, false) {
            Ok((component, _)) => self.violations_of(&component, name, bytes, kind, grants),
            Err(e) => vec![not_a_component(name, kind, &e)],
        }
    }

    /// Whether compiled components are kept on disk (a cache directory is configured).
    pub fn has_disk_cache(&self) -> bool {
        self.inner.cache.is_some()
    }

    /// Compiles `bytes` into the disk cache ahead of its first run (`crewbox plugin
    /// build`): exactly what a run's first load does — the same engine, compile limits,
    /// compiler (the limited child for an untrusted component) and cache key — so that
    /// load is a cache hit. A remembered refusal is not trusted: it compiles again.
    /// Blocking.
    pub fn precompile(&self, name: &str, bytes: &[u8]) -> Result<Precompiled, PluginError> {
        let started = std::time::Instant::now();
        let (_, outcome) = self.compile(&super::text::escape(name), bytes, true)?;
        Ok(Precompiled {
            outcome,
            elapsed: started.elapsed(),
        })
    }

    /// `crewbox plugin check`: compiles afresh into the cache (as
    /// [`PluginRuntime::precompile`]), then checks the component against the rules as
    /// a plugin of `kind` (or of the kind its exports say) under the grants
    /// `grants_for` gives that kind. Returns every rule it breaks (empty means it
    /// loads) and what the compile did. Blocking.
    pub fn check_precompiling(
        &self,
        name: &str,
        bytes: &[u8],
        kind: Option<PluginKind>,
        grants_for: impl FnOnce(Option<PluginKind>) -> Grants,
    ) -> (Vec<Violation>, Result<Precompiled, PluginError>) {
        let started = std::time::Instant::now();
        match self.compile(name, bytes, true) {
            Ok((component, outcome)) => {
                let precompiled = Precompiled {
                    outcome,
                    elapsed: started.elapsed(),
                };
                let detected = self.describe(&component, bytes.len()).kind;
                let grants = grants_for(kind.or(detected));
                let found = self.violations_of(&component, name, bytes, kind, &grants);
                (found, Ok(precompiled))
            }
            Err(e) => (vec![not_a_component(name, kind, &e)], Err(e)),
        }
    }

    /// Every rule the compiled `component` breaks as a `kind` under `grants`, linking
    /// included.
    fn violations_of(
        &self,
        component: &Component,
        name: &str,
        bytes: &[u8],
        kind: Option<PluginKind>,
        grants: &Grants,
    ) -> Vec<Violation> {
        let info = self.describe(component, bytes.len());
        let mut found = violations(
            name,
            kind,
            info.imports.iter().map(String::as_str),
            info.exports.iter().map(String::as_str),
            grants,
        );
        // Passing the rules is not loading: the imports must also link.
        if found.is_empty()
            && let Some(kind) = kind.or(info.kind)
            && let Err(reason) = self.link(component, kind, grants)
        {
            found.push(Violation {
                plugin: super::text::escape(name).into_owned(),
                kind: Some(kind),
                interface: String::new(),
                rule: Rule::DoesNotLink { reason },
                hint: None,
            });
        }
        super::producer::advise(&mut found, bytes);
        found
    }

    /// Links `component` as a `kind` under `grants` and pre-instantiates it, as `load`
    /// does; the error says why it would not load.
    fn link(
        &self,
        component: &Component,
        kind: PluginKind,
        grants: &Grants,
    ) -> Result<(InstancePre<host::HostState>, Exports), String> {
        let why = |e: wasmtime::Error| super::text::escape(&format!("{e:#}")).into_owned();
        let linker = host::linker(&self.inner.engine, grants).map_err(why)?;
        let pre = linker.instantiate_pre(component).map_err(why)?;
        let exports = Exports::new(kind, &pre).map_err(why)?;
        Ok((pre, exports))
    }

    /// Compiles (off the async runtime), checks every import against the kind and the
    /// grants, links only what is granted and pre-instantiates.
    pub async fn load(
        &self,
        name: &str,
        source: PluginSource,
        bytes: Arc<[u8]>,
        grants: Grants,
        limits: Option<Limits>,
    ) -> Result<Plugin, PluginError> {
        // A name is often a file stem: the repository chose it. It is only a label, so it
        // is escaped once here and every message naming the plugin is safe to print.
        let name = &*super::text::escape(name);
        let this = self.clone();
        let task_name = name.to_owned();
        let size = bytes.len();
        let advise_bytes = bytes.clone();
        let (component, cache) =
            tokio::task::spawn_blocking(move || this.compile(&task_name, &bytes, false))
                .await
                .map_err(|e| PluginError::Task {
                    plugin: name.to_owned(),
                    reason: e.to_string(),
                })??;
        let info = self.describe(&component, size);
        let mut denied = violations(
            name,
            None,
            info.imports.iter().map(String::as_str),
            info.exports.iter().map(String::as_str),
            &grants,
        );
        if !denied.is_empty() {
            // Reading the producer parses the component: off the async runtime.
            denied = tokio::task::spawn_blocking(move || {
                super::producer::advise(&mut denied, &advise_bytes);
                denied
            })
            .await
            .map_err(|e| PluginError::Task {
                plugin: name.to_owned(),
                reason: e.to_string(),
            })?;
            return Err(PluginError::Denied {
                plugin: name.to_owned(),
                violations: denied,
            });
        }
        // A component without violations exports exactly one plugin interface.
        let kind = info.kind.ok_or_else(|| PluginError::Contract {
            plugin: name.to_owned(),
            reason: "it exports no plugin interface".into(),
        })?;
        for dir in grants.read_only_dirs() {
            wasmtime_wasi::WasiCtx::builder()
                .preopened_dir(&dir.host, &dir.guest, wasmtime_wasi::FsPerms::ReadOnly)
                .map_err(|e| PluginError::Grant {
                    plugin: name.to_owned(),
                    path: dir.host.clone(),
                    reason: format!("{e:#}"),
                })?;
        }
        let (pre, exports) =
            self.link(&component, kind, &grants)
                .map_err(|reason| PluginError::Contract {
                    plugin: name.to_owned(),
                    reason,
                })?;
        let mut limits = limits.unwrap_or_else(|| Limits::for_kind(kind));
        limits.memory_bytes = limits.memory_bytes.min(self.inner.config.max_memory_bytes);
        Ok(Plugin {
            inner: Arc::new(PluginInner {
                name: name.into(),
                kind,
                source,
                imports: info.imports,
                grants,
                limits,
                cache,
                pre,
                exports,
                runtime: self.inner.clone(),
            }),
        })
    }
}

/// The engine configuration every plugin is compiled and run with. The compiler child
/// builds the same one without the pool (`pool: None`): the pool does not change the
/// compiled code, so what the child compiles loads here.
pub(crate) fn wasm_config(
    memory_reservation: u64,
    pool: Option<PoolingAllocationConfig>,
) -> Config {
    let mut wasm = Config::new();
    wasm.wasm_component_model(true)
        .epoch_interruption(true)
        .memory_reservation(memory_reservation)
        .memory_reservation_for_growth(0);
    if let Some(pool) = pool {
        wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    wasm
}

//! Calling a loaded plugin: a fresh store per call with a memory cap, an epoch deadline
//! and size caps on what comes back. A trap poisons an instance, so none is reused.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Instance, InstancePre, ResourceTable};
use wasmtime::{Store, Trap};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use super::bindings::log::Level;
use super::bindings::types::{
    AgentOutput, DispatchDecision, DispatchRequest, Outcome, RoleContext, RoleSpec, ValidatorInfo,
};
use super::bindings::{crew_role, dispatch, validate};
use super::cache::CacheOutcome;
use super::error::PluginFault;
use super::grants::Grants;
use super::host::model::{ModelAccess, ModelState};
use super::host::workspace::{WorkspaceState, WorkspaceView};
use super::host::{HostState, MemoryCap, log::LogState};
use super::kind::PluginKind;
use super::limits::Limits;
use super::runtime::{PluginSource, RuntimeInner};

/// What the host lends a plugin for one call. The default lends nothing.
#[derive(Clone, Default)]
pub struct CallEnv {
    /// The workspace the `workspace` import reads (if the plugin has that grant).
    pub workspace: Option<WorkspaceView>,
    /// The model the `model` import calls (if the plugin has that grant).
    pub model: Option<Arc<dyn ModelAccess>>,
}

/// The export accessors for the one interface a plugin implements.
pub(crate) enum Exports {
    Dispatch(dispatch::GuestIndices),
    Validate(validate::GuestIndices),
    Role(crew_role::GuestIndices),
}

impl Exports {
    pub(crate) fn new(kind: PluginKind, pre: &InstancePre<HostState>) -> wasmtime::Result<Self> {
        Ok(match kind {
            PluginKind::Dispatcher => Self::Dispatch(dispatch::GuestIndices::new(pre)?),
            PluginKind::Validator => Self::Validate(validate::GuestIndices::new(pre)?),
            PluginKind::Role => Self::Role(crew_role::GuestIndices::new(pre)?),
        })
    }
}

pub(crate) struct PluginInner {
    pub(crate) name: Arc<str>,
    pub(crate) kind: PluginKind,
    pub(crate) source: PluginSource,
    pub(crate) imports: Vec<String>,
    pub(crate) grants: Grants,
    pub(crate) limits: Limits,
    pub(crate) cache: CacheOutcome,
    pub(crate) pre: InstancePre<HostState>,
    pub(crate) exports: Exports,
    pub(crate) runtime: Arc<RuntimeInner>,
}

/// A loaded, checked, pre-instantiated plugin. Cheap to clone; calls may run concurrently.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) inner: Arc<PluginInner>,
}

/// Extra time past the epoch deadline before the host gives up on a call stuck in a
/// host import (the epoch only interrupts running wasm).
const HOST_GRACE: Duration = Duration::from_millis(250);

impl Plugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The kind detected from its exports.
    pub fn kind(&self) -> PluginKind {
        self.inner.kind
    }

    /// Where it came from.
    pub fn source(&self) -> &PluginSource {
        &self.inner.source
    }

    /// Its import names, versioned.
    pub fn imports(&self) -> &[String] {
        &self.inner.imports
    }

    /// What it was granted.
    pub fn grants(&self) -> &Grants {
        &self.inner.grants
    }

    /// The limits its calls run under.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Whether the compiled code came from the disk cache.
    pub fn cache_outcome(&self) -> CacheOutcome {
        self.inner.cache
    }

    /// Picks a mode for a request (dispatchers).
    pub async fn decide(&self, req: &DispatchRequest) -> Result<DispatchDecision, PluginFault> {
        let Exports::Dispatch(idx) = &self.inner.exports else {
            return Err(self.wrong(PluginKind::Dispatcher));
        };
        let d = self
            .run(CallEnv::default(), async |store, instance| {
                idx.load(&mut *store, instance)?
                    .call_decide(&mut *store, req)
                    .await
            })
            .await?;
        let cap = self.caps();
        cap.string("reason", &d.reason)?;
        cap.strings("tasks", &d.tasks)?;
        cap.list("signals", d.signals.len())?;
        for s in &d.signals {
            cap.string("signal name", &s.name)?;
            cap.string("signal detail", &s.detail)?;
        }
        Ok(d)
    }

    /// Describes the validator.
    pub async fn describe(&self) -> Result<ValidatorInfo, PluginFault> {
        let Exports::Validate(idx) = &self.inner.exports else {
            return Err(self.wrong(PluginKind::Validator));
        };
        let info = self
            .run(CallEnv::default(), async |store, instance| {
                idx.load(&mut *store, instance)?
                    .call_describe(&mut *store)
                    .await
            })
            .await?;
        let cap = self.caps();
        cap.string("name", &info.name)?;
        cap.string("description", &info.description)?;
        cap.strings("default criteria", &info.default_criteria)?;
        Ok(info)
    }

    /// Checks an agent's output. The inner `Err` is the validator saying it could not
    /// judge — an answer, not a fault and not a failed verdict.
    pub async fn validate(
        &self,
        env: CallEnv,
        output: &AgentOutput,
        criteria: &[String],
    ) -> Result<Result<crate::vocab::Verdict, String>, PluginFault> {
        let Exports::Validate(idx) = &self.inner.exports else {
            return Err(self.wrong(PluginKind::Validator));
        };
        let answer = self
            .run(env, async |store, instance| {
                idx.load(&mut *store, instance)?
                    .call_validate(&mut *store, output, criteria)
                    .await
            })
            .await?;
        let cap = self.caps();
        match &answer {
            Ok(v) => {
                cap.list("results", v.results.len())?;
                for r in &v.results {
                    cap.string("criterion", &r.criterion)?;
                    cap.string("detail", &r.detail)?;
                }
                if let Some(fix) = &v.fix_prompt {
                    cap.string("fix prompt", fix)?;
                }
            }
            Err(e) => cap.string("error", e)?,
        }
        Ok(answer.map(crate::vocab::Verdict::from))
    }

    /// Describes the role.
    pub async fn role_spec(&self) -> Result<RoleSpec, PluginFault> {
        let Exports::Role(idx) = &self.inner.exports else {
            return Err(self.wrong(PluginKind::Role));
        };
        let spec = self
            .run(CallEnv::default(), async |store, instance| {
                idx.load(&mut *store, instance)?
                    .call_spec(&mut *store)
                    .await
            })
            .await?;
        let cap = self.caps();
        cap.string("name", &spec.name)?;
        cap.string("description", &spec.description)?;
        if let Some(hint) = &spec.model_hint {
            cap.string("model hint", hint)?;
        }
        Ok(spec)
    }

    /// Builds the prompt for the agent playing this role.
    pub async fn role_prompt(
        &self,
        env: CallEnv,
        ctx: &RoleContext,
    ) -> Result<String, PluginFault> {
        let Exports::Role(idx) = &self.inner.exports else {
            return Err(self.wrong(PluginKind::Role));
        };
        let prompt = self
            .run(env, async |store, instance| {
                idx.load(&mut *store, instance)?
                    .call_prompt(&mut *store, ctx)
                    .await
            })
            .await?;
        self.caps().string("prompt", &prompt)?;
        Ok(prompt)
    }

    /// Reads the agent's reply for this role.
    pub async fn role_interpret(
        &self,
        env: CallEnv,
        ctx: &RoleContext,
        output: &str,
    ) -> Result<Outcome, PluginFault> {
        let Exports::Role(idx) = &self.inner.exports else {
            return Err(self.wrong(PluginKind::Role));
        };
        let outcome = self
            .run(env, async |store, instance| {
                idx.load(&mut *store, instance)?
                    .call_interpret(&mut *store, ctx, output)
                    .await
            })
            .await?;
        let cap = self.caps();
        match &outcome {
            Outcome::Done(s) | Outcome::Pass(s) => cap.string("outcome", s)?,
            Outcome::Fail(items) | Outcome::Plan(items) => cap.strings("outcome", items)?,
        }
        Ok(outcome)
    }

    fn wrong(&self, expected: PluginKind) -> PluginFault {
        PluginFault::WrongKind {
            plugin: self.name().to_owned(),
            expected,
            actual: self.inner.kind,
        }
    }

    fn caps(&self) -> Caps<'_> {
        Caps {
            plugin: &self.inner.name,
            limits: &self.inner.limits,
        }
    }

    fn new_store(&self, env: CallEnv) -> Result<Store<HostState>, PluginFault> {
        let inner = &*self.inner;
        let limits = inner.limits;
        let stdout = MemoryOutputPipe::new(limits.max_log_bytes as usize);
        let stderr = MemoryOutputPipe::new(limits.max_log_bytes as usize);
        let mut wasi = wasmtime_wasi::WasiCtx::builder();
        wasi.stdout(stdout.clone()).stderr(stderr.clone());
        for dir in inner.grants.read_only_dirs() {
            wasi.preopened_dir(&dir.host, &dir.guest, wasmtime_wasi::FsPerms::ReadOnly)
                .map_err(|e| PluginFault::Instantiate {
                    plugin: self.name().to_owned(),
                    detail: format!("{}: {e:#}", dir.host.display()),
                })?;
        }
        let state = HostState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            memory: MemoryCap::new(limits.memory_bytes, inner.runtime.config.component_caps),
            log: LogState::new(inner.name.clone(), limits.max_log_bytes),
            workspace: WorkspaceState {
                view: env
                    .workspace
                    .filter(|_| inner.grants.has_workspace())
                    .map(Arc::new),
                root: Arc::default(),
                max_read: limits.max_read_bytes,
                max_diff: limits.max_string_bytes as usize,
            },
            model: ModelState::new(
                env.model.filter(|_| inner.grants.model_budget().is_some()),
                inner.grants.model_budget(),
            ),
            stdout,
            stderr,
        };
        let mut store = Store::new(&inner.runtime.engine, state);
        store.limiter(|s| &mut s.memory);
        // Bounds what lifting one answer (or one host call's arguments) may copy onto the
        // host, counted while it is copied: strings by their bytes, lists by their items.
        // Many list entries pointing at one guest buffer are charged for every entry, so
        // a guest cannot make the host allocate more than this per transfer.
        store.set_hostcall_fuel(usize::try_from(limits.max_answer_bytes).unwrap_or(usize::MAX));
        // Every epoch tick, a running guest yields to the async executor (so a spinning
        // plugin never holds a runtime worker thread) until its wall-clock deadline,
        // then it is interrupted (a `Deadline` fault).
        let deadline = std::time::Instant::now() + limits.deadline;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            Ok(if std::time::Instant::now() >= deadline {
                wasmtime::UpdateDeadline::Interrupt
            } else {
                wasmtime::UpdateDeadline::Yield(1)
            })
        });
        Ok(store)
    }

    /// Instantiates in a fresh store, runs `f`, and turns every failure into a fault.
    async fn run<R>(
        &self,
        env: CallEnv,
        f: impl AsyncFnOnce(&mut Store<HostState>, &Instance) -> wasmtime::Result<R>,
    ) -> Result<R, PluginFault> {
        let mut store = self.new_store(env)?;
        let limits = self.inner.limits;
        let result = {
            let store = &mut store;
            let work = async move {
                let instance = self
                    .inner
                    .pre
                    .instantiate_async(&mut *store)
                    .await
                    .map_err(|e| (true, e))?;
                f(store, &instance).await.map_err(|e| (false, e))
            };
            tokio::time::timeout(limits.deadline + HOST_GRACE, work).await
        };
        self.flush_stdio(&mut store);
        let plugin = self.name().to_owned();
        match result {
            Ok(Ok(r)) => Ok(r),
            Err(_elapsed) => Err(PluginFault::Deadline {
                plugin,
                ms: limits.deadline.as_millis() as u64,
            }),
            Ok(Err(_)) if store.data().memory.hit => Err(PluginFault::MemoryLimit {
                plugin,
                limit: limits.memory_bytes,
            }),
            Ok(Err((_, e))) if is_transfer_cap(&e) => Err(PluginFault::TransferTooLarge {
                plugin,
                limit: limits.max_answer_bytes,
            }),
            Ok(Err((_, e))) if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) => {
                Err(PluginFault::Deadline {
                    plugin,
                    ms: limits.deadline.as_millis() as u64,
                })
            }
            Ok(Err((true, e))) if e.downcast_ref::<Trap>().is_none() => {
                Err(PluginFault::Instantiate {
                    plugin,
                    detail: super::text::escape(&format!("{e:#}")).into_owned(),
                })
            }
            // The backtrace carries the guest's own function names: escaped. What the
            // guest said before (an exception, a panic message) is escaped already.
            Ok(Err((_, e))) => Err(PluginFault::Trap {
                plugin,
                said: store.data().log.last_words(),
                detail: super::text::escape(&format!("{e:?}")).into_owned(),
            }),
        }
    }

    /// Moves what the guest printed into the log, under the same per-call byte budget.
    fn flush_stdio(&self, store: &mut Store<HostState>) {
        let state = store.data_mut();
        for (pipe, level, stream) in [
            (&state.stdout, Level::Info, "stdout"),
            (&state.stderr, Level::Warn, "stderr"),
        ] {
            let bytes = pipe.contents();
            if bytes.is_empty() {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            for line in text.lines().filter(|l| !l.is_empty()) {
                if stream == "stderr" {
                    state.log.remember(line);
                }
                state.log.emit(level, &format!("[{stream}] {line}"));
            }
        }
    }
}

/// Whether wasmtime stopped a lift because the store's hostcall fuel ran out. Its error
/// type is private, so this matches the message of the pinned wasmtime version (a test
/// of the typed fault guards it).
fn is_transfer_cap(e: &wasmtime::Error) -> bool {
    e.chain().any(|c| {
        c.to_string()
            .contains("fuel allocated for hostcalls has been exhausted")
    })
}

/// Size caps on what a guest returns, checked after the call.
struct Caps<'a> {
    plugin: &'a str,
    limits: &'a Limits,
}

impl Caps<'_> {
    fn string(&self, what: &'static str, s: &str) -> Result<(), PluginFault> {
        self.check(what, s.len() as u64, self.limits.max_string_bytes)
    }

    fn list(&self, what: &'static str, len: usize) -> Result<(), PluginFault> {
        self.check(what, len as u64, self.limits.max_list_items)
    }

    fn strings(&self, what: &'static str, items: &[String]) -> Result<(), PluginFault> {
        self.list(what, items.len())?;
        items.iter().try_for_each(|s| self.string(what, s))
    }

    fn check(&self, what: &'static str, size: u64, limit: u64) -> Result<(), PluginFault> {
        if size > limit {
            return Err(PluginFault::OutputTooLarge {
                plugin: self.plugin.to_owned(),
                what,
                size,
                limit,
            });
        }
        Ok(())
    }
}

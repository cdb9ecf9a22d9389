//! Host side of each plugin import, one small module per interface, plus the store
//! state and the linker that links only what a plugin is granted.

mod beneath;
pub(crate) mod log;
pub(crate) mod model;
pub(crate) mod workspace;

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime::{ResourceLimiter, Result};
use wasmtime_wasi::p2::bindings as wasi;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::bindings;
use super::grants::Grants;
use super::limits::ComponentCaps;

/// Everything one call's store holds; each interface sees only its own field.
pub(crate) struct HostState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) memory: MemoryCap,
    pub(crate) log: log::LogState,
    pub(crate) workspace: workspace::WorkspaceState,
    pub(crate) model: model::ModelState,
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The resource caps of one call's store, which holds exactly one plugin instance: its
/// memories are summed (a component may instantiate several core modules, each with
/// its own memory), and the number of core instances, memories and tables is capped.
/// A refused `memory.grow` surfaces in the guest as an allocation failure (usually a
/// trap); only the `hit` flag tells the host the real cause.
pub(crate) struct MemoryCap {
    /// Bytes all memories of the plugin may hold together.
    pub(crate) limit: u64,
    /// Bytes they hold now.
    pub(crate) used: u64,
    /// The growth last allowed, taken back if the grow then fails.
    pub(crate) pending: u64,
    /// Whether a growth was refused for the cap.
    pub(crate) hit: bool,
    /// Core instances, memories and tables the store may create.
    pub(crate) counts: ComponentCaps,
}

/// Elements any one plugin's tables may hold together.
const MAX_TABLE_ELEMENTS: u64 = 100_000;

impl MemoryCap {
    pub(crate) fn new(limit: u64, counts: ComponentCaps) -> Self {
        Self {
            limit,
            used: 0,
            pending: 0,
            hit: false,
            counts,
        }
    }
}

impl ResourceLimiter for MemoryCap {
    /// Called for every memory of the store, including its initial allocation
    /// (`current` = 0), so `used` is the plugin's total.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        let growth = (desired as u64).saturating_sub(current as u64);
        if self.used.saturating_add(growth) > self.limit {
            self.hit = true;
            return Ok(false);
        }
        self.used += growth;
        self.pending = growth;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> Result<()> {
        self.used = self.used.saturating_sub(std::mem::take(&mut self.pending));
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        Ok(desired as u64 <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        self.counts.instances as usize
    }

    fn memories(&self) -> usize {
        self.counts.memories as usize
    }

    fn tables(&self) -> usize {
        self.counts.tables as usize
    }
}

/// Selects one field of [`HostState`] for an interface's host trait.
pub(crate) struct Slice<F>(std::marker::PhantomData<F>);

impl HasData for Slice<log::LogState> {
    type Data<'a> = &'a mut log::LogState;
}
impl HasData for Slice<workspace::WorkspaceState> {
    type Data<'a> = &'a mut workspace::WorkspaceState;
}
impl HasData for Slice<model::ModelState> {
    type Data<'a> = &'a mut model::ModelState;
}

/// Links the sandboxed WASI set (empty context) and exactly the granted crewbox imports.
pub(crate) fn linker(engine: &wasmtime::Engine, grants: &Grants) -> Result<Linker<HostState>> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
    use wasmtime_wasi::random::{WasiRandom, WasiRandomView};

    let mut l = Linker::<HostState>::new(engine);
    // Guests built against older 0.2.x WASI minors resolve to the same host functions.
    wasi::io::error::add_to_linker::<HostState, Table>(&mut l, |s| &mut s.table)?;
    wasi::io::poll::add_to_linker::<HostState, Table>(&mut l, |s| &mut s.table)?;
    wasi::io::streams::add_to_linker::<HostState, Table>(&mut l, |s| &mut s.table)?;
    wasi::clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(&mut l, HostState::clocks)?;
    wasi::clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(
        &mut l,
        HostState::clocks,
    )?;
    wasi::random::random::add_to_linker::<HostState, WasiRandom>(&mut l, HostState::random)?;
    wasi::random::insecure::add_to_linker::<HostState, WasiRandom>(&mut l, HostState::random)?;
    wasi::random::insecure_seed::add_to_linker::<HostState, WasiRandom>(&mut l, HostState::random)?;
    wasi::cli::exit::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::environment::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::stdin::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::stdout::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::stderr::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_input::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_output::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    wasi::cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(&mut l, HostState::cli)?;
    if !grants.read_only_dirs().is_empty() {
        wasi::filesystem::types::add_to_linker::<HostState, WasiFilesystem>(
            &mut l,
            HostState::filesystem,
        )?;
        wasi::filesystem::preopens::add_to_linker::<HostState, WasiFilesystem>(
            &mut l,
            HostState::filesystem,
        )?;
    }
    // `types` has no functions; an empty instance satisfies the import.
    l.instance("crewbox:plugin/types@0.1.0")?;
    if grants.has_log() {
        bindings::log::add_to_linker::<HostState, Slice<log::LogState>>(&mut l, |s| &mut s.log)?;
    }
    if grants.has_workspace() {
        bindings::workspace::add_to_linker::<HostState, Slice<workspace::WorkspaceState>>(
            &mut l,
            |s| &mut s.workspace,
        )?;
    }
    if grants.model_budget().is_some() {
        bindings::model::add_to_linker::<HostState, Slice<model::ModelState>>(&mut l, |s| {
            &mut s.model
        })?;
    }
    Ok(l)
}

/// The resource table alone, for `wasi:io`.
struct Table;

impl HasData for Table {
    type Data<'a> = &'a mut ResourceTable;
}

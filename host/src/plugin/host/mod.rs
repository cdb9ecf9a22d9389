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

/// A memory cap that remembers it was hit: a refused `memory.grow` surfaces in the
/// guest as an allocation failure (usually a trap), and only this flag tells the host
/// the real cause.
pub(crate) struct MemoryCap {
    pub(crate) limit: u64,
    pub(crate) hit: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        if desired as u64 > self.limit {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        Ok(desired <= 100_000)
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

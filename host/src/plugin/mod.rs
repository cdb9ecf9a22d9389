//! The WebAssembly plugin runtime: one `bindgen!`, deny-by-default grants, limits, cache.
//!
//! ```no_run
//! # async fn demo(bytes: std::sync::Arc<[u8]>) -> Result<(), Box<dyn std::error::Error>> {
//! use crewbox::unstable::plugin::*;
//! let runtime = PluginRuntime::new(RuntimeConfig::default())?;
//! let grants = Grants::none().log();
//! let plugin = runtime.load("mine", PluginSource::Builtin, bytes, grants, None).await?;
//! let request = DispatchRequest { prompt: "fix the bug".into(), team: None, available_modes: vec![Mode::Single] };
//! let decision = plugin.decide(&request).await?;
//! # let _ = decision; Ok(()) }
//! ```

mod bindings;
pub mod build;
pub mod builtin;
mod cache;
mod call;
mod compile;
pub mod discover;
mod error;
pub mod file;
mod grants;
mod host;
mod kind;
mod limits;
pub mod producer;
mod runtime;
pub mod scaffold;
pub mod text;
pub mod verdict;

pub use crate::vocab::{CriterionResult, Verdict};
pub use bindings::types::{
    Access, AgentOutput, AgentStatus, DispatchDecision, DispatchRequest, Mode, Outcome,
    RoleContext, RoleSpec, Signal, ValidatorInfo,
};
pub use bindings::workspace::ChangeKind;
pub use cache::{CacheOutcome, CacheUsage, Removed};
pub use call::{CallEnv, Plugin};
pub use compile::{COMPILER_ARG, CompileLimits, CompileRefusal, Compiler, compiler_main};
pub use error::{PluginError, PluginFault};
pub use grants::{Capability, Grants, ModelBudget, ReadOnlyDir, Rule, UserGrant, Violation};
pub use host::model::{ModelAccess, ModelReply};
pub use host::workspace::WorkspaceView;
pub use kind::PluginKind;
pub use limits::{ComponentCaps, Limits};
pub use runtime::{
    ComponentInfo, DEFAULT_CACHE_MAX_BYTES, PluginRuntime, PluginSource, Precompiled,
    RuntimeConfig, default_cache_dir,
};

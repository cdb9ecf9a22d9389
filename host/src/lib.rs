//! crewbox runs crews of AI coding agents on a git repository, autonomously and safely.
//!
//! The library's API is small: open a [`Repository`], get its [`Engine`], and
//! [`run`](Engine::run) or [`resume`](Engine::resume) [`RunRequest`]s into
//! [`RunReport`]s; read [`status`](Repository::status), [`reports`](Repository::report)
//! and, through a [`Watch`](Repository::watch), the event log; or [subscribe](Engine::subscribe) to a
//! running engine's typed [`Event`]s. The `crewbox` binary is built on it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use crewbox::{Event, ModeChoice, Mode, Repository, RunRequest};
//! let repo = Repository::open(None, None)?;
//! let engine = repo.engine(tokio_util::sync::CancellationToken::new()).await?;
//! let mut events = engine.subscribe();
//! tokio::spawn(async move {
//!     while let Ok(e) = events.recv().await {
//!         if let Event::ToolCall { tool, ok, .. } = e.event {
//!             println!("{tool}: {ok}");
//!         }
//!     }
//! });
//! let mut req = RunRequest::new("fix the failing test");
//! req.mode = Some(ModeChoice::Mode(Mode::Crew));
//! let report = engine.run(req).await?;
//! println!("{}", report.render_text());
//! # Ok(()) }
//! ```
//!
//! Modules mirror the loop (see ARCHITECTURE.md at the repository root) and are private to the crate; [`unstable`]
//! re-exports what crewbox's test suite and benches use of them, and nothing else.

// Text reaches a terminal only through `text`'s escaping sink (see `text::stdout`).
#![warn(clippy::print_stdout, clippy::print_stderr)]

pub(crate) mod agent;
pub(crate) mod backoff;
pub(crate) mod batch;
pub(crate) mod child;
pub(crate) mod config;
pub(crate) mod control;
pub(crate) mod engine;
pub mod event;
pub(crate) mod fs;
pub(crate) mod ids;
pub(crate) mod mcp;
pub(crate) mod observe;
pub(crate) mod paths;
pub(crate) mod plugin;
pub(crate) mod process;
pub(crate) mod provider;
pub(crate) mod redact;
pub(crate) mod remote;
pub(crate) mod replay;
mod repository;
// The sandbox helper's and server's own lines are a protocol to crewbox (a nonce and a
// setup error, the probe's JSON) or system errors, never text an agent wrote.
#[allow(clippy::print_stdout, clippy::print_stderr, clippy::disallowed_methods)]
pub(crate) mod sandbox;
pub(crate) mod schedule;
pub(crate) mod store;
pub(crate) mod team;
pub mod text;
pub(crate) mod tls;
pub(crate) mod tool;
pub(crate) mod trust;
pub mod vocab;
pub(crate) mod worktree;

pub use crewbox_handoff as handoff;

pub use engine::{
    AgentReport, ChainLink, CrewDetails, CrewExecution, DEFAULT_FIX_ROUNDS, DEMO_SCRIPT, Decision,
    Engine, EngineError, ErrorClass, EvaluatorKind, IntegrationReport, MAX_FIX_ROUNDS, MemberEntry,
    MembersDetails, MergeRecord, ModeDetails, OrchestrateDetails, PluginLoadError, PluginStep,
    ReflectDetails, RoleCall, RunDetails, RunFault, RunReport, RunRequest, SingleDetails,
    SwarmDetails, Tokens, UsageError, VoteGroup, check_model_name,
};
pub use event::{Event, EventKind, EventRecord};
pub use ids::{AgentId, RunId};
pub use observe::{flush_telemetry, init_tracing};
/// Serde for paths that may not be UTF-8: a string when it is, else its bytes (how
/// every path in crewbox's JSON is written).
pub use paths::serde_path;
/// Serves a pool of agent tasks from NATS JetStream as a scale-out worker until
/// `shutdown` (tasks in progress finish first): each task's repository is cloned and
/// opened as a [`Repository`] on this machine, under the user's own configuration.
pub use repository::serve_worker;
pub use repository::{
    AddJobError, AddedJob, ControlError, DeadTarget, DropError, HealthFacts, JobTiming, NewJob,
    OpenError, Queued, ReadError, RecordKind, Repository, RunList, RunTree, Scheduler, Status,
    Watch,
};
pub use repository::{
    ConfigInForce, Exported, McpServerInForce, McpTransport, RecordingError, RunProvider,
    TeamExport, TeamExportError, Worktrees,
};
pub use vocab::{
    Access, DecisionSource, ExitReason, Isolation, Mode, ModeChoice, RunStatus, Strategy, Trend,
    WorkerStatus,
};

/// Masking of secrets at every sink: each registered secret (at least
/// [`MIN_SECRET_LEN`](secrets::MIN_SECRET_LEN) bytes) is replaced by [`MASK`](secrets::MASK)
/// in everything crewbox writes — the store, logs, telemetry, reports, the terminal.
/// The registry is the process's own.
pub mod secrets {
    pub use crate::redact::{MASK, MIN_SECRET_LEN, clean, register, register_secret_env};
}

/// Which repositories the user trusts (`crewbox trust`): kept in the user's own state
/// directory, never in a repository, keyed by the canonical root, and covering the
/// repository's crewbox files as they were when trusted.
pub mod user_trust {
    pub use crate::repository::trusting::{
        ApprovedServer, InitError, Initialized, TrustCommandError, Trusted, TrustedRepo, UserTrust,
        Written, init_repository, repo_config_keys, repository_root,
    };
    pub use crate::trust::store::TrustRecord;
    pub use crate::trust::{Standing, TrustError};
}

/// crewbox as an MCP server (`crewbox mcp serve`): any MCP client hands work to a crew
/// over stdio or Streamable HTTP, on an engine of a [`Repository`].
pub mod mcp_server {
    pub use crate::mcp::serve::http::{HttpOptions, serve as serve_http};
    pub use crate::mcp::serve::{ServeError, Server};
}

/// WebAssembly plugins outside a run: the plugins a place sees ([`Repository::plugins`],
/// [`plugins::Plugins`]), a validator run on an output, a component file inspected or
/// checked, a plugin project scaffolded, built and compiled into the plugin cache, and
/// the cache itself (the `crewbox plugin` and `validate` commands).
pub mod plugins {
    pub use crate::engine::dispatch::AutoDecision;
    /// The project is built with its language's own toolchain (installed into the
    /// project when missing; its output goes to stderr as it prints); then
    /// [`precompile_built`] makes the component's first run a cache hit.
    pub use crate::plugin::build::build as build_project;
    pub use crate::plugin::build::{BuildError, Built};
    pub use crate::plugin::file::FileError;
    /// The plugin project `crewbox plugin new` makes, in `dir/NAME`: the WIT contract
    /// this crewbox speaks, sources, toolchain settings, a README.
    pub use crate::plugin::scaffold::create as new_project;
    pub use crate::plugin::scaffold::{Lang, ScaffoldError};
    pub use crate::plugin::{AgentOutput, AgentStatus, DispatchDecision, PluginFault, verdict};
    pub use crate::plugin::{
        CacheOutcome, CacheUsage, Grants, PluginKind, PluginSource, Removed, Violation,
    };
    pub use crate::repository::authoring::{
        CacheState, Checked, Compiled, InspectError, Inspection, NoCacheDir, Precompile,
        precompile_built,
    };
    pub use crate::repository::plugins::{
        EntryError, ExplainError, PluginEntry, Plugins, PluginsError, ValidateError, Validated,
    };
}

/// The entry points only crewbox's own binary calls, first thing in its `main`.
#[doc(hidden)]
pub mod entry {
    /// When this process was started as the sandbox helper, runs it and never returns.
    #[cfg(target_os = "linux")]
    pub fn run_if_sandbox_helper() {
        crate::sandbox::helper::run_if_helper();
    }

    /// When this process was started as the plugin compiler child, compiles and returns
    /// its exit code; None otherwise.
    pub fn plugin_compiler_main() -> Option<std::process::ExitCode> {
        crate::plugin::compiler_main()
    }
}

/// Types the public API mentions that belong to the lower floors.
pub mod types {
    pub use crate::batch::{DeliveryKind, MemberCounts};
    pub use crate::config::effective::{Ignored, IgnoredAction, Setting, Source};
    pub use crate::config::user::TelemetryFile;
    pub use crate::config::{ConfigError, ExecutorKind, ProviderChoiceError};
    pub use crate::control::{MAX_MESSAGE_BYTES, Refused};
    pub use crate::mcp::McpError;
    pub use crate::mcp::config::ServerSource;
    pub use crate::mcp::project::{FILE as MCP_PROJECT_FILE, RepoServer, RepoServerState};
    pub use crate::mcp::tools::OfferedTool;
    pub use crate::observe::history::DispatchHistogram;
    pub use crate::observe::tree::{AgentTree, Visit};
    pub use crate::plugin::{CriterionResult, PluginError, PluginFault, PluginKind, Verdict};
    pub use crate::provider::breaker::{BreakerState, BreakerStatus};
    pub use crate::provider::props::ServerProps;
    pub use crate::provider::{ProviderError, Usage};
    pub use crate::remote::WorkerError;
    pub use crate::remote::worker::{WorkerOptions, WorkerStats};
    pub use crate::replay::{ReplayError, ReplayOptions, ReplayOutcome, ReplayPlan, ReplayReport};
    pub use crate::repository::{McpCall, McpConnection, McpUseError};
    pub use crate::repository::{ProbeOutcome, ProviderProbe};
    pub use crate::sandbox::ProbeReport;
    pub use crate::schedule::daemon::{DaemonError, FireNotice};
    pub use crate::schedule::lock::{DaemonLock, LockError};
    pub use crate::schedule::spec::ScheduleError;
    pub use crate::schedule::{CatchUp, Overlap};
    pub use crate::store::audit::{Anchor as AuditAnchor, AuditRecord, Verdict as AuditVerdict};
    pub use crate::store::{
        AgentCounts, AgentNode, AgentWorker, RetryOverrides, RunRecord, StoreError,
    };
    pub use crate::store::{AgentRecord, DeadLetter, MIN_TAIL, SCHEMA_VERSION};
    pub use crate::store::{AgentRow, RunRow, StepOutline, StepState};
    pub use crate::store::{FireStatus, ScheduleRecord};
    pub use crate::team::export::{ExportError, ExportFormat, ExportReport};
    pub use crate::team::{
        Discovered, FindTeamError, Member, PackNote, SkippedWhat, Team, TeamError, TeamSource,
    };
    pub use crate::trust::Trust;
    pub use crate::trust::rules::{RepoKey, RepoRule};
    pub use crate::vocab::AgentState;
    pub use crate::vocab::Exceeded;
    pub use crate::worktree::branches::BranchInfo;
    pub use crate::worktree::{BranchArtifact, MergeOutcome, WorktreeError};
    pub use crate::worktree::{PruneReason, PruneReport, WorktreeInfo, WorktreeState};
}

/// **Not a stable API.** The items of the crate's internal floors that crewbox's
/// integration test suite (`tests/all/`) and its benches (`benches/`) use directly (the
/// binary uses none) (the manager, the plugin runtime, worktrees,
/// providers, tools, the store), each named. Anything here may change or vanish in
/// any release; other programs should use the crate-level API.
#[doc(hidden)]
pub mod unstable {
    /// Agents: lifecycle, permissions, quotas, the turn loop and the manager.
    pub mod agent {
        pub use crate::agent::{AgentState, manager, permissions, quota, runner};
    }
    /// Batching of spawns and the joins that deliver their results. All of it: the
    /// suite names six items, but without the rest, methods only the unit tests call
    /// would be dead code.
    pub mod batch {
        pub use crate::batch::*;
    }
    /// Configuration files.
    pub mod config {
        pub use crate::config::{Config, ExecutorKind, Quotas};
    }
    /// Engine internals the suite and benches use directly, and the reflect loop's
    /// state machine, which the suite does not use: its accessors (and its `Paused`
    /// outcome) are only the unit tests' and would be dead code without it.
    pub mod engine {
        pub use crate::engine::model_access::ProviderModel;
        pub use crate::engine::modes::team::reflect_loop;
        pub use crate::engine::plugins::{PluginSet, grants_for};
    }
    /// Ids.
    pub mod ids {
        pub use crate::ids::{AgentId, RunId};
    }
    /// MCP servers: config, the SDK client, the per-run pool.
    pub mod mcp {
        pub use crate::mcp::{AgentMcp, Pool, config};
    }
    /// The WebAssembly plugin runtime.
    pub mod plugin {
        pub use crate::plugin::*;
    }
    /// Where crewbox keeps its files (XDG directories).
    pub mod paths {
        pub use crate::paths::{repo_id, repo_state_dir};
    }
    /// Model providers.
    pub mod provider {
        pub use crate::provider::*;
    }
    /// The scale-out task wire format.
    pub mod remote {
        pub use crate::remote::task::{ForwardedExchange, TaskResult, WIRE_VERSION};
    }
    /// The process sandbox agents' commands run in.
    pub mod sandbox {
        pub use crate::sandbox::{
            AgentSandbox, AgentScope, Helper, Sandbox, SandboxConfig, SandboxMode, SandboxOptions,
            helper, layout,
        };
    }
    /// The SQLite store.
    pub mod store {
        pub use crate::store::{
            AgentRecord, AgentStats, AgentWorker, ControlKind, DB_FILE, ExchangeWrite, FireStatus,
            RemoteResult, RunRecord, SCHEMA_VERSION, StepRecord, StepState, Store, StoreError,
            now_ms,
        };
    }
    /// Teams' limits.
    pub mod team {
        pub use crate::team::limits;
    }
    /// Agent tools.
    pub mod tool {
        pub use crate::tool::{
            Capability, SpawnError, Spawner, ToolContext, ToolError, ToolOutput, ToolRegistry,
            registry,
        };
    }
    /// Where a repository's root is; and the trust store, which the suite does not use
    /// (its `dir` is only the unit tests' and would be dead code without it).
    pub mod trust {
        pub use crate::trust::{RepoRoot, TrustStore};
    }
    /// Git worktrees.
    pub mod worktree {
        pub use crate::worktree::{
            BranchArtifact, ChangeKind, ChangedPath, FinishOutcome, Identity, PruneReason,
            WorktreeError, WorktreeManager, WorktreeOptions, WorktreeState,
            sanitize_branch_component,
        };
    }
}

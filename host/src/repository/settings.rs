//! What the settings commands ask a repository, and the actions they take on it: the
//! configuration in force (`crewbox config`), its agent worktrees (`crewbox worktree`),
//! a run's recording (`crewbox export`, `crewbox replay`) and writing a team out
//! (`crewbox team export`). Typed answers, typed errors; the binary only renders them.

use std::path::PathBuf;

use crate::config::effective::{Ignored, Setting, Source};
use crate::config::provider::ProviderChoiceError;
use crate::ids::RunId;
use crate::mcp::config::{ServerSource, Transport};
use crate::mcp::project::RepoServer;
use crate::replay::{ReplayError, ReplayOptions, ReplayPlan};
use crate::store::{RunRecord, Store};
use crate::team::Team;
use crate::team::export::{ExportError, ExportFormat, ExportReport};
use crate::trust::rules::{REPO_KEYS, RepoKey, UNLISTED};
use crate::trust::{Trust, TrustError, TrustStore};
use crate::worktree::{PruneReport, WorktreeInfo, WorktreeManager, WorktreeOptions};

use super::{ReadError, RecordKind, Repository};

/// The configuration in force here ([`Repository::config_in_force`]): the user's
/// settings and what the repository may set, each value with where it came from, the
/// MCP servers agents may be granted, what of the repository's was not applied, and
/// the table of what a repository may set.
#[derive(Debug)]
pub struct ConfigInForce {
    /// The repository root.
    pub repository: PathBuf,
    /// Whether the user trusts it.
    pub trust: Trust,
    /// Why the trust store could not be read, or why a trusted repository counts as
    /// untrusted again (its files changed).
    pub trust_error: Option<String>,
    /// This repository's state directory.
    pub state_dir: PathBuf,
    /// The configuration files read, user first.
    pub files: Vec<PathBuf>,
    /// The provider a run would use without `--provider`, or why a run cannot start.
    pub run_provider: Result<RunProvider, ProviderChoiceError>,
    /// Every setting in force with its source, in a stable order.
    pub settings: Vec<Setting>,
    /// The MCP servers defined (the user's, and the repository's the user approved),
    /// by name.
    pub mcp_servers: Vec<McpServerInForce>,
    /// The servers every agent is granted unless a run says otherwise (`[mcp] default`).
    pub mcp_default: Vec<String>,
    /// Each server of the repository's `.mcp.json`, and what became of it.
    pub repo_mcp: Vec<RepoServer>,
    /// The repository settings that were ignored or clamped, and why.
    pub ignored: Vec<Ignored>,
    /// What a repository's `.crewbox/config.toml` may set, one row a key; the last row
    /// is the rule for keys not listed.
    pub repo_rules: Vec<RepoKey>,
}

/// The provider a run would use ([`ConfigInForce::run_provider`]).
#[derive(Clone, Debug)]
pub struct RunProvider {
    /// Its name.
    pub name: String,
    /// What chose it.
    pub chosen_by: Source,
}

/// One MCP server in force, as `crewbox config` shows it: never a secret.
#[derive(Clone, Debug)]
pub struct McpServerInForce {
    /// Its name (`mcp__NAME__TOOL`).
    pub name: String,
    /// How it is reached.
    pub transport: McpTransport,
    /// Where it was defined.
    pub source: ServerSource,
    /// A one-line summary (command and arguments, or URL) without secrets.
    pub summary: String,
    /// Whether agents may only call its read-only tools.
    pub read_only: bool,
}

/// How an MCP server is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpTransport {
    /// A process in the sandbox, over its stdin and stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

impl McpTransport {
    /// `stdio` or `http`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdio => "stdio",
            Self::Http => "http",
        }
    }
}

/// The agent worktrees of a repository ([`Repository::worktrees`]).
#[derive(Clone, Debug)]
pub struct Worktrees {
    /// The directory they live in.
    pub dir: PathBuf,
    /// Each one, by slot.
    pub worktrees: Vec<WorktreeInfo>,
}

/// A cassette written by [`Repository::export_cassette`].
#[derive(Clone, Debug)]
pub struct Exported {
    /// The run recorded.
    pub run: RunId,
    /// The model calls it holds.
    pub model_calls: usize,
}

/// Why a run's recording could not be exported or replayed.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The run named cannot be found, or the store read.
    #[error(transparent)]
    Run(#[from] ReadError),
    /// The run cannot be exported or replayed as it is (nothing recorded, an in-place
    /// run, an unreadable request): the user's to change, not a failure.
    #[error(transparent)]
    Refused(ReplayError),
    /// The cassette could not be written.
    #[error(transparent)]
    Write(ReplayError),
}

/// A team written out by [`Repository::export_team`].
#[derive(Clone, Debug)]
pub struct TeamExport {
    /// What was written, and what was left as it was.
    pub report: ExportReport,
    /// Whether the trust record was renewed to cover the files written (a trusted
    /// repository: what the user exported is the user's own change).
    pub retrusted: bool,
}

/// Why a team was not written out.
#[derive(Debug, thiserror::Error)]
pub enum TeamExportError {
    /// The export would lose or overwrite something, or cannot be done.
    #[error("team export refused: {0}")]
    Refused(#[from] ExportError),
    /// The trust record could not be renewed.
    #[error(transparent)]
    Trust(#[from] TrustError),
    /// The blocking export was cancelled or panicked.
    #[error(transparent)]
    Interrupted(#[from] tokio::task::JoinError),
}

impl Repository {
    /// The configuration in force here, with where each value came from (what
    /// `crewbox config` prints). The provider a run would use is chosen as `run` would
    /// without `--provider`, reading this process's environment for API keys.
    pub fn config_in_force(&self) -> ConfigInForce {
        let cfg = &*self.config;
        let env = |var: &str| std::env::var(var).ok();
        let run_provider = cfg.choose_provider(None, None, &env).map(|c| RunProvider {
            name: c.name,
            chosen_by: c.chosen_by,
        });
        ConfigInForce {
            repository: self.root().to_path_buf(),
            trust: cfg.trust,
            trust_error: self.trust_error.clone(),
            state_dir: self.state_dir().to_path_buf(),
            files: cfg.sources.clone(),
            run_provider,
            settings: cfg.settings(),
            mcp_servers: cfg
                .mcp
                .servers
                .values()
                .map(|s| McpServerInForce {
                    name: s.name.clone(),
                    transport: match s.transport {
                        Transport::Stdio { .. } => McpTransport::Stdio,
                        Transport::Http { .. } => McpTransport::Http,
                    },
                    source: s.source,
                    summary: s.summary(),
                    read_only: s.read_only,
                })
                .collect(),
            mcp_default: cfg.mcp.default.clone(),
            repo_mcp: cfg.repo_mcp.clone(),
            ignored: cfg.ignored.clone(),
            repo_rules: REPO_KEYS.iter().chain([&UNLISTED]).copied().collect(),
        }
    }

    /// The agent worktrees, read without creating anything where no agent ever worked
    /// (and without keeping any for this process). The store, if there is one, must
    /// belong to this repository.
    pub async fn worktrees(&self) -> Result<Worktrees, ReadError> {
        self.store_if_exists()?;
        let dir = self.worktrees_dir();
        if !dir.exists() {
            return Ok(Worktrees {
                dir,
                worktrees: Vec::new(),
            });
        }
        let manager = self.worktree_manager().await?;
        Ok(Worktrees {
            worktrees: manager.list().await?,
            dir: manager.worktrees_dir().to_path_buf(),
        })
    }

    /// Removes the worktrees of processes that are gone (a live one's are never
    /// touched). The store, if there is one, must belong to this repository.
    pub async fn prune_worktrees(&self) -> Result<PruneReport, ReadError> {
        self.store_if_exists()?;
        Ok(self.worktree_manager().await?.prune().await?)
    }

    async fn worktree_manager(&self) -> Result<WorktreeManager, ReadError> {
        let opts = WorktreeOptions {
            // A listing or pruning process must not keep worktrees for itself.
            pool_size: 0,
            ..WorktreeOptions::default()
        };
        Ok(WorktreeManager::open(self.root(), &self.worktrees_dir(), opts).await?)
    }

    /// Writes the recording of the run `run` names (its request and every model
    /// exchange, redacted) to `file` as a cassette a `kind = "replay"` provider answers
    /// from.
    pub async fn export_cassette(
        &self,
        run: &str,
        file: PathBuf,
    ) -> Result<Exported, RecordingError> {
        let (store, run) = self.recorded_run(run).await?;
        let cassette = crate::replay::cassette(&store, &run)
            .await
            .map_err(RecordingError::Refused)?;
        let model_calls = cassette.exchanges.len();
        crate::replay::save(cassette, file)
            .await
            .map_err(RecordingError::Write)?;
        Ok(Exported {
            run: run.id,
            model_calls,
        })
    }

    /// Prepares the replay of the run `run` names in a scratch state: open the plan's
    /// scratch repository's engine, run its request, then [`ReplayPlan::finish`].
    pub async fn plan_replay(
        &self,
        run: &str,
        opts: ReplayOptions,
    ) -> Result<ReplayPlan, RecordingError> {
        let (store, run) = self.recorded_run(run).await?;
        crate::replay::plan(self, &store, run, opts)
            .await
            .map_err(RecordingError::Refused)
    }

    /// The existing store and the run `text` names in it.
    async fn recorded_run(&self, text: &str) -> Result<(Store, RunRecord), ReadError> {
        let store = self.existing_store()?;
        let run = ReadError::settle(RecordKind::Run, text, store.lookup_run(text).await?)?;
        Ok((store, run))
    }

    /// Writes `team` out in `format` (into `dir`, relative to the repository, or the
    /// format's own place), never losing or overwriting what is there unless `force`.
    /// A trusted repository's trust record is renewed to cover the files written.
    pub async fn export_team(
        &self,
        team: Team,
        format: ExportFormat,
        dir: Option<PathBuf>,
        force: bool,
    ) -> Result<TeamExport, TeamExportError> {
        let repo = self.root().to_path_buf();
        let aliases = self.config.pack_models.clone();
        let trusted = self.config.trust.is_trusted();
        tokio::task::spawn_blocking(move || {
            let report =
                crate::team::export(&repo, &team, format, dir.as_deref(), force, &aliases)?;
            let retrusted = trusted && !report.written.is_empty();
            if retrusted {
                TrustStore::user()?.trust(&repo, None)?;
            }
            Ok(TeamExport { report, retrusted })
        })
        .await?
    }
}

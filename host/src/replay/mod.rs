//! `crewbox replay RUN`: re-runs a recorded run in a scratch state, answering every
//! model call from its recording (tools really run), then compares the two runs.
//!
//! The scratch state is a directory of its own under the repository's state directory
//! (a fresh store, fresh worktrees): the repository's own store is only read. The
//! replay's agents commit to branches named after their new ids, which are deleted
//! once compared, with their worktrees; no branch of the user's is touched. The run's
//! request is the recorded one (mode, prompt, team, settings) with the provider
//! replaced by `kind = "replay"` over a cassette written into the scratch state, the
//! validators replaced when `--validator` names others, and the dispatcher asked again
//! when `--dispatcher` names one.

mod compare;

use std::path::{Path, PathBuf};

pub use compare::{ReplayOutcome, ReplayReport};

use crate::config::ExecutorKind;
use crate::engine::RunReport;
use crate::engine::RunRequest;
use crate::engine::request::RunSpec;
use crate::ids::RunId;
use crate::provider::Completion;
use crate::provider::config::{ProviderConfig, ReplayConfig};
use crate::provider::replay::{Cassette, CassetteError, Exchange, RecordedRun, RequestDigest};
use crate::repository::Repository;
use crate::store::{RunRecord, Store, StoreError};
use crate::vocab::{Isolation, ModeChoice};

/// The provider name a replay's agents see.
pub const REPLAY_PROVIDER: &str = "replay";

/// What a replay changes of the recorded run.
#[derive(Clone, Debug, Default)]
pub struct ReplayOptions {
    /// Validators to run instead of the recorded ones (none: the recorded ones).
    pub validators: Vec<String>,
    /// A dispatcher to ask instead of keeping the recorded mode.
    pub dispatcher: Option<String>,
}

/// Why a run cannot be exported or replayed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The cassette could not be written.
    #[error(transparent)]
    Cassette(#[from] CassetteError),
    /// The run has no recorded model call.
    #[error(
        "run {run} has no recorded model calls (it ran no agent, or was recorded by a crewbox without replay support)"
    )]
    NothingRecorded {
        /// The run.
        run: String,
    },
    /// The run's stored request does not read.
    #[error("run {run}: its stored request does not read ({detail})")]
    Unreadable {
        /// The run.
        run: String,
        /// Why.
        detail: String,
    },
    /// The run worked in the repository directory itself: replaying it would change the
    /// user's files.
    #[error(
        "run {run} ran with isolation `none` (in the repository directory); it cannot be replayed without changing your files"
    )]
    InPlace {
        /// The run.
        run: String,
    },
    /// The scratch state could not be made or removed.
    #[error("replay scratch directory {}: {source}", path.display())]
    Scratch {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Reading or cleaning up branches failed.
    #[error("replay: git: {0}")]
    Git(String),
    /// The commit the run started from is no longer in the repository.
    #[error(
        "run {run} started from commit {commit}, which is no longer in the repository; a replay starts where the run started"
    )]
    BaseGone {
        /// The run.
        run: String,
        /// Its base commit.
        commit: String,
    },
}

/// The commit the recorded run's worktrees started from, as its journal holds it
/// (`base`: single and swarm; `workspace`: team modes; `crew/worktree`: crew), so a
/// replay starts there too, not at a HEAD that moved since.
async fn recorded_base(store: &Store, run: &RunId) -> Result<Option<String>, StoreError> {
    for key in ["base", "workspace", "crew/worktree"] {
        let Some(step) = store.step(run, key).await? else {
            continue;
        };
        let base = match &step.data {
            serde_json::Value::String(s) => Some(s.clone()),
            v => v
                .get("base")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        };
        if base.is_some() {
            return Ok(base);
        }
    }
    Ok(None)
}

/// The cassette of a stored run: its request and every model exchange.
pub async fn cassette(store: &Store, run: &RunRecord) -> Result<Cassette, ReplayError> {
    let exchanges: Vec<Exchange> = store
        .exchanges::<RequestDigest, Completion>(&run.id)
        .await?
        .into_iter()
        .map(Exchange::from)
        .collect();
    if exchanges.is_empty() {
        return Err(ReplayError::NothingRecorded {
            run: run.id.to_string(),
        });
    }
    Ok(Cassette::new(
        RecordedRun {
            id: run.id.to_string(),
            mode: run.mode,
            status: run.status,
            prompt: run.prompt.clone(),
            spec: run.spec.clone(),
        },
        exchanges,
    ))
}

/// Writes `cassette` to `path` off the async runtime.
pub async fn save(cassette: Cassette, path: PathBuf) -> Result<(), ReplayError> {
    tokio::task::spawn_blocking(move || cassette.save(&path))
        .await
        .map_err(|e| ReplayError::Git(format!("cassette writer task: {e}")))??;
    Ok(())
}

/// A scratch state directory, removed when dropped, and held ([`HeldDir`]) while its
/// replay lives: a replay killed with SIGKILL leaves it behind with its lock free, and
/// the next replay of the repository removes it with the branches and worktree
/// registrations it left ([`sweep_abandoned`]).
pub struct Scratch {
    dir: crate::fs::held::HeldDir,
}

/// The lock file in each scratch directory.
const SCRATCH_LOCK: &str = "replay.lock";

impl Scratch {
    fn create(parent: &Path) -> Result<Self, ReplayError> {
        let replays = parent.join("replays");
        let name = uuid::Uuid::now_v7().simple().to_string();
        crate::fs::held::HeldDir::create(&replays, &name, SCRATCH_LOCK)
            .map(|dir| Self { dir })
            .map_err(|source| ReplayError::Scratch {
                path: replays.join(name),
                source,
            })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(self.path()) {
            tracing::warn!(path = %self.path().display(), error = %e, "replay scratch state not removed");
        }
    }
}

/// Removes what replays of the repository at `repo` (state under `state_dir`) that
/// died left behind — a scratch directory whose lock no process holds, its worktree
/// registrations and the branches of its agents and runs, as its own store names them
/// — and returns how many were removed. What cannot be told for sure (no lock file, a
/// held lock) is left alone; a failure is logged, never fatal to the replay at hand.
pub async fn sweep_abandoned(repo: &Path, state_dir: &Path) -> usize {
    let replays = state_dir.join("replays");
    let found = tokio::task::spawn_blocking(move || {
        crate::fs::held::abandoned(&replays, "", SCRATCH_LOCK, |_| false)
    })
    .await
    .unwrap_or_default();
    let mut removed = 0;
    for (dir, held) in found {
        let names = match branches_in(&dir.join("state")).await {
            Ok(names) => names,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot read a dead replay's store");
                continue;
            }
        };
        let repo = repo.to_path_buf();
        let forgotten = tokio::task::spawn_blocking(move || {
            let forgotten = forget_scratch(&repo, &dir, names)
                .and_then(|()| {
                    std::fs::remove_dir_all(&dir).map_err(|source| ReplayError::Scratch {
                        path: dir.clone(),
                        source,
                    })
                })
                .map_err(|e| (dir, e));
            // Held until its directory is gone.
            drop(held);
            forgotten
        })
        .await;
        match forgotten {
            Ok(Ok(())) => removed += 1,
            Ok(Err((dir, e))) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot clean up after a dead replay")
            }
            Err(e) => tracing::warn!(error = %e, "cleaning up after a dead replay failed"),
        }
    }
    removed
}

/// Prunes the worktrees under scratch directory `dir` and deletes the branches `names`
/// (each agent's `crewbox/<agent-id>`, suffixed or not, and each run's integration
/// branch).
fn forget_scratch(repo: &Path, dir: &Path, names: Vec<String>) -> Result<(), ReplayError> {
    let Ok(git) = git2::Repository::open(repo) else {
        return Ok(());
    };
    compare::prune_worktrees(&git, dir)?;
    // An agent's branch is `crewbox/<agent-id>`, or that with a suffix when the name
    // was taken.
    let mut doomed = Vec::new();
    for branch in git
        .branches(Some(git2::BranchType::Local))
        .map_err(|e| ReplayError::Git(e.message().to_owned()))?
        .flatten()
    {
        let Ok(Some(name)) = branch.0.name() else {
            continue;
        };
        if names.iter().any(|n| {
            name == n
                || name
                    .strip_prefix(n.as_str())
                    .is_some_and(|r| r.starts_with('-'))
        }) {
            doomed.push(name.to_owned());
        }
    }
    compare::delete_branches(&git, doomed)
}

/// The branches the scratch store at `state` names: its agents' and runs' ids exist
/// only in that store. None when it has no store.
async fn branches_in(state: &Path) -> Result<Vec<String>, StoreError> {
    if !state.join(crate::store::DB_FILE).is_file() {
        return Ok(Vec::new());
    }
    let opened = state.to_path_buf();
    let store = tokio::task::spawn_blocking(move || Store::open_existing(&opened))
        .await
        .map_err(|e| StoreError::Sqlite {
            op: "open a dead replay's store",
            detail: e.to_string(),
        })??;
    let mut names = Vec::new();
    for run in store.recent_runs(1_000).await? {
        names.push(crate::engine::workspace::integration_branch(&run.id));
        for agent in store.agents(&run.id).await? {
            names.push(format!(
                "crewbox/{}",
                crate::worktree::sanitize_branch_component(agent.id.as_str())
            ));
        }
    }
    Ok(names)
}

/// A replay ready to run: the scratch repository (open its engine and run `request`),
/// and the recorded run's report to compare with.
pub struct ReplayPlan {
    /// The repository with its state in the scratch directory and the replay provider.
    pub scratch: Repository,
    /// The recorded request, replaying.
    pub request: RunRequest,
    /// The recorded run's report.
    pub original: RunReport,
    /// Model calls in the recording.
    pub recorded: usize,
    dir: Scratch,
}

/// Prepares the replay of `run` (a run of `repo`'s store).
pub async fn plan(
    repo: &Repository,
    store: &Store,
    run: RunRecord,
    opts: ReplayOptions,
) -> Result<ReplayPlan, ReplayError> {
    let unreadable = |detail: String| ReplayError::Unreadable {
        run: run.id.to_string(),
        detail,
    };
    let spec: RunSpec =
        serde_json::from_value(run.spec.clone()).map_err(|e| unreadable(e.to_string()))?;
    let mut request = spec.request;
    if request.isolation() == Isolation::None {
        return Err(ReplayError::InPlace {
            run: run.id.to_string(),
        });
    }
    let cassette = cassette(store, &run).await?;
    let recorded = cassette.exchanges.len();
    let swept = sweep_abandoned(repo.root(), repo.state_dir()).await;
    if swept > 0 {
        tracing::info!(swept, "removed what replays that died left behind");
    }
    let dir = Scratch::create(repo.state_dir())?;
    let file = dir.path().join("cassette.json");
    save(cassette, file.clone()).await?;
    // Where the run started, whatever HEAD is now.
    request.base = recorded_base(store, &run.id).await?;
    if let Some(commit) = &request.base {
        let (root, commit) = (repo.root().to_path_buf(), commit.clone());
        let found = tokio::task::spawn_blocking(move || {
            use crate::store::RepoIdentity as _;
            crate::trust::RepoRoot::from_canonical(root).has_commit(&commit)
        })
        .await
        .unwrap_or(false);
        if !found {
            return Err(ReplayError::BaseGone {
                run: run.id.to_string(),
                commit: request.base.take().unwrap_or_default(),
            });
        }
    }
    request.provider = Some(REPLAY_PROVIDER.into());
    request.model = None;
    request.script = None;
    if !opts.validators.is_empty() {
        request.validators = opts.validators;
    }
    // The recorded mode, unless a dispatcher is to be asked again (even when the run
    // named its mode: that is what `--dispatcher` is for).
    request.mode = Some(match opts.dispatcher {
        Some(_) => ModeChoice::Auto,
        None => ModeChoice::Mode(run.mode),
    });
    let mut scratch = repo
        .clone()
        .with_state_dir(dir.path().join("state"))
        .with_executor(ExecutorKind::Local)
        .with_provider(
            REPLAY_PROVIDER,
            ProviderConfig::Replay(ReplayConfig {
                run: None,
                cassette: Some(file),
            }),
        );
    if let Some(d) = opts.dispatcher {
        scratch = scratch.with_dispatcher(d);
    }
    let mut original = RunReport::load(store, run).await?;
    // Attempts a later one replaced are not the run's: a replay runs each step once.
    let superseded = store.superseded_agents(&original.run_id).await?;
    original.agents.retain(|a| !superseded.contains(&a.id));
    Ok(ReplayPlan {
        scratch,
        request,
        original,
        recorded,
        dir,
    })
}

impl ReplayPlan {
    /// Compares the replay's `report` with the recorded run, then removes what the
    /// replay left in the repository (its branches and worktrees) and its scratch
    /// state.
    pub async fn finish(self, report: RunReport) -> Result<ReplayReport, ReplayError> {
        let repo = self.scratch.root().to_path_buf();
        let scratch = self.dir.path().to_path_buf();
        let original = self.original;
        let recorded = self.recorded;
        let result = tokio::task::spawn_blocking(move || {
            let compared = compare::compare(&repo, original, report, recorded);
            let cleaned = compare::clean_up(&repo, &scratch, &compared.report);
            cleaned.map(|()| compared)
        })
        .await
        .map_err(|e| ReplayError::Git(format!("comparison task: {e}")))?;
        drop(self.dir);
        result
    }
}

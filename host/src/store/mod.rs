//! The store: one SQLite file (WAL) in the state directory holding runs, agents, the
//! append-only event log and control messages. Facts are written before the side effects
//! they describe; a corrupt or newer-schema database is an error, never a silent reset.

pub mod audit;
mod checkpoint;
mod dead;
pub use dead::{DeadLetter, RetryOverrides, RetryPlan};
mod exchanges;
pub use exchanges::{ExchangeRecord, ExchangeWrite, StoredExchange, exchanges_blocking};
mod identity;
mod query;
pub use identity::{RecordedRepo, RepoIdentity};
pub use query::{AgentCounts, AgentRow, Lookup, MIN_TAIL, RunRow, StepOutline};
mod records;
mod remote;
pub use remote::{AgentWorker, RemoteResult};
mod schedules;
mod schema;
mod steps;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use tokio::sync::oneshot;

pub use crate::event::EventRecord;
pub use records::{
    AgentNode, AgentRecord, AgentStats, ControlKind, DispatchRecord, RunRecord, now_ms,
};
pub use schedules::{FireStatus, ScheduleRecord};
pub use schema::SCHEMA_VERSION;
pub use steps::{StepRecord, StepState};
use writer::{Ack, Write};

use tokio::sync::broadcast;

use crate::event::Event;
use crate::ids::{AgentId, RunId};
use crate::vocab::{AgentState, ExitReason, FailReason, RunStatus};

/// The database file name inside the state directory.
pub const DB_FILE: &str = "crewbox.db";

/// Stored events a subscriber may fall behind by before it sees `Lagged`.
const EVENT_BUFFER: usize = 4096;

/// Why a store operation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened or created.
    #[error("cannot open the store at {path}: {detail}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The file is not a usable SQLite database. It is left untouched.
    #[error(
        "the store at {path} is corrupt or not a crewbox database ({detail}); it was left untouched — move it aside to start afresh"
    )]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite said.
        detail: String,
    },
    /// The database was written by a newer crewbox.
    #[error(
        "the store at {path} has schema version {found}, newer than this crewbox supports ({supported}); upgrade crewbox"
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Its version.
        found: u32,
        /// Ours.
        supported: u32,
    },
    /// There is no store yet (read-only commands do not create one).
    #[error("no crewbox store at {0} (nothing has run in this state directory yet)")]
    Missing(PathBuf),
    /// An agent state change that its current state does not allow.
    #[error("agent {agent} cannot become {to} from its stored state")]
    Transition {
        /// The agent.
        agent: String,
        /// The requested state.
        to: AgentState,
    },
    /// A statement failed.
    #[error("store operation `{op}` failed: {detail}")]
    Sqlite {
        /// Which operation.
        op: &'static str,
        /// What SQLite said.
        detail: String,
    },
    /// A scheduled job of that name exists already.
    #[error(
        "a scheduled job named `{name}` exists already; pick another --name or remove it first"
    )]
    ScheduleExists {
        /// The job name.
        name: String,
    },
    /// No scheduled job has that name.
    #[error(
        "no scheduled job named `{}` (see `crewbox schedule list`)",
        crate::text::escape(name)
    )]
    NoSuchSchedule {
        /// The job name.
        name: String,
    },
    /// No run has that id.
    #[error("no run `{id}`")]
    NoSuchRun {
        /// The run id.
        id: String,
    },
    /// The run has finished; there is nothing to resume.
    #[error("run {id} has already finished ({status}); nothing to resume")]
    RunFinished {
        /// The run id.
        id: String,
        /// Its status.
        status: String,
    },
    /// Another live process drives the run.
    #[error(
        "run {id} is still being driven by process {pid}; wait for it to end, or stop the run with `crewbox stop {id}` (it then ends cancelled)"
    )]
    RunBusy {
        /// The run id.
        id: String,
        /// The process driving it.
        pid: u32,
    },
    /// The team already runs a reflect loop.
    #[error(
        "team `{team}` already has a reflect loop running (run {run_id}, process {pid}); \
         send it a message with `crewbox send --team {team} \"...\"`, or wait for it to end"
    )]
    TeamBusy {
        /// The team.
        team: String,
        /// The run holding the loop.
        run_id: String,
        /// Its process.
        pid: u32,
    },
    /// The store was recorded for another repository.
    #[error(
        "the store at {} belongs to the repository at {}{}, not to {}; crewbox keeps one \
         state directory per repository — use the default, or a --state-dir base, instead \
         of pointing two repositories at one directory",
        path.display(),
        recorded_root.display(),
        recorded_commit.as_deref().map(|c| format!(" (root commit {c})")).unwrap_or_default(),
        root.display()
    )]
    OtherRepository {
        /// The database file.
        path: PathBuf,
        /// The repository recorded in it.
        recorded_root: PathBuf,
        /// Its root commit.
        recorded_commit: Option<String>,
        /// The repository it was opened for.
        root: PathBuf,
    },
    /// The store was recorded for this repository, whose history no longer holds the
    /// root commit it had then.
    #[error(
        "the store at {} was recorded for this repository ({}) when its history began at \
         commit {commit}, which it no longer has (its history was rewritten, another \
         repository took its place, or git cannot read it as this user); the store's runs \
         name commits that are gone, so it is not used: move its directory {} aside to \
         start a new store",
        path.display(),
        root.display(),
        path.parent().unwrap_or(path).display()
    )]
    HistoryRewritten {
        /// The database file.
        path: PathBuf,
        /// The repository.
        root: PathBuf,
        /// The root commit it recorded.
        commit: String,
    },
    /// The agent is not a dead letter (it did not fail, or it was dropped or retried).
    #[error("agent {agent} is not a dead letter: {why}")]
    NotDead {
        /// The agent.
        agent: String,
        /// Why.
        why: String,
    },
    /// The writer thread is gone (the process is shutting down).
    #[error("the store writer has shut down")]
    Closed,
}

impl StoreError {
    fn sqlite(op: &'static str, e: &rusqlite::Error) -> Self {
        Self::Sqlite {
            op,
            detail: e.to_string(),
        }
    }
}

struct Inner {
    path: PathBuf,
    /// The writer's queue (a `Sender` is shared by reference: no lock on the hot path).
    writes: mpsc::Sender<(Write, Ack)>,
    reader: Mutex<Connection>,
    /// Every event as it is committed, with its sequence number.
    events: broadcast::Sender<EventRecord>,
    /// The newest event committed through this handle (the log's end when it opened).
    last_seq: Arc<std::sync::atomic::AtomicI64>,
}

/// A write queued but not yet known to be committed. Writes are applied in the order
/// they were queued, so a write queued after this one is never committed before it.
#[must_use = "a queued write's failure is only seen through `committed`"]
#[derive(Debug)]
pub struct Pending(oneshot::Receiver<Result<(), StoreError>>);

impl Pending {
    /// Waits until the write is committed: its result.
    pub async fn committed(self) -> Result<(), StoreError> {
        self.0.await.map_err(|_| StoreError::Closed)?
    }
}

/// A handle to the store; cheap to clone. Writes go through one writer thread; reads use
/// a separate connection (WAL lets them run while a writer commits, also from other
/// processes such as `crewbox status`).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish()
    }
}

/// The error of an agent the process driving its run left unfinished.
pub const INTERRUPTED_ERROR: &str = "interrupted: the process driving its run stopped";

impl Store {
    /// Opens (creating and migrating if needed) the store in `state_dir`.
    pub fn open(state_dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(state_dir, true, None)
    }

    /// Opens an existing store without creating one (for status, events, steer, stop).
    pub fn open_existing(state_dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(state_dir, false, None)
    }

    /// Opens (creating if `create`) the store of repository `repo`: a new store records
    /// it, an existing one must belong to it ([`StoreError::OtherRepository`]).
    pub fn open_for(
        state_dir: &Path,
        create: bool,
        repo: &dyn RepoIdentity,
    ) -> Result<Self, StoreError> {
        Self::open_with(state_dir, create, Some(repo))
    }

    fn open_with(
        state_dir: &Path,
        create: bool,
        repo: Option<&dyn RepoIdentity>,
    ) -> Result<Self, StoreError> {
        let path = state_dir.join(DB_FILE);
        let flags = if create {
            std::fs::create_dir_all(state_dir).map_err(|e| StoreError::Open {
                path: state_dir.to_path_buf(),
                detail: format!("cannot create the state directory: {e}"),
            })?;
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } else {
            if !path.exists() {
                return Err(StoreError::Missing(path));
            }
            OpenFlags::SQLITE_OPEN_READ_WRITE
        };
        let mut conn = open_conn(&path, flags)?;
        migrate(&mut conn, &path)?;
        if let Some(repo) = repo {
            identity::bind(&conn, &path, repo)?;
        }
        let reader = open_conn(&path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        Self::from_parts(path, conn, reader)
    }

    /// The repository this store belongs to, when one was recorded.
    pub async fn repository(&self) -> Result<Option<RecordedRepo>, StoreError> {
        let path = self.inner.path.clone();
        self.read(move |c| identity::recorded(c, &path)).await
    }

    fn from_parts(
        path: PathBuf,
        writer: Connection,
        reader: Connection,
    ) -> Result<Self, StoreError> {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        let checkpoints = checkpoint::start(&path, &writer);
        let last = writer
            .query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get(0))
            .map_err(|e| StoreError::sqlite("last event", &e))?;
        let last_seq = Arc::new(std::sync::atomic::AtomicI64::new(last));
        let published = writer::Published {
            events: events.clone(),
            last_seq: last_seq.clone(),
        };
        let writes =
            writer::spawn(writer, published, checkpoints).map_err(|e| StoreError::Open {
                path: path.clone(),
                detail: format!("cannot start the store writer thread: {e}"),
            })?;
        Ok(Self {
            inner: Arc::new(Inner {
                path,
                writes,
                reader: Mutex::new(reader),
                events,
                last_seq,
            }),
        })
    }

    /// Every event stored through this handle (or its clones) from now on, with its
    /// sequence number, published once it is committed.
    pub fn subscribe(&self) -> broadcast::Receiver<EventRecord> {
        self.inner.events.subscribe()
    }

    /// The sequence number of the newest event committed through this handle (or its
    /// clones), or of the log's end when it was opened: where a reader of the events
    /// this process stores from now on starts, without a read of the database. Events
    /// another process stores meanwhile are not counted (see
    /// [`Store::last_event_seq`]).
    pub fn last_event_seq_written(&self) -> i64 {
        self.inner
            .last_seq
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn send(&self, write: Write, ack: Ack) -> Result<(), StoreError> {
        self.inner
            .writes
            .send((write, ack))
            .map_err(|_| StoreError::Closed)
    }

    /// Queues a write and waits until it is committed.
    async fn write(&self, write: Write) -> Result<(), StoreError> {
        self.queue(write)?.committed().await
    }

    /// Waits until every write queued before this call (also those queued without
    /// waiting: events, an agent's start) is committed.
    pub async fn settled(&self) -> Result<(), StoreError> {
        self.write(Write::Barrier).await
    }

    /// Queues a write in order with every other write, without waiting for it.
    fn queue(&self, write: Write) -> Result<Pending, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.send(write, Some(tx))?;
        Ok(Pending(rx))
    }

    /// Records a new run (before anything of it starts).
    pub async fn insert_run(&self, run: &RunRecord) -> Result<(), StoreError> {
        self.write(Write::InsertRun(Box::new(run.clone()))).await
    }

    /// Records a new run with its `run.started` event (audited), in one transaction.
    pub async fn start_run(&self, run: &RunRecord, event: Event) -> Result<(), StoreError> {
        self.write(Write::StartRun {
            run: Box::new(run.clone()),
            event: Self::event_write(&run.id, None, event),
        })
        .await
    }

    /// Records how a run ended, with its `run.finished` event, in one transaction.
    pub async fn finish_run(
        &self,
        id: &RunId,
        status: RunStatus,
        exit_reason: ExitReason,
        result: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write(Write::FinishRun {
            id: id.clone(),
            status,
            exit_reason,
            result: result.map(str::to_owned),
            at: now_ms(),
            event: Self::event_write(
                id,
                None,
                Event::RunFinished {
                    status,
                    exit_reason,
                },
            ),
        })
        .await
    }

    /// Records which process is driving a run (None when it lets go).
    pub async fn set_run_pid(&self, id: &RunId, pid: Option<u32>) -> Result<(), StoreError> {
        self.write(Write::SetRunPid {
            id: id.clone(),
            pid,
        })
        .await
    }

    /// Stores mode-specific report facts of a run.
    pub async fn set_run_details(
        &self,
        id: &RunId,
        details: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.write(Write::SetRunDetails {
            id: id.clone(),
            details: details.to_string(),
        })
        .await
    }

    /// Records a dispatch decision, keeping only the newest `keep`.
    pub async fn record_dispatch(
        &self,
        record: &DispatchRecord,
        keep: u32,
    ) -> Result<(), StoreError> {
        self.write(Write::RecordDispatch {
            record: Box::new(record.clone()),
            keep,
        })
        .await
    }

    /// Records a new agent (queued) before it starts.
    pub async fn insert_agent(&self, agent: &AgentRecord) -> Result<(), StoreError> {
        self.write(Write::InsertAgent(Box::new(agent.clone())))
            .await
    }

    /// Queues the record of a new agent (queued): ordered before every write queued
    /// after it, committed when [`Pending::committed`] says so.
    pub fn queue_agent(&self, agent: AgentRecord) -> Result<Pending, StoreError> {
        self.queue(Write::InsertAgent(Box::new(agent)))
    }

    /// Queues the move of an agent to `to` (see [`Store::set_agent_state`]) without
    /// waiting for it: [`Pending::committed`] says whether the store took it.
    pub fn queue_agent_state(&self, id: &AgentId, to: AgentState) -> Result<Pending, StoreError> {
        self.queue(Write::AgentState {
            id: id.clone(),
            to,
            at: now_ms(),
        })
    }

    /// Moves an agent to `to` if its stored state may become it
    /// ([`AgentState::can_become`], the one transition rule).
    pub async fn set_agent_state(&self, id: &AgentId, to: AgentState) -> Result<(), StoreError> {
        self.write(Write::AgentState {
            id: id.clone(),
            to,
            at: now_ms(),
        })
        .await
    }

    /// Records an agent's end: its terminal state, counters and result (refused unless
    /// its stored state may become `state`).
    pub async fn finish_agent(
        &self,
        id: &AgentId,
        state: AgentState,
        stats: AgentStats,
        result: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write(finish_write(id, state, stats, result, error, None, None))
            .await
    }

    /// Records that an agent the process driving its run left queued or running will
    /// never end on its own: `error`, interrupted (a dead letter unless its step runs
    /// again).
    pub async fn finish_interrupted(
        &self,
        id: &AgentId,
        stats: AgentStats,
    ) -> Result<(), StoreError> {
        let reason = Some(FailReason::Interrupted);
        let write = finish_write(
            id,
            AgentState::Error,
            stats,
            None,
            Some(INTERRUPTED_ERROR),
            reason,
            None,
        );
        self.write(write).await
    }

    /// Records an agent's end as [`Store::finish_agent`] does, with why it did not end
    /// well and its final conversation in the same transaction: what a resume finishes
    /// its step from, and what a retry of a dead letter continues.
    pub async fn finish_agent_with_conversation(
        &self,
        id: &AgentId,
        end: AgentEnding<'_>,
    ) -> Result<(), StoreError> {
        self.write(finish_write(
            id,
            end.state,
            end.stats,
            Some(end.result),
            end.error,
            end.reason,
            Some(end.conversation),
        ))
        .await
    }

    /// Queues an agent's end as [`Store::finish_agent_with_conversation`] records it,
    /// without waiting: [`Pending::committed`] says whether the store took it.
    pub fn queue_finish_agent(
        &self,
        id: &AgentId,
        end: AgentEnding<'_>,
    ) -> Result<Pending, StoreError> {
        self.queue(finish_write(
            id,
            end.state,
            end.stats,
            Some(end.result),
            end.error,
            end.reason,
            Some(end.conversation),
        ))
    }

    /// The audit chain, oldest first, optionally only run `run_id`'s records.
    pub async fn audit_records(
        &self,
        run_id: Option<&RunId>,
    ) -> Result<Vec<audit::AuditRecord>, StoreError> {
        let run = run_id.map(|r| r.as_str().to_owned());
        self.read(move |c| audit::records(c, run.as_deref())).await
    }

    /// Walks the audit chain: the first broken link, gap or truncation, if any.
    pub async fn audit_verify(&self) -> Result<audit::Verdict, StoreError> {
        self.read(|c| audit::verify(c, None)).await
    }

    /// [`Store::audit_verify`], and the chain must still hold `anchor`.
    pub async fn audit_verify_anchored(
        &self,
        anchor: audit::Anchor,
    ) -> Result<audit::Verdict, StoreError> {
        self.read(move |c| audit::verify(c, Some(&anchor))).await
    }

    /// An agent's final conversation (JSON), when its end stored one.
    pub async fn agent_conversation(&self, id: &AgentId) -> Result<Option<String>, StoreError> {
        let id = id.clone();
        self.read(move |c| {
            c.query_row(
                "SELECT conversation FROM agent_conversations WHERE agent_id = ?1",
                rusqlite::params![id.as_str()],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| StoreError::sqlite("read agent conversation", &e))
        })
        .await
    }

    /// Appends an event and waits until it is stored.
    pub async fn append_event(
        &self,
        run_id: &RunId,
        agent_id: Option<&AgentId>,
        event: Event,
    ) -> Result<(), StoreError> {
        self.write(Self::event(run_id, agent_id, event)).await
    }

    /// Appends an event without waiting (observability only; order is still kept).
    pub fn log_event(&self, run_id: &RunId, agent_id: Option<&AgentId>, event: Event) {
        if let Err(e) = self.send(Self::event(run_id, agent_id, event), None) {
            tracing::warn!(error = %e, "event not stored");
        }
    }

    fn event(run_id: &RunId, agent_id: Option<&AgentId>, event: Event) -> Write {
        Write::Event(Self::event_write(run_id, agent_id, event))
    }

    /// The one place an event becomes a stored row (kind and data columns).
    fn event_write(
        run_id: &RunId,
        agent_id: Option<&AgentId>,
        event: Event,
    ) -> Box<writer::EventWrite> {
        let (kind, data) = event.to_stored();
        Box::new(writer::EventWrite {
            run_id: run_id.clone(),
            agent_id: agent_id.cloned(),
            at: now_ms(),
            kind,
            data,
            event,
        })
    }

    /// Queues a steer or stop for an agent or run (picked up by the process running it).
    pub async fn push_control(
        &self,
        target: &str,
        kind: ControlKind,
        message: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write(Write::PushControl {
            target: target.to_owned(),
            kind,
            message: message.map(str::to_owned),
            at: now_ms(),
        })
        .await
    }

    /// Marks control messages as handled.
    pub async fn consume_controls(&self, seqs: Vec<i64>) -> Result<(), StoreError> {
        if seqs.is_empty() {
            return Ok(());
        }
        self.write(Write::ConsumeControls { seqs, at: now_ms() })
            .await
    }

    /// Runs a read on the reader connection, off the async runtime.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let conn = inner.reader.lock().unwrap_or_else(|p| p.into_inner());
            f(&conn)
        })
        .await
        .map_err(|e| StoreError::Sqlite {
            op: "read task",
            detail: e.to_string(),
        })?
    }
}

fn open_conn(path: &Path, flags: OpenFlags) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(
        |e| StoreError::Open {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(|e| classify(path, &e))?;
    // WAL: readers never block the writer; NORMAL: commits survive a killed process.
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| classify(path, &e))?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| classify(path, &e))?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(|e| classify(path, &e))?;
    // Room for every statement the writer runs (parsed once each, not per write).
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// Prepared statements kept per connection: more than the writer's distinct ones.
const STATEMENT_CACHE: usize = 128;

fn classify(path: &Path, e: &rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
        _ => StoreError::Open {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
    }
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| classify(path, &e))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
        // IMMEDIATE takes the write lock first, so two processes opening a fresh store
        // at once migrate one after the other; the second sees the new version and skips.
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| classify(path, &e))?;
        let now: u32 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(|e| classify(path, &e))?;
        if now > i as u32 {
            continue;
        }
        tx.execute_batch(sql).map_err(|e| classify(path, &e))?;
        tx.pragma_update(None, "user_version", i as u32 + 1)
            .map_err(|e| classify(path, &e))?;
        tx.commit().map_err(|e| classify(path, &e))?;
    }
    Ok(())
}

/// How an agent ended, with its final conversation (JSON), as one stored fact.
pub struct AgentEnding<'a> {
    /// Its terminal state.
    pub state: AgentState,
    /// Its counters.
    pub stats: AgentStats,
    /// Its result text.
    pub result: &'a str,
    /// Why it failed, in words.
    pub error: Option<&'a str>,
    /// Why it failed, as a class.
    pub reason: Option<FailReason>,
    /// Its whole conversation, as JSON.
    pub conversation: String,
}

/// The one write of an agent's end.
fn finish_write(
    id: &AgentId,
    state: AgentState,
    stats: AgentStats,
    result: Option<&str>,
    error: Option<&str>,
    reason: Option<FailReason>,
    conversation: Option<String>,
) -> Write {
    Write::FinishAgent {
        id: id.clone(),
        state,
        stats,
        result: result.map(str::to_owned),
        error: error.map(str::to_owned),
        at: now_ms(),
        conversation,
        reason,
    }
}

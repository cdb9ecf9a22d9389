//! The single writer: one thread owns the write connection and commits queued writes in
//! groups, so many agents' facts cost one fsync-free WAL commit instead of one each.
//! Every write is acknowledged only after its transaction commits.

use std::sync::mpsc;

use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::{broadcast, oneshot};

use super::StoreError;
use super::records::{AgentRecord, AgentStats, ControlKind, DispatchRecord, RunRecord};
use super::remote::RemoteWrite;
use crate::event::{Event, EventRecord};
use crate::ids::{AgentId, RunId};
use crate::vocab::{AgentState, ExitReason, FailReason, RunStatus};

/// Events that record a decision, appended to the audit chain with them.
const AUDITED_EVENTS: &[&str] = &[
    "run.started",
    "run.resumed",
    "run.finished",
    "validator.verdict",
    "agent.validation",
    "crew.review",
    "orchestrate.plan",
    "team.merge_conflict",
    "agent.recovered",
];

/// Most writes committed in one transaction.
const MAX_GROUP: usize = 512;

/// One fact to store.
#[derive(Debug)]
pub(crate) enum Write {
    InsertRun(Box<RunRecord>),
    /// A new run with its `run.started` event (audited), in one transaction: a crash
    /// never leaves a run the chain does not say started (`audit verify` checks it).
    StartRun {
        run: Box<RunRecord>,
        event: Box<EventWrite>,
    },
    /// The run's end and its `run.finished` event (audited), in one transaction: a
    /// crash never leaves a finished run whose end no event or audit record tells.
    FinishRun {
        id: RunId,
        status: RunStatus,
        exit_reason: ExitReason,
        result: Option<String>,
        at: i64,
        event: Box<EventWrite>,
    },
    SetRunPid {
        id: RunId,
        pid: Option<u32>,
    },
    SetRunDetails {
        id: RunId,
        details: String,
    },
    RecordDispatch {
        record: Box<DispatchRecord>,
        keep: u32,
    },
    InsertAgent(Box<AgentRecord>),
    AgentState {
        id: AgentId,
        to: AgentState,
        at: i64,
    },
    FinishAgent {
        id: AgentId,
        state: AgentState,
        stats: AgentStats,
        result: Option<String>,
        error: Option<String>,
        at: i64,
        /// The agent's final conversation (JSON), stored with its end.
        conversation: Option<String>,
        /// Why it did not end well.
        reason: Option<FailReason>,
    },
    Event(Box<EventWrite>),
    PushControl {
        target: String,
        kind: ControlKind,
        message: Option<String>,
        at: i64,
    },
    ConsumeControls {
        seqs: Vec<i64>,
        at: i64,
    },
    Schedule(super::schedules::ScheduleWrite),
    Step(super::steps::StepWrite),
    Remote(super::remote::RemoteWrite),
    Dead(super::dead::DeadWrite),
    Exchange(Box<super::exchanges::ExchangeWrite>),
    /// Nothing: acknowledged once every write queued before it is committed.
    Barrier,
}

/// An event to append: its row and the typed event, published once committed.
#[derive(Debug)]
pub(crate) struct EventWrite {
    pub run_id: RunId,
    pub agent_id: Option<AgentId>,
    pub at: i64,
    pub kind: String,
    pub data: String,
    pub event: Event,
}

pub(crate) type Ack = Option<oneshot::Sender<Result<(), StoreError>>>;

/// What applying one write produced: for an event, its sequence number.
type Applied = Result<Option<i64>, StoreError>;

/// Where the writer says what it committed: each event as it is committed, and the
/// newest event's sequence number.
pub(crate) struct Published {
    pub events: broadcast::Sender<EventRecord>,
    pub last_seq: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

pub(crate) fn spawn(
    conn: Connection,
    published: Published,
    checkpoints: Option<super::checkpoint::Nudge>,
) -> std::io::Result<mpsc::Sender<(Write, Ack)>> {
    let (tx, rx) = mpsc::channel::<(Write, Ack)>();
    std::thread::Builder::new()
        .name("crewbox-store-writer".into())
        .spawn(move || run(conn, rx, published, checkpoints))?;
    Ok(tx)
}

fn run(
    mut conn: Connection,
    rx: mpsc::Receiver<(Write, Ack)>,
    published: Published,
    mut checkpoints: Option<super::checkpoint::Nudge>,
) {
    let Published { events, last_seq } = published;
    let mut group = Vec::with_capacity(MAX_GROUP);
    let mut fault = FaultHook::from_env();
    // Under the fault hook every write is its own transaction, so "the Nth write" is
    // exact.
    let max_group = if fault.is_some() { 1 } else { MAX_GROUP };
    while let Ok(first) = rx.recv() {
        group.push(first);
        while group.len() < max_group {
            match rx.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        if let Some(redactor) = crate::redact::snapshot() {
            for (write, _) in &mut group {
                redact(write, &redactor);
            }
        }
        let results = commit_group(&mut conn, &group);
        if let Some(hook) = &mut fault {
            hook.committed(group.len());
        }
        if let Some(nudge) = &mut checkpoints {
            nudge.committed(group.len());
        }
        for ((write, ack), result) in group.drain(..).zip(results) {
            // Published only once committed, so a subscriber never sees a lost event.
            let stored = match write {
                Write::Event(e)
                | Write::Remote(RemoteWrite::Event { event: e, .. })
                | Write::FinishRun { event: e, .. }
                | Write::StartRun { event: e, .. } => Some(e),
                _ => None,
            };
            if let (Some(_), Ok(Some(seq))) = (&stored, &result) {
                last_seq.fetch_max(*seq, std::sync::atomic::Ordering::Release);
            }
            if let (Some(e), Ok(Some(seq))) = (stored, &result)
                && events.receiver_count() > 0
            {
                let e = *e;
                let _ = events.send(EventRecord {
                    seq: *seq,
                    run_id: e.run_id,
                    agent_id: e.agent_id,
                    at: e.at,
                    event: e.event,
                });
            }
            if let Some(ack) = ack {
                let _ = ack.send(result.map(|_| ()));
            }
        }
        // After the acks: whoever waited on this group goes on meanwhile.
        if let Some(nudge) = &mut checkpoints {
            nudge.catch_up(&conn);
        }
    }
}

/// The test hook `CREWBOX_FAULT_AFTER_WRITES=N`: the process kills itself with SIGKILL
/// right after its Nth write is committed (before the writer of it hears back), the
/// way `kill -9` would between any two durable writes. Tests of crash recovery loop N
/// over a run's writes; it is not meant for anything else.
struct FaultHook {
    after: u64,
    done: u64,
}

impl FaultHook {
    fn from_env() -> Option<Self> {
        let after = std::env::var("CREWBOX_FAULT_AFTER_WRITES")
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)?;
        Some(Self { after, done: 0 })
    }

    fn committed(&mut self, writes: usize) {
        self.done += writes as u64;
        if self.done >= self.after {
            tracing::warn!(
                writes = self.done,
                "CREWBOX_FAULT_AFTER_WRITES reached: killing this process"
            );
            crate::process::kill_self();
        }
    }
}

/// Masks every registered secret in the text a write carries: this is the one door into
/// the database, so no row can hold a key whatever built it.
fn redact(write: &mut Write, redactor: &crate::redact::Redactor) {
    use super::schedules::ScheduleWrite;
    use super::steps::StepWrite;
    let clean = |s: &mut String| redactor.clean_in_place(s);
    let opt = |s: &mut Option<String>| {
        if let Some(s) = s {
            redactor.clean_in_place(s);
        }
    };
    match write {
        Write::InsertRun(r) | Write::StartRun { run: r, .. } => {
            clean(&mut r.prompt);
            opt(&mut r.result);
            redact_value(&mut r.spec, redactor);
            if let Some(d) = &mut r.details {
                redact_value(d, redactor);
            }
        }
        Write::FinishRun { result, .. } => opt(result),
        Write::SetRunDetails { details, .. } => clean(details),
        Write::RecordDispatch { record, .. } => clean(&mut record.reason),
        Write::InsertAgent(a) => clean(&mut a.task),
        Write::FinishAgent {
            result,
            error,
            conversation,
            ..
        } => {
            opt(result);
            opt(error);
            opt(conversation);
        }
        Write::Event(e) | Write::Remote(RemoteWrite::Event { event: e, .. }) => {
            // What subscribers are sent is what the log holds: an event that carried a
            // secret is published as read back from its cleaned row.
            if let std::borrow::Cow::Owned(cleaned) = redactor.clean(&e.data) {
                e.data = cleaned;
                let data = serde_json::from_str(&e.data).unwrap_or(serde_json::Value::Null);
                e.event = Event::from_parts(e.kind.clone(), data);
            }
        }
        Write::PushControl { message, .. } => opt(message),
        Write::Remote(RemoteWrite::Started { agent, .. }) => {
            clean(&mut agent.task);
            opt(&mut agent.result);
            opt(&mut agent.error);
        }
        Write::Exchange(x) => {
            clean(&mut x.agent_name);
            clean(&mut x.reply);
        }
        Write::Remote(RemoteWrite::Result(r)) => {
            opt(&mut r.result);
            opt(&mut r.error);
            opt(&mut r.conversation);
            for x in &mut r.exchanges {
                clean(&mut x.agent_name);
                clean(&mut x.reply);
            }
            for c in &mut r.children {
                clean(&mut c.task);
                opt(&mut c.result);
                opt(&mut c.error);
            }
        }
        Write::Step(StepWrite::Begin { data, .. }) => clean(data),
        Write::Step(StepWrite::Done {
            data, conversation, ..
        }) => {
            clean(data);
            opt(conversation);
        }
        Write::Schedule(ScheduleWrite::Insert(r)) => clean(&mut r.prompt),
        Write::SetRunPid { .. }
        | Write::AgentState { .. }
        | Write::ConsumeControls { .. }
        | Write::Dead(_)
        | Write::Remote(RemoteWrite::Forget { .. } | RemoteWrite::Unreported { .. })
        | Write::Barrier
        | Write::Step(
            StepWrite::ClaimRun { .. } | StepWrite::ReleaseRun { .. } | StepWrite::ClaimTeam { .. },
        )
        | Write::Schedule(
            ScheduleWrite::Remove { .. }
            | ScheduleWrite::Pause { .. }
            | ScheduleWrite::RunNow { .. }
            | ScheduleWrite::Fire { .. }
            | ScheduleWrite::Finished { .. },
        ) => {}
    }
}

fn redact_value(v: &mut serde_json::Value, r: &crate::redact::Redactor) {
    match v {
        serde_json::Value::String(s) => r.clean_in_place(s),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|i| redact_value(i, r)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|i| redact_value(i, r)),
        _ => {}
    }
}

/// Applies a group in one transaction. A write that fails is rolled back alone and
/// reported to its sender; the others still commit (the group is applied whole first,
/// and only when a write fails again write by write under savepoints).
///
/// The transaction is IMMEDIATE: it takes the write lock when it begins, waiting out
/// another process's writes (`busy_timeout`). A deferred one that reads first (the
/// audit head, a state check) cannot wait when it turns into a write after another
/// process wrote: SQLite answers "database is locked" at once, which failed the end of
/// a run when two processes shared a store.
fn commit_group(conn: &mut Connection, group: &[(Write, Ack)]) -> Vec<Applied> {
    match commit_whole(conn, group) {
        Whole::Done(results) => results,
        // Alone in its transaction, the failed write is its own answer.
        Whole::Failed(e) if group.len() == 1 => vec![Err(e)],
        Whole::Failed(_) => commit_each(conn, group),
    }
}

/// How a group fared applied whole.
enum Whole {
    /// Committed (or refused as one: begin or commit failed): each write's answer.
    Done(Vec<Applied>),
    /// A write failed (this error); the transaction was rolled back, nothing of the
    /// group is kept.
    Failed(StoreError),
}

/// The common case, where no write fails: the group in one transaction, without a
/// savepoint per write (two more statements each, which cost more than the writes).
fn commit_whole(conn: &mut Connection, group: &[(Write, Ack)]) -> Whole {
    let tx = match begin(conn) {
        Ok(tx) => tx,
        Err(e) => return Whole::Done(group.iter().map(|_| Err(e.clone())).collect()),
    };
    let mut results = Vec::with_capacity(group.len());
    for (write, _) in group {
        match apply(&tx, write) {
            Ok(seq) => results.push(Ok(seq)),
            // Dropping the transaction rolls back the whole group.
            Err(e) => return Whole::Failed(e),
        }
    }
    match tx.commit() {
        Ok(()) => Whole::Done(results),
        Err(e) => {
            let err = StoreError::sqlite("commit", &e);
            Whole::Done(group.iter().map(|_| Err(err.clone())).collect())
        }
    }
}

/// A group in which a write failed, again: each write under its own savepoint, so the
/// failed one is rolled back alone and reported to its sender; the others commit.
fn commit_each(conn: &mut Connection, group: &[(Write, Ack)]) -> Vec<Applied> {
    let mut tx = match begin(conn) {
        Ok(tx) => tx,
        Err(e) => return group.iter().map(|_| Err(e.clone())).collect(),
    };
    let mut results = Vec::with_capacity(group.len());
    for (write, _) in group {
        let result = match tx.savepoint() {
            Ok(sp) => match apply(&sp, write) {
                // Dropping an uncommitted savepoint rolls back just this write.
                Ok(seq) => sp
                    .commit()
                    .map(|()| seq)
                    .map_err(|e| StoreError::sqlite("commit savepoint", &e)),
                Err(e) => Err(e),
            },
            Err(e) => Err(StoreError::sqlite("savepoint", &e)),
        };
        results.push(result);
    }
    if let Err(e) = tx.commit() {
        let err = StoreError::sqlite("commit", &e);
        return group.iter().map(|_| Err(err.clone())).collect();
    }
    results
}

/// An IMMEDIATE transaction (see [`commit_group`]).
fn begin(conn: &mut Connection) -> Result<rusqlite::Transaction<'_>, StoreError> {
    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| StoreError::sqlite("begin transaction", &e))
}

/// Runs one statement through the connection's statement cache: the writer runs the
/// same few statements for every agent, and parsing them each time cost more than
/// running them.
pub(super) fn exec(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// The states an agent may be in to become `to` — the one transition rule,
/// [`AgentState::can_become`] — as SQL placeholders numbered from `first`, and their
/// values.
fn prior_states(to: AgentState, first: usize) -> (String, Vec<&'static str>) {
    let from: Vec<&'static str> = AgentState::ALL
        .into_iter()
        .filter(|s| s.can_become(to))
        .map(AgentState::as_str)
        .collect();
    let marks = (0..from.len())
        .map(|i| format!("?{}", first + i))
        .collect::<Vec<_>>()
        .join(", ");
    (marks, from)
}

/// Appends an event row; its sequence number.
/// The audit record of an agent spawned with the tools it was granted; `worker` names
/// the worker that started it, for a sub-agent a worker's agent spawned there.
pub(super) fn audit_spawn(
    conn: &Connection,
    a: &AgentRecord,
    worker: Option<&str>,
) -> Result<(), StoreError> {
    let mut data = serde_json::json!({
        "name": a.name,
        "role": a.role,
        "caps": a.caps,
        "parent": a.parent.as_ref().map(|p| p.as_str()),
        "depth": a.depth,
        "join": a.join,
    });
    if let Some(w) = worker {
        data["worker"] = serde_json::Value::from(w);
    }
    super::audit::append(
        conn,
        a.created_at,
        Some(a.run_id.as_str()),
        Some(a.id.as_str()),
        "spawn",
        &data,
    )
}

/// Keeps `agent`'s final conversation (JSON): what a retry continues from.
pub(super) fn store_conversation(
    conn: &Connection,
    agent: &str,
    conversation: &str,
) -> Result<(), StoreError> {
    exec(
        conn,
        "INSERT INTO agent_conversations (agent_id, conversation) VALUES (?1, ?2)
         ON CONFLICT (agent_id) DO UPDATE SET conversation = ?2",
        params![agent, conversation],
    )
    .map_err(|e| StoreError::sqlite("store agent conversation", &e))?;
    Ok(())
}

/// Stores an event and, when it records a decision ([`AUDITED_EVENTS`]), its audit
/// record in the same transaction: whoever made the decision (this process, or a worker
/// whose forwarded event this is), the chain holds it as a local run's would.
pub(super) fn insert_audited_event(conn: &Connection, e: &EventWrite) -> Result<i64, StoreError> {
    let seq = insert_event(conn, e)?;
    if AUDITED_EVENTS.contains(&e.kind.as_str()) {
        let data = serde_json::from_str(&e.data).unwrap_or(serde_json::Value::Null);
        super::audit::append(
            conn,
            e.at,
            Some(e.run_id.as_str()),
            e.agent_id.as_ref().map(|a| a.as_str()),
            &e.kind,
            &data,
        )?;
    }
    Ok(seq)
}

fn insert_event(conn: &Connection, e: &EventWrite) -> Result<i64, StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    conn.prepare_cached(
        "INSERT INTO events (run_id, agent_id, at, kind, data) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .map_err(q("prepare event"))?
    .execute(params![
        e.run_id.as_str(),
        e.agent_id.as_ref().map(|a| a.as_str()),
        e.at,
        e.kind,
        e.data
    ])
    .map_err(q("append event"))?;
    Ok(conn.last_insert_rowid())
}

fn insert_run(conn: &Connection, r: &RunRecord) -> Result<(), StoreError> {
    exec(
        conn,
        "INSERT INTO runs (id, mode, prompt, team, status, exit_reason, result, spec, pid, created_at, finished_at, details, pid_identity)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            r.id.as_str(),
            r.mode.as_str(),
            r.prompt,
            r.team,
            r.status.as_str(),
            r.exit_reason.map(|e| e.as_str()),
            r.result,
            r.spec.to_string(),
            r.pid,
            r.created_at,
            r.finished_at,
            r.details.as_ref().map(|d| d.to_string()),
            r.pid.and_then(crate::process::identity)
        ],
    )
    .map_err(|e| StoreError::sqlite("insert run", &e))?;
    Ok(())
}

fn apply(conn: &Connection, write: &Write) -> Applied {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    match write {
        Write::StartRun { run, event } => {
            insert_run(conn, run)?;
            return insert_audited_event(conn, event).map(Some);
        }
        Write::InsertRun(r) => insert_run(conn, r)?,
        Write::FinishRun {
            id,
            status,
            exit_reason,
            result,
            at,
            event,
        } => {
            // A run's result is usually one of its agents' results, stored already (up
            // to a reply's full size): then the run refers to that agent instead of
            // holding a second copy. Reads resolve it (see query.rs `RUN_COLS`).
            let of_agent: Option<String> = match result {
                Some(text) => conn
                    .query_row(
                        "SELECT id FROM agents WHERE run_id = ?1 AND result = ?2
                         ORDER BY created_at DESC, id DESC LIMIT 1",
                        params![id.as_str(), text],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(q("find the agent holding a run's result"))?,
                None => None,
            };
            let own = if of_agent.is_some() {
                None
            } else {
                result.as_deref()
            };
            exec(
                conn,
                "UPDATE runs SET status = ?2, exit_reason = ?3, result = ?4, result_agent = ?5,
                 finished_at = ?6, pid = NULL, pid_identity = NULL WHERE id = ?1",
                params![
                    id.as_str(),
                    status.as_str(),
                    exit_reason.as_str(),
                    own,
                    of_agent,
                    at
                ],
            )
            .map_err(q("finish run"))?;
            exec(
                conn,
                "DELETE FROM team_locks WHERE run_id = ?1",
                params![id.as_str()],
            )
            .map_err(q("release team lock"))?;
            return insert_audited_event(conn, event).map(Some);
        }
        Write::SetRunPid { id, pid } => {
            exec(
                conn,
                "UPDATE runs SET pid = ?2, pid_identity = ?3 WHERE id = ?1",
                params![id.as_str(), pid, pid.and_then(crate::process::identity)],
            )
            .map_err(q("set run pid"))?;
        }
        Write::SetRunDetails { id, details } => {
            exec(
                conn,
                "UPDATE runs SET details = ?2 WHERE id = ?1",
                params![id.as_str(), details],
            )
            .map_err(q("set run details"))?;
        }
        Write::RecordDispatch { record, keep } => {
            exec(
            conn,
                "INSERT INTO dispatch_history (run_id, at, kind, source, prompt_len, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    record.run_id.as_ref().map(|r| r.as_str()),
                    record.at,
                    record.kind.as_str(),
                    record.source,
                    record.prompt_len as i64,
                    record.reason
                ],
            )
            .map_err(q("record dispatch"))?;
            super::audit::append(
                conn,
                record.at,
                record.run_id.as_ref().map(|r| r.as_str()),
                None,
                "dispatch",
                &serde_json::json!({
                    "mode": record.kind.as_str(),
                    "source": record.source,
                    "reason": record.reason,
                }),
            )?;
            exec(
            conn,
                "DELETE FROM dispatch_history WHERE seq <= (SELECT MAX(seq) FROM dispatch_history) - ?1",
                params![keep],
            )
            .map_err(q("trim dispatch history"))?;
        }
        Write::InsertAgent(a) => {
            exec(
            conn,
                "INSERT INTO agents (id, run_id, parent_id, name, role, task, caps, depth, join_mode, state, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    a.id.as_str(),
                    a.run_id.as_str(),
                    a.parent.as_ref().map(|p| p.as_str()),
                    a.name,
                    a.role,
                    a.task,
                    serde_json::to_string(&a.caps).unwrap_or_default(),
                    a.depth,
                    a.join,
                    a.state.as_str(),
                    a.created_at
                ],
            )
            .map_err(q("insert agent"))?;
            audit_spawn(conn, a, None)?;
        }
        Write::AgentState { id, to, at } => {
            let (marks, from) = prior_states(*to, 4);
            let sql = format!(
                "UPDATE agents SET state = ?2, started_at = COALESCE(started_at, ?3) WHERE id = ?1 AND state IN ({marks})"
            );
            let (agent, to_name) = (id.as_str(), to.as_str());
            let mut values: Vec<&dyn rusqlite::ToSql> = vec![&agent, &to_name, at];
            values.extend(from.iter().map(|s| s as &dyn rusqlite::ToSql));
            let changed = conn
                .prepare_cached(&sql)
                .map_err(q("prepare agent state"))?
                .execute(values.as_slice())
                .map_err(q("set agent state"))?;
            if changed == 0 {
                return Err(StoreError::Transition {
                    agent: id.to_string(),
                    to: *to,
                });
            }
        }
        Write::FinishAgent {
            id,
            state,
            stats,
            result,
            error,
            at,
            conversation,
            reason,
        } => {
            let (marks, from) = prior_states(*state, 12);
            let sql = format!(
                "UPDATE agents SET state = ?2, turns = ?3, tool_calls = ?4, tokens_in = ?5, tokens_out = ?6,
                 cost = ?7, result = ?8, error = ?9, finished_at = ?10, fail_reason = ?11
                 WHERE id = ?1 AND state IN ({marks})"
            );
            let reason = reason.map(FailReason::as_str);
            let (tokens_in, tokens_out) = (
                i64::try_from(stats.tokens_in).unwrap_or(i64::MAX),
                i64::try_from(stats.tokens_out).unwrap_or(i64::MAX),
            );
            let (agent, state_name) = (id.as_str(), state.as_str());
            let mut values: Vec<&dyn rusqlite::ToSql> = vec![
                &agent,
                &state_name,
                &stats.turns,
                &stats.tool_calls,
                &tokens_in,
                &tokens_out,
                &stats.cost,
                result,
                error,
                at,
                &reason,
            ];
            values.extend(from.iter().map(|s| s as &dyn rusqlite::ToSql));
            let changed = conn
                .prepare_cached(&sql)
                .map_err(q("prepare finish agent"))?
                .execute(values.as_slice())
                .map_err(q("finish agent"))?;
            if changed == 0 {
                return Err(StoreError::Transition {
                    agent: id.to_string(),
                    to: *state,
                });
            }
            if let Some(conversation) = conversation {
                store_conversation(conn, agent, conversation)?;
            }
        }
        Write::Event(e) => return insert_audited_event(conn, e).map(Some),
        Write::PushControl {
            target,
            kind,
            message,
            at,
        } => {
            exec(
                conn,
                "INSERT INTO controls (target, kind, message, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![target, kind.as_str(), message, at],
            )
            .map_err(q("push control"))?;
            super::audit::append(
                conn,
                *at,
                None,
                None,
                &format!("control.{}", kind.as_str()),
                &serde_json::json!({ "target": target, "message": message }),
            )?;
        }
        Write::ConsumeControls { seqs, at } => {
            let mut stmt = conn
                .prepare_cached("UPDATE controls SET consumed_at = ?2 WHERE seq = ?1")
                .map_err(q("prepare consume control"))?;
            for seq in seqs {
                stmt.execute(params![seq, at])
                    .map_err(q("consume control"))?;
            }
        }
        Write::Schedule(w) => super::schedules::apply(conn, w)?,
        Write::Step(w) => super::steps::apply(conn, w)?,
        Write::Remote(w) => return super::remote::apply(conn, w),
        Write::Dead(w) => super::dead::apply(conn, w)?,
        Write::Exchange(x) => super::exchanges::apply(conn, x)?,
        Write::Barrier => {}
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group with a failing write in the middle: applied whole, the failure rolls
    /// everything back, and the group is applied again write by write, so only the
    /// failed write is lost and it alone gets the error.
    #[test]
    fn a_failed_write_costs_only_itself_in_its_group() {
        use crate::store::records::RunRecord;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.db");
        let mut conn = super::super::open_conn(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_CREATE,
        )
        .unwrap();
        super::super::migrate(&mut conn, &path).unwrap();
        let first = RunRecord::started(crate::vocab::Mode::Single, "a", serde_json::json!({}));
        let second = RunRecord::started(crate::vocab::Mode::Single, "b", serde_json::json!({}));
        let group: Vec<(Write, Ack)> = vec![
            (Write::InsertRun(Box::new(first.clone())), None),
            (
                Write::SetRunPid {
                    id: first.id.clone(),
                    pid: Some(42),
                },
                None,
            ),
            // The same id again: a primary-key conflict.
            (Write::InsertRun(Box::new(first.clone())), None),
            (Write::InsertRun(Box::new(second.clone())), None),
        ];
        let results = commit_group(&mut conn, &group);
        let ok: Vec<bool> = results.iter().map(Result::is_ok).collect();
        assert_eq!(ok, [true, true, false, true], "{results:?}");
        let runs: Vec<(String, Option<i64>)> = conn
            .prepare("SELECT id, pid FROM runs ORDER BY created_at, id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(runs.len(), 2, "{runs:?}");
        assert!(runs.contains(&(first.id.to_string(), Some(42))), "{runs:?}");
        assert!(
            runs.contains(&(second.id.to_string(), second.pid.map(i64::from))),
            "{runs:?}"
        );
        // Alone in its group, a failed write is its own error.
        let again = commit_group(&mut conn, &group[2..3]);
        assert!(again[0].is_err());
    }

    #[test]
    fn the_store_takes_its_transitions_from_the_lifecycle() {
        assert_eq!(
            prior_states(AgentState::Running, 4),
            ("?4".into(), vec!["queued"])
        );
        assert_eq!(
            prior_states(AgentState::Error, 12),
            ("?12, ?13".into(), vec!["queued", "running"])
        );
        assert_eq!(prior_states(AgentState::Completed, 1).1, ["running"]);
        assert!(
            prior_states(AgentState::Queued, 1).1.is_empty(),
            "nothing becomes queued"
        );
    }
}

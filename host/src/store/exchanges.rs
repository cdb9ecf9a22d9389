//! Model exchanges: one row per agent turn, the fingerprint of the request as sent
//! and the full reply (text, tool calls, usage, why it stopped), so a run can be
//! replayed (the replay provider names their types). Rows go through the single writer without waiting,
//! like events, so recording costs an agent nothing but the queueing; the writer
//! redacts them like every row.

use std::path::Path;

use rusqlite::{Connection, OpenFlags, params};

use super::writer::Write;
use super::{Store, StoreError, now_ms};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ids::{AgentId, RunId};

/// One model exchange to store. The store keeps the request's fingerprint and the reply
/// as JSON and does not know their types: the provider layer names them (`Q`, `R`).
#[derive(Clone, Debug)]
pub struct ExchangeRecord<Q, R> {
    /// The run.
    pub run_id: RunId,
    /// The agent that made the call.
    pub agent_id: AgentId,
    /// The calling agent's name.
    pub agent: String,
    /// Its 1-based turn.
    pub turn: u32,
    /// The fingerprint of the request as sent.
    pub request: Q,
    /// The model's whole reply.
    pub reply: R,
}

/// One stored model exchange, read back as the types the caller names.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredExchange<Q, R> {
    /// The calling agent's name.
    pub agent: String,
    /// Its 1-based turn.
    pub turn: u32,
    /// The fingerprint of the request as sent.
    pub request: Q,
    /// The model's whole reply.
    pub reply: R,
}

/// What [`Store::exchanges`] reads: the stored exchange with its JSON parts typed.
pub type Exchanges<Q, R> = Vec<StoredExchange<Q, R>>;

/// The row form of an `ExchangeRecord`: its JSON parts serialised once, before the
/// writer redacts them (also how a worker reads its agents' exchanges back and how the
/// coordinator records them with their result, see [`super::RemoteResult`]).
#[derive(Clone, Debug)]
pub struct ExchangeWrite {
    /// The run.
    pub run_id: RunId,
    /// The agent that made the call.
    pub agent_id: AgentId,
    /// The calling agent's name.
    pub agent_name: String,
    /// Its 1-based turn.
    pub turn: u32,
    /// The request's fingerprint (JSON).
    pub request: String,
    /// The model's whole reply (JSON).
    pub reply: String,
    /// When the call was answered (ms since the epoch).
    pub at: i64,
}

impl Store {
    /// Stores one model exchange without waiting (order with the agent's other writes
    /// is kept: its end is committed after it).
    pub fn record_exchange<Q: Serialize, R: Serialize>(&self, record: ExchangeRecord<Q, R>) {
        let write = Write::Exchange(Box::new(ExchangeWrite {
            run_id: record.run_id,
            agent_id: record.agent_id,
            agent_name: record.agent,
            turn: record.turn,
            request: serde_json::to_string(&record.request).unwrap_or_default(),
            reply: serde_json::to_string(&record.reply).unwrap_or_default(),
            at: now_ms(),
        }));
        if let Err(e) = self.send(write, None) {
            tracing::warn!(error = %e, "model exchange not stored");
        }
    }

    /// Every model exchange of run `run`, in the order they were made.
    pub async fn exchanges<Q, R>(&self, run: &RunId) -> Result<Exchanges<Q, R>, StoreError>
    where
        Q: DeserializeOwned + Send + 'static,
        R: DeserializeOwned + Send + 'static,
    {
        let run = run.clone();
        self.read(move |c| read_run(c, &run)).await
    }

    /// The model exchanges of `agents` in run `run` as stored (their JSON parts as
    /// text), in the order they were made: what a worker sends with a task's result.
    pub async fn agents_exchanges(
        &self,
        run: &RunId,
        agents: Vec<AgentId>,
    ) -> Result<Vec<ExchangeWrite>, StoreError> {
        let run = run.clone();
        self.read(move |c| {
            let ids =
                serde_json::Value::from(agents.iter().map(AgentId::as_str).collect::<Vec<_>>());
            let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
            let mut stmt = c
                // `+run_id`: found by agent (a few rows each), not by run (a worker's
                // store holds the calls of many agents of a run until it forgets them).
                .prepare_cached(
                    "SELECT agent_id, agent_name, turn, request, reply, at FROM model_exchanges
                     WHERE +run_id = ?1 AND agent_id IN (SELECT value FROM json_each(?2))
                     ORDER BY seq",
                )
                .map_err(q("prepare model exchanges"))?;
            let rows = stmt
                .query_map(params![run.as_str(), ids.to_string()], |r| {
                    Ok(ExchangeWrite {
                        run_id: run.clone(),
                        agent_id: AgentId::from_string(r.get::<_, String>(0)?),
                        agent_name: r.get(1)?,
                        turn: r.get(2)?,
                        request: r.get(3)?,
                        reply: r.get(4)?,
                        at: r.get(5)?,
                    })
                })
                .map_err(q("read model exchanges"))?;
            rows.map(|r| r.map_err(q("read model exchange"))).collect()
        })
        .await
    }
}

/// Reads run `run`'s exchanges from the store in `state_dir` on a connection of its
/// own (blocking: for building a `replay` provider, where config files are read too).
pub fn exchanges_blocking<Q: DeserializeOwned, R: DeserializeOwned>(
    db: &Path,
    run: &RunId,
) -> Result<Exchanges<Q, R>, StoreError> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| {
        StoreError::Open {
            path: db.to_path_buf(),
            detail: e.to_string(),
        }
    })?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(|e| StoreError::sqlite("set busy timeout", &e))?;
    read_run(&conn, run)
}

fn read_run<Q: DeserializeOwned, R: DeserializeOwned>(
    c: &Connection,
    run: &RunId,
) -> Result<Exchanges<Q, R>, StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    let mut stmt = c
        .prepare_cached(
            // The calls of attempts a later one replaced (an agent a resume found
            // interrupted, a dead letter retried) last: a replay answers a name, turn and
            // request from the first unused call that has them, which must be the
            // attempt that went on, not the one cut short.
            &format!(
                "SELECT agent_name, turn, request, reply FROM model_exchanges
                 WHERE run_id = ?1 ORDER BY (agent_id IN ({})), seq",
                super::dead::SUPERSEDED_SQL
            ),
        )
        .map_err(q("prepare model exchanges"))?;
    let rows = stmt
        .query_map(params![run.as_str()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, u32>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .map_err(q("read model exchanges"))?;
    let mut out = Vec::new();
    for row in rows {
        out.push(typed(row.map_err(q("read model exchange"))?)?);
    }
    Ok(out)
}

/// A stored exchange's columns (agent name, turn, request, reply) read as the types
/// the caller names.
fn typed<Q: DeserializeOwned, R: DeserializeOwned>(
    (agent, turn, request, reply): (String, u32, String, String),
) -> Result<StoredExchange<Q, R>, StoreError> {
    let bad = |what: &str, e: serde_json::Error| StoreError::Sqlite {
        op: "read model exchange",
        detail: format!("the stored {what} of agent `{agent}` turn {turn} does not read: {e}"),
    };
    let request = serde_json::from_str(&request).map_err(|e| bad("request", e))?;
    let reply = serde_json::from_str(&reply).map_err(|e| bad("reply", e))?;
    Ok(StoredExchange {
        agent,
        turn,
        request,
        reply,
    })
}

/// Inserts one exchange row.
pub(crate) fn apply(conn: &Connection, w: &ExchangeWrite) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO model_exchanges (run_id, agent_id, agent_name, turn, request, reply, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .map_err(|e| StoreError::sqlite("prepare model exchange", &e))?
    .execute(params![
        w.run_id.as_str(),
        w.agent_id.as_str(),
        w.agent_name,
        w.turn,
        w.request,
        w.reply,
        w.at
    ])
    .map_err(|e| StoreError::sqlite("store model exchange", &e))?;
    Ok(())
}

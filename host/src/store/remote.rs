//! What workers on other machines send back, stored idempotently (scale-out, see
//! `remote/`). JetStream delivers at least once, so every write here is keyed: an event
//! by its sender's execution and sequence number (`remote_events`), a result by the
//! agent it is recorded for (`remote_results`). A second delivery of either changes
//! nothing, in the same transaction that would have stored it.

use rusqlite::{Connection, params};

use super::records::{AgentRecord, AgentStats};
use super::writer::{EventWrite, Write};
use super::{Store, StoreError, now_ms};
use crate::event::Event;
use crate::ids::{AgentId, RunId};
use crate::vocab::AgentState;

/// A write of this module.
#[derive(Debug)]
pub(crate) enum RemoteWrite {
    /// An event a worker forwarded, stored once per `key`.
    Event {
        /// Unique within the run: the sender's execution and sequence number.
        key: String,
        /// The event row.
        event: Box<EventWrite>,
    },
    /// An agent's result, recorded once per agent.
    Result(Box<RemoteResult>),
    /// A sub-agent a remote agent started on its worker, known here while it runs
    /// (recorded and audited once; its result's record brings its end).
    Started {
        /// The sub-agent's row as the worker has it.
        agent: Box<AgentRecord>,
        /// The worker running it.
        worker: String,
    },
    /// Sub-agents recorded while they ran whose parent's result did not say how they
    /// ended: they end as errors.
    Unreported {
        /// Their run.
        run_id: RunId,
        /// The sub-agents.
        agents: Vec<AgentId>,
    },
    /// A worker's own store forgets answered tasks' agents and the agents they
    /// started (see [`Store::queue_forget_agents`]).
    Forget {
        /// The tasks' agents.
        agents: Vec<AgentId>,
    },
}

/// An agent's end as a worker reported it.
#[derive(Debug, Clone)]
pub struct RemoteResult {
    /// Its run.
    pub run_id: RunId,
    /// The agent it is recorded for.
    pub agent_id: AgentId,
    /// The task it answers.
    pub task_key: String,
    /// The worker that ran it.
    pub worker: String,
    /// Its terminal state.
    pub state: AgentState,
    /// Counters.
    pub stats: AgentStats,
    /// Its final text.
    pub result: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// The class of its failure (the dead-letter class `crewbox dead` shows).
    pub reason: Option<crate::vocab::FailReason>,
    /// Agents it spawned on the worker (`spawn_agent`), recorded alongside.
    pub children: Vec<AgentRecord>,
    /// Its final conversation (JSON), as a local agent's end stores it: what `crewbox
    /// retry` continues a failed agent from. `None` when the worker sent none (a
    /// result over the size bound drops it).
    pub conversation: Option<String>,
    /// The model exchanges of the agent and of the agents it started there, as the
    /// worker recorded them: what `crewbox replay` and `export --cassette` read. Stored
    /// with the result, so once however often it is delivered.
    pub exchanges: Vec<super::ExchangeWrite>,
}

/// One agent's worker, for `status` and `tree`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct AgentWorker {
    /// The agent.
    pub agent_id: String,
    /// The worker that ran it.
    pub worker: String,
    /// The task it ran in (its own, or its ancestor's for an agent started on the
    /// worker).
    pub task_key: String,
}

impl Store {
    /// Stores an event a worker forwarded unless an event with `key` is stored already;
    /// an `agent.state: running` event also moves the queued agent to running here.
    /// Queued in order with every other write, not waited for: [`super::Pending::committed`]
    /// says whether it was stored (the events of one message commit together).
    pub fn queue_remote_event(
        &self,
        run_id: &RunId,
        agent_id: Option<&AgentId>,
        at: i64,
        key: String,
        event: Event,
    ) -> Result<super::Pending, StoreError> {
        let (kind, data) = event.to_stored();
        let event = Box::new(EventWrite {
            run_id: run_id.clone(),
            agent_id: agent_id.cloned(),
            at,
            kind,
            data,
            event,
        });
        self.queue(Write::Remote(RemoteWrite::Event { key, event }))
    }

    /// Records a sub-agent that a remote agent started on `worker`, while it runs, so it
    /// can be steered and stopped from here (once: a second delivery, or its parent's
    /// result listing it later, does not record or audit it again). Queued in order with
    /// every other write, not waited for.
    pub fn queue_remote_started(
        &self,
        agent: AgentRecord,
        worker: String,
    ) -> Result<super::Pending, StoreError> {
        self.queue(Write::Remote(RemoteWrite::Started {
            agent: Box::new(agent),
            worker,
        }))
    }

    /// Ends `agents` of `run` (sub-agents recorded while they ran) as errors unless they
    /// have an end already: their parent's result, the last word of their worker, did
    /// not list them (a result over the size bound lists fewer).
    pub fn queue_remote_unreported(
        &self,
        run_id: &RunId,
        agents: Vec<AgentId>,
    ) -> Result<super::Pending, StoreError> {
        self.queue(Write::Remote(RemoteWrite::Unreported {
            run_id: run_id.clone(),
            agents,
        }))
    }

    /// Records an agent's remote result once (a second delivery is a no-op).
    pub async fn record_remote_result(&self, result: RemoteResult) -> Result<(), StoreError> {
        self.write(Write::Remote(RemoteWrite::Result(Box::new(result))))
            .await
    }

    /// Deletes what this store holds of `agents` and of the agents they started (their
    /// rows, events, journal steps, conversations, model exchanges, audit records and
    /// dead-letter marks), in one transaction queued after every write queued before
    /// it. For a `crewbox worker`'s own store only: it runs each task's agent as a
    /// local run does and answers the task with what the coordinator keeps, so once
    /// the task is answered nothing reads these rows again, and without this the store
    /// of a long-lived worker grows with every task it ever ran. (The audit chain of
    /// such a store has gaps where agents were forgotten; that store is deleted when
    /// the worker stops and never verified.) Runs' own rows stay: more tasks of a run
    /// may come.
    pub fn queue_forget_agents(&self, agents: Vec<AgentId>) -> Result<super::Pending, StoreError> {
        self.queue(Write::Remote(RemoteWrite::Forget { agents }))
    }

    /// The agents recorded with a result for task `key` in `run`.
    pub async fn remote_agents_of_task(
        &self,
        run: &RunId,
        key: &str,
    ) -> Result<Vec<AgentId>, StoreError> {
        let (run, key) = (run.clone(), key.to_owned());
        self.read(move |c| {
            let mut stmt = c
                .prepare_cached(
                    "SELECT agent_id FROM remote_results WHERE run_id = ?1 AND task_key = ?2",
                )
                .map_err(|e| StoreError::sqlite("read remote results", &e))?;
            let rows = stmt
                .query_map(params![run.as_str(), key], |r| r.get::<_, String>(0))
                .map_err(|e| StoreError::sqlite("read remote results", &e))?;
            rows.map(|r| {
                r.map(AgentId::from_string)
                    .map_err(|e| StoreError::sqlite("read remote results", &e))
            })
            .collect()
        })
        .await
    }

    /// Which worker ran each remote agent of `run`: the tasks' agents, then the agents
    /// those started on their workers (with their ancestor's worker and task).
    pub async fn agent_workers(&self, run: &RunId) -> Result<Vec<AgentWorker>, StoreError> {
        let run = run.clone();
        self.read(move |c| {
            let q = |e: rusqlite::Error| StoreError::sqlite("read agent workers", &e);
            let mut stmt = c
                .prepare_cached(
                    "SELECT agent_id, worker, task_key FROM remote_results WHERE run_id = ?1 ORDER BY at",
                )
                .map_err(q)?;
            let rows = stmt
                .query_map(params![run.as_str()], |r| {
                    Ok(AgentWorker {
                        agent_id: r.get(0)?,
                        worker: r.get(1)?,
                        task_key: r.get(2)?,
                    })
                })
                .map_err(q)?;
            let mut out = rows.collect::<Result<Vec<_>, _>>().map_err(q)?;
            if out.is_empty() {
                return Ok(out);
            }
            let mut stmt = c
                .prepare_cached(
                    "SELECT id, parent_id FROM agents WHERE run_id = ?1 AND parent_id IS NOT NULL
                     ORDER BY created_at, id",
                )
                .map_err(q)?;
            let spawned = stmt
                .query_map(params![run.as_str()], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .map_err(q)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(q)?;
            out.extend(started_on_workers(&out, &spawned));
            Ok(out)
        })
        .await
    }
}

/// The agents of `spawned` (id, parent; parents first) whose ancestor ran on a worker
/// (`tasks`) and that did not themselves: each with that ancestor's worker and task.
fn started_on_workers(tasks: &[AgentWorker], spawned: &[(String, String)]) -> Vec<AgentWorker> {
    use std::collections::HashMap;
    let mut found: HashMap<&str, (&str, &str)> = tasks
        .iter()
        .map(|w| {
            (
                w.agent_id.as_str(),
                (w.worker.as_str(), w.task_key.as_str()),
            )
        })
        .collect();
    let mut out = Vec::new();
    // Parents were created before their children, so one pass in creation order sees
    // each parent's worker before its children.
    for (id, parent) in spawned {
        if found.contains_key(id.as_str()) {
            continue;
        }
        if let Some(&(worker, key)) = found.get(parent.as_str()) {
            found.insert(id, (worker, key));
            out.push(AgentWorker {
                agent_id: id.clone(),
                worker: worker.to_owned(),
                task_key: key.to_owned(),
            });
        }
    }
    out
}

/// Applies a remote write; an event that was stored returns its sequence number.
pub(crate) fn apply(conn: &Connection, write: &RemoteWrite) -> Result<Option<i64>, StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    match write {
        RemoteWrite::Event { key, event: e } => {
            let new = conn
                .prepare_cached("INSERT OR IGNORE INTO remote_events (run_id, key) VALUES (?1, ?2)")
                .map_err(q("prepare remote event key"))?
                .execute(params![e.run_id.as_str(), key])
                .map_err(q("record remote event key"))?;
            if new == 0 {
                return Ok(None);
            }
            if let (Event::AgentState { state, .. }, Some(agent)) = (&e.event, &e.agent_id)
                && *state == AgentState::Running
            {
                super::writer::exec(
                    conn,
                    "UPDATE agents SET state = 'running', started_at = COALESCE(started_at, ?2)
                     WHERE id = ?1 AND run_id = ?3 AND state = 'queued'",
                    params![agent.as_str(), e.at, e.run_id.as_str()],
                )
                .map_err(q("mark a remote agent running"))?;
            }
            // Only a new event: a redelivered one is neither stored nor audited twice.
            super::writer::insert_audited_event(conn, e).map(Some)
        }
        RemoteWrite::Result(r) => {
            let at = now_ms();
            let new = conn
                .execute(
                    "INSERT OR IGNORE INTO remote_results (run_id, agent_id, task_key, worker, at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        r.run_id.as_str(),
                        r.agent_id.as_str(),
                        r.task_key,
                        r.worker,
                        at
                    ],
                )
                .map_err(q("record remote result"))?;
            if new == 0 {
                return Ok(None);
            }
            for c in &r.children {
                if !insert_started(conn, c, &r.worker)? {
                    finish_started(conn, c)?;
                }
            }
            // Only an agent still waiting for its result takes it: one that resume
            // marked interrupted keeps that ending (its step is re-run as a new agent).
            super::writer::exec(
                conn,
                "UPDATE agents SET state = ?2, turns = ?3, tool_calls = ?4, tokens_in = ?5,
                 tokens_out = ?6, cost = ?7, result = ?8, error = ?9, finished_at = ?10,
                 started_at = COALESCE(started_at, ?10), fail_reason = ?12
                 WHERE id = ?1 AND run_id = ?11 AND state IN ('queued', 'running')",
                params![
                    r.agent_id.as_str(),
                    r.state.as_str(),
                    r.stats.turns,
                    r.stats.tool_calls,
                    i64::try_from(r.stats.tokens_in).unwrap_or(i64::MAX),
                    i64::try_from(r.stats.tokens_out).unwrap_or(i64::MAX),
                    r.stats.cost,
                    r.result,
                    r.error,
                    at,
                    r.run_id.as_str(),
                    r.reason.map(crate::vocab::FailReason::as_str)
                ],
            )
            .map_err(q("record a remote agent's end"))?;
            if let Some(conversation) = &r.conversation {
                super::writer::store_conversation(conn, r.agent_id.as_str(), conversation)?;
            }
            for x in &r.exchanges {
                super::exchanges::apply(conn, x)?;
            }
            Ok(None)
        }
        RemoteWrite::Started { agent, worker } => {
            insert_started(conn, agent, worker)?;
            Ok(None)
        }
        RemoteWrite::Unreported { run_id, agents } => {
            let ids =
                serde_json::Value::from(agents.iter().map(AgentId::as_str).collect::<Vec<_>>());
            let at = now_ms();
            super::writer::exec(
                conn,
                "UPDATE agents SET state = ?5, fail_reason = ?6, error = ?3,
                 finished_at = ?4, started_at = COALESCE(started_at, ?4)
                 WHERE run_id = ?1 AND id IN (SELECT value FROM json_each(?2))
                 AND state IN ('queued', 'running')",
                params![
                    run_id.as_str(),
                    ids.to_string(),
                    "its worker's result for its parent's task did not say how it ended",
                    at,
                    AgentState::Error.as_str(),
                    crate::vocab::FailReason::Internal.as_str()
                ],
            )
            .map_err(q("end unreported remote sub-agents"))?;
            Ok(None)
        }
        RemoteWrite::Forget { agents } => {
            forget(conn, agents)?;
            Ok(None)
        }
    }
}

/// Inserts sub-agent `c` that a remote agent started on `worker` and audits its spawn,
/// unless it is recorded already; whether it was inserted.
fn insert_started(conn: &Connection, c: &AgentRecord, worker: &str) -> Result<bool, StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    let inserted = super::writer::exec(
        conn,
        "INSERT OR IGNORE INTO agents (id, run_id, parent_id, name, role, task, caps, depth,
         join_mode, state, turns, tool_calls, tokens_in, tokens_out, cost, result, error,
         created_at, started_at, finished_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
         ?17, ?18, ?19, ?20)",
        params![
            c.id.as_str(),
            c.run_id.as_str(),
            c.parent.as_ref().map(|p| p.as_str()),
            c.name,
            c.role,
            c.task,
            serde_json::to_string(&c.caps).unwrap_or_default(),
            c.depth,
            c.join,
            c.state.as_str(),
            c.stats.turns,
            c.stats.tool_calls,
            i64::try_from(c.stats.tokens_in).unwrap_or(i64::MAX),
            i64::try_from(c.stats.tokens_out).unwrap_or(i64::MAX),
            c.stats.cost,
            c.result,
            c.error,
            c.created_at,
            c.started_at,
            c.finished_at
        ],
    )
    .map_err(q("record a remote sub-agent"))?;
    // Spawned on the worker: audited here as a local spawn is, once.
    if inserted > 0 {
        super::writer::audit_spawn(conn, c, Some(worker))?;
    }
    Ok(inserted > 0)
}

/// Brings a sub-agent recorded while it ran (see [`insert_started`]) to its end as its
/// parent's result lists it; an end it has already is kept.
fn finish_started(conn: &Connection, c: &AgentRecord) -> Result<(), StoreError> {
    super::writer::exec(
        conn,
        "UPDATE agents SET state = ?3, turns = ?4, tool_calls = ?5, tokens_in = ?6,
         tokens_out = ?7, cost = ?8, result = ?9, error = ?10,
         started_at = COALESCE(started_at, ?11), finished_at = ?12
         WHERE id = ?1 AND run_id = ?2 AND state IN ('queued', 'running')",
        params![
            c.id.as_str(),
            c.run_id.as_str(),
            c.state.as_str(),
            c.stats.turns,
            c.stats.tool_calls,
            i64::try_from(c.stats.tokens_in).unwrap_or(i64::MAX),
            i64::try_from(c.stats.tokens_out).unwrap_or(i64::MAX),
            c.stats.cost,
            c.result,
            c.error,
            c.started_at,
            c.finished_at
        ],
    )
    .map_err(|e| StoreError::sqlite("record a remote sub-agent's end", &e))?;
    Ok(())
}

/// The rows of `agents` and of the agents they started, deleted (see
/// [`Store::queue_forget_agents`]). One statement per table for the whole batch; the
/// tables without an index by agent are scanned, which stays cheap as a worker's
/// store then only holds what it runs and what it has not forgotten yet.
fn forget(conn: &Connection, agents: &[AgentId]) -> Result<(), StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    if agents.is_empty() {
        return Ok(());
    }
    let roots = serde_json::Value::from(agents.iter().map(AgentId::as_str).collect::<Vec<_>>());
    // `UNION` keeps each agent once.
    let ids: Vec<String> = {
        let mut stmt = conn
            .prepare_cached(
                "WITH RECURSIVE tree(id) AS (
                     SELECT value FROM json_each(?1)
                     UNION SELECT a.id FROM agents a JOIN tree t ON a.parent_id = t.id)
                 SELECT id FROM tree",
            )
            .map_err(q("find the agents to forget"))?;
        let rows = stmt
            .query_map(params![roots.to_string()], |r| r.get(0))
            .map_err(q("find the agents to forget"))?;
        rows.collect::<Result<_, _>>()
            .map_err(q("find the agents to forget"))?
    };
    let ids = serde_json::Value::from(ids).to_string();
    const BY_AGENT: [&str; 7] = [
        "DELETE FROM events WHERE agent_id IN (SELECT value FROM json_each(?1))",
        "DELETE FROM steps WHERE agent_id IN (SELECT value FROM json_each(?1))",
        "DELETE FROM audit WHERE agent_id IN (SELECT value FROM json_each(?1))",
        "DELETE FROM model_exchanges WHERE agent_id IN (SELECT value FROM json_each(?1))",
        "DELETE FROM agent_conversations WHERE agent_id IN (SELECT value FROM json_each(?1))",
        "DELETE FROM dead_letters WHERE agent_id IN (SELECT value FROM json_each(?1))",
        "DELETE FROM agents WHERE id IN (SELECT value FROM json_each(?1))",
    ];
    for sql in BY_AGENT {
        conn.prepare_cached(sql)
            .map_err(q("prepare forgetting agents"))?
            .execute(params![ids])
            .map_err(q("forget agents"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_started_on_workers_take_their_ancestors_worker_and_task() {
        let tasks = [AgentWorker {
            agent_id: "a".into(),
            worker: "w1".into(),
            task_key: "k1".into(),
        }];
        let spawned = [
            ("b".to_owned(), "a".to_owned()),
            ("c".to_owned(), "b".to_owned()),
            ("d".to_owned(), "local".to_owned()),
            ("a".to_owned(), "root".to_owned()),
        ];
        let got: Vec<(String, String, String)> = started_on_workers(&tasks, &spawned)
            .into_iter()
            .map(|w| (w.agent_id, w.worker, w.task_key))
            .collect();
        let want = |id: &str| (id.to_owned(), "w1".to_owned(), "k1".to_owned());
        assert_eq!(got, vec![want("b"), want("c")]);
    }
}

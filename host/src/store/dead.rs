//! Dead letters: agents that ended `error` or `aborted` (a provider that failed, an open
//! circuit breaker, a budget, an interrupted process) and that nobody dropped or retried
//! yet. Each keeps its spec (the agent row), its last conversation
//! (`agent_conversations`), its failure (`error`, `fail_reason`) and the journal step it
//! did, so `crewbox retry` can run that step again inside its run.
//!
//! A dead letter stops being one when it is dropped or retried (`dead_letters` holds
//! which, and a retry's overrides); the agent row stays, so history keeps every attempt.
//! Both decisions are appended to the audit chain in the same transaction.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use super::{Store, StoreError, now_ms, writer::Write};
use crate::ids::{AgentId, RunId};
use crate::vocab::{AgentState, DeadClass, DeadDisposition, FailReason};

/// One dead letter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeadLetter {
    /// The agent.
    pub agent_id: AgentId,
    /// Its run.
    pub run_id: RunId,
    /// Its name (`alice`, `agent`, `swarm-2`, …).
    pub name: String,
    /// Its role.
    pub role: String,
    /// How it ended (`error` or `aborted`; `completed` when a validator faulted on its
    /// work).
    pub state: AgentState,
    /// Why, as a kind (absent for agents stored before kinds were), by its stored
    /// name (the one its error text starts with).
    #[serde(serialize_with = "reason_name")]
    pub reason: Option<FailReason>,
    /// What an operator does about it.
    pub class: DeadClass,
    /// Why, as the agent's error says.
    pub error: Option<String>,
    /// The journal step it did (`member/alice`, `agent/swarm-2`, …); absent for an agent
    /// another agent spawned, which is retried through its parent.
    pub step: Option<String>,
    /// The commit its run's agents start from, when journaled.
    pub base: Option<String>,
    /// Whether its last conversation is stored (a retry continues it).
    pub conversation: bool,
    /// How often its step was retried before.
    pub retries: u32,
    /// When it ended (ms).
    pub finished_at: Option<i64>,
}

/// What a retry changes about the agent it runs again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryOverrides {
    /// Another of the user's providers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Another model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A lower or higher turn limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Start from the task again instead of the stored conversation.
    #[serde(default)]
    pub fresh: bool,
}

/// A retry stored for a run: the step to run again, the dead agent it replaces and how.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPlan {
    /// The dead agent.
    pub agent_id: AgentId,
    /// Its step.
    pub step: String,
    /// What changes.
    pub overrides: RetryOverrides,
}

/// A write of this module.
#[derive(Debug)]
pub(crate) enum DeadWrite {
    /// Forget dead letters (they stay in history).
    Drop {
        agents: Vec<(AgentId, RunId)>,
        at: i64,
    },
    /// Reopen a dead letter's step and its run, so resuming the run runs it again.
    Retry {
        agent_id: AgentId,
        run_id: RunId,
        step: String,
        overrides: String,
        at: i64,
    },
}

/// The columns [`dead_row`] reads.
const DEAD_COLS: &str = "a.id, a.run_id, a.name, a.role, a.state, a.fail_reason, a.error, a.finished_at, \
     (SELECT s.key FROM steps s WHERE s.run_id = a.run_id AND s.agent_id = a.id LIMIT 1), \
     (SELECT b.data FROM steps b WHERE b.run_id = a.run_id AND b.key = 'base'), \
     EXISTS (SELECT 1 FROM agent_conversations c WHERE c.agent_id = a.id), \
     a.state NOT IN ('error', 'aborted')";

/// An agent is a dead letter while it ended badly — `error`, `aborted`, or its work
/// unjudged because a validator faulted —, nobody dropped or retried it, and it
/// still stands for its work: it is its step's agent (a resume that ran the step again
/// superseded it) or a child another agent spawned that failed on its own (a child
/// found interrupted is redone with the step of the agent that spawned it — an
/// orchestrated or reflect worker whose step a resume ran again with a new agent, a
/// sub-agent — and retrying it is refused).
const DEAD_WHERE: &str = "(a.state IN ('error', 'aborted') OR (a.state IN ('completed', 'steered') \
          AND EXISTS (SELECT 1 FROM events e WHERE e.run_id = a.run_id AND e.agent_id = a.id \
              AND e.kind = 'agent.validation' AND json_extract(e.data, '$.status') = 'faulted'))) \
     AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.agent_id = a.id) \
     AND ((a.parent_id IS NOT NULL AND COALESCE(a.fail_reason, '') <> 'interrupted') \
          OR EXISTS (SELECT 1 FROM steps s WHERE s.run_id = a.run_id AND s.agent_id = a.id))";

fn dead_row(r: &Row<'_>) -> rusqlite::Result<DeadLetter> {
    let state: String = r.get(4)?;
    let state = AgentState::parse(&state).unwrap_or(AgentState::Error);
    // It completed, but a validator faulted on its work.
    let faulted: bool = r.get(11)?;
    let reason = r
        .get::<_, Option<String>>(5)?
        .as_deref()
        .and_then(FailReason::parse);
    let base = r
        .get::<_, Option<String>>(9)?
        .and_then(|d| serde_json::from_str::<String>(&d).ok());
    Ok(DeadLetter {
        agent_id: AgentId::from_string(r.get::<_, String>(0)?),
        run_id: RunId::from_string(r.get::<_, String>(1)?),
        name: r.get(2)?,
        role: r.get(3)?,
        state,
        class: if faulted {
            DeadClass::Plugin
        } else {
            classify(state, reason)
        },
        reason,
        error: r.get(6)?,
        finished_at: r.get(7)?,
        step: r.get(8)?,
        base,
        conversation: r.get(10)?,
        retries: 0,
    })
}

fn reason_name<S: serde::Serializer>(r: &Option<FailReason>, s: S) -> Result<S::Ok, S::Error> {
    match r {
        Some(r) => s.serialize_str(r.as_str()),
        None => s.serialize_none(),
    }
}

/// The class of an agent that ended `state` for `reason`.
fn classify(state: AgentState, reason: Option<FailReason>) -> DeadClass {
    match (reason, state) {
        (Some(reason), _) => reason.dead_class(),
        (None, AgentState::Aborted) => DeadClass::Budget,
        // Stored before reasons were: a failure of the model or of crewbox.
        (None, _) => DeadClass::Transient,
    }
}

impl Store {
    /// The dead letters, oldest first; of one run when `run` is given.
    pub async fn dead_letters(&self, run: Option<&RunId>) -> Result<Vec<DeadLetter>, StoreError> {
        let run = run.map(|r| r.as_str().to_owned());
        self.read(move |c| {
            let sql = format!(
                "SELECT {DEAD_COLS} FROM agents a WHERE {DEAD_WHERE} \
                 AND (?1 IS NULL OR a.run_id = ?1) ORDER BY a.finished_at, a.id"
            );
            let op = "list dead letters";
            let mut stmt = c
                .prepare_cached(&sql)
                .map_err(|e| StoreError::sqlite(op, &e))?;
            let rows = stmt
                .query_map(params![run], dead_row)
                .map_err(|e| StoreError::sqlite(op, &e))?;
            let mut out = rows
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(|e| StoreError::sqlite(op, &e))?;
            for d in &mut out {
                d.retries = retries(c, &d.run_id, d.step.as_deref())?;
            }
            Ok(out)
        })
        .await
    }

    /// Agent `id` when it is a dead letter.
    pub async fn dead_letter(&self, id: &AgentId) -> Result<Option<DeadLetter>, StoreError> {
        let id = id.clone();
        self.read(move |c| {
            let sql = format!("SELECT {DEAD_COLS} FROM agents a WHERE a.id = ?1 AND {DEAD_WHERE}");
            let found = c
                .query_row(&sql, params![id.as_str()], dead_row)
                .optional()
                .map_err(|e| StoreError::sqlite("read dead letter", &e))?;
            match found {
                Some(mut d) => {
                    d.retries = retries(c, &d.run_id, d.step.as_deref())?;
                    Ok(Some(d))
                }
                None => Ok(None),
            }
        })
        .await
    }

    /// Forgets dead letters: they are no longer listed, and stay in history.
    pub async fn drop_dead(&self, agents: Vec<(AgentId, RunId)>) -> Result<(), StoreError> {
        if agents.is_empty() {
            return Ok(());
        }
        self.write(Write::Dead(DeadWrite::Drop {
            agents,
            at: now_ms(),
        }))
        .await
    }

    /// Marks dead letter `d` retried with `overrides`, and reopens its step, the steps
    /// begun after it ended (they saw its failure) and its run, in one transaction: the
    /// run's next resume runs that step again. Refused when `d` is no longer a dead
    /// letter or a live process drives its run.
    pub async fn retry_dead(
        &self,
        d: &DeadLetter,
        overrides: &RetryOverrides,
    ) -> Result<(), StoreError> {
        let step = d.step.clone().ok_or_else(|| StoreError::NotDead {
            agent: d.agent_id.to_string(),
            why: "it has no step of its own (another agent spawned it)".into(),
        })?;
        self.write(Write::Dead(DeadWrite::Retry {
            agent_id: d.agent_id.clone(),
            run_id: d.run_id.clone(),
            step,
            overrides: serde_json::to_string(overrides).unwrap_or_default(),
            at: now_ms(),
        }))
        .await
    }

    /// The retries stored for run `run`, oldest first.
    pub async fn retry_plans(&self, run: &RunId) -> Result<Vec<RetryPlan>, StoreError> {
        let run = run.clone();
        self.read(move |c| {
            let op = "read retries";
            let mut stmt = c
                .prepare_cached(
                    "SELECT agent_id, step, overrides FROM dead_letters
                     WHERE run_id = ?1 AND disposition = ?2 AND step IS NOT NULL ORDER BY at",
                )
                .map_err(|e| StoreError::sqlite(op, &e))?;
            let rows = stmt
                .query_map(
                    params![run.as_str(), DeadDisposition::Retried.as_str()],
                    |r| {
                        let overrides: Option<String> = r.get(2)?;
                        Ok(RetryPlan {
                            agent_id: AgentId::from_string(r.get::<_, String>(0)?),
                            step: r.get(1)?,
                            overrides: overrides
                                .and_then(|o| serde_json::from_str(&o).ok())
                                .unwrap_or_default(),
                        })
                    },
                )
                .map_err(|e| StoreError::sqlite(op, &e))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(|e| StoreError::sqlite(op, &e))
        })
        .await
    }
}

/// The agents of `run` a later attempt replaced: those a resume found interrupted,
/// and dead letters retried.
pub(crate) const SUPERSEDED_SQL: &str =
    "SELECT id FROM agents WHERE run_id = ?1 AND fail_reason = 'interrupted'
     UNION SELECT agent_id FROM dead_letters WHERE run_id = ?1 AND disposition = 'retried'";

impl Store {
    /// The agents of `run` a later attempt of their step replaced (found interrupted
    /// by a resume, or retried as dead letters): what a comparison of the run with a
    /// replay of it leaves out (a replay runs each step once).
    pub async fn superseded_agents(
        &self,
        run: &RunId,
    ) -> Result<std::collections::HashSet<AgentId>, StoreError> {
        let run = run.clone();
        self.read(move |c| {
            let op = "read replaced agents";
            let mut stmt = c
                .prepare_cached(SUPERSEDED_SQL)
                .map_err(|e| StoreError::sqlite(op, &e))?;
            let rows = stmt
                .query_map(params![run.as_str()], |r| r.get::<_, String>(0))
                .map_err(|e| StoreError::sqlite(op, &e))?;
            rows.map(|r| r.map(AgentId::from_string))
                .collect::<rusqlite::Result<_>>()
                .map_err(|e| StoreError::sqlite(op, &e))
        })
        .await
    }
}

/// How often `step` of `run` was retried.
fn retries(c: &Connection, run: &RunId, step: Option<&str>) -> Result<u32, StoreError> {
    let Some(step) = step else { return Ok(0) };
    c.query_row(
        "SELECT COUNT(*) FROM dead_letters WHERE run_id = ?1 AND step = ?2 AND disposition = ?3",
        params![run.as_str(), step, DeadDisposition::Retried.as_str()],
        |r| r.get(0),
    )
    .map_err(|e| StoreError::sqlite("count retries", &e))
}

pub(crate) fn apply(conn: &Connection, w: &DeadWrite) -> Result<(), StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    match w {
        DeadWrite::Drop { agents, at } => {
            for (agent, run) in agents {
                let added = conn
                    .execute(
                        "INSERT INTO dead_letters (agent_id, run_id, disposition, at) VALUES (?1, ?2, ?3, ?4)
                         ON CONFLICT (agent_id) DO NOTHING",
                        params![
                            agent.as_str(),
                            run.as_str(),
                            DeadDisposition::Dropped.as_str(),
                            at
                        ],
                    )
                    .map_err(q("drop dead letter"))?;
                if added > 0 {
                    super::audit::append(
                        conn,
                        *at,
                        Some(run.as_str()),
                        Some(agent.as_str()),
                        "dead.drop",
                        &serde_json::json!({}),
                    )?;
                }
            }
        }
        DeadWrite::Retry {
            agent_id,
            run_id,
            step,
            overrides,
            at,
        } => retry(conn, agent_id, run_id, step, overrides, *at)?,
    }
    Ok(())
}

/// Whether steps `a` and `b` of a run in `mode` belong to one group whose members run
/// side by side and never see each other's work: the workers of one orchestrated
/// round (`worker/…`, `it2/worker/…`), and the members of a `broadcast` run.
/// `sequential` members are not: each one reads the replies before it.
fn same_group(mode: &str, a: &str, b: &str) -> bool {
    let group = |k: &str| k.rsplit_once('/').map(|(g, _)| g.to_owned());
    let (Some(ga), Some(gb)) = (group(a), group(b)) else {
        return false;
    };
    ga == gb && (ga.ends_with("worker") || (ga == "member" && mode == "broadcast"))
}

fn retry(
    conn: &Connection,
    agent: &AgentId,
    run: &RunId,
    step: &str,
    overrides: &str,
    at: i64,
) -> Result<(), StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    // Checked again inside the transaction: two retries of one letter run it once.
    let still: bool = conn
        .query_row(
            &format!("SELECT EXISTS (SELECT 1 FROM agents a WHERE a.id = ?1 AND {DEAD_WHERE})"),
            params![agent.as_str()],
            |r| r.get(0),
        )
        .map_err(q("check dead letter"))?;
    if !still {
        return Err(StoreError::NotDead {
            agent: agent.to_string(),
            why: "it was dropped or retried meanwhile".into(),
        });
    }
    let holder: Option<(Option<u32>, Option<String>)> = conn
        .query_row(
            "SELECT pid, pid_identity FROM runs WHERE id = ?1",
            params![run.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(q("read run owner"))?;
    if let Some((Some(pid), identity)) = holder
        && pid != std::process::id()
        && crate::process::still_running(pid, identity.as_deref())
    {
        return Err(StoreError::RunBusy {
            id: run.to_string(),
            pid,
        });
    }
    let ended: Option<i64> = conn
        .query_row(
            "SELECT COALESCE(finished_at, started_at) FROM steps WHERE run_id = ?1 AND key = ?2",
            params![run.as_str(), step],
            |r| r.get(0),
        )
        .optional()
        .map_err(q("read dead letter's step"))?;
    let Some(ended) = ended else {
        return Err(StoreError::NotDead {
            agent: agent.to_string(),
            why: format!("its step `{step}` is not in its run's journal"),
        });
    };
    // Later steps took the failure in (a later member saw its reply, a synthesis
    // summed it up): they run again with the new result. Steps begun before it ended
    // (the run's base and workspace), and the rest of its group whenever they began
    // (a broadcast member or an orchestrated worker that waited for a free slot, or
    // one a retry ran again), never saw it: they stand.
    let mode: String = conn
        .query_row(
            "SELECT mode FROM runs WHERE id = ?1",
            params![run.as_str()],
            |r| r.get(0),
        )
        .map_err(q("read run mode"))?;
    let later: Vec<String> = {
        let mut stmt = conn
            .prepare_cached(
                "SELECT key FROM steps WHERE run_id = ?1 AND key <> ?2 AND started_at >= ?3",
            )
            .map_err(q("read later steps"))?;
        let keys = stmt
            .query_map(params![run.as_str(), step, ended], |r| r.get(0))
            .map_err(q("read later steps"))?;
        keys.collect::<rusqlite::Result<_>>()
            .map_err(q("read later steps"))?
    };
    let mut redone = 0;
    for key in later.iter().filter(|k| !same_group(&mode, step, k)) {
        redone += conn
            .execute(
                "DELETE FROM steps WHERE run_id = ?1 AND key = ?2",
                params![run.as_str(), key],
            )
            .map_err(q("reopen later steps"))?;
    }
    super::writer::exec(
        conn,
        "UPDATE steps SET state = 'started', finished_at = NULL, conversation = NULL
         WHERE run_id = ?1 AND key = ?2",
        params![run.as_str(), step],
    )
    .map_err(q("reopen step"))?;
    // The process retrying drives the run from here on (engine::retry resumes it at
    // once): recorded with the reopening, so the run is never seen `running` with no
    // driver — `status` showed it interrupted until the resume claimed it, and another
    // process could have taken it over.
    let pid = std::process::id();
    super::writer::exec(
        conn,
        "UPDATE runs SET status = 'running', exit_reason = NULL, result = NULL,
         result_agent = NULL, finished_at = NULL, pid = ?2, pid_identity = ?3 WHERE id = ?1",
        params![run.as_str(), pid, crate::process::identity(pid)],
    )
    .map_err(q("reopen run"))?;
    super::writer::exec(
        conn,
        "INSERT INTO dead_letters (agent_id, run_id, disposition, step, overrides, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            agent.as_str(),
            run.as_str(),
            DeadDisposition::Retried.as_str(),
            step,
            overrides,
            at
        ],
    )
    .map_err(q("record retry"))?;
    let overrides = serde_json::from_str(overrides).unwrap_or(serde_json::Value::Null);
    super::audit::append(
        conn,
        at,
        Some(run.as_str()),
        Some(agent.as_str()),
        "retry",
        &serde_json::json!({ "step": step, "overrides": overrides, "steps_redone": redone }),
    )
}

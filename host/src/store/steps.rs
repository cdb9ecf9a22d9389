//! The run journal and run/team ownership: what makes a run resumable after `kill -9`.
//!
//! Every step of a mode that costs a model call (a plan, one worker's part, a
//! synthesis, an evaluation, the messages taken from a team's inbox) has a key unique
//! within its run, e.g. `it2/worker/alice`. A step is stored as `started` (with the
//! agent doing it) before it runs and as `done` (with its result) as soon as it ends.
//! A resumed run replays its mode: a `done` step is read back instead of run again.
//!
//! A run is driven by at most one process (`runs.pid`, taken over only from a dead
//! process), and a team runs at most one reflect loop at a time (`team_locks`).

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{Store, StoreError, now_ms, writer::Write};
use crate::ids::RunId;

/// Where a step is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepState {
    /// Begun; its result is not stored (it is re-run on resume).
    Started,
    /// Its result is stored.
    Done,
}

impl StepState {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Done => "done",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "started" => Some(Self::Started),
            "done" => Some(Self::Done),
            _ => None,
        }
    }
}

/// One stored step of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Unique within the run, e.g. `plan`, `it2/worker/alice`.
    pub key: String,
    /// Started or done.
    pub state: StepState,
    /// The agent doing it, if any.
    pub agent_id: Option<String>,
    /// The step's input when started, its result when done.
    pub data: serde_json::Value,
    /// When it was begun (ms).
    pub started_at: i64,
    /// When its result was stored (ms).
    pub finished_at: Option<i64>,
}

/// A write of this module.
#[derive(Debug)]
pub(crate) enum StepWrite {
    Begin {
        run_id: RunId,
        key: String,
        agent_id: Option<String>,
        data: String,
        at: i64,
    },
    Done {
        run_id: RunId,
        key: String,
        agent_id: Option<String>,
        data: String,
        at: i64,
        /// Control messages this step took in, marked consumed in the same transaction.
        consume: Vec<i64>,
        /// The agent's final conversation (JSON), for steps done by one agent.
        conversation: Option<String>,
    },
    ClaimRun {
        id: RunId,
        pid: u32,
    },
    ReleaseRun {
        id: RunId,
        pid: u32,
    },
    ClaimTeam {
        team: String,
        run_id: RunId,
        pid: u32,
        at: i64,
    },
}

pub(crate) fn apply(conn: &Connection, w: &StepWrite) -> Result<(), StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    match w {
        StepWrite::Begin {
            run_id,
            key,
            agent_id,
            data,
            at,
        } => {
            // A done step is never demoted: its result is what a resume relies on. A
            // step begun again (resumed, retried) keeps when it first began: its place
            // in the run, which a retry of another step reads (what began after that
            // one ended took its failure in; a step merely re-run later did not).
            super::writer::exec(conn,
                "INSERT INTO steps (run_id, key, state, agent_id, data, started_at) VALUES (?1, ?2, 'started', ?3, ?4, ?5)
                 ON CONFLICT (run_id, key) DO UPDATE SET agent_id = ?3, data = ?4 WHERE state <> 'done'",
                params![run_id.as_str(), key, agent_id, data, at],
            )
            .map_err(q("begin step"))?;
        }
        StepWrite::Done {
            run_id,
            key,
            agent_id,
            data,
            at,
            consume,
            conversation,
        } => {
            super::writer::exec(conn,
                "INSERT INTO steps (run_id, key, state, agent_id, data, started_at, finished_at, conversation) VALUES (?1, ?2, 'done', ?3, ?4, ?5, ?5, ?6)
                 ON CONFLICT (run_id, key) DO UPDATE SET state = 'done', agent_id = COALESCE(?3, agent_id), data = ?4, finished_at = ?5, conversation = ?6",
                params![run_id.as_str(), key, agent_id, data, at, conversation],
            )
            .map_err(q("finish step"))?;
            // A merge into a team's integration branch is a decision the chain keeps.
            if key.starts_with("merge/") {
                let merged = serde_json::from_str(data).unwrap_or(serde_json::Value::Null);
                super::audit::append(
                    conn,
                    *at,
                    Some(run_id.as_str()),
                    agent_id.as_deref(),
                    "merge",
                    &serde_json::json!({ "step": key, "merged": merged }),
                )?;
            }
            for seq in consume {
                super::writer::exec(
                    conn,
                    "UPDATE controls SET consumed_at = ?2 WHERE seq = ?1 AND consumed_at IS NULL",
                    params![seq, at],
                )
                .map_err(q("consume team message"))?;
            }
        }
        StepWrite::ClaimRun { id, pid } => {
            let row: Option<(String, Option<u32>, Option<String>)> = conn
                .query_row(
                    "SELECT status, pid, pid_identity FROM runs WHERE id = ?1",
                    params![id.as_str()],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()
                .map_err(q("read run owner"))?;
            let Some((status, holder, holder_identity)) = row else {
                return Err(StoreError::NoSuchRun { id: id.to_string() });
            };
            if status != "running" {
                return Err(StoreError::RunFinished {
                    id: id.to_string(),
                    status,
                });
            }
            if let Some(holder) = holder
                && holder != *pid
                && crate::process::still_running(holder, holder_identity.as_deref())
            {
                return Err(StoreError::RunBusy {
                    id: id.to_string(),
                    pid: holder,
                });
            }
            super::writer::exec(
                conn,
                "UPDATE runs SET pid = ?2, pid_identity = ?3 WHERE id = ?1",
                params![id.as_str(), pid, crate::process::identity(*pid)],
            )
            .map_err(q("claim run"))?;
        }
        StepWrite::ReleaseRun { id, pid } => {
            super::writer::exec(
                conn,
                "UPDATE runs SET pid = NULL, pid_identity = NULL WHERE id = ?1 AND pid = ?2",
                params![id.as_str(), pid],
            )
            .map_err(q("release run"))?;
        }
        StepWrite::ClaimTeam {
            team,
            run_id,
            pid,
            at,
        } => {
            // The insert takes the write lock first, so the check below sees the latest
            // holder even when several processes claim at once.
            let inserted = conn
                .execute(
                    "INSERT INTO team_locks (team, run_id, pid, at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (team) DO NOTHING",
                    params![team, run_id.as_str(), pid, at],
                )
                .map_err(q("claim team"))?;
            if inserted == 1 {
                return Ok(());
            }
            let (holder_run, holder_pid): (String, u32) = conn
                .query_row(
                    "SELECT run_id, pid FROM team_locks WHERE team = ?1",
                    params![team],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(q("read team lock"))?;
            if holder_run != run_id.as_str() {
                let run: Option<(String, Option<u32>, Option<String>)> = conn
                    .query_row(
                        "SELECT status, pid, pid_identity FROM runs WHERE id = ?1",
                        params![holder_run],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()
                    .map_err(q("read team lock run"))?;
                // A holder still counts while its run is unfinished and its process
                // lives (or its run row is not written yet, by a live process). The
                // run's driver is the holder: its recorded identity tells a pid the
                // kernel gave another process since from the holder.
                let unfinished = run.as_ref().is_none_or(|(s, _, _)| s == "running");
                let identity = run
                    .as_ref()
                    .filter(|(_, driver, _)| *driver == Some(holder_pid))
                    .and_then(|(_, _, identity)| identity.as_deref());
                let alive =
                    holder_pid == *pid || crate::process::still_running(holder_pid, identity);
                if unfinished && alive {
                    return Err(StoreError::TeamBusy {
                        team: team.clone(),
                        run_id: holder_run,
                        pid: holder_pid,
                    });
                }
            }
            super::writer::exec(
                conn,
                "UPDATE team_locks SET run_id = ?2, pid = ?3, at = ?4 WHERE team = ?1",
                params![team, run_id.as_str(), pid, at],
            )
            .map_err(q("take over team lock"))?;
        }
    }
    Ok(())
}

fn step_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StepRecord> {
    let state: String = r.get(1)?;
    let data: String = r.get(3)?;
    Ok(StepRecord {
        key: r.get(0)?,
        state: StepState::parse(&state).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                1,
                rusqlite::types::Type::Text,
                format!("step state: {state}").into(),
            )
        })?,
        agent_id: r.get(2)?,
        data: serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
        started_at: r.get(4)?,
        finished_at: r.get(5)?,
    })
}

impl Store {
    /// Records that a step begins (before its agent runs). A done step stays done.
    pub async fn begin_step(
        &self,
        run_id: &RunId,
        key: &str,
        agent_id: Option<&str>,
        data: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.write(Write::Step(StepWrite::Begin {
            run_id: run_id.clone(),
            key: key.to_owned(),
            agent_id: agent_id.map(str::to_owned),
            data: data.to_string(),
            at: now_ms(),
        }))
        .await
    }

    /// Stores a step's result, consuming the control messages it took in with it, and
    /// the final conversation of the agent that did it (JSON), if any.
    pub async fn finish_step(
        &self,
        run_id: &RunId,
        key: &str,
        agent_id: Option<&str>,
        data: &serde_json::Value,
        consume: Vec<i64>,
        conversation: Option<String>,
    ) -> Result<(), StoreError> {
        self.write(Write::Step(StepWrite::Done {
            run_id: run_id.clone(),
            key: key.to_owned(),
            agent_id: agent_id.map(str::to_owned),
            data: data.to_string(),
            at: now_ms(),
            consume,
            conversation,
        }))
        .await
    }

    /// The stored conversations of a run's done steps: (step key, conversation JSON).
    pub async fn step_conversations(
        &self,
        run_id: &RunId,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let id = run_id.clone();
        self.read(move |c| {
            let mut stmt = c
                .prepare(
                    "SELECT key, conversation FROM steps
                     WHERE run_id = ?1 AND state = 'done' AND conversation IS NOT NULL",
                )
                .map_err(|e| StoreError::sqlite("read step conversations", &e))?;
            let rows = stmt
                .query_map(params![id.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(|e| StoreError::sqlite("read step conversations", &e))?;
            rows.collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::sqlite("read step conversations", &e))
        })
        .await
    }

    /// Makes this process the driver of an unfinished run. Refused while another live
    /// process drives it, or once it has finished.
    pub async fn claim_run(&self, id: &RunId) -> Result<(), StoreError> {
        self.write(Write::Step(StepWrite::ClaimRun {
            id: id.clone(),
            pid: std::process::id(),
        }))
        .await
    }

    /// Lets go of a run this process drives without finishing it (it stays resumable).
    pub async fn release_run(&self, id: &RunId) -> Result<(), StoreError> {
        self.write(Write::Step(StepWrite::ReleaseRun {
            id: id.clone(),
            pid: std::process::id(),
        }))
        .await
    }

    /// Takes team `team`'s loop lock for `run_id`: refused with
    /// [`StoreError::TeamBusy`] while another unfinished run of a live process holds
    /// it. Released when the run finishes.
    pub async fn claim_team(&self, team: &str, run_id: &RunId) -> Result<(), StoreError> {
        self.write(Write::Step(StepWrite::ClaimTeam {
            team: team.to_ascii_lowercase(),
            run_id: run_id.clone(),
            pid: std::process::id(),
            at: now_ms(),
        }))
        .await
    }

    /// The run holding team `team`'s loop lock, if any (it may be stale).
    pub async fn team_lock(&self, team: &str) -> Result<Option<(RunId, u32)>, StoreError> {
        let team = team.to_ascii_lowercase();
        self.read(move |c| {
            c.query_row(
                "SELECT run_id, pid FROM team_locks WHERE team = ?1",
                params![team],
                |r| Ok((RunId::from_string(r.get::<_, String>(0)?), r.get(1)?)),
            )
            .optional()
            .map_err(|e| StoreError::sqlite("read team lock", &e))
        })
        .await
    }

    /// Step `key` of a run, when it was begun.
    pub async fn step(&self, run_id: &RunId, key: &str) -> Result<Option<StepRecord>, StoreError> {
        let (id, key) = (run_id.clone(), key.to_owned());
        self.read(move |c| {
            c.query_row(
                "SELECT key, state, agent_id, data, started_at, finished_at FROM steps
                 WHERE run_id = ?1 AND key = ?2",
                params![id.as_str(), key],
                step_row,
            )
            .optional()
            .map_err(|e| StoreError::sqlite("read step", &e))
        })
        .await
    }

    /// Every step of a run, in the order they were begun.
    pub async fn steps(&self, run_id: &RunId) -> Result<Vec<StepRecord>, StoreError> {
        let id = run_id.clone();
        self.read(move |c| {
            let mut stmt = c
                .prepare(
                    "SELECT key, state, agent_id, data, started_at, finished_at FROM steps
                     WHERE run_id = ?1 ORDER BY started_at, rowid",
                )
                .map_err(|e| StoreError::sqlite("read steps", &e))?;
            let rows = stmt
                .query_map(params![id.as_str()], step_row)
                .map_err(|e| StoreError::sqlite("read steps", &e))?;
            rows.collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::sqlite("read steps", &e))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_round_trip() {
        for s in [StepState::Started, StepState::Done] {
            assert_eq!(StepState::parse(s.as_str()), Some(s));
        }
        assert_eq!(StepState::parse("other"), None);
    }
}

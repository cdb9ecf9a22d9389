//! Reads. They run on the reader connection, off the async runtime.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::records::driver_gone;
use super::records::{AgentRecord, AgentStats, ControlKind, ControlRecord, RunRecord};
use super::{Store, StoreError};
use crate::event::{Event, EventKind, EventRecord};
use crate::ids::{AgentId, RunId};
use crate::vocab::{AgentState, ExitReason, Mode, RunStatus};

/// A run's result is its own, or (stored once) that of the agent it names.
const RUN_COLS: &str = "id, mode, prompt, team, status, exit_reason, \
     COALESCE(result, (SELECT a.result FROM agents a WHERE a.id = runs.result_agent)), \
     spec, pid, created_at, finished_at, details, pid_identity";
const AGENT_COLS: &str = "id, run_id, parent_id, name, role, task, caps, depth, join_mode, state, turns, tool_calls, \
     tokens_in, tokens_out, cost, result, error, created_at, started_at, finished_at";

fn bad(op: &'static str, what: impl std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        0,
        rusqlite::types::Type::Text,
        format!("{op}: {what}").into(),
    )
}

fn run_row(r: &Row<'_>) -> rusqlite::Result<RunRecord> {
    let mode: String = r.get(1)?;
    let status: String = r.get(4)?;
    let exit: Option<String> = r.get(5)?;
    let spec: String = r.get(7)?;
    Ok(RunRecord {
        id: RunId::from_string(r.get::<_, String>(0)?),
        mode: Mode::parse(&mode).ok_or_else(|| bad("run mode", &mode))?,
        prompt: r.get(2)?,
        team: r.get(3)?,
        status: RunStatus::parse(&status).ok_or_else(|| bad("run status", &status))?,
        exit_reason: exit
            .map(|e| ExitReason::parse(&e).ok_or_else(|| bad("exit reason", &e)))
            .transpose()?,
        result: r.get(6)?,
        spec: serde_json::from_str(&spec).map_err(|e| bad("run spec", e))?,
        pid: r.get(8)?,
        created_at: r.get(9)?,
        finished_at: r.get(10)?,
        details: r
            .get::<_, Option<String>>(11)?
            .and_then(|d| serde_json::from_str(&d).ok()),
        pid_identity: r.get(12)?,
    })
}

fn agent_row(r: &Row<'_>) -> rusqlite::Result<AgentRecord> {
    let caps: String = r.get(6)?;
    let state: String = r.get(9)?;
    Ok(AgentRecord {
        id: AgentId::from_string(r.get::<_, String>(0)?),
        run_id: RunId::from_string(r.get::<_, String>(1)?),
        parent: r.get::<_, Option<String>>(2)?.map(AgentId::from_string),
        name: r.get(3)?,
        role: r.get(4)?,
        task: r.get(5)?,
        caps: serde_json::from_str(&caps).map_err(|e| bad("agent caps", e))?,
        depth: r.get(7)?,
        join: r.get(8)?,
        state: AgentState::parse(&state).ok_or_else(|| bad("agent state", &state))?,
        stats: AgentStats {
            turns: r.get(10)?,
            tool_calls: r.get(11)?,
            tokens_in: r.get::<_, i64>(12)? as u64,
            tokens_out: r.get::<_, i64>(13)? as u64,
            cost: r.get(14)?,
        },
        result: r.get(15)?,
        error: r.get(16)?,
        created_at: r.get(17)?,
        started_at: r.get(18)?,
        finished_at: r.get(19)?,
    })
}

fn event_row(r: &Row<'_>) -> rusqlite::Result<EventRecord> {
    let data: String = r.get(5)?;
    Ok(EventRecord {
        seq: r.get(0)?,
        run_id: RunId::from_string(r.get::<_, String>(1)?),
        agent_id: r.get::<_, Option<String>>(2)?.map(AgentId::from_string),
        at: r.get(3)?,
        event: Event::from_parts(
            r.get(4)?,
            serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data)),
        ),
    })
}

fn collect<T>(
    conn: &Connection,
    op: &'static str,
    sql: &str,
    params: impl rusqlite::Params,
    f: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let mut stmt = conn
        .prepare_cached(sql)
        .map_err(|e| StoreError::sqlite(op, &e))?;
    let rows = stmt
        .query_map(params, f)
        .map_err(|e| StoreError::sqlite(op, &e))?;
    rows.collect::<rusqlite::Result<Vec<T>>>()
        .map_err(|e| StoreError::sqlite(op, &e))
}

/// The one row `sql` selects, if any (a cached statement: single-row reads such as an
/// agent's are on hot paths).
fn one<T>(
    conn: &Connection,
    op: &'static str,
    sql: &str,
    params: impl rusqlite::Params,
    f: fn(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>, StoreError> {
    conn.prepare_cached(sql)
        .and_then(|mut stmt| stmt.query_row(params, f).optional())
        .map_err(|e| StoreError::sqlite(op, &e))
}

/// Agents per state, for `status` and `health`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AgentCounts {
    /// Agents waiting for a slot.
    pub queued: u64,
    /// Agents running.
    pub running: u64,
}

impl Store {
    /// One run.
    pub async fn run(&self, id: &RunId) -> Result<Option<RunRecord>, StoreError> {
        let id = id.clone();
        self.read(move |c| {
            one(
                c,
                "read run",
                &format!("SELECT {RUN_COLS} FROM runs WHERE id = ?1"),
                params![id.as_str()],
                run_row,
            )
        })
        .await
    }

    /// The most recent runs, newest first.
    /// The `limit` newest runs in `status` (any when `None`), newest first.
    pub async fn recent_runs_in(
        &self,
        status: Option<RunStatus>,
        limit: u32,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let status = status.map(|s| s.as_str());
        self.read(move |c| {
            collect(
                c,
                "list runs",
                &format!(
                    "SELECT {RUN_COLS} FROM runs WHERE ?1 IS NULL OR status = ?1 \
                     ORDER BY created_at DESC, id DESC LIMIT ?2"
                ),
                params![status, limit],
                run_row,
            )
        })
        .await
    }

    pub async fn recent_runs(&self, limit: u32) -> Result<Vec<RunRecord>, StoreError> {
        self.read(move |c| {
            collect(
                c,
                "list runs",
                &format!("SELECT {RUN_COLS} FROM runs ORDER BY created_at DESC, id DESC LIMIT ?1"),
                params![limit],
                run_row,
            )
        })
        .await
    }

    /// Unfinished runs whose driving process is gone, oldest first (what a bare
    /// `crewbox resume` finishes).
    pub async fn orphaned_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        Ok(self
            .unfinished_runs()
            .await?
            .into_iter()
            .filter(RunRecord::is_interrupted)
            .collect())
    }

    /// Runs that have not finished (running, or interrupted by a crash).
    pub async fn unfinished_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.read(|c| {
            collect(
                c,
                "list unfinished runs",
                &format!(
                    "SELECT {RUN_COLS} FROM runs WHERE status = 'running' ORDER BY created_at"
                ),
                [],
                run_row,
            )
        })
        .await
    }

    /// The agents of a run, in creation order.
    pub async fn agents(&self, run_id: &RunId) -> Result<Vec<AgentRecord>, StoreError> {
        let id = run_id.clone();
        self.read(move |c| {
            collect(
                c,
                "list agents",
                &format!(
                    "SELECT {AGENT_COLS} FROM agents WHERE run_id = ?1 ORDER BY created_at, id"
                ),
                params![id.as_str()],
                agent_row,
            )
        })
        .await
    }

    /// The agents of run `run_id` that `parent` started, oldest first, at most `limit`.
    pub async fn children(
        &self,
        run_id: &RunId,
        parent: &AgentId,
        limit: usize,
    ) -> Result<Vec<AgentRecord>, StoreError> {
        let (run, parent) = (run_id.clone(), parent.clone());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |c| {
            collect(
                c,
                "list child agents",
                &format!(
                    "SELECT {AGENT_COLS} FROM agents WHERE run_id = ?1 AND parent_id = ?2
                     ORDER BY created_at, id LIMIT ?3"
                ),
                params![run.as_str(), parent.as_str(), limit],
                agent_row,
            )
        })
        .await
    }

    /// One agent.
    pub async fn agent(&self, id: &AgentId) -> Result<Option<AgentRecord>, StoreError> {
        let id = id.clone();
        self.read(move |c| {
            one(
                c,
                "read agent",
                &format!("SELECT {AGENT_COLS} FROM agents WHERE id = ?1"),
                params![id.as_str()],
                agent_row,
            )
        })
        .await
    }

    /// Events after `after_seq`, oldest first, optionally of one run.
    pub async fn events(
        &self,
        run_id: Option<&RunId>,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let run = run_id.cloned();
        self.read(move |c| match run {
            Some(run) => collect(
                c,
                "read events",
                "SELECT seq, run_id, agent_id, at, kind, data FROM events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                params![run.as_str(), after_seq, limit],
                event_row,
            ),
            None => collect(
                c,
                "read events",
                "SELECT seq, run_id, agent_id, at, kind, data FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                params![after_seq, limit],
                event_row,
            ),
        })
        .await
    }

    /// Unhandled steer/stop messages, oldest first.
    pub async fn pending_controls(&self) -> Result<Vec<ControlRecord>, StoreError> {
        self.read(|c| {
            collect(
                c,
                "read controls",
                "SELECT seq, target, kind, message FROM controls WHERE consumed_at IS NULL ORDER BY seq",
                [],
                |r| {
                    let kind: String = r.get(2)?;
                    Ok(ControlRecord {
                        seq: r.get(0)?,
                        target: r.get(1)?,
                        kind: match kind.as_str() {
                            "steer" => ControlKind::Steer,
                            "stop" => ControlKind::Stop,
                            "message" => ControlKind::Message,
                            other => return Err(bad("control kind", other)),
                        },
                        message: r.get(3)?,
                    })
                },
            )
        })
        .await
    }

    /// How many agents are queued and running across all runs, those of interrupted
    /// runs left out: no process runs them (a resume marks them interrupted and runs
    /// their steps again).
    pub async fn agent_counts(&self) -> Result<AgentCounts, StoreError> {
        self.read(|c| {
            let q = |e: rusqlite::Error| StoreError::sqlite("count agents", &e);
            let mut stmt = c
                .prepare_cached(
                    "SELECT a.state = 'queued', r.status, r.pid, r.pid_identity, COUNT(*)
                     FROM agents a JOIN runs r ON r.id = a.run_id
                     WHERE a.state IN ('queued', 'running')
                     GROUP BY a.run_id, a.state",
                )
                .map_err(q)?;
            let mut rows = stmt.query([]).map_err(q)?;
            let mut counts = AgentCounts::default();
            while let Some(r) = rows.next().map_err(q)? {
                let status: String = r.get(1).map_err(q)?;
                let pid: Option<u32> = r.get(2).map_err(q)?;
                let identity: Option<String> = r.get(3).map_err(q)?;
                let driven = RunStatus::parse(&status) != Some(RunStatus::Running)
                    || !driver_gone(pid, identity.as_deref());
                if !driven {
                    continue;
                }
                let n = r.get::<_, i64>(4).map_err(q)?.max(0) as u64;
                if r.get::<_, bool>(0).map_err(q)? {
                    counts.queued += n;
                } else {
                    counts.running += n;
                }
            }
            Ok(counts)
        })
        .await
    }

    /// Resolves an id prefix or full id to a run, if one matches uniquely.
    pub async fn find_run(&self, id_or_prefix: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self.lookup_run(id_or_prefix).await?.one())
    }

    /// The runs an id, a unique prefix of one (with or without its `r-`) or a unique
    /// tail of at least [`MIN_TAIL`] characters names.
    pub async fn lookup_run(&self, text: &str) -> Result<Lookup<RunRecord>, StoreError> {
        let Some(pats) = IdPatterns::new("r-", text) else {
            return Ok(Lookup::None);
        };
        self.read(move |c| {
            let runs = collect(
                c,
                "find run",
                &format!(
                    "SELECT {RUN_COLS} FROM runs WHERE {ID_MATCH} ORDER BY created_at, id LIMIT 11"
                ),
                params![pats.exact, pats.prefix, pats.tail],
                run_row,
            )?;
            Ok(Lookup::of(runs, &pats.exact, |r| r.id.to_string()))
        })
        .await
    }

    /// The agents an id, a unique prefix (with or without its `a-`) or a unique tail
    /// of at least [`MIN_TAIL`] characters (what the progress view shows) names.
    pub async fn lookup_agent(&self, text: &str) -> Result<Lookup<AgentRecord>, StoreError> {
        let Some(pats) = IdPatterns::new("a-", text) else {
            return Ok(Lookup::None);
        };
        self.read(move |c| {
            let agents = collect(
                c,
                "find agent",
                &format!("SELECT {AGENT_COLS} FROM agents WHERE {ID_MATCH} ORDER BY created_at, id LIMIT 11"),
                params![pats.exact, pats.prefix, pats.tail],
                agent_row,
            )?;
            Ok(Lookup::of(agents, &pats.exact, |a| a.id.to_string()))
        })
        .await
    }
}

/// The shortest id tail accepted as a name (the progress view shows this many).
pub const MIN_TAIL: usize = 6;

/// An id, a prefix of one, or a tail (`?3` is NULL for text too short to be one).
const ID_MATCH: &str = "(id = ?1 OR id LIKE ?2 OR (?3 IS NOT NULL AND id LIKE ?3))";

/// The LIKE patterns an id the user typed stands for.
struct IdPatterns {
    exact: String,
    prefix: String,
    tail: Option<String>,
}

impl IdPatterns {
    /// `None` for text no id can match (ids are `[a-z0-9-]`; this also keeps LIKE's
    /// wildcards out of the patterns).
    fn new(kind: &str, text: &str) -> Option<Self> {
        let text = text.trim();
        if text.is_empty()
            || !text
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return None;
        }
        let prefix = if text.starts_with(kind) {
            format!("{text}%")
        } else {
            format!("{kind}{text}%")
        };
        let tail = (text.len() >= MIN_TAIL && !text.contains('-')).then(|| format!("%{text}"));
        Some(Self {
            exact: text.to_owned(),
            prefix,
            tail,
        })
    }
}

/// What an id or an abbreviation of one names.
#[derive(Debug)]
pub enum Lookup<T> {
    /// Nothing.
    None,
    /// Exactly one record.
    One(T),
    /// Several: their full ids (at most ten, then `… and more` when there are more),
    /// oldest first.
    Ambiguous(Vec<String>),
}

impl<T> Lookup<T> {
    /// An exact id wins over the prefixes and tails it also matched.
    fn of(mut found: Vec<T>, exact: &str, id: impl Fn(&T) -> String) -> Self {
        if let Some(i) = found.iter().position(|t| id(t) == exact) {
            return Self::One(found.swap_remove(i));
        }
        match found.len() {
            0 => Self::None,
            1 => found.pop().map_or(Self::None, Self::One),
            _ => {
                let mut ids: Vec<String> = found.iter().take(10).map(id).collect();
                // Read with a limit of 11: more than ten match (the list was cut
                // without a word).
                if found.len() > 10 {
                    ids.push("… and more".to_owned());
                }
                Self::Ambiguous(ids)
            }
        }
    }

    /// The record when exactly one matched.
    pub fn one(self) -> Option<T> {
        match self {
            Self::One(t) => Some(t),
            Self::None | Self::Ambiguous(_) => None,
        }
    }
}

impl Store {
    /// The newest event's sequence number (0 when there is none).
    pub async fn last_event_seq(&self) -> Result<i64, StoreError> {
        self.read(|c| {
            c.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get(0))
                .map_err(|e| StoreError::sqlite("last event", &e))
        })
        .await
    }
}

impl Store {
    /// The stored dispatch decisions, oldest first.
    pub async fn dispatch_history(&self) -> Result<Vec<super::DispatchRecord>, StoreError> {
        self.read(|c| {
            collect(
                c,
                "read dispatch history",
                "SELECT run_id, at, kind, source, prompt_len, reason FROM dispatch_history ORDER BY seq",
                [],
                |r| {
                    let kind: String = r.get(2)?;
                    Ok(super::DispatchRecord {
                        run_id: r.get::<_, Option<String>>(0)?.map(RunId::from_string),
                        at: r.get(1)?,
                        kind: Mode::parse(&kind).ok_or_else(|| bad("dispatch kind", &kind))?,
                        source: r.get(3)?,
                        prompt_len: r.get::<_, i64>(4)? as u64,
                        reason: r.get(5)?,
                    })
                },
            )
        })
        .await
    }

    /// Events of some kinds for a run, oldest first (for building reports).
    pub async fn events_of_kinds(
        &self,
        run_id: &RunId,
        kinds: &'static [&'static str],
    ) -> Result<Vec<EventRecord>, StoreError> {
        let run = run_id.clone();
        self.read(move |c| {
            let marks = vec!["?"; kinds.len()].join(", ");
            let sql = format!(
                "SELECT seq, run_id, agent_id, at, kind, data FROM events WHERE run_id = ?1 AND kind IN ({marks}) ORDER BY seq"
            );
            let run_str = run.as_str().to_owned();
            let mut values: Vec<&dyn rusqlite::ToSql> = vec![&run_str];
            for k in kinds {
                values.push(k);
            }
            let mut stmt = c.prepare(&sql).map_err(|e| StoreError::sqlite("read events", &e))?;
            let rows = stmt.query_map(values.as_slice(), event_row).map_err(|e| StoreError::sqlite("read events", &e))?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(|e| StoreError::sqlite("read events", &e))
        })
        .await
    }
}

impl Store {
    /// The tree outline of a run's agents, in creation order (no tasks or results).
    pub async fn agent_nodes(&self, run_id: &RunId) -> Result<Vec<super::AgentNode>, StoreError> {
        let id = run_id.clone();
        self.read(move |c| {
            collect(
                c,
                "list agent nodes",
                "SELECT id, parent_id, name, role, state, join_mode, created_at FROM agents WHERE run_id = ?1 ORDER BY created_at, id",
                params![id.as_str()],
                |r| {
                    let state: String = r.get(4)?;
                    Ok(super::AgentNode {
                        id: AgentId::from_string(r.get::<_, String>(0)?),
                        parent: r.get::<_, Option<String>>(1)?.map(AgentId::from_string),
                        name: r.get(2)?,
                        role: r.get(3)?,
                        state: AgentState::parse(&state).ok_or_else(|| bad("agent state", &state))?,
                        join: r.get(5)?,
                        created_at: r.get(6)?,
                    })
                },
            )
        })
        .await
    }
}

/// A run as the dashboard lists it: no result text and a capped prompt, with its
/// agents' totals (cheap to read every few seconds).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RunRow {
    /// The run.
    pub id: RunId,
    /// Its mode.
    pub mode: Mode,
    /// The first 200 characters of its prompt.
    pub prompt: String,
    /// The team, for team runs.
    pub team: Option<String>,
    /// Its stored status.
    pub status: RunStatus,
    /// Why it ended.
    pub exit_reason: Option<ExitReason>,
    /// The process driving it.
    pub pid: Option<u32>,
    /// Who that process is beyond its pid, when known.
    pub pid_identity: Option<String>,
    /// Creation time (ms).
    pub created_at: i64,
    /// When it ended (ms).
    pub finished_at: Option<i64>,
    /// Its agents.
    pub agents: u32,
    /// Of those, running.
    pub running: u32,
    /// Tokens in and out, summed over its agents.
    pub tokens: (u64, u64),
    /// Cost summed over its agents, where the provider reports one.
    pub cost: Option<f64>,
}

impl RunRow {
    /// Running in the store, with no live process driving it (see
    /// [`RunRecord::is_interrupted`]).
    pub fn is_interrupted(&self) -> bool {
        self.status == RunStatus::Running && driver_gone(self.pid, self.pid_identity.as_deref())
    }
}

/// An agent as the dashboard shows it: states and totals, no task or result text.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct AgentRow {
    /// The agent.
    pub id: AgentId,
    /// Who spawned it (or the team agent it works under).
    pub parent: Option<AgentId>,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// Where it is.
    pub state: AgentState,
    /// Turns, tool calls, tokens and cost so far.
    pub stats: AgentStats,
    /// The first 200 characters of why it failed.
    pub error: Option<String>,
    /// Creation time (ms).
    pub created_at: i64,
    /// When it started running (ms).
    pub started_at: Option<i64>,
    /// When it ended (ms).
    pub finished_at: Option<i64>,
}

/// A journal step without its data: what a run is doing now.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StepOutline {
    /// The step's key (`plan`, `it2/worker/alice`, …).
    pub key: String,
    /// Begun or done.
    pub state: super::StepState,
}

impl Store {
    /// The `limit` newest runs as the dashboard lists them, newest first.
    pub async fn run_rows(&self, limit: u32) -> Result<Vec<RunRow>, StoreError> {
        self.read(move |c| {
            collect(
                c,
                "list run rows",
                "SELECT r.id, r.mode, substr(r.prompt, 1, 200), r.team, r.status, r.exit_reason, \
                 r.pid, r.created_at, r.finished_at, \
                 (SELECT COUNT(*) FROM agents a WHERE a.run_id = r.id), \
                 (SELECT COUNT(*) FROM agents a WHERE a.run_id = r.id AND a.state = 'running'), \
                 (SELECT COALESCE(SUM(tokens_in), 0) FROM agents a WHERE a.run_id = r.id), \
                 (SELECT COALESCE(SUM(tokens_out), 0) FROM agents a WHERE a.run_id = r.id), \
                 (SELECT SUM(cost) FROM agents a WHERE a.run_id = r.id), \
                 r.pid_identity \
                 FROM runs r ORDER BY r.created_at DESC, r.id DESC LIMIT ?1",
                params![limit],
                |r| {
                    let mode: String = r.get(1)?;
                    let status: String = r.get(4)?;
                    let exit: Option<String> = r.get(5)?;
                    Ok(RunRow {
                        id: RunId::from_string(r.get::<_, String>(0)?),
                        mode: Mode::parse(&mode).ok_or_else(|| bad("run mode", &mode))?,
                        prompt: r.get(2)?,
                        team: r.get(3)?,
                        status: RunStatus::parse(&status)
                            .ok_or_else(|| bad("run status", &status))?,
                        exit_reason: exit
                            .map(|e| ExitReason::parse(&e).ok_or_else(|| bad("exit reason", &e)))
                            .transpose()?,
                        pid: r.get(6)?,
                        created_at: r.get(7)?,
                        finished_at: r.get(8)?,
                        agents: r.get(9)?,
                        running: r.get(10)?,
                        tokens: (r.get::<_, i64>(11)? as u64, r.get::<_, i64>(12)? as u64),
                        cost: r.get(13)?,
                        pid_identity: r.get(14)?,
                    })
                },
            )
        })
        .await
    }

    /// A run's agents as the dashboard shows them, in creation order.
    pub async fn agent_rows(&self, run_id: &RunId) -> Result<Vec<AgentRow>, StoreError> {
        let id = run_id.clone();
        self.read(move |c| {
            collect(
                c,
                "list agent rows",
                "SELECT id, parent_id, name, role, state, turns, tool_calls, tokens_in, tokens_out, \
                 cost, substr(error, 1, 200), created_at, started_at, finished_at \
                 FROM agents WHERE run_id = ?1 ORDER BY created_at, id",
                params![id.as_str()],
                |r| {
                    let state: String = r.get(4)?;
                    Ok(AgentRow {
                        id: AgentId::from_string(r.get::<_, String>(0)?),
                        parent: r.get::<_, Option<String>>(1)?.map(AgentId::from_string),
                        name: r.get(2)?,
                        role: r.get(3)?,
                        state: AgentState::parse(&state)
                            .ok_or_else(|| bad("agent state", &state))?,
                        stats: AgentStats {
                            turns: r.get(5)?,
                            tool_calls: r.get(6)?,
                            tokens_in: r.get::<_, i64>(7)? as u64,
                            tokens_out: r.get::<_, i64>(8)? as u64,
                            cost: r.get(9)?,
                        },
                        error: r.get(10)?,
                        created_at: r.get(11)?,
                        started_at: r.get(12)?,
                        finished_at: r.get(13)?,
                    })
                },
            )
        })
        .await
    }

    /// A run's journal steps without their data, in the order they were begun.
    pub async fn step_outline(&self, run_id: &RunId) -> Result<Vec<StepOutline>, StoreError> {
        let id = run_id.clone();
        self.read(move |c| {
            collect(
                c,
                "read step outline",
                "SELECT key, state FROM steps WHERE run_id = ?1 ORDER BY started_at, rowid",
                params![id.as_str()],
                |r| {
                    let state: String = r.get(1)?;
                    Ok(StepOutline {
                        key: r.get(0)?,
                        state: super::StepState::parse(&state)
                            .ok_or_else(|| bad("step state", &state))?,
                    })
                },
            )
        })
        .await
    }

    /// The `limit` newest events of a run, oldest first, optionally of one agent and
    /// only of some kinds (what a dashboard shows before it follows new ones).
    pub async fn latest_events(
        &self,
        run_id: &RunId,
        agent: Option<&AgentId>,
        kinds: &[EventKind],
        limit: u32,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let run = run_id.as_str().to_owned();
        let agent = agent.map(|a| a.as_str().to_owned());
        let kinds: Vec<&'static str> = kinds.iter().map(|k| k.as_str()).collect();
        self.read(move |c| {
            // Numbered after the three fixed parameters (a bare `?` would take ?3).
            let marks: Vec<String> = (0..kinds.len()).map(|i| format!("?{}", i + 4)).collect();
            let marks = marks.join(", ");
            let kind_filter = if kinds.is_empty() {
                String::new()
            } else {
                format!(" AND kind IN ({marks})")
            };
            let sql = format!(
                "SELECT * FROM (SELECT seq, run_id, agent_id, at, kind, data FROM events \
                 WHERE run_id = ?1 AND (?2 IS NULL OR agent_id = ?2){kind_filter} \
                 ORDER BY seq DESC LIMIT ?3) ORDER BY seq"
            );
            let mut values: Vec<&dyn rusqlite::ToSql> = vec![&run, &agent, &limit];
            for k in &kinds {
                values.push(k);
            }
            let mut stmt = c
                .prepare_cached(&sql)
                .map_err(|e| StoreError::sqlite("read latest events", &e))?;
            let rows = stmt
                .query_map(values.as_slice(), event_row)
                .map_err(|e| StoreError::sqlite("read latest events", &e))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(|e| StoreError::sqlite("read latest events", &e))
        })
        .await
    }
}

#[cfg(test)]
mod lookup_tests {
    use super::Lookup;

    /// Probe 18: 22 matching runs listed 10, with no word of the others.
    #[test]
    fn more_than_ten_candidates_say_there_are_more() {
        let ids = |n: usize| (0..n).map(|i| format!("r-{i:02}")).collect::<Vec<_>>();
        match Lookup::of(ids(11), "r-", String::clone) {
            Lookup::Ambiguous(shown) => {
                assert_eq!(shown.len(), 11);
                assert_eq!(shown[10], "… and more");
            }
            other => panic!("{other:?}"),
        }
        match Lookup::of(ids(3), "r-", String::clone) {
            Lookup::Ambiguous(shown) => assert_eq!(shown, ids(3)),
            other => panic!("{other:?}"),
        }
    }
}

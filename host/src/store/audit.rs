//! The audit chain: every decision (a dispatch, an agent spawned with the tools it was
//! granted, a steer/stop/send, a validator's verdict, a crew review, a merge into a
//! team's integration branch, a run started, resumed or finished, a step finished from
//! the store) is appended as a record holding the SHA-256 of the record before it. The
//! records are written by the store's writer in the same transaction as the fact they
//! record, so the chain never misses a stored decision.
//!
//! `audit_head` holds the last record's number and hash: `verify` finds an edited
//! record (its hash no longer matches), a removed one (a gap in the numbers, or a
//! record whose `prev` is not its predecessor's hash) and a truncated tail (the head
//! names a record that is gone). `audit_origin` holds when the chain began: every
//! agent stored since then must have its `spawn` record, and every finished merge step
//! must hold what its last `merge` record says, so a chain emptied with its head, or a
//! merge result edited in `steps`, is found too.

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::StoreError;

/// The hash the first record links to.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One record of the chain.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditRecord {
    /// Its position (from 1, without gaps).
    pub seq: i64,
    /// When (ms).
    pub at: i64,
    /// The run it is about, if any.
    pub run_id: Option<String>,
    /// The agent it is about, if any.
    pub agent_id: Option<String>,
    /// What was decided (`dispatch`, `spawn`, `control.steer`, `validator.verdict`, …).
    pub kind: String,
    /// The decision's details (JSON).
    pub data: serde_json::Value,
    /// The previous record's hash.
    pub prev: String,
    /// This record's hash.
    pub hash: String,
}

/// What `verify` found.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Verdict {
    /// Every link holds.
    Intact {
        /// Records checked.
        records: i64,
        /// The last record as `SEQ:HASH` ([`GENESIS`] after `0:` for an empty chain):
        /// kept elsewhere, it is an [`Anchor`] a later `verify` checks the chain still
        /// holds (someone who can write the store can rewrite the whole chain and its
        /// head, not what was kept elsewhere).
        head: String,
    },
    /// The chain does not hold the record an [`Anchor`] names with the hash kept: the
    /// chain was rewritten, emptied or cut back since.
    AnchorLost {
        /// The anchored record.
        seq: i64,
        /// What the chain holds there now (`None`: no such record).
        found: Option<String>,
    },
    /// A record's stored hash is not the hash of its contents (it was edited).
    BrokenLink {
        /// The record.
        seq: i64,
    },
    /// A record is missing before `seq` (its number skips, or its `prev` does not
    /// match its predecessor).
    Gap {
        /// The first record after the gap.
        seq: i64,
        /// The number expected there.
        expected: i64,
    },
    /// The chain has records but no head (the head was removed).
    HeadMissing {
        /// The last record present.
        last: i64,
    },
    /// The record of when the chain began was removed.
    OriginMissing,
    /// The record of when the chain began was moved: it lies in the future, or after
    /// the start of a run the chain recorded.
    OriginMoved {
        /// When it says the chain began (ms).
        origin: i64,
    },
    /// A run stored since the chain began (or one whose agents the chain names) has no
    /// `run.started` record.
    RunUnrecorded {
        /// The run.
        run: String,
    },
    /// A `run.started` record names a run the store no longer holds (it was removed,
    /// with or without its agents).
    RunMissing {
        /// The record.
        seq: i64,
        /// The run it names.
        run: String,
    },
    /// A table of the chain, or of the facts it is checked against, is gone (dropped).
    TableMissing {
        /// The table.
        table: String,
    },
    /// A record names an agent the store no longer holds (it was removed).
    FactMissing {
        /// The record.
        seq: i64,
        /// The agent it names.
        agent: String,
    },
    /// The head holds the last record's number but not its hash (it was edited).
    HeadEdited {
        /// The last record.
        last: i64,
    },
    /// SQLite finds the store file damaged: nothing read from it can be vouched for.
    StoreDamaged {
        /// What SQLite's check said first.
        detail: String,
    },
    /// An agent stored since the chain began has no `spawn` record: records were
    /// removed and the chain rewritten (or emptied), or the agent was added.
    Unrecorded {
        /// The agent.
        agent: String,
        /// Its run.
        run: String,
    },
    /// A finished merge step does not hold what its last `merge` record says.
    StepEdited {
        /// The run.
        run: String,
        /// The step (`merge/…`).
        step: String,
    },
    /// The chain ends before its recorded head.
    Truncated {
        /// The last record present.
        last: i64,
        /// The head recorded with the last append.
        head: i64,
    },
}

impl Verdict {
    /// True when nothing was found.
    pub fn intact(&self) -> bool {
        matches!(self, Self::Intact { .. })
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Intact { records, head } => write!(
                f,
                "intact: {records} record(s), every link holds; head {head}"
            ),
            Self::AnchorLost { seq, found: None } => write!(
                f,
                "the anchored record {seq} is not in the chain: the chain was emptied, cut \
                 back or rewritten since the anchor was taken"
            ),
            Self::AnchorLost {
                seq,
                found: Some(_),
            } => write!(
                f,
                "record {seq} does not hold the anchored hash: the chain was rewritten since \
                 the anchor was taken"
            ),
            Self::BrokenLink { seq } => write!(
                f,
                "broken link at record {seq}: its hash does not match its contents (edited)"
            ),
            Self::Gap { seq, expected } if seq == expected => write!(
                f,
                "gap before record {seq}: its link names another record than the one before \
                 it (a record was removed, replaced or moved)"
            ),
            Self::Gap { seq, expected } => write!(
                f,
                "gap before record {seq}: record {expected} is missing or was replaced"
            ),
            Self::HeadMissing { last } => write!(
                f,
                "the chain's head is missing (it has {last} record(s)): it was removed"
            ),
            Self::OriginMissing => write!(
                f,
                "the record of when the chain began is missing: it was removed"
            ),
            Self::OriginMoved { origin } => write!(
                f,
                "the record of when the chain began ({origin} ms) was moved: it lies in the \
                 future or after a run the chain recorded"
            ),
            Self::RunUnrecorded { run } => write!(
                f,
                "run {run} is stored but no record names its start: records were removed (or the run was added)"
            ),
            Self::RunMissing { seq, run } => write!(
                f,
                "record {seq} names run {run}, which is not stored: it was removed"
            ),
            Self::TableMissing { table } => {
                write!(f, "the store's table `{table}` is missing: it was dropped")
            }
            Self::FactMissing { seq, agent } => write!(
                f,
                "record {seq} names agent {agent}, which is not stored: it was removed"
            ),
            Self::HeadEdited { last } => write!(
                f,
                "the chain's head names record {last} with another hash: it was edited"
            ),
            Self::StoreDamaged { detail } => write!(
                f,
                "the store file is damaged ({detail}): the chain cannot be vouched for"
            ),
            Self::Unrecorded { agent, run } => write!(
                f,
                "agent {agent} of run {run} is stored but no record names its spawn: records were removed (or the agent was added)"
            ),
            Self::StepEdited { run, step } => write!(
                f,
                "step {step} of run {run} does not hold what the chain recorded for it (edited)"
            ),
            Self::Truncated { last, head } => write!(
                f,
                "truncated: the chain ends at record {last}, but its head is record {head}"
            ),
        }
    }
}

/// The hash of a record with these contents.
pub fn hash(
    prev: &str,
    seq: i64,
    at: i64,
    run_id: Option<&str>,
    agent_id: Option<&str>,
    kind: &str,
    data: &str,
) -> String {
    let mut h = Sha256::new();
    for part in [
        prev,
        &seq.to_string(),
        &at.to_string(),
        run_id.unwrap_or(""),
        agent_id.unwrap_or(""),
        kind,
        data,
    ] {
        // Length-prefixed, so no two different records hash alike by shifting text.
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    crate::text::hex(&h.finalize())
}

/// Appends a record (inside the writer's transaction).
pub(crate) fn append(
    conn: &Connection,
    at: i64,
    run_id: Option<&str>,
    agent_id: Option<&str>,
    kind: &str,
    data: &serde_json::Value,
) -> Result<(), StoreError> {
    let q = |op: &'static str| move |e: rusqlite::Error| StoreError::sqlite(op, &e);
    // Cached: every audit record reads the head (a statement parsed per record was a
    // visible share of the writer's time).
    let last: Option<(i64, String)> = conn
        .prepare_cached("SELECT seq, hash FROM audit_head WHERE id = 1")
        .map_err(q("prepare audit head"))?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(q("read audit head"))?;
    let (seq, prev) = match last {
        Some((seq, hash)) => (seq + 1, hash),
        None => (1, GENESIS.to_owned()),
    };
    let data = data.to_string();
    let hash = hash(&prev, seq, at, run_id, agent_id, kind, &data);
    conn.prepare_cached(
        "INSERT INTO audit (seq, at, run_id, agent_id, kind, data, prev, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .map_err(q("prepare audit append"))?
    .execute(params![seq, at, run_id, agent_id, kind, data, prev, hash])
    .map_err(q("append audit record"))?;
    super::writer::exec(
        conn,
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?1, ?2)
         ON CONFLICT (id) DO UPDATE SET seq = ?1, hash = ?2",
        params![seq, hash],
    )
    .map_err(q("move audit head"))?;
    Ok(())
}

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AuditRecord> {
    let data: String = r.get(5)?;
    Ok(AuditRecord {
        seq: r.get(0)?,
        at: r.get(1)?,
        run_id: r.get(2)?,
        agent_id: r.get(3)?,
        kind: r.get(4)?,
        data: serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data)),
        prev: r.get(6)?,
        hash: r.get(7)?,
    })
}

const COLS: &str = "seq, at, run_id, agent_id, kind, data, prev, hash";

/// The records, oldest first, optionally of one run.
pub(crate) fn records(
    conn: &Connection,
    run_id: Option<&str>,
) -> Result<Vec<AuditRecord>, StoreError> {
    let q = |e: rusqlite::Error| StoreError::sqlite("read audit chain", &e);
    let mut stmt = match run_id {
        Some(_) => conn.prepare(&format!(
            "SELECT {COLS} FROM audit WHERE run_id = ?1 ORDER BY seq"
        )),
        None => conn.prepare(&format!("SELECT {COLS} FROM audit ORDER BY seq")),
    }
    .map_err(q)?;
    let rows = match run_id {
        Some(run) => stmt.query_map(params![run], row),
        None => stmt.query_map([], row),
    }
    .map_err(q)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(q)
}

/// A record of the chain as `crewbox audit verify` printed it once (`SEQ:HASH`), kept
/// elsewhere: [`verify`] checks the chain still holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anchor {
    /// The record's number (0: the empty chain, whose hash is [`GENESIS`]).
    pub seq: i64,
    /// Its hash (64 lowercase hex digits).
    pub hash: String,
}

impl std::str::FromStr for Anchor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "`{}` is no audit anchor: expected SEQ:HASH as `crewbox audit verify` prints \
                 its head (a record number, a colon, 64 hex digits)",
                crate::text::escape(&crate::text::cut_marked(s, 100, "…"))
            )
        };
        let (seq, hash) = s.trim().split_once(':').ok_or_else(bad)?;
        let seq: i64 = seq.parse().ok().filter(|n| *n >= 0).ok_or_else(bad)?;
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        Ok(Self {
            seq,
            hash: hash.to_ascii_lowercase(),
        })
    }
}

/// How far in the future the chain's origin may lie (clocks of one machine).
const ORIGIN_SLACK_MS: i64 = 60_000;

/// Walks the whole chain and reports the first thing wrong with it, `anchor` included
/// (the chain must still hold that record with that hash).
pub(crate) fn verify(conn: &Connection, anchor: Option<&Anchor>) -> Result<Verdict, StoreError> {
    let q = |e: rusqlite::Error| StoreError::sqlite("verify audit chain", &e);
    // A damaged file reads back whatever its pages hold: said first.
    let check: String = conn
        .query_row("PRAGMA quick_check(1)", [], |r| r.get(0))
        .unwrap_or_else(|e| e.to_string());
    if check != "ok" {
        let check = check.split_whitespace().collect::<Vec<_>>().join(" ");
        return Ok(Verdict::StoreDamaged {
            detail: crate::text::escape(&crate::text::cut_marked(&check, 200, "…")).into_owned(),
        });
    }
    // A dropped table is tampering like deleted rows, not a failure to read (the
    // origin's table: `origin-missing`, below).
    for table in ["audit", "audit_head", "runs", "agents", "steps", "events"] {
        let exists: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
                params![table],
                |r| r.get(0),
            )
            .map_err(q)?;
        if !exists {
            return Ok(Verdict::TableMissing {
                table: table.to_owned(),
            });
        }
    }
    let mut stmt = conn
        .prepare("SELECT seq, at, run_id, agent_id, kind, data, prev, hash FROM audit ORDER BY seq")
        .map_err(q)?;
    let mut rows = stmt.query([]).map_err(q)?;
    let (mut expected, mut prev) = (1i64, GENESIS.to_owned());
    // What the chain says about stored facts, checked against them once it holds.
    let mut spawned: HashMap<String, (i64, Option<String>)> = HashMap::new();
    // Runs the chain saw start, and when (the record's time).
    let mut started_runs: HashMap<String, (i64, i64)> = HashMap::new();
    let mut merges: HashMap<(String, String), serde_json::Value> = HashMap::new();
    while let Some(r) = rows.next().map_err(q)? {
        // Read as the writer stores them; a value of another type (a text made a blob,
        // a number made text) is an edit, never a reason to stop verifying.
        let Some(seq) = integer(r.get_ref(0).map_err(q)?) else {
            return Ok(Verdict::Gap {
                seq: expected,
                expected,
            });
        };
        if seq != expected {
            return Ok(Verdict::Gap { seq, expected });
        }
        let read = (|| {
            Some((
                integer(r.get_ref(1).ok()?)?,
                optional_text(r.get_ref(2).ok()?)?,
                optional_text(r.get_ref(3).ok()?)?,
                text(r.get_ref(4).ok()?)?,
                text(r.get_ref(5).ok()?)?,
                text(r.get_ref(6).ok()?)?,
                text(r.get_ref(7).ok()?)?,
            ))
        })();
        let Some((at, run_id, agent_id, kind, data, stored_prev, stored_hash)) = read else {
            return Ok(Verdict::BrokenLink { seq });
        };
        if stored_prev != prev {
            return Ok(Verdict::Gap { seq, expected });
        }
        // The hash takes a missing id as empty text; crewbox never stores an empty one,
        // so one is an edit the hash alone would not see.
        if run_id == Some("") || agent_id == Some("") {
            return Ok(Verdict::BrokenLink { seq });
        }
        let h = hash(stored_prev, seq, at, run_id, agent_id, kind, data);
        if h != stored_hash {
            return Ok(Verdict::BrokenLink { seq });
        }
        if let Some(a) = anchor.filter(|a| a.seq == seq)
            && a.hash != stored_hash
        {
            return Ok(Verdict::AnchorLost {
                seq,
                found: Some(stored_hash.to_owned()),
            });
        }
        match (kind, run_id, agent_id) {
            ("spawn", run, Some(agent)) => {
                spawned.insert(agent.to_owned(), (seq, run.map(str::to_owned)));
            }
            ("run.started", Some(run), _) => {
                started_runs.insert(run.to_owned(), (at, seq));
            }
            ("merge", Some(run), _) => {
                let mut merge: serde_json::Value =
                    serde_json::from_str(data).unwrap_or(serde_json::Value::Null);
                if let Some(step) = merge["step"].as_str() {
                    let key = (run.to_owned(), step.to_owned());
                    merges.insert(key, merge["merged"].take());
                }
            }
            _ => {}
        }
        prev = stored_hash.to_owned();
        expected += 1;
    }
    let last = expected - 1;
    let head: Option<(i64, String)> = conn
        .query_row("SELECT seq, hash FROM audit_head WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(q)?;
    match head {
        Some((head, _)) if head != last => {
            return Ok(Verdict::Truncated { last, head });
        }
        Some((_, hash)) if hash != prev => return Ok(Verdict::HeadEdited { last }),
        None if last > 0 => return Ok(Verdict::HeadMissing { last }),
        _ => {}
    }
    match anchor {
        Some(a) if a.seq > last => {
            return Ok(Verdict::AnchorLost {
                seq: a.seq,
                found: None,
            });
        }
        Some(a) if a.seq == 0 && a.hash != GENESIS => {
            return Ok(Verdict::AnchorLost {
                seq: 0,
                found: Some(GENESIS.to_owned()),
            });
        }
        _ => {}
    }
    // A dropped table reads as a removed row.
    let origin: Option<i64> = conn
        .query_row("SELECT at FROM audit_origin WHERE id = 1", [], |r| r.get(0))
        .optional()
        .unwrap_or(None);
    let Some(origin) = origin else {
        return Ok(Verdict::OriginMissing);
    };
    // The origin is no hash's part: moved later, it would put every fact before the
    // chain began. It is never in the future, nor after a run the chain saw start.
    if origin > super::now_ms() + ORIGIN_SLACK_MS {
        return Ok(Verdict::OriginMoved { origin });
    }
    // Agents: each one stored since the origin, or of a run the chain saw start, has
    // its spawn recorded.
    let mut stmt = conn
        .prepare("SELECT id, run_id, created_at FROM agents ORDER BY created_at, id")
        .map_err(q)?;
    let mut agents = stmt.query([]).map_err(q)?;
    let mut stored_agents = HashSet::new();
    while let Some(r) = agents.next().map_err(q)? {
        let agent: String = r.get(0).map_err(q)?;
        let run: String = r.get(1).map_err(q)?;
        let created: i64 = r.get(2).map_err(q)?;
        if !spawned.contains_key(&agent) && (created >= origin || started_runs.contains_key(&run)) {
            return Ok(Verdict::Unrecorded { agent, run });
        }
        stored_agents.insert(agent);
    }
    // Runs: each one stored since the origin has its start recorded, and no run the
    // chain saw start began before the origin. A worker's own runs (kept for its tasks,
    // without a spec) record nothing.
    let mut stmt = conn
        .prepare("SELECT id, created_at FROM runs WHERE spec IS NOT NULL AND spec != 'null' ORDER BY created_at, id")
        .map_err(q)?;
    let mut runs = stmt.query([]).map_err(q)?;
    let mut stored_runs = HashSet::new();
    while let Some(r) = runs.next().map_err(q)? {
        let run: String = r.get(0).map_err(q)?;
        let created: i64 = r.get(1).map_err(q)?;
        match started_runs.get(&run) {
            Some(&(at, _)) if at < origin => return Ok(Verdict::OriginMoved { origin }),
            // The engine stores a run with its start, event and record together: a run
            // whose start event is stored without its record lost the record.
            None if created >= origin && start_event(conn, &run).map_err(q)? => {
                return Ok(Verdict::RunUnrecorded { run });
            }
            _ => {}
        }
        stored_runs.insert(run);
    }
    // Each run the chain saw start is still stored (whatever else of it was removed
    // with it: a run deleted with its agents left no agent to miss).
    let all_runs: HashSet<String> = conn
        .prepare("SELECT id FROM runs")
        .map_err(q)?
        .query_map([], |r| r.get(0))
        .map_err(q)?
        .collect::<Result<_, _>>()
        .map_err(q)?;
    let mut gone: Vec<(&String, i64)> = started_runs
        .iter()
        .filter(|(run, _)| !all_runs.contains(*run))
        .map(|(run, (_, seq))| (run, *seq))
        .collect();
    gone.sort_by_key(|(_, seq)| *seq);
    if let Some((run, seq)) = gone.first() {
        return Ok(Verdict::RunMissing {
            seq: *seq,
            run: (*run).clone(),
        });
    }
    // And each spawn recorded in such a run names a stored agent.
    let mut missing: Vec<(&String, &(i64, Option<String>))> = spawned
        .iter()
        .filter(|(agent, (_, run))| {
            !stored_agents.contains(*agent)
                && run
                    .as_ref()
                    .is_some_and(|r| started_runs.contains_key(r) && stored_runs.contains(r))
        })
        .collect();
    missing.sort_by_key(|(_, (seq, _))| *seq);
    if let Some((agent, (seq, _))) = missing.first() {
        return Ok(Verdict::FactMissing {
            seq: *seq,
            agent: (*agent).clone(),
        });
    }
    let mut stmt = conn
        .prepare("SELECT run_id, key, data FROM steps WHERE key LIKE 'merge/%' AND state = 'done' ORDER BY run_id, key")
        .map_err(q)?;
    let mut steps = stmt.query([]).map_err(q)?;
    while let Some(r) = steps.next().map_err(q)? {
        let key: (String, String) = (r.get(0).map_err(q)?, r.get(1).map_err(q)?);
        let Some(recorded) = merges.get(&key) else {
            // Merges finished before the chain began have no record.
            continue;
        };
        let stored = match r.get_ref(2).map_err(q)? {
            rusqlite::types::ValueRef::Text(t) => std::str::from_utf8(t)
                .ok()
                .and_then(|t| serde_json::from_str(t).ok())
                .unwrap_or(serde_json::Value::Null),
            rusqlite::types::ValueRef::Null => serde_json::Value::Null,
            _ => serde_json::Value::Bool(false),
        };
        if &stored != recorded {
            return Ok(Verdict::StepEdited {
                run: key.0,
                step: key.1,
            });
        }
    }
    Ok(Verdict::Intact {
        records: last,
        head: format!("{last}:{prev}"),
    })
}

/// Whether run `run` has its `run.started` event stored.
fn start_event(conn: &Connection, run: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM events WHERE run_id = ?1 AND kind = 'run.started')",
        params![run],
        |r| r.get(0),
    )
}

fn integer(v: rusqlite::types::ValueRef<'_>) -> Option<i64> {
    match v {
        rusqlite::types::ValueRef::Integer(i) => Some(i),
        _ => None,
    }
}

fn text(v: rusqlite::types::ValueRef<'_>) -> Option<&str> {
    match v {
        rusqlite::types::ValueRef::Text(t) => std::str::from_utf8(t).ok(),
        _ => None,
    }
}

/// A text or NULL (`Some(None)`); anything else is `None`.
fn optional_text(v: rusqlite::types::ValueRef<'_>) -> Option<Option<&str>> {
    match v {
        rusqlite::types::ValueRef::Null => Some(None),
        other => text(other).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anchor_reads_as_verify_prints_it() {
        let hash = "AB".repeat(32);
        let a: Anchor = format!(" 7:{hash}\n").parse().unwrap();
        assert_eq!((a.seq, a.hash), (7, "ab".repeat(32)));
        let empty: Anchor = format!("0:{GENESIS}").parse().unwrap();
        assert_eq!(empty.seq, 0);
        for bad in [
            "",
            "7",
            "7:",
            "-1:00",
            "x:00",
            &format!("7:{}", "g".repeat(64)),
        ] {
            assert!(bad.parse::<Anchor>().is_err(), "{bad}");
        }
        assert!(
            format!("-1:{}", "a".repeat(64)).parse::<Anchor>().is_err(),
            "a negative record number"
        );
    }

    #[test]
    fn hashes_depend_on_every_field_and_the_link() {
        let a = hash(GENESIS, 1, 5, Some("r"), None, "spawn", "{}");
        assert_eq!(a, hash(GENESIS, 1, 5, Some("r"), None, "spawn", "{}"));
        assert_ne!(a, hash(GENESIS, 2, 5, Some("r"), None, "spawn", "{}"));
        assert_ne!(a, hash(GENESIS, 1, 5, None, Some("r"), "spawn", "{}"));
        assert_ne!(a, hash(&a, 1, 5, Some("r"), None, "spawn", "{}"));
        assert_ne!(a, hash(GENESIS, 1, 5, Some("r"), None, "spaw", "n{}"));
    }
}

//! What a watcher of a repository reads again and again while runs go on in other
//! processes: `crewbox top` polls it, `crewbox events` pages through its event log, a
//! progress view reads back the events its subscription lagged behind on.
//! One handle on the store, opened once ([`Repository::watch`]); every read is
//! bounded, typed, and runs off the async runtime (the store's reads do).

use crate::engine::Engine;
use crate::event::{EventKind, EventRecord};
use crate::ids::{AgentId, RunId};
use crate::store::{AgentRecord, AgentRow, RunRecord, RunRow, StepOutline, Store};

use super::{HealthFacts, ReadError, RecordKind, Repository};

/// A repository's store as a watcher reads it: the event log by sequence number, the
/// newest runs, one run's agents and journal steps, the scheduled jobs and the store's
/// health facts. Works while other processes run and write.
#[derive(Clone)]
pub struct Watch {
    store: Store,
}

impl Repository {
    /// A handle for watching this repository, or None when nothing has run in its
    /// state directory yet (no store is created).
    pub async fn watch(&self) -> Result<Option<Watch>, ReadError> {
        let repo = self.clone();
        let store = tokio::task::spawn_blocking(move || repo.store_if_exists()).await??;
        Ok(store.map(|store| Watch { store }))
    }
}

impl Engine {
    /// A watch on the store this engine writes: what a subscriber of
    /// [`Engine::subscribe`] that lagged reads back by sequence number.
    pub fn watch(&self) -> Watch {
        Watch {
            store: self.store().clone(),
        }
    }
}

impl Watch {
    /// The newest event's sequence number (0 when the log is empty): where a watcher
    /// that wants only new events starts.
    pub async fn last_seq(&self) -> Result<i64, ReadError> {
        Ok(self.store.last_event_seq().await?)
    }

    /// Up to `limit` events after sequence number `after`, oldest first; only `run`'s
    /// when given. A page shorter than `limit` is the end of the log for now.
    pub async fn page(
        &self,
        run: Option<&RunId>,
        after: i64,
        limit: u32,
    ) -> Result<Vec<EventRecord>, ReadError> {
        Ok(self.store.events(run, after, limit).await?)
    }

    /// The `limit` newest events of `run`, oldest first; only those of `kinds` unless it
    /// is empty.
    pub async fn latest(
        &self,
        run: &RunId,
        kinds: &[EventKind],
        limit: u32,
    ) -> Result<Vec<EventRecord>, ReadError> {
        Ok(self.store.latest_events(run, None, kinds, limit).await?)
    }

    /// The run `text` names: a full id, a unique prefix or a unique tail.
    pub async fn run(&self, text: &str) -> Result<RunRecord, ReadError> {
        ReadError::settle(RecordKind::Run, text, self.store.lookup_run(text).await?)
    }

    /// The `limit` newest runs as a list shows them (a capped prompt, their agents'
    /// totals), newest first.
    pub async fn runs(&self, limit: u32) -> Result<Vec<RunRow>, ReadError> {
        Ok(self.store.run_rows(limit).await?)
    }

    /// `run`'s agents (states and totals, no task or result text), in creation order.
    pub async fn agents(&self, run: &RunId) -> Result<Vec<AgentRow>, ReadError> {
        Ok(self.store.agent_rows(run).await?)
    }

    /// The agent with this id, if there is one.
    pub async fn agent(&self, id: &AgentId) -> Result<Option<AgentRecord>, ReadError> {
        Ok(self.store.agent(id).await?)
    }

    /// `run`'s journal steps without their data, in the order they were begun.
    pub async fn steps(&self, run: &RunId) -> Result<Vec<StepOutline>, ReadError> {
        Ok(self.store.step_outline(run).await?)
    }

    /// The scheduled jobs, the agent counts, the unfinished and interrupted runs and
    /// the database file with its size (what `crewbox health` reads, from this handle).
    pub async fn health(&self) -> Result<HealthFacts, ReadError> {
        let jobs = self.store.schedules().await?;
        let agents = self.store.agent_counts().await?;
        let unfinished = self.store.unfinished_runs().await?;
        let path = self.store.path().to_path_buf();
        let (path, size_bytes) = tokio::task::spawn_blocking(move || {
            let size = std::fs::metadata(&path).map_or(0, |m| m.len());
            (path, size)
        })
        .await?;
        Ok(HealthFacts {
            jobs,
            agents,
            unfinished: unfinished.len(),
            interrupted: unfinished.iter().filter(|r| r.is_interrupted()).count(),
            store: Some(path),
            size_bytes,
        })
    }
}

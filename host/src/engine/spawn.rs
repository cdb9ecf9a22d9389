//! The spawn path: every agent a mode starts is queued in the batcher (100 ms trailing
//! debounce, 1 s max wait), finalised as a batch partitioned by join mode — recorded in
//! the event log before anything starts — and only then handed to the [`Executor`].
//! Foreground dispatch flushes the batch before awaiting its members, so it never
//! waits for the debounce.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tracing::Instrument;

use super::error::EngineError;
use super::executor::{ExecResult, Executor, Job};
use super::journal::{StepInput, StepKey};
use crate::agent::runner::{AgentOutcome, AgentSpec};
use crate::batch::{Batch, BatchError, Batcher, DebounceConfig, JoinMode, Spawn};
use crate::event::{BatchShare, Event, JoinMembers};
use crate::ids::{AgentId, RunId};
use crate::store::{StepState, Store};
use serde::{Deserialize, Serialize};

/// A queued agent and where its result goes.
struct Pending {
    job: Job,
    reply: oneshot::Sender<Result<ExecResult, EngineError>>,
    /// The span current where the job was submitted (the run's, or a spawning agent's
    /// `tool` span): the job executes in the batcher's task, under this span.
    parent: tracing::Span,
}

/// Where a queued agent's result arrives.
pub(crate) type ResultRx = oneshot::Receiver<Result<ExecResult, EngineError>>;

/// Jobs of each run that are queued or executing, so a stopping run can wait for its
/// agents to record their end.
#[derive(Default)]
struct InFlight {
    runs: Mutex<HashMap<RunId, usize>>,
    changed: Notify,
}

impl InFlight {
    fn add(&self, run: &RunId) {
        *self
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(run.clone())
            .or_default() += 1;
    }

    fn done(&self, run: &RunId) {
        {
            let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = runs.get_mut(run) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    runs.remove(run);
                }
            }
        }
        self.changed.notify_waiters();
    }

    fn busy(&self, run: &RunId) -> bool {
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(run)
    }
}

/// The batcher and the task that executes finalised batches. Dropping the queue
/// aborts that task and, with it, every job it still runs.
pub(crate) struct SpawnQueue {
    batcher: Batcher<Pending>,
    in_flight: Arc<InFlight>,
    driver: JoinHandle<()>,
}

impl Drop for SpawnQueue {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl SpawnQueue {
    /// Starts the batcher; finalised batches are recorded in `store` and executed by
    /// `executor`.
    pub(crate) fn start(executor: Arc<dyn Executor>, store: Store) -> Self {
        let hook = Box::new(move |batch: &Batch<Pending>| {
            let facts = describe(batch);
            let agents = batch.len();
            let store = store.clone();
            Box::pin(async move {
                for (run, share) in facts {
                    store
                        .append_event(&run, None, Event::BatchFinalized(share))
                        .await
                        .map_err(|e| BatchError {
                            agents,
                            reason: e.to_string(),
                        })?;
                }
                Ok(())
            }) as futures::future::BoxFuture<'static, Result<(), BatchError>>
        });
        let (batcher, mut batches) = Batcher::start_with_hook(DebounceConfig::default(), hook);
        let in_flight = Arc::new(InFlight::default());
        let driver = tokio::spawn({
            let in_flight = in_flight.clone();
            async move {
                // Owns every job task: dropping the set (when the queue goes) aborts them.
                let mut jobs = JoinSet::new();
                loop {
                    tokio::select! {
                        finalized = batches.recv() => {
                            let Some(finalized) = finalized else { break };
                            if let Some(fallback) = &finalized.fallback {
                                tracing::warn!(error = %fallback, "batch dissolved; agents run individually");
                            }
                            for (join, pending) in labelled(finalized.batch) {
                                let Pending { mut job, reply, parent } = pending;
                                job.join = join;
                                let (executor, in_flight) = (executor.clone(), in_flight.clone());
                                jobs.spawn(async move {
                                    let run = job.spec.run_id.clone();
                                    let result = executor.execute(job).await;
                                    in_flight.done(&run);
                                    // The mode may have stopped waiting; the facts are stored.
                                    let _ = reply.send(result);
                                }.instrument(parent));
                            }
                        }
                        Some(_) = jobs.join_next(), if !jobs.is_empty() => {}
                    }
                }
                while jobs.join_next().await.is_some() {}
            }
        });
        Self {
            batcher,
            in_flight,
            driver,
        }
    }

    /// Queues an agent for the next batch; the receiver yields its result.
    pub(crate) async fn submit(&self, job: Job, join: JoinMode) -> Result<ResultRx, EngineError> {
        let (reply, result) = oneshot::channel();
        let (agent, run) = (job.spec.id.clone(), job.spec.run_id.clone());
        self.in_flight.add(&run);
        if let Err(e) = self
            .batcher
            .spawn(Spawn::new(
                agent,
                join,
                Pending {
                    job,
                    reply,
                    parent: tracing::Span::current(),
                },
            ))
            .await
        {
            self.in_flight.done(&run);
            return Err(EngineError::Internal(e.to_string()));
        }
        Ok(result)
    }

    /// Finalises the pending batch now (foreground dispatch, before awaiting members).
    pub(crate) async fn flush(&self) -> Result<(), EngineError> {
        self.batcher
            .flush()
            .await
            .map_err(|e| EngineError::Internal(e.to_string()))
    }

    /// Resolves once no job of `run` is queued or executing: every agent it started
    /// has recorded its end.
    pub(crate) async fn wait_idle(&self, run: &RunId) {
        loop {
            let changed = self.in_flight.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if !self.in_flight.busy(run) {
                return;
            }
            changed.await;
        }
    }
}

/// A batch's agents with the join label each is recorded with.
fn labelled(batch: Batch<Pending>) -> impl Iterator<Item = (Option<String>, Pending)> {
    let groups = batch.groups.into_iter().flat_map(|g| {
        let label = format!("group:{}", g.id);
        g.members
            .into_iter()
            .map(move |m| (Some(label.clone()), m.payload))
    });
    let swarms = batch.swarms.into_iter().flat_map(|s| {
        let label = format!("swarm:{}", s.id);
        s.members
            .into_iter()
            .map(move |m| (Some(label.clone()), m.payload))
    });
    let individuals = batch.individuals.into_iter().map(|m| (None, m.payload));
    groups.chain(swarms).chain(individuals)
}

/// What a batch holds, per run, for the event log.
fn describe(batch: &Batch<Pending>) -> BTreeMap<RunId, BatchShare> {
    let mut per_run: BTreeMap<RunId, BatchShare> = BTreeMap::new();
    for g in &batch.groups {
        if let Some(first) = g.members.first() {
            per_run
                .entry(first.payload.job.spec.run_id.clone())
                .or_default()
                .groups
                .push(JoinMembers {
                    id: g.id.to_string(),
                    members: g.members.iter().map(|m| m.agent.clone()).collect(),
                });
        }
    }
    for s in &batch.swarms {
        if let Some(first) = s.members.first() {
            per_run
                .entry(first.payload.job.spec.run_id.clone())
                .or_default()
                .swarms
                .push(JoinMembers {
                    id: s.id.to_string(),
                    members: s.members.iter().map(|m| m.agent.clone()).collect(),
                });
        }
    }
    for i in &batch.individuals {
        per_run
            .entry(i.payload.job.spec.run_id.clone())
            .or_default()
            .individuals
            .push(i.agent.clone());
    }
    per_run
}

/// Sends `spawn_agent` children through the spawn queue: each is batched (recorded in
/// its batch's `batch.finalized` event), handed to the executor and run in its
/// parent's workspace and slot. Each child is a journal step of its run,
/// [`StepKey::Child`] (`child/<parent-agent-id>/<n>`): begun before it is queued, done
/// when it ends, so a parent that goes on as the same agent reads a finished child
/// back instead of running it again. Holds the queue weakly (the queue's executor owns
/// the manager that holds this).
pub(crate) struct QueuedChildren {
    spawns: std::sync::Weak<SpawnQueue>,
    store: Store,
    /// How many `spawn_agent` calls each running parent agent has made in this process
    /// (an entry goes when its agent ends: a parent driven again, e.g. by a retry,
    /// counts from 1 and reads its finished children back).
    calls: Mutex<HashMap<AgentId, u32>>,
}

/// A child's step as the journal stores it: the agent that did it (its end, result
/// text and counters are the agent's row).
#[derive(Debug, Serialize, Deserialize)]
struct StoredChild {
    agent_id: AgentId,
}

impl QueuedChildren {
    pub(crate) fn new(spawns: &Arc<SpawnQueue>, store: Store) -> Self {
        Self {
            spawns: Arc::downgrade(spawns),
            store,
            calls: Mutex::new(HashMap::new()),
        }
    }

    /// How many parents' calls are counted (the running parents that spawned).
    #[cfg(test)]
    fn counted_parents(&self) -> usize {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The step of `parent`'s next `spawn_agent` call.
    fn next_key(&self, parent: &AgentId) -> StepKey {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let n = calls.entry(parent.clone()).or_default();
        *n += 1;
        StepKey::Child {
            parent: parent.clone(),
            n: *n,
        }
    }

    /// The outcome of the child that did step `key`, when the store holds its end: the
    /// step is done, or it was begun by an agent whose end was stored before the step
    /// was (a kill between the two writes; the step is finished now). `None` when the
    /// child must run: not begun, or begun and never ended.
    async fn ended(
        &self,
        run: &RunId,
        key: &StepKey,
    ) -> Result<Option<AgentOutcome>, crate::store::StoreError> {
        let stored = key.to_string();
        let Some(step) = self.store.step(run, &stored).await? else {
            return Ok(None);
        };
        let agent = match step.state {
            StepState::Done => match serde_json::from_value::<StoredChild>(step.data) {
                Ok(done) => done.agent_id,
                Err(e) => {
                    tracing::warn!(key = %stored, error = %e, "a stored child does not read back; running it again");
                    return Ok(None);
                }
            },
            StepState::Started => match step.agent_id {
                Some(id) => AgentId::from_string(id),
                None => return Ok(None),
            },
        };
        let Some(row) = self.store.agent(&agent).await? else {
            return Ok(None);
        };
        if !row.state.is_terminal() {
            return Ok(None);
        }
        if step.state == StepState::Started {
            self.finish(run, key, &agent).await?;
        }
        tracing::info!(step = %stored, agent_id = %agent, "a finished child read back, not run again");
        Ok(Some(AgentOutcome {
            state: row.state,
            stats: row.stats,
            result: row.result.unwrap_or_default(),
            error: row.error,
            exceeded: None,
            reason: None,
            history: Vec::new(),
        }))
    }

    async fn finish(
        &self,
        run: &RunId,
        key: &StepKey,
        agent: &AgentId,
    ) -> Result<(), crate::store::StoreError> {
        let data = serde_json::to_value(StoredChild {
            agent_id: agent.clone(),
        })
        .unwrap_or(serde_json::Value::Null);
        self.store
            .finish_step(
                run,
                &key.to_string(),
                Some(agent.as_str()),
                &data,
                Vec::new(),
                None,
            )
            .await
    }
}

#[async_trait::async_trait]
impl crate::agent::manager::ChildRunner for QueuedChildren {
    async fn run_child(&self, spec: AgentSpec) -> Result<AgentOutcome, String> {
        use super::executor::{ExecOptions, Placement, Stop};
        let spawns = self
            .spawns
            .upgrade()
            .ok_or_else(|| "the engine has shut down".to_owned())?;
        let (run, child) = (spec.run_id.clone(), spec.id.clone());
        let key = spec.parent.as_ref().map(|parent| self.next_key(parent));
        if let Some(key) = &key {
            if let Some(outcome) = self.ended(&run, key).await.map_err(|e| e.to_string())? {
                return Ok(outcome);
            }
            let input = serde_json::to_value(StepInput {
                name: &spec.name,
                task: None,
            })
            .unwrap_or(serde_json::Value::Null);
            self.store
                .begin_step(&run, &key.to_string(), Some(child.as_str()), &input)
                .await
                .map_err(|e| e.to_string())?;
        }
        let mut job = Job::new(spec, ExecOptions::unvalidated(), Stop::default());
        job.placement = Placement::WithParent;
        let rx = spawns
            .submit(job, JoinMode::Individual)
            .await
            .map_err(|e| e.to_string())?;
        // The parent waits for it: no debounce.
        spawns.flush().await.map_err(|e| e.to_string())?;
        let outcome = match rx.await {
            Ok(Ok(result)) => result.outcome,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("the spawn queue dropped the agent".to_owned()),
        };
        if let Some(key) = &key {
            self.finish(&run, key, &child)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(outcome)
    }

    fn agent_ended(&self, agent: &AgentId) {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(agent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::manager::ChildRunner as _;

    #[tokio::test]
    async fn a_parents_call_count_goes_when_it_ends_and_starts_again_from_one() {
        let dir = tempfile::tempdir().unwrap();
        let children = QueuedChildren {
            spawns: std::sync::Weak::new(),
            store: Store::open(dir.path()).unwrap(),
            calls: Mutex::new(HashMap::new()),
        };
        let (alice, bob) = (AgentId::new(), AgentId::new());
        let n = |key: StepKey| match key {
            StepKey::Child { n, .. } => n,
            other => panic!("not a child step: {other}"),
        };
        assert_eq!(n(children.next_key(&alice)), 1);
        assert_eq!(n(children.next_key(&alice)), 2);
        assert_eq!(n(children.next_key(&bob)), 1);
        assert_eq!(children.counted_parents(), 2);
        children.agent_ended(&alice);
        assert_eq!(children.counted_parents(), 1, "alice ended: her count goes");
        assert_eq!(
            n(children.next_key(&alice)),
            1,
            "driven again, she counts from 1"
        );
        children.agent_ended(&alice);
        children.agent_ended(&bob);
        assert_eq!(children.counted_parents(), 0);
    }
}

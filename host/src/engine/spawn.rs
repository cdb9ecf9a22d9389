//! The spawn path: every agent a mode starts is queued in the batcher (100 ms trailing
//! debounce, 1 s max wait), finalised as a batch partitioned by join mode — recorded in
//! the event log before anything starts — and only then executed. Foreground dispatch
//! flushes the batch before awaiting its members, so it never waits for the debounce.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use tokio::sync::oneshot;

use super::execute::{ExecOptions, ExecResult};
use super::run::{Engine, EngineError};
use crate::agent::runner::AgentSpec;
use crate::batch::{Batch, BatchError, Batcher, DebounceConfig, JoinMode, Spawn};
use crate::ids::RunId;

/// A queued agent and where its result goes.
pub struct Pending {
    spec: AgentSpec,
    opts: ExecOptions,
    reply: oneshot::Sender<Result<ExecResult, EngineError>>,
}

/// The engine's batcher and the task that starts finalised batches.
pub struct SpawnQueue {
    batcher: Batcher<Pending>,
}

/// One run's share of a batch: groups, swarms, individual agent ids.
#[derive(Default)]
struct RunShare(Vec<serde_json::Value>, Vec<serde_json::Value>, Vec<String>);

/// What a batch holds, per run, for the event log.
fn describe(batch: &Batch<Pending>) -> BTreeMap<RunId, serde_json::Value> {
    let mut per_run: BTreeMap<RunId, RunShare> = BTreeMap::new();
    for g in &batch.groups {
        let run = g.members[0].payload.spec.run_id.clone();
        let ids: Vec<String> = g.members.iter().map(|m| m.agent.to_string()).collect();
        per_run
            .entry(run)
            .or_default()
            .0
            .push(json!({ "id": g.id.as_str(), "members": ids }));
    }
    for s in &batch.swarms {
        let run = s.members[0].payload.spec.run_id.clone();
        let ids: Vec<String> = s.members.iter().map(|m| m.agent.to_string()).collect();
        per_run
            .entry(run)
            .or_default()
            .1
            .push(json!({ "id": s.id.as_str(), "members": ids }));
    }
    for i in &batch.individuals {
        per_run
            .entry(i.payload.spec.run_id.clone())
            .or_default()
            .2
            .push(i.agent.to_string());
    }
    per_run
        .into_iter()
        .map(|(run, RunShare(groups, swarms, individuals))| {
            (
                run,
                json!({ "groups": groups, "swarms": swarms, "individuals": individuals }),
            )
        })
        .collect()
}

impl SpawnQueue {
    /// Starts the batcher; finalised batches are executed by `engine` (a copy without
    /// a queue of its own).
    pub fn start(engine: Engine) -> Arc<Self> {
        let store = engine.store.clone();
        let hook = Box::new(move |batch: &Batch<Pending>| {
            let facts = describe(batch);
            let agents = batch.len();
            let store = store.clone();
            Box::pin(async move {
                for (run, data) in facts {
                    store
                        .append_event(&run, None, "batch.finalized", data)
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
        tokio::spawn(async move {
            while let Some(finalized) = batches.recv().await {
                if let Some(fallback) = &finalized.fallback {
                    tracing::warn!(error = %fallback, "batch dissolved; agents run individually");
                }
                let batch = finalized.batch;
                let labelled = batch
                    .groups
                    .into_iter()
                    .flat_map(|g| {
                        let label = format!("group:{}", g.id);
                        g.members.into_iter().map(move |m| (Some(label.clone()), m))
                    })
                    .chain(batch.swarms.into_iter().flat_map(|s| {
                        let label = format!("swarm:{}", s.id);
                        s.members.into_iter().map(move |m| (Some(label.clone()), m))
                    }))
                    .chain(batch.individuals.into_iter().map(|m| (None, m)));
                for (join, spawn) in labelled {
                    let Pending {
                        spec,
                        mut opts,
                        reply,
                    } = spawn.payload;
                    opts.join = join;
                    let engine = engine.clone();
                    tokio::spawn(async move {
                        let _ = reply.send(engine.execute(spec, opts).await);
                    });
                }
            }
        });
        Arc::new(Self { batcher })
    }
}

impl Engine {
    /// Queues an agent for the next batch; the receiver yields its result.
    pub async fn submit(
        &self,
        spec: AgentSpec,
        opts: ExecOptions,
        join: JoinMode,
    ) -> Result<oneshot::Receiver<Result<ExecResult, EngineError>>, EngineError> {
        let (reply, result) = oneshot::channel();
        match &self.spawns {
            Some(queue) => {
                let agent = spec.id.clone();
                queue
                    .batcher
                    .spawn(Spawn::new(agent, join, Pending { spec, opts, reply }))
                    .await
                    .map_err(|e| EngineError::Config(e.to_string()))?;
            }
            // An engine without a queue (the queue's own copy) executes directly.
            None => {
                let engine = self.clone();
                tokio::spawn(async move {
                    let _ = reply.send(engine.execute(spec, opts).await);
                });
            }
        }
        Ok(result)
    }

    /// Finalises the pending batch now (foreground dispatch, before awaiting members).
    pub async fn flush_spawns(&self) -> Result<(), EngineError> {
        if let Some(queue) = &self.spawns {
            queue
                .batcher
                .flush()
                .await
                .map_err(|e| EngineError::Config(e.to_string()))?;
        }
        Ok(())
    }

    /// This engine with a spawn queue of its own.
    pub fn with_spawn_queue(mut self) -> Self {
        let mut direct = self.clone();
        direct.spawns = None;
        self.spawns = Some(SpawnQueue::start(direct));
        self
    }
}

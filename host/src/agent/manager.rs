//! The agent manager: a FIFO queue with `max_concurrent` slots. Spawning records the
//! agent as queued and returns at once; a task waits for a slot, runs the turn loop,
//! lets an optional reviewer ask for fix rounds, and records the outcome. Steering and
//! stop requests reach live agents by id, also from other processes through the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt as _;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::permissions::{CapSet, Permissions};
use super::runner::{
    AgentIo, AgentOutcome, AgentSpec, Carry, FailReason, RunnerEnv, initial_messages, run_turns,
};
use super::started::Started;
use crate::event::Event;
use crate::ids::{AgentId, RunId};
use crate::provider::Message;
use crate::store::{AgentRecord, AgentStats, ControlKind, Pending, Store, StoreError, now_ms};
use crate::tool::registry::ToolRegistry;
use crate::tool::{Capability, ChildQuota, SpawnError, Spawner};
use crate::vocab::AgentState;

/// How often the control loop polls the store for steer/stop messages.
pub const CONTROL_POLL: Duration = Duration::from_millis(250);

/// Looks at a finished turn loop and may ask for a fix round (validators do).
#[async_trait]
pub trait Review: Send + Sync {
    /// Called after each run of the turn loop (`round` 0 first, then after each fix round).
    /// `Some(prompt)` asks for a fix round with that prompt (same agent, same history);
    /// `None` accepts. After the last allowed round the answer is recorded, not acted on.
    async fn review(&self, spec: &AgentSpec, outcome: &AgentOutcome, round: u32) -> Option<String>;
}

/// Makes an agent's work durable before its end is stored (commits its worktree to its
/// branch): once the store says an agent completed, its outputs are in place, so a
/// resume can finish its step from the store without running it again.
#[async_trait]
pub trait Seal: Send + Sync {
    /// Called once, after the turn loop and any fix rounds, before the end is stored.
    async fn seal(&self, spec: &AgentSpec, outcome: &AgentOutcome);
}

/// Options for one spawn.
#[derive(Clone, Default)]
pub struct SpawnOptions {
    /// How the agent is joined (`group:ID`, `swarm:ID`), recorded with it.
    pub join: Option<String>,
    /// Reviews the result and may ask for fix rounds.
    pub review: Option<Arc<dyn Review>>,
    /// Most fix rounds a reviewer can ask for.
    pub max_fix_rounds: u32,
    /// Start from this conversation instead of system + task.
    pub history: Option<Vec<Message>>,
    /// Makes its work durable before its end is stored.
    pub seal: Option<Arc<dyn Seal>>,
    /// Runs in the slot of the agent that spawned it (a `spawn_agent` child: its parent
    /// is blocked waiting for it, so taking a slot of its own could deadlock).
    pub in_parent_slot: bool,
    /// Its creation time (ms) when the caller made it earlier than this spawn (an
    /// engine's job); now otherwise.
    pub created_at: Option<i64>,
}

/// Runs a child that `spawn_agent` started through the engine's spawn path (its spawn
/// queue, batch and executor), so a child is batched, recorded and executed like every
/// other agent. A manager without one (no engine above it) starts children itself.
#[async_trait]
pub trait ChildRunner: Send + Sync {
    /// Runs `spec` (not yet recorded) to its end, in its parent's slot.
    async fn run_child(&self, spec: AgentSpec) -> Result<AgentOutcome, String>;

    /// Agent `agent` has ended in this process: forget what was kept for its children.
    fn agent_ended(&self, agent: &AgentId);
}

/// A spawned agent; `wait` returns its outcome.
pub struct AgentHandle {
    /// The agent's id.
    pub id: AgentId,
    rx: oneshot::Receiver<AgentOutcome>,
}

impl AgentHandle {
    /// Waits for the agent to end.
    pub async fn wait(self) -> AgentOutcome {
        self.rx.await.unwrap_or_else(|_| AgentOutcome {
            state: AgentState::Error,
            stats: AgentStats::default(),
            result: String::new(),
            error: Some("the agent task ended without an outcome".into()),
            exceeded: None,
            reason: Some(FailReason::Internal),
            history: Vec::new(),
        })
    }
}

struct Live {
    run_id: RunId,
    steer: mpsc::UnboundedSender<String>,
    cancel: CancellationToken,
    spec: Arc<AgentSpec>,
    /// Children started with `spawn_agent` (against `max_children`).
    children: u32,
}

struct Inner {
    store: Store,
    tools: Arc<ToolRegistry>,
    slots: Arc<Semaphore>,
    live: Mutex<HashMap<AgentId, Live>>,
    /// Runs driven here, cancelled by a stop aimed at the run.
    runs: Mutex<HashMap<RunId, CancellationToken>>,
    /// Children started with `spawn_agent` per run (against `max_children_per_run`),
    /// counted from the store the first time a run spawns here.
    run_children: Mutex<HashMap<RunId, u32>>,
    /// Where agents' processes run.
    sandbox: crate::sandbox::Sandbox,
    /// The MCP servers agents may be granted, one connection per run and server.
    mcp: crate::mcp::Pool,
    /// Where `spawn_agent` children go, once the engine set it.
    children: std::sync::OnceLock<Arc<dyn ChildRunner>>,
}

/// Runs agents. Cheap to clone.
#[derive(Clone)]
pub struct Manager {
    inner: Arc<Inner>,
}

impl Manager {
    /// A manager running at most `max_concurrent` agents at once. Its agents' commands
    /// are refused (no sandbox: fail closed); see [`Manager::sandboxed`].
    pub fn new(store: Store, tools: Arc<ToolRegistry>, max_concurrent: usize) -> Self {
        Self::sandboxed(
            store,
            tools,
            max_concurrent,
            crate::sandbox::Sandbox::missing(),
        )
    }

    /// A manager whose agents' processes run in `sandbox` (no MCP servers).
    pub fn sandboxed(
        store: Store,
        tools: Arc<ToolRegistry>,
        max_concurrent: usize,
        sandbox: crate::sandbox::Sandbox,
    ) -> Self {
        Self::with_mcp(
            store,
            tools,
            max_concurrent,
            sandbox,
            crate::mcp::Pool::default(),
        )
    }

    /// A manager whose agents' processes run in `sandbox` and whose agents reach the
    /// MCP servers of `mcp` they are granted.
    pub fn with_mcp(
        store: Store,
        tools: Arc<ToolRegistry>,
        max_concurrent: usize,
        sandbox: crate::sandbox::Sandbox,
        mcp: crate::mcp::Pool,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                tools,
                slots: Arc::new(Semaphore::new(max_concurrent.max(1))),
                live: Mutex::new(HashMap::new()),
                runs: Mutex::new(HashMap::new()),
                run_children: Mutex::new(HashMap::new()),
                sandbox,
                mcp,
                children: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Sends every `spawn_agent` child through `runner` from now on (set once, by the
    /// engine that owns this manager).
    pub(crate) fn route_children(&self, runner: Arc<dyn ChildRunner>) {
        if self.inner.children.set(runner).is_err() {
            tracing::warn!("spawn_agent children were routed already");
        }
    }

    /// Where its agents' processes run.
    pub fn sandbox(&self) -> &crate::sandbox::Sandbox {
        &self.inner.sandbox
    }

    /// The store facts go to.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Queues the agent's record (queued) to the store and starts it when a slot is
    /// free. Returns at once, without waiting for the store: the record is committed
    /// before anything queued to the store after it, before the agent's first effect
    /// (a tool call, a provider that acts, its seal) and before its end is reported; a
    /// record the store refuses makes the agent an error that did nothing. Fails only
    /// when the store has shut down.
    pub async fn spawn(
        &self,
        spec: AgentSpec,
        opts: SpawnOptions,
    ) -> Result<AgentHandle, StoreError> {
        let recorded = self.insert(&spec, &opts)?;
        let needs_slot = !opts.in_parent_slot;
        Ok(self.start(spec, opts, needs_slot, recorded))
    }

    fn insert(&self, spec: &AgentSpec, opts: &SpawnOptions) -> Result<Pending, StoreError> {
        self.inner.store.queue_agent(AgentRecord {
            id: spec.id.clone(),
            run_id: spec.run_id.clone(),
            parent: spec.parent.clone(),
            name: spec.name.clone(),
            role: spec.role.clone(),
            task: spec.task.clone(),
            caps: super::cap_names(spec.perms.caps),
            depth: spec.perms.depth,
            join: opts.join.clone(),
            state: AgentState::Queued,
            stats: AgentStats::default(),
            result: None,
            error: None,
            created_at: opts.created_at.unwrap_or_else(now_ms),
            started_at: None,
            finished_at: None,
        })
    }

    fn start(
        &self,
        spec: AgentSpec,
        opts: SpawnOptions,
        needs_slot: bool,
        recorded: Pending,
    ) -> AgentHandle {
        let (tx, rx) = oneshot::channel();
        let (steer_tx, steer_rx) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let spec = Arc::new(spec);
        let id = spec.id.clone();
        self.inner
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                id.clone(),
                Live {
                    run_id: spec.run_id.clone(),
                    steer: steer_tx,
                    cancel: cancel.clone(),
                    spec: spec.clone(),
                    children: 0,
                },
            );
        let this = self.clone();
        // The agent's task starts with no span of its own: its span's parent is what is
        // current here (the run's span, or the spawning agent's `tool` span), passed on.
        let span = crate::observe::spans::agent(
            &tracing::Span::current(),
            &crate::observe::spans::AgentNames {
                run_id: &spec.run_id,
                agent_id: &spec.id,
                name: &spec.name,
                role: &spec.role,
                parent: spec.parent.as_ref(),
            },
        );
        let ended = span.clone();
        let task = async move {
            let mut io = AgentIo {
                steer: steer_rx,
                cancel,
            };
            // A bug that panics the task must not leave the agent `running` for ever:
            // it is recorded as an error like any other failure.
            let driven = std::panic::AssertUnwindSafe(
                this.drive(&spec, &opts, &mut io, needs_slot, recorded),
            )
            .catch_unwind()
            .await;
            let outcome = match driven {
                Ok(outcome) => outcome,
                Err(panic) => {
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".into());
                    tracing::error!(agent_id = %spec.id, "the agent's task panicked: {why}");
                    // Its start may not have been queued: nothing to confirm.
                    this.record(
                        &spec,
                        failed(format!("internal error: the agent's task panicked: {why}")),
                        &Started::committed(),
                    )
                    .await
                }
            };
            this.inner
                .live
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&spec.id);
            if let Some(children) = this.inner.children.get() {
                children.agent_ended(&spec.id);
            }
            // Steers are sent under the `live` lock, so none can arrive any more: what is
            // left was never seen by the model, and is reported rather than dropped.
            while let Ok(message) = io.steer.try_recv() {
                undelivered(&this.inner.store, &spec.run_id, &spec.id, &message).await;
            }
            crate::observe::spans::agent_ended(
                &ended,
                outcome.state,
                &outcome.stats,
                outcome.reason,
            );
            let _ = tx.send(outcome);
        };
        tokio::spawn(task.instrument(span));
        AgentHandle { id, rx }
    }

    async fn drive(
        &self,
        spec: &AgentSpec,
        opts: &SpawnOptions,
        io: &mut AgentIo,
        needs_slot: bool,
        recorded: Pending,
    ) -> AgentOutcome {
        let store = &self.inner.store;
        let _permit = if needs_slot {
            tokio::select! {
                permit = self.inner.slots.clone().acquire_owned() => permit.ok(),
                _ = io.cancel.cancelled() => {
                    let started = Started::queued(vec![("queued", recorded)]);
                    return self.record(spec, stopped_before_start(), &started).await;
                }
            }
        } else {
            None
        };
        // Not waited for here: confirmed before the agent's first effect and its end
        // (see `started`).
        let started = match store.queue_agent_state(&spec.id, AgentState::Running) {
            Ok(running) => Arc::new(Started::queued(vec![
                ("queued", recorded),
                ("running", running),
            ])),
            Err(e) => {
                let started = Started::queued(vec![("queued", recorded)]);
                let why = format!("cannot record the agent as running: {e}");
                return self.record(spec, failed(why), &started).await;
            }
        };
        store.log_event(
            &spec.run_id,
            Some(&spec.id),
            Event::AgentState {
                state: AgentState::Running,
                error: None,
                exceeded: None,
                reason: None,
            },
        );
        // Registered for every agent: the `command` provider finds it by the agent's id.
        let sandbox = self.inner.sandbox.agent(crate::sandbox::AgentScope {
            id: spec.id.to_string(),
            workspace: Some(spec.workspace.clone()),
            writable: spec.perms.caps.contains(Capability::Write),
            network: spec.network,
        });
        let env = RunnerEnv {
            store: store.clone(),
            tools: self.inner.tools.clone(),
            spawner: Some(Arc::new(ChildSpawner {
                manager: Arc::downgrade(&self.inner),
            }) as Arc<dyn Spawner>),
            started: started.clone(),
            sandbox: Some(sandbox),
            mcp: self.inner.mcp.for_agent(
                spec.run_id.as_str(),
                &spec.workspace,
                &spec.mcp,
                spec.perms.caps,
            ),
        };
        let messages = opts
            .history
            .clone()
            .unwrap_or_else(|| initial_messages(spec));
        // One budget for the agent, its fix rounds included.
        let (mut outcome, mut carry) = run_turns(&env, spec, io, messages, Carry::new(spec)).await;
        if let Some(review) = &opts.review {
            // Review after every run; a fix is only acted on while rounds remain, so the
            // reviewer always sees (and records) the final state.
            let mut round = 0;
            while outcome.state.is_success() {
                let Some(fix) = review.review(spec, &outcome, round).await else {
                    break;
                };
                if round >= opts.max_fix_rounds {
                    break;
                }
                round += 1;
                store.log_event(&spec.run_id, Some(&spec.id), Event::AgentFixRound { round });
                let mut history = std::mem::take(&mut outcome.history);
                history.push(Message::user(fix));
                (outcome, carry) = run_turns(&env, spec, io, history, carry).await;
            }
        }
        // The agent is done with its tools: its MCP servers end now, their process
        // trees waited for, so nothing they started runs while crewbox seals, commits
        // or resets the worktree as the user (a background process could swap a
        // directory for a link to the host under the commit's walk).
        if let Some(mcp) = &env.mcp {
            mcp.close().await;
        }
        if let Some(seal) = &opts.seal {
            // Sealing commits its worktree: an effect, so its start is stored first.
            if let Err(why) = started.confirmed().await {
                outcome = failed(why);
            }
            seal.seal(spec, &outcome).await;
        }
        self.record(spec, outcome, &started).await
    }

    /// Stores an agent's end (the store refuses transitions the lifecycle does not
    /// have). Its end is queued behind its start, whose writes are confirmed before the
    /// outcome is reported: a start the store refused makes the agent an error.
    async fn record(
        &self,
        spec: &AgentSpec,
        outcome: AgentOutcome,
        started: &Started,
    ) -> AgentOutcome {
        let store = &self.inner.store;
        // Its conversation is stored with its end (one transaction): what a resume
        // finishes its step from, and what a retry of a dead letter continues.
        let ending = crate::store::AgentEnding {
            state: outcome.state,
            stats: outcome.stats,
            result: &outcome.result,
            error: outcome.error.as_deref(),
            reason: outcome.reason,
            conversation: serde_json::to_string(&outcome.history).unwrap_or_default(),
        };
        let finished = store.queue_finish_agent(&spec.id, ending);
        // Applied in order: the start is settled by the time the end is.
        let outcome = match started.confirmed().await {
            Ok(()) => outcome,
            Err(why) => {
                tracing::error!(agent_id = %spec.id, error = %why, "the agent's start was not stored");
                failed(why)
            }
        };
        if let Err(e) = async { finished?.committed().await }.await {
            tracing::error!(agent_id = %spec.id, error = %e, "agent outcome not stored");
        }
        store.log_event(
            &spec.run_id,
            Some(&spec.id),
            Event::AgentState {
                state: outcome.state,
                error: outcome.error.clone(),
                exceeded: outcome.exceeded,
                reason: outcome.reason,
            },
        );
        outcome
    }

    /// Queues a steering message for a live agent (delivered before its next model call,
    /// or reported undelivered if it ends first); false if it is not running here.
    pub fn steer(&self, id: &AgentId, message: String) -> bool {
        let live = self.inner.live.lock().unwrap_or_else(|p| p.into_inner());
        live.get(id).is_some_and(|l| l.steer.send(message).is_ok())
    }

    /// Stops a live agent, or every agent of a run; returns how many were told.
    pub fn stop(&self, target: &str) -> usize {
        if let Some(run) = self
            .inner
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&RunId::from_string(target.to_owned()))
        {
            run.cancel();
        }
        let live = self.inner.live.lock().unwrap_or_else(|p| p.into_inner());
        let mut n = 0;
        for (id, l) in live.iter() {
            if id.as_str() == target || l.run_id.as_str() == target {
                l.cancel.cancel();
                n += 1;
            }
        }
        n
    }

    /// Registers a run driven here: the token is cancelled when the run is stopped
    /// (`crewbox stop RUN`), so a mode can end between its agents too.
    pub fn register_run(&self, run: &RunId) -> CancellationToken {
        self.inner
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(run.clone())
            .or_default()
            .clone()
    }

    /// Forgets a run registered with [`Manager::register_run`].
    pub fn unregister_run(&self, run: &RunId) {
        self.inner
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run);
        self.inner
            .run_children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run);
    }

    /// Number of agents this manager is running or holding in its queue.
    pub fn live_count(&self) -> usize {
        self.inner
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Polls the store for steer/stop messages aimed at this manager's agents or runs
    /// until `shutdown` is cancelled. Messages for other processes are left alone.
    pub async fn control_loop(&self, runs: Vec<RunId>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(CONTROL_POLL) => {}
            }
            let Ok(pending) = self.inner.store.pending_controls().await else {
                continue;
            };
            let mut handled = Vec::new();
            for c in pending {
                let is_ours = runs.iter().any(|r| r.as_str() == c.target)
                    || self
                        .inner
                        .live
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .contains_key(&AgentId::from_string(c.target.clone()));
                if !is_ours {
                    // A steer for an agent that has ended (it raced the agent's end) is
                    // reported once, by whichever process sees it, instead of waiting
                    // forever.
                    if c.kind == ControlKind::Steer
                        && let Ok(Some(agent)) = self
                            .inner
                            .store
                            .agent(&AgentId::from_string(c.target.clone()))
                            .await
                        && agent.state.is_terminal()
                    {
                        let message = c.message.clone().unwrap_or_default();
                        undelivered(&self.inner.store, &agent.run_id, &agent.id, &message).await;
                        handled.push(c.seq);
                    }
                    continue;
                }
                match c.kind {
                    ControlKind::Steer => {
                        if self.steer(
                            &AgentId::from_string(c.target.clone()),
                            c.message.clone().unwrap_or_default(),
                        ) {
                            handled.push(c.seq);
                        }
                    }
                    ControlKind::Stop => {
                        self.stop(&c.target);
                        handled.push(c.seq);
                    }
                    // Team messages are taken by the team's reflect loop.
                    ControlKind::Message => {}
                }
            }
            if let Err(e) = self.inner.store.consume_controls(handled).await {
                tracing::warn!(error = %e, "control messages not marked handled");
            }
        }
    }
}

/// Records that a steering message never reached the agent's model (stored before
/// anyone is told the agent ended).
async fn undelivered(store: &Store, run: &RunId, agent: &AgentId, message: &str) {
    tracing::warn!(agent_id = %agent, "steering message not delivered: the agent had ended");
    let event = Event::AgentSteerUndelivered {
        message: message.to_owned(),
        why: "the agent ended before its next model call".into(),
    };
    if let Err(e) = store.append_event(run, Some(agent), event).await {
        tracing::warn!(agent_id = %agent, error = %e, "undelivered steer not recorded");
    }
}

fn stopped_before_start() -> AgentOutcome {
    AgentOutcome {
        state: AgentState::Stopped,
        stats: AgentStats::default(),
        result: String::new(),
        error: Some("stopped before it started".into()),
        exceeded: None,
        reason: Some(FailReason::Stopped),
        history: Vec::new(),
    }
}

fn failed(error: String) -> AgentOutcome {
    AgentOutcome {
        state: AgentState::Error,
        error: Some(error),
        reason: Some(FailReason::Internal),
        ..stopped_before_start()
    }
}

/// Roles that ask for read-only tools when spawned by `spawn_agent`.
const READ_ONLY_ROLES: &[&str] = &["planner", "reviewer", "reader", "researcher", "read-only"];

/// Serves `spawn_agent`: the child gets `requested ∩ parent` (never `spawn`), runs inside
/// its parent's slot (the parent is blocked waiting, so taking a new slot could deadlock)
/// and its result text goes back to the parent as the tool result.
struct ChildSpawner {
    manager: Weak<Inner>,
}

impl Inner {
    /// Takes one of `parent`'s children out of `max_children`: the parent's spec, or
    /// the quota that is used up.
    fn reserve_agent_child(&self, parent: &AgentId) -> Result<Arc<AgentSpec>, SpawnError> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        let l = live
            .get_mut(parent)
            .ok_or_else(|| SpawnError::Failed(format!("agent {parent} is not running")))?;
        let max = l.spec.quotas.max_children;
        if l.children >= max {
            return Err(SpawnError::Quota {
                quota: ChildQuota::PerAgent,
                max,
            });
        }
        l.children += 1;
        Ok(l.spec.clone())
    }

    /// Gives back a child taken with [`Inner::reserve_agent_child`] that never started.
    fn release_agent_child(&self, parent: &AgentId) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = live.get_mut(parent) {
            l.children = l.children.saturating_sub(1);
        }
    }

    /// Takes one child of `run` out of `max`; `stored` is how many children the store
    /// holds for the run (counted once, when the run first spawns in this process, so
    /// a resumed run keeps counting from what ran before).
    fn reserve_run_child(&self, run: &RunId, stored: u32, max: u32) -> Result<(), SpawnError> {
        let mut runs = self.run_children.lock().unwrap_or_else(|p| p.into_inner());
        let n = runs.entry(run.clone()).or_insert(stored);
        if *n >= max {
            return Err(SpawnError::Quota {
                quota: ChildQuota::PerRun,
                max,
            });
        }
        *n += 1;
        Ok(())
    }

    fn release_run_child(&self, run: &RunId) {
        let mut runs = self.run_children.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = runs.get_mut(run) {
            *n = n.saturating_sub(1);
        }
    }

    /// The children `spawn_agent` started in `run` so far, as the store knows them:
    /// agents below the root of the tree (chained agents and team workers are roots).
    async fn stored_children(&self, run: &RunId) -> Result<u32, SpawnError> {
        let counted = self
            .run_children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(run);
        if counted {
            return Ok(0);
        }
        let agents = self
            .store
            .agents(run)
            .await
            .map_err(|e| SpawnError::Failed(format!("cannot count the run's agents: {e}")))?;
        Ok(agents.iter().filter(|a| a.depth > 0).count() as u32)
    }
}

#[async_trait]
impl Spawner for ChildSpawner {
    async fn spawn_child(
        &self,
        parent: &AgentId,
        role: &str,
        task: &str,
    ) -> Result<String, SpawnError> {
        let inner = self
            .manager
            .upgrade()
            .ok_or_else(|| SpawnError::Failed("the agent manager has shut down".into()))?;
        let manager = Manager { inner };
        let inner = &manager.inner;
        // The quotas are taken before anything is recorded: a refused child never
        // exists, and concurrent calls cannot both take the last place.
        let parent_spec = inner.reserve_agent_child(parent)?;
        let run = parent_spec.run_id.clone();
        let taken = match inner.stored_children(&run).await {
            Ok(stored) => {
                inner.reserve_run_child(&run, stored, parent_spec.quotas.max_children_per_run)
            }
            Err(e) => Err(e),
        };
        if let Err(e) = taken {
            inner.release_agent_child(parent);
            return Err(e);
        }
        let release = || {
            inner.release_agent_child(parent);
            inner.release_run_child(&run);
        };
        let requested = if READ_ONLY_ROLES.contains(&role) {
            CapSet::read_only()
        } else {
            CapSet::full()
        };
        let perms: Permissions = match parent_spec
            .perms
            .child(requested, parent_spec.quotas.max_depth)
        {
            Ok(p) => p,
            Err(e) => {
                release();
                return Err(SpawnError::Failed(e.to_string()));
            }
        };
        let mut spec = (*parent_spec).clone();
        spec.id = AgentId::new();
        spec.parent = Some(parent.clone());
        spec.name = role.to_owned();
        spec.role = role.to_owned();
        spec.task = task.to_owned();
        // The parent by name, not by id: the model has no use for an id, and a prompt
        // that holds one differs on every run, so a replay of the run would diverge.
        // `mcp` is named only with servers to reach (an agent on a NATS worker has none):
        // the prompt says what the sub-agent can use, wherever it runs.
        let usable = super::prompt_caps(perms.caps, &spec.mcp);
        spec.system_prompt = format!(
            "{}\n\nYou are a sub-agent with role `{role}`, spawned by agent `{}`. Your tools: {}.",
            parent_spec.system_prompt,
            parent_spec.name,
            super::cap_names(usable).join(", ")
        );
        debug_assert!(!perms.caps.contains(Capability::Spawn));
        spec.perms = perms;
        let outcome = if let Some(runner) = inner.children.get().cloned() {
            // Through the engine: queued, batched, recorded and executed like every agent.
            match runner.run_child(spec).await {
                Ok(outcome) => outcome,
                Err(e) => {
                    // Never started, or lost on the way: its places go back.
                    release();
                    return Err(SpawnError::Failed(e));
                }
            }
        } else {
            let recorded = match manager.insert(&spec, &SpawnOptions::default()) {
                Ok(recorded) => recorded,
                Err(e) => {
                    release();
                    return Err(SpawnError::Failed(e.to_string()));
                }
            };
            manager
                .start(spec, SpawnOptions::default(), false, recorded)
                .wait()
                .await
        };
        match outcome.state {
            s if s.is_success() => Ok(outcome.result),
            s => Err(SpawnError::Failed(format!(
                "sub-agent ended {s}: {}",
                outcome.error.unwrap_or_default()
            ))),
        }
    }
}

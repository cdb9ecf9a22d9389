//! `crewbox worker`: pulls tasks of one pool and runs each with the same
//! [`LocalExecutor`] a local run uses (worktree, sandbox, tools, validators, budgets),
//! in a clone of the task's git remote, with this machine's own user config.
//!
//! What a worker trusts: nothing in a task widens access. Providers are the worker
//! user's definitions of the name the task gives (keys never travel); quotas are the
//! lower of the task's and the worker's; the network is granted only when both the
//! coordinator's user and the worker's sandbox config grant it; the sandbox is the
//! worker's; a repository's own config and plugins apply only if the worker's user
//! trusts the clone (`crewbox trust` in it); remotes are served only when they match
//! the worker's `allow_remotes`.
//!
//! Delivery: a task is acked only after its result's PubAck; an in-progress ack goes
//! every third of the ack wait, so a long agent is not redelivered; a task whose result
//! is already on the server is acked without running again; a delivery past
//! [`streams::RUN_DELIVERIES`] is answered with an error instead of run (the workers
//! before stopped without answering), so its run goes on.

mod forward;
mod own;
mod pull;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::streams::{self, result_subject};
use super::task::{
    Control, ForwardedExchange, MAX_CHILDREN, Order, Task, TaskPlacement, TaskResult, WIRE_VERSION,
    is_token,
};
use super::{RemoteError, WorkerError, git};
use crate::agent::permissions::{CapSet, Permissions};
use crate::agent::runner::AgentSpec;
use crate::config::{Config, Quotas};
use crate::engine::executor::{ExecOptions, Executor, Job, LocalExecutor, Placement, Stop};
use crate::engine::services::Services;
use crate::engine::validate::ValidatorEntry;
use crate::engine::{EngineError, RunRequest};
use crate::ids::{AgentId, RunId};
use crate::store::{AgentRecord, Store};
use crate::vocab::{Capability, Isolation};
use forward::Forwarder;
use pull::Puller;

/// How a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The server (else the user's `[nats] url`).
    pub url: Option<String>,
    /// The pool served (else `[nats] pool`).
    pub pool: Option<String>,
    /// Tasks at once.
    pub slots: usize,
    /// This worker's name as recorded per agent (default `<host>-<pid>`).
    pub name: Option<String>,
    /// The state base (clones, the worker's own store).
    pub state_base: Option<PathBuf>,
    /// Remote URL prefixes served, besides the user's `[nats] allow_remotes`.
    pub allow_remotes: Vec<String>,
    /// The script of tasks naming the `scripted` provider.
    pub script: Option<PathBuf>,
}

/// What a worker did (returned when it stops).
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkerStats {
    /// Tasks run to a result.
    pub ran: u64,
    /// Tasks acked without running (their result was on the server already).
    pub skipped: u64,
    /// Tasks refused (malformed, another pool, an unserved remote).
    pub refused: u64,
}

/// A clone a worker opened as a repository: what its engine is built from.
pub struct OpenedClone {
    /// The clone's root.
    pub root: PathBuf,
    /// The process sandbox for its agents' commands (the user's config).
    pub sandbox: crate::sandbox::Sandbox,
    /// Where its agents' worktrees go.
    pub worktrees_dir: PathBuf,
    /// Its configuration (the user's, plus the clone's only when it is trusted).
    pub config: Config,
}

/// Opens a clone of a remote as a repository, under the same rules as the CLI's (the
/// composition root, `repository/`, provides it: the worker does not reach above
/// the engine).
pub trait CloneOpener: Send + Sync {
    /// Opens the clone at `dir`, its state under `state_base`.
    fn open(
        &self,
        dir: &std::path::Path,
        state_base: &std::path::Path,
    ) -> Result<OpenedClone, Box<dyn std::error::Error + Send + Sync>>;
}

struct Shared {
    opener: Arc<dyn CloneOpener>,
    js: jetstream::Context,
    results: jetstream::stream::Stream,
    pool: String,
    name: String,
    ack_wait: Duration,
    state_base: PathBuf,
    clones: PathBuf,
    store: Store,
    allow: Vec<super::url::RemoteUrl>,
    script: Option<PathBuf>,
    /// Tasks run at once (its worktree pools keep as many prepared worktrees).
    slots: usize,
    /// One engine per remote, built on first use.
    engines: Mutex<HashMap<String, Arc<Services>>>,
    /// Runs recorded in the worker's own store.
    runs: Mutex<std::collections::HashSet<String>>,
    /// Tasks running in this process (a redelivery of one is not run twice here).
    inflight: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The agents of those tasks.
    running_agents: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Task key → its agent, the agents that one started and the engine running them,
    /// while it runs: where a steer or stop for the task goes.
    steerable: std::sync::Mutex<HashMap<String, Steering>>,
    /// The latest results this process produced, by task key, for a redelivery whose
    /// result could not be stored the first time (the agent is not run again).
    recent: std::sync::Mutex<std::collections::VecDeque<TaskResult>>,
    /// Base commits fetched already, per remote.
    fetched: Mutex<std::collections::HashSet<(String, String)>>,
    /// Checkouts read-only agents share, per clone and base.
    readers: super::readers::Readers,
    /// Agents of answered tasks whose rows the worker's own store still holds (they go
    /// in batches, see [`forget_answered`]).
    answered: std::sync::Mutex<Vec<AgentId>>,
    stats: std::sync::Mutex<WorkerStats>,
}

/// Serves tasks until `shutdown`; tasks in progress finish first.
pub async fn serve(
    opts: WorkerOptions,
    opener: Arc<dyn CloneOpener>,
    shutdown: CancellationToken,
) -> Result<WorkerStats, WorkerError> {
    let config = Config::load_user()?;
    let settings = config.nats.clone();
    let pool = opts.pool.clone().unwrap_or(settings.pool.clone());
    if !is_token(&pool) {
        return Err(RemoteError::Pool(pool).into());
    }
    // Parsed before anything else: an empty or malformed entry is an error, never a
    // prefix of every remote.
    let mut allow = Vec::new();
    for (origin, list) in [
        ("[nats] allow_remotes", &settings.allow_remotes),
        ("--allow-remote", &opts.allow_remotes),
    ] {
        for entry in list {
            allow.push(
                super::url::RemoteUrl::parse(entry)
                    .map_err(|source| RemoteError::AllowRemote { origin, source })?,
            );
        }
    }
    let name = opts.name.clone().unwrap_or_else(default_name);
    let client = super::connect(
        &settings,
        opts.url.as_deref(),
        &format!("crewbox worker {name}"),
    )
    .await?;
    let js = jetstream::new(client);
    let (tasks, results) = streams::ensure(&js).await?;
    let (consumer, ack_wait) = streams::pool_consumer(&tasks, &pool, settings.ack_wait).await?;
    let state_base = match opts.state_base.clone().or(config.state_dir.clone()) {
        Some(b) => b,
        None => crate::paths::user_state_dir().ok_or(WorkerError::NoStateHome)?,
    };
    let state_base = std::path::absolute(&state_base)?;
    let worker_dir = state_base.join("worker");
    // The stores of workers that died without deleting theirs go (a whole store each,
    // so off the runtime), then this process's own store's directory is made: a task
    // redelivered to a restarted worker starts clean.
    let (swept, own) = {
        let dir = worker_dir.clone();
        tokio::task::spawn_blocking(move || (own::sweep(&dir), own::create(&dir)))
            .await
            .map_err(std::io::Error::other)?
    };
    if swept > 0 {
        tracing::info!(swept, dir = %worker_dir.display(), "deleted the stores of dead workers");
    }
    let own = own.map_err(|source| WorkerError::OwnDir {
        dir: worker_dir.clone(),
        source,
    })?;
    let store = Store::open(own.path())?;
    let shared = Arc::new(Shared {
        opener,
        js,
        results,
        pool,
        name,
        ack_wait,
        state_base,
        clones: worker_dir.join("clones"),
        store,
        allow,
        script: opts.script.clone(),
        slots: opts.slots.max(1),
        engines: Mutex::new(HashMap::new()),
        runs: Mutex::new(Default::default()),
        fetched: Mutex::new(Default::default()),
        readers: Default::default(),
        inflight: std::sync::Mutex::new(Default::default()),
        running_agents: std::sync::Mutex::new(Default::default()),
        steerable: std::sync::Mutex::new(HashMap::new()),
        recent: std::sync::Mutex::new(Default::default()),
        answered: std::sync::Mutex::new(Vec::new()),
        stats: std::sync::Mutex::new(WorkerStats::default()),
    });
    tracing::info!(pool = %shared.pool, worker = %shared.name, slots = opts.slots, "worker ready");
    crate::text::errln!(
        "crewbox worker {} serving pool {} ({} slots)",
        shared.name,
        shared.pool,
        opts.slots
    );
    // One pull loop per slot, each asking for one task at a time, so a slot that frees
    // takes the next task at once: a pull for several tasks waits until all of them
    // came (or it expired) while its slots stayed idle.
    let mut running = tokio::task::JoinSet::new();
    // Steer and stop orders for the agents this worker runs.
    let orders = shared
        .js
        .client()
        .subscribe(streams::control_filter(&shared.pool))
        .await
        .map_err(|e| RemoteError::Connect {
            url: "the NATS server".into(),
            detail: format!("cannot listen for steer and stop orders: {e}"),
        })?;
    running.spawn(take_orders(shared.clone(), orders, shutdown.clone()));
    for _ in 0..shared.slots {
        running.spawn(slot_loop(
            shared.clone(),
            consumer.clone(),
            shutdown.clone(),
        ));
    }
    // What answered tasks left in the worker's own store goes at least once a second.
    running.spawn({
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(FORGET_EVERY) => forget_answered(&shared, 1),
                    _ = shutdown.cancelled() => return,
                }
            }
        }
    });
    while running.join_next().await.is_some() {}
    shared.readers.close().await;
    let _ = tokio::fs::remove_dir_all(own.path()).await;
    drop(own);
    let stats = *shared.stats.lock().unwrap_or_else(|p| p.into_inner());
    Ok(stats)
}

fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".into());
    let host: String = host
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(64)
        .collect();
    format!("{host}-{}", std::process::id())
}

/// One slot: pulls a task (waiting on the server up to [`pull::PULL_WAIT`] per request, so an
/// idle slot asks about once a second, never in a loop), handles it to its ack, then
/// pulls the next, until `shutdown` (a task in progress finishes first).
async fn slot_loop(
    shared: Arc<Shared>,
    consumer: jetstream::consumer::PullConsumer,
    shutdown: CancellationToken,
) {
    let backoff = crate::backoff::Backoff::new(Duration::from_millis(500), Duration::from_secs(5));
    let mut failures = 0;
    let mut puller = Puller::new(shared.js.clone(), consumer);
    // The last task's result on its way to the server while the next task runs (one
    // at a time per slot: the slot takes the next task without waiting for the store).
    let mut finishing: Option<tokio::task::JoinHandle<()>> = None;
    while !shutdown.is_cancelled() {
        let pulled = tokio::select! {
            m = puller.next() => m,
            _ = shutdown.cancelled() => break,
        };
        match pulled {
            Ok(Some(msg)) => {
                failures = 0;
                let ran = handle(&shared, msg).await;
                if let Some(last) = finishing.take() {
                    let _ = last.await;
                }
                finishing = ran.map(|ran| tokio::spawn(ran.finish()));
            }
            // Expired with nothing to do.
            Ok(None) => failures = 0,
            Err(e) => {
                tracing::warn!(error = %e, "fetching a task failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff.wait(failures)) => {}
                    _ = shutdown.cancelled() => break,
                }
                failures = failures.saturating_add(1);
            }
        }
    }
    if let Some(last) = finishing.take() {
        let _ = last.await;
    }
}

/// One task delivery, up to its result: what is left to do ([`Ran::finish`]) when its
/// agent ran (or it was refused with a result), `None` when it is settled already.
async fn handle(shared: &Arc<Shared>, msg: jetstream::Message) -> Option<Ran> {
    let task = match Task::from_bytes(&msg.payload) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(subject = %msg.subject, error = %e, "task refused");
            bump(shared, |s| s.refused += 1);
            let _ = msg.ack_with(AckKind::Term).await;
            return None;
        }
    };
    tracing::debug!(
        task = %task.key,
        agent = %task.name,
        delivered = msg.info().map(|i| i.delivered).unwrap_or(0),
        "task received"
    );
    let expected = streams::task_subject(&task.pool, &task.run_id, &task.key);
    let refusal = if task.pool != shared.pool {
        Some(format!(
            "task for pool `{}` reached a worker of pool `{}`",
            task.pool, shared.pool
        ))
    } else if msg.subject.as_str() != expected {
        Some(format!(
            "task on subject {} names subject {expected}",
            msg.subject
        ))
    } else if !super::url::RemoteUrl::parse(&task.remote)
        .is_ok_and(|remote| shared.allow.iter().any(|p| remote.within(p)))
    {
        Some(format!(
            "worker {} does not serve remote {} (not in its `[nats] allow_remotes` or --allow-remote)",
            shared.name, task.remote
        ))
    } else {
        msg.info()
            .ok()
            .map(|i| i.delivered)
            .filter(|n| *n > streams::RUN_DELIVERIES)
            .map(|n| {
                format!(
                    "task given up on its delivery {n}: it was delivered {} times to run and \
                     no worker answered (each stopped first: killed, or the task makes workers \
                     crash)",
                    streams::RUN_DELIVERIES
                )
            })
    };
    // A first delivery has no result yet: a task is published again only when its
    // result is not on the server. A redelivery may (a worker died between storing it
    // and its ack).
    let redelivered = msg.info().map_or(true, |i| i.delivered > 1);
    let results_at = result_subject(&task.run_id, &task.key);
    if redelivered
        && shared
            .results
            .get_last_raw_message_by_subject(&results_at)
            .await
            .is_ok()
    {
        // Its result is durable already (a worker died between that and its ack).
        bump(shared, |s| s.skipped += 1);
        let _ = msg.double_ack().await;
        return None;
    }
    if !lock(&shared.inflight).insert(task.key.clone()) {
        // Redelivered while it still runs here (a heartbeat was late): keep it ours.
        tracing::warn!(task = %task.key, "task redelivered while running here");
        let _ = msg.ack_with(AckKind::Progress).await;
        return None;
    }
    let running = Running(shared.clone(), task.key.clone());
    let cached = lock(&shared.recent)
        .iter()
        .find(|r| r.key == task.key)
        .cloned();
    let exec = uuid::Uuid::now_v7().simple().to_string();
    let result = match (cached, refusal) {
        (Some(done), _) => done,
        (None, refusal) => match refusal {
            Some(why) => {
                tracing::warn!(task = %task.key, %why, "task refused");
                bump(shared, |s| s.refused += 1);
                TaskResult::failure(&task, &exec, &shared.name, why)
            }
            None => {
                let heartbeat = CancellationToken::new();
                let beat = tokio::spawn({
                    let (msg_ack, stop, every) =
                        (msg.clone(), heartbeat.clone(), shared.ack_wait / 3);
                    async move {
                        loop {
                            tokio::select! {
                                _ = tokio::time::sleep(every) => {
                                    if let Err(e) = msg_ack.ack_with(AckKind::Progress).await {
                                        tracing::warn!(error = %e, "heartbeat failed");
                                    }
                                }
                                _ = stop.cancelled() => return,
                            }
                        }
                    }
                });
                let r = match run_task(shared, &task, &exec).await {
                    Ok(r) => r,
                    Err(e) => TaskResult::failure(&task, &exec, &shared.name, e.to_string()),
                };
                // The answer holds what the coordinator keeps of the agent: nothing
                // reads this store's rows of it again (a redelivery is answered from
                // `recent` or runs afresh), so they go, in batches.
                lock(&shared.answered).push(AgentId::from_string(task.agent_id.clone()));
                forget_answered(shared, FORGET_BATCH);
                heartbeat.cancel();
                let _ = beat.await;
                tracing::debug!(task = %task.key, state = ?r.state, "task ran");
                bump(shared, |s| s.ran += 1);
                r
            }
        },
    };
    {
        let mut recent = lock(&shared.recent);
        recent.retain(|r| r.key != task.key);
        if recent.len() >= RECENT_RESULTS {
            recent.pop_front();
        }
        recent.push_back(result.clone());
    }
    Some(Ran {
        task,
        result,
        msg,
        running,
    })
}

/// A task with its result, not yet stored on the server; the task stays marked as
/// running here until it is acked (a redelivery meanwhile is not run twice).
struct Ran {
    task: Task,
    result: TaskResult,
    msg: jetstream::Message,
    /// Marks the task as running here until it is acked (and holds the worker's state).
    running: Running,
}

impl Ran {
    /// Stores the result on the server, then acks the task (or has it redelivered).
    async fn finish(mut self) {
        let (task, msg, shared) = (&self.task, &self.msg, &self.running.0);
        match publish_result(shared, task, &mut self.result).await {
            Ok(()) => {
                tracing::debug!(task = %task.key, "result stored on the server");
                // An ack that is lost only brings the task back once its ack wait is
                // over, and a redelivered task whose result is stored is acked without
                // running (see above).
                if let Err(e) = msg.ack().await {
                    tracing::warn!(task = %task.key, error = %e, "task ack failed; it may be redelivered (its result is stored)");
                }
            }
            Err(e) => {
                tracing::warn!(task = %task.key, error = %e, "result not stored; the task is redelivered");
                let _ = msg
                    .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                    .await;
            }
        }
    }
}

/// Results kept for redeliveries in this process.
const RECENT_RESULTS: usize = 64;

/// Runs the worker remembers having recorded in its own store.
const RUNS_REMEMBERED: usize = 4096;

/// Answered tasks whose agents the worker's own store forgets in one write...
const FORGET_BATCH: usize = 64;
/// ...or after at most this long.
const FORGET_EVERY: Duration = Duration::from_secs(1);

/// Queues the forgetting of the answered tasks' agents once there are at least `least`
/// of them (behind the writes of theirs queued before it; not waited for).
fn forget_answered(shared: &Shared, least: usize) {
    let agents = {
        let mut answered = lock(&shared.answered);
        if answered.len() < least {
            return;
        }
        std::mem::take(&mut *answered)
    };
    if let Err(e) = shared.store.queue_forget_agents(agents) {
        tracing::warn!(error = %e, "cannot forget answered tasks' agents");
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks a task as no longer running here when its handling ends, however it ends.
struct Running(Arc<Shared>, String);

impl Drop for Running {
    fn drop(&mut self) {
        lock(&self.0.inflight).remove(&self.1);
    }
}

fn bump(shared: &Shared, f: impl FnOnce(&mut WorkerStats)) {
    f(&mut shared.stats.lock().unwrap_or_else(|p| p.into_inner()));
}

async fn publish_result(
    shared: &Shared,
    task: &Task,
    result: &mut TaskResult,
) -> Result<(), RemoteError> {
    let subject = result_subject(&task.run_id, &task.key);
    let payload = result.to_bytes()?;
    let publish = jetstream::message::PublishMessage::build()
        .payload(payload.into())
        .message_id(format!("res-{}", result.exec));
    let fail = |e: String| RemoteError::Publish {
        subject: subject.clone(),
        detail: e,
    };
    shared
        .js
        .send_publish(subject.clone(), publish)
        .await
        .map_err(|e| fail(e.to_string()))?
        .await
        .map_err(|e| fail(e.to_string()))?;
    Ok(())
}

/// The engine services of the clone of the task's remote (cloned and opened on first
/// use), with the task's base commit fetched into it.
async fn services_for(shared: &Shared, task: &Task) -> Result<Arc<Services>, WorkerError> {
    let remote = task.remote.as_str();
    let mut engines = shared.engines.lock().await;
    if let Some(s) = engines.get(remote) {
        let s = s.clone();
        drop(engines);
        let mut fetched = shared.fetched.lock().await;
        let key = (remote.to_owned(), task.base.clone());
        if !fetched.contains(&key) {
            git::fetch_base(s.repo(), remote, &task.base_ref, &task.base).await?;
            fetched.insert(key);
        }
        return Ok(s);
    }
    let dir = git::clone_cache(&shared.clones, remote).await?;
    git::fetch_base(&dir, remote, &task.base_ref, &task.base).await?;
    shared
        .fetched
        .lock()
        .await
        .insert((remote.to_owned(), task.base.clone()));
    // A clone of a remote without branches has no HEAD; worktrees need one.
    git::ensure_head(&dir, &task.base).await?;
    let repo = shared
        .opener
        .open(&dir, &shared.state_base)
        .map_err(WorkerError::Open)?;
    let services = Services::open(
        repo.root,
        shared.store.clone(),
        repo.sandbox,
        &repo.worktrees_dir,
        Arc::new(repo.config),
        shared.slots,
    )
    .await?;
    let services = Arc::new(services);
    engines.insert(remote.to_owned(), services.clone());
    Ok(services)
}

/// Runs the task's agent and builds its result (pushing its branch to the remote).
async fn run_task(
    shared: &Arc<Shared>,
    task: &Task,
    exec: &str,
) -> Result<TaskResult, WorkerError> {
    let services = services_for(shared, task).await?;
    let run = RunId::from_string(task.run_id.clone());
    record_run(shared, &run).await?;
    let mut spec = agent_spec(&services, shared, task)?;
    let validators = validators(&services, task).await?;
    let opts = ExecOptions {
        isolation: Isolation::Worktree,
        validators,
        max_fix_rounds: task.max_fix_rounds,
    };
    // A reader that can change no file reads the checkout of its base that the other
    // readers of that base read (held until its task is done); any other agent gets a
    // checkout of its own.
    let view = match (task.placement, services.worktrees()) {
        (TaskPlacement::Reader, Some(worktrees))
            if super::readers::shares_a_view(&spec.perms.caps) =>
        {
            let view = shared
                .readers
                .view(worktrees, &task.base)
                .await
                .map_err(|source| EngineError::Worktree {
                    agent: spec.id.clone(),
                    source,
                })?;
            spec.workspace = view.path().to_path_buf();
            Some(view)
        }
        _ => None,
    };
    let (placement, shared_view) = match (task.placement, &view) {
        // Its workspace is the view: no checkout of its own (an agent that cannot
        // write is never isolated).
        (_, Some(view)) => (
            Placement::Isolated { base: None },
            Some(view.path().to_path_buf()),
        ),
        (TaskPlacement::Worktree, None) => (
            Placement::Isolated {
                base: Some(task.base.clone()),
            },
            None,
        ),
        (TaskPlacement::Reader, None) => (
            Placement::Reader {
                base: task.base.clone(),
            },
            None,
        ),
    };
    // Only an agent that may spawn can have started agents of its own.
    let may_spawn = spec.perms.caps.contains(Capability::Spawn);
    let mut job = Job::new(spec, opts, Stop::default());
    job.placement = placement;
    job.history = task.history.clone();
    job.join = task.join.clone();
    let agent = AgentId::from_string(task.agent_id.clone());
    let _known = RunningAgent::new(shared, &task.agent_id);
    let family = forward::Family::default();
    let _steerable = Steerable::new(shared, &task.key, &agent, &services, &family);
    let forward = Forwarder::start(
        shared.clone(),
        task,
        exec,
        run.clone(),
        agent.clone(),
        family,
    );
    if let Some(path) = shared_view {
        // Where it works, as a checkout of its own would say.
        shared.store.log_event(
            &run,
            Some(&agent),
            crate::event::Event::AgentWorktree {
                path,
                base: task.base.clone(),
            },
        );
    }
    // The agent's span is a child of this one, which joins the coordinator's trace.
    let span = crate::observe::spans::remote_task(&task.key, &shared.name);
    if let Some(parent) = &task.trace {
        crate::observe::follow(&span, parent);
    }
    let executed = {
        use tracing::Instrument as _;
        LocalExecutor::new(services.clone())
            .execute(job)
            .instrument(span)
            .await
    };
    drop(view);
    let forwarded = forward.finish().await;
    let exec_result = executed?;
    let events = forwarded?;
    if let Some(b) = &exec_result.branch {
        let tip = b.commits.last().cloned().unwrap_or_else(|| b.base.clone());
        git::push_commit(
            services.repo(),
            &task.remote,
            &tip,
            &format!("refs/heads/{}", b.branch),
        )
        .await?;
    }
    let children = if may_spawn {
        shared.store.children(&run, &agent, MAX_CHILDREN).await?
    } else {
        Vec::new()
    };
    let exchanges = recorded_exchanges(shared, &run, &agent, &children).await?;
    let o = exec_result.outcome;
    Ok(TaskResult {
        v: WIRE_VERSION,
        key: task.key.clone(),
        exec: exec.to_owned(),
        agent_id: task.agent_id.clone(),
        worker: shared.name.clone(),
        state: o.state,
        stats: o.stats,
        result: o.result,
        error: o.error,
        exceeded: o.exceeded,
        reason: o.reason,
        history: o.history,
        changed: exec_result.changed,
        diff: exec_result.diff,
        branch: exec_result.branch,
        validation: exec_result.validation,
        rounds: exec_result.rounds,
        children,
        events,
        exchanges,
    })
}

/// The model calls of a task's agent and of the agents it started, as this worker's
/// store recorded them (committed before the agent's end, which the forwarder has seen),
/// their JSON parts sent as stored.
async fn recorded_exchanges(
    shared: &Shared,
    run: &RunId,
    agent: &AgentId,
    children: &[AgentRecord],
) -> Result<Vec<ForwardedExchange>, EngineError> {
    let agents = std::iter::once(agent.clone())
        .chain(children.iter().map(|c| c.id.clone()))
        .collect();
    let stored = shared.store.agents_exchanges(run, agents).await?;
    let raw = serde_json::value::RawValue::from_string;
    Ok(stored
        .into_iter()
        .filter_map(|x| match (raw(x.request), raw(x.reply)) {
            (Ok(request), Ok(reply)) => Some(ForwardedExchange {
                agent_id: x.agent_id.as_str().to_owned(),
                agent: x.agent_name,
                turn: x.turn,
                at: x.at,
                request,
                reply,
            }),
            _ => {
                tracing::warn!(agent = %x.agent_id, turn = x.turn, "a stored model call is not JSON; not sent");
                None
            }
        })
        .collect())
}

/// A task's agent, known to every forwarder of this worker while it runs (its events
/// are no other task's).
struct RunningAgent<'a>(&'a Shared, String);

impl<'a> RunningAgent<'a> {
    fn new(shared: &'a Shared, agent: &str) -> Self {
        lock(&shared.running_agents).insert(agent.to_owned());
        Self(shared, agent.to_owned())
    }
}

impl Drop for RunningAgent<'_> {
    fn drop(&mut self) {
        lock(&self.0.running_agents).remove(&self.1);
    }
}

/// Who a running task's orders may reach, and through which services.
#[derive(Clone)]
struct Steering {
    /// The task's agent.
    agent: AgentId,
    /// The agents it started here.
    family: forward::Family,
    services: Arc<Services>,
}

/// A task's agent (and the agents it starts), reachable by steer and stop orders while
/// it runs.
struct Steerable<'a>(&'a Shared, String);

impl<'a> Steerable<'a> {
    fn new(
        shared: &'a Shared,
        key: &str,
        agent: &AgentId,
        services: &Arc<Services>,
        family: &forward::Family,
    ) -> Self {
        let steering = Steering {
            agent: agent.clone(),
            family: family.clone(),
            services: services.clone(),
        };
        lock(&shared.steerable).insert(key.to_owned(), steering);
        Self(shared, key.to_owned())
    }
}

impl Drop for Steerable<'_> {
    fn drop(&mut self) {
        lock(&self.0.steerable).remove(&self.1);
    }
}

/// Takes the steer and stop orders of this worker's pool until `shutdown`.
async fn take_orders(
    shared: Arc<Shared>,
    mut orders: async_nats::Subscriber,
    shutdown: CancellationToken,
) {
    use futures::StreamExt;
    loop {
        let msg = tokio::select! {
            m = orders.next() => match m {
                Some(m) => m,
                None => return,
            },
            _ = shutdown.cancelled() => return,
        };
        if take_order(&shared, &msg)
            && let Some(reply) = msg.reply
        {
            // The coordinator marks the order handled only on this answer.
            if let Err(e) = shared.js.client().publish(reply, "taken".into()).await {
                tracing::warn!(error = %e, "an order's answer was not sent; it is offered again");
            }
        }
    }
}

/// Hands an order to the agent of its task when this worker runs it; whether it did.
/// An order for a task another worker runs (or none) is no business of this one: it is
/// ignored without an answer. One that does not read, or names another subject or
/// agent than its task's, is refused (logged).
fn take_order(shared: &Shared, msg: &async_nats::Message) -> bool {
    let order = match Control::from_bytes(&msg.payload) {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(subject = %msg.subject, error = %e, "order refused");
            return false;
        }
    };
    if msg.subject.as_str() != streams::control_subject(&shared.pool, &order.run_id, &order.key) {
        tracing::warn!(subject = %msg.subject, "order refused: its subject names another task");
        return false;
    }
    let Some(steering) = lock(&shared.steerable).get(&order.key).cloned() else {
        return false;
    };
    let ours = steering.agent.as_str() == order.agent_id
        || lock(&steering.family).contains(&order.agent_id);
    if !ours {
        tracing::warn!(task = %order.key, "order refused: it names an agent that is not the task's nor one it started");
        return false;
    }
    let agent = AgentId::from_string(order.agent_id);
    let manager = steering.services.manager();
    let taken = match order.order {
        Order::Steer => manager.steer(&agent, order.message.unwrap_or_default()),
        Order::Stop => manager.stop(agent.as_str()) > 0,
    };
    tracing::info!(task = %order.key, order = ?order.order, taken, "order from the coordinator");
    taken
}

/// Records the task's run in the worker's own store (agents refer to it).
async fn record_run(shared: &Shared, run: &RunId) -> Result<(), WorkerError> {
    let mut runs = shared.runs.lock().await;
    if runs.contains(run.as_str()) {
        return Ok(());
    }
    if shared.store.run(run).await?.is_none() {
        shared.store.insert_run(&remote_run(run.clone())).await?;
    }
    // A memo of the store's answer: emptied now and then, so a worker serving runs for
    // months holds no set of all of them (a run not in it is looked up again).
    if runs.len() >= RUNS_REMEMBERED {
        runs.clear();
    }
    runs.insert(run.to_string());
    Ok(())
}

/// The agent as this worker will run it: the task's ask, within this worker's limits.
fn agent_spec(services: &Services, shared: &Shared, task: &Task) -> Result<AgentSpec, EngineError> {
    let config = services.config();
    let script = (task.provider == crate::config::provider::SCRIPTED)
        .then(|| shared.script.clone())
        .flatten();
    let req = RunRequest {
        provider: Some(task.provider.clone()),
        model: task.model.clone().filter(|_| script.is_none()),
        script,
        ..RunRequest::default()
    };
    let built = crate::engine::providers::build(services, &req)?;
    let caps: Vec<Capability> = task
        .caps
        .iter()
        .filter_map(|c| match c.as_str() {
            "read" => Some(Capability::Read),
            "write" => Some(Capability::Write),
            "exec" => Some(Capability::Exec),
            "spawn" => Some(Capability::Spawn),
            "mcp" => Some(Capability::Mcp),
            _ => None,
        })
        .collect();
    Ok(AgentSpec {
        id: AgentId::from_string(task.agent_id.clone()),
        run_id: RunId::from_string(task.run_id.clone()),
        parent: task.parent.clone().map(AgentId::from_string),
        name: task.name.clone(),
        role: task.role.clone(),
        task: task.task.clone(),
        system_prompt: task.system_prompt.clone(),
        perms: Permissions {
            caps: CapSet::of(&caps),
            depth: task.depth,
        },
        workspace: services.repo().to_path_buf(),
        quotas: lower(&task.quotas, &config.quotas),
        provider: built.provider,
        prices: built.prices,
        network: task.network && config.sandbox.network_for(None),
        // MCP servers are not reached from NATS workers (their config is the worker's).
        mcp: Vec::new(),
    })
}

/// Each quota the lower of the task's and the worker's.
fn lower(task: &Quotas, mine: &Quotas) -> Quotas {
    Quotas {
        max_turns: task.max_turns.min(mine.max_turns),
        grace_turns: task.grace_turns.min(mine.grace_turns),
        max_tokens: task.max_tokens.min(mine.max_tokens),
        wall_time: task.wall_time.min(mine.wall_time),
        max_tool_calls: task.max_tool_calls.min(mine.max_tool_calls),
        max_cost: match (task.max_cost, mine.max_cost) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
        model_timeout: task.model_timeout.min(mine.model_timeout),
        max_output_tokens: task.max_output_tokens.min(mine.max_output_tokens),
        context_tokens: task.context_tokens.min(mine.context_tokens),
        keep_turns: task.keep_turns.min(mine.keep_turns),
        max_depth: task.max_depth.min(mine.max_depth),
        max_children: task.max_children.min(mine.max_children),
        max_children_per_run: task.max_children_per_run.min(mine.max_children_per_run),
    }
}

/// The task's validators, resolved by name by this worker: built-ins, its user's
/// plugins, and a clone's `.crewbox/plugins` only when this worker's user trusts the
/// clone. A name that is a path is refused (the wire check refuses it too): a task never
/// names a file on this machine.
async fn validators(services: &Services, task: &Task) -> Result<Vec<ValidatorEntry>, EngineError> {
    let mut out = Vec::new();
    for v in &task.validators {
        if crate::plugin::discover::is_path_spec(&v.name) {
            return Err(crate::engine::PluginLoadError::PathFromTask {
                name: crate::text::escape(&v.name).into_owned(),
                kind: crate::plugin::PluginKind::Validator,
            }
            .into());
        }
        let plugin = services
            .plugins()
            .get(&v.name, crate::plugin::PluginKind::Validator)
            .await?;
        out.push(ValidatorEntry {
            plugin,
            criteria: v.criteria.clone(),
        });
    }
    Ok(out)
}

/// The worker's record of a coordinator's run (its agents refer to it; nothing else).
fn remote_run(id: RunId) -> crate::store::RunRecord {
    let mut r = crate::store::RunRecord::started(
        crate::vocab::Mode::Single,
        "(a task from a coordinator)",
        serde_json::Value::Null,
    );
    r.id = id;
    r
}

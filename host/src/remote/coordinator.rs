//! The coordinator side: [`NatsExecutor`] publishes a run's agents as tasks and turns
//! the results workers send back into the same [`ExecResult`] a local run produces,
//! after recording them (and the forwarded events) in this machine's store — so
//! `status`, `events`, `tree`, `top`, the journal and `resume` read them as usual.
//!
//! What stays local: a [`Placement::Held`] worktree (a crew's executor revising in one
//! worktree) and an agent that writes in place — both are this machine's directories.
//!
//! A task's key is derived from what the agent is asked to do (run, name, role, task,
//! prompt, base, capabilities, history), so the step a resumed run re-creates as a new
//! agent finds the task and result its predecessor published: a result that arrived
//! while this process was down is taken, a task still queued or running is awaited, and
//! nothing is published twice.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use async_nats::jetstream::stream::LastRawMessageErrorKind;
use async_nats::jetstream::{self, stream};
use async_trait::async_trait;
use futures::{FutureExt as _, StreamExt};
use sha2::Digest;
use tokio::sync::oneshot;

use super::streams::{self, control_subject, event_subject, result_subject, task_subject};
use super::task::{
    Control, Forwarded, ForwardedEvent, MAX_CHILDREN, Order, StartedAgent, Task, TaskPlacement,
    TaskResult, ValidatorRef, WIRE_VERSION, base_ref, is_token,
};
use super::{RemoteError, git};
use crate::agent::runner::AgentOutcome;
use crate::engine::EngineError;
use crate::engine::executor::{ExecResult, Executor, Job, LocalExecutor, Placement};
use crate::engine::services::Services;
use crate::event::Event;
use crate::ids::{AgentId, RunId};
use crate::store::{AgentRecord, AgentStats, ControlKind, ExchangeWrite, RemoteResult, Store};
use crate::vocab::{Capability, Isolation};

/// Runs agents on workers through NATS JetStream (and the ones that must stay here
/// locally).
pub struct NatsExecutor {
    services: Arc<Services>,
    local: LocalExecutor,
    js: jetstream::Context,
    tasks: stream::Stream,
    results: stream::Stream,
    pool: String,
    remote: String,
    hubs: tokio::sync::Mutex<HashMap<RunId, Arc<RunHub>>>,
    /// Base refs pushed (or being pushed), per commit.
    pushed: Mutex<HashMap<String, PushOnce>>,
    url: tokio::sync::Mutex<Option<String>>,
    /// Commit ids already resolved here (a commit id names the same commit for good, so
    /// agents of one batch on one base pay one `git rev-parse`, not one each).
    commits: Mutex<HashSet<String>>,
    /// How often a task waited for is looked after ([`NatsExecutor::watch`]).
    watch_every: std::time::Duration,
}

/// One push of a base ref, which every agent at that base waits for.
type PushOnce = Arc<tokio::sync::OnceCell<()>>;

/// Agents published to workers through NATS JetStream: the executor of
/// `executor = "nats"`.
pub(crate) struct OverNats;

#[async_trait]
impl crate::engine::executor::ExecutorFactory for OverNats {
    async fn build(&self, services: Arc<Services>) -> Result<Arc<dyn Executor>, EngineError> {
        Ok(Arc::new(NatsExecutor::connect(services).await?))
    }
}

impl NatsExecutor {
    /// Connects to the server the user's `[nats]` names and makes sure the streams exist.
    pub(crate) async fn connect(services: Arc<Services>) -> Result<Self, RemoteError> {
        let settings = services.config().nats.clone();
        if !is_token(&settings.pool) {
            return Err(RemoteError::Pool(settings.pool));
        }
        let client = super::connect(&settings, None, "crewbox coordinator").await?;
        let js = jetstream::new(client);
        let (tasks, results) = streams::ensure(&js).await?;
        Ok(Self {
            local: LocalExecutor::new(services.clone()),
            services,
            js,
            tasks,
            results,
            pool: settings.pool,
            remote: settings.remote,
            hubs: tokio::sync::Mutex::new(HashMap::new()),
            pushed: Mutex::new(HashMap::new()),
            url: tokio::sync::Mutex::new(None),
            commits: Mutex::new(HashSet::new()),
            watch_every: (settings.ack_wait * 3).clamp(WATCH_MIN, WATCH_MAX),
        })
    }

    /// The run's hub: its durable consumer of events and results, started once.
    async fn hub(&self, run: &RunId) -> Result<Arc<RunHub>, RemoteError> {
        let mut hubs = self.hubs.lock().await;
        if let Some(h) = hubs.get(run) {
            return Ok(h.clone());
        }
        let (consumer, new) = streams::run_consumer(&self.results, run.as_str()).await?;
        let hub = Arc::new(RunHub {
            run: run.clone(),
            new,
            store: self.services.store().clone(),
            state: Mutex::new(HubState::default()),
            driver: Mutex::new(Vec::new()),
        });
        let driver = tokio::spawn({
            let hub = Arc::downgrade(&hub);
            async move { consume(hub, consumer).await }
        });
        let controls = tokio::spawn(forward_controls(
            Arc::downgrade(&hub),
            self.js.client(),
            self.pool.clone(),
        ));
        *hub.driver.lock().unwrap_or_else(|p| p.into_inner()) = vec![driver, controls];
        hubs.insert(run.clone(), hub.clone());
        Ok(hub)
    }

    /// The commit `rev` names. A full commit id resolved once is not asked again; any
    /// other name (a branch, `HEAD`) can move, so it is always resolved.
    async fn resolve(&self, rev: &str) -> Result<String, RemoteError> {
        let is_id = matches!(rev.len(), 40 | 64) && rev.bytes().all(|b| b.is_ascii_hexdigit());
        let known = |c: &str| {
            self.commits
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(c)
        };
        if is_id && known(rev) {
            return Ok(rev.to_owned());
        }
        // HEAD, which every agent starting at the repository's head names, is read in
        // this process (git2 runs no program): `git rev-parse` cost two processes per
        // agent.
        let commit = match self.services.worktrees() {
            Some(worktrees) if rev == "HEAD" => worktrees.head().await.map_err(|e| {
                RemoteError::Git(git::GitError {
                    op: "rev-parse".into(),
                    remote: rev.to_owned(),
                    detail: e.to_string(),
                })
            })?,
            _ => git::resolve(self.services.repo(), rev).await?,
        };
        self.commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(commit.clone());
        Ok(commit)
    }

    /// The URL of the configured remote (read once).
    async fn remote_url(&self) -> Result<String, RemoteError> {
        let mut url = self.url.lock().await;
        if let Some(u) = &*url {
            return Ok(u.clone());
        }
        let u = git::remote_url(self.services.repo(), &self.remote).await?;
        *url = Some(u.clone());
        Ok(u)
    }

    /// Pushes `commit` to the remote under its base ref, once per commit in this process
    /// (whatever runs start there). Agents at one base wait for its one push: concurrent
    /// pushes of one ref fail on git's ref lock. A push that lost that race to another
    /// coordinator of the same remote is tried once more, and finds the ref there.
    async fn push_base(&self, commit: &str) -> Result<String, RemoteError> {
        let refname = base_ref(commit);
        let once = self
            .pushed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(commit.to_owned())
            .or_default()
            .clone();
        once.get_or_try_init(|| async {
            let repo = self.services.repo();
            match git::push_commit(repo, &self.remote, commit, &refname).await {
                Ok(()) => Ok(()),
                Err(e) => {
                    tracing::debug!(error = %e, "pushing a base ref failed; trying once more");
                    git::push_commit(repo, &self.remote, commit, &refname).await
                }
            }
        })
        .await?;
        Ok(refname)
    }

    async fn execute_remote(
        &self,
        job: Job,
        placement: TaskPlacement,
        base: Option<String>,
    ) -> Result<ExecResult, EngineError> {
        let Job {
            spec,
            opts,
            history,
            join,
            stop,
            created_at,
            ..
        } = job;
        let repo = self.services.repo();
        let base = self.resolve(base.as_deref().unwrap_or("HEAD")).await?;
        let url = self.remote_url().await?;
        let base_ref = self.push_base(&base).await?;
        let store = self.services.store();
        store
            .insert_agent(&AgentRecord {
                id: spec.id.clone(),
                run_id: spec.run_id.clone(),
                parent: spec.parent.clone(),
                name: spec.name.clone(),
                role: spec.role.clone(),
                task: spec.task.clone(),
                caps: crate::agent::cap_names(spec.perms.caps),
                depth: spec.perms.depth,
                join: join.clone(),
                state: crate::vocab::AgentState::Queued,
                stats: AgentStats::default(),
                result: None,
                error: None,
                created_at,
                started_at: None,
                finished_at: None,
            })
            .await?;
        let mut task = Task {
            v: WIRE_VERSION,
            key: String::new(),
            pool: self.pool.clone(),
            run_id: spec.run_id.to_string(),
            agent_id: spec.id.to_string(),
            parent: spec.parent.as_ref().map(ToString::to_string),
            name: spec.name.clone(),
            role: spec.role.clone(),
            task: spec.task.clone(),
            system_prompt: spec.system_prompt.clone(),
            // MCP servers are the coordinating user's, started next to their run: a
            // worker on another machine has none to give, so the task does not ask.
            caps: crate::agent::cap_names(spec.perms.caps.without(Capability::Mcp)),
            depth: spec.perms.depth,
            quotas: spec.quotas.clone(),
            provider: spec.provider.name().to_owned(),
            model: Some(spec.provider.model().to_owned()),
            network: spec.network,
            remote: url,
            base,
            base_ref,
            placement,
            validators: opts
                .validators
                .iter()
                .map(|v| ValidatorRef {
                    name: v.plugin.name().to_owned(),
                    criteria: v.criteria.clone(),
                })
                .collect(),
            max_fix_rounds: opts.max_fix_rounds,
            history,
            join,
            // The run's span (current here, as for a local agent's span).
            trace: crate::observe::traceparent(&tracing::Span::current()),
        };
        let hub = self.hub(&spec.run_id).await?;
        task.key = self.key_for(&hub, &task, &spec.id).await?;
        // A key first published in a run whose consumer this process made can be on the
        // server neither as a task nor as a result: two lookups saved per agent.
        let first = hub.new && hub.state().published.insert(task.key.clone());
        let queued = if first {
            None
        } else {
            self.queued(&hub, &task).await
        };
        let on_server = queued.is_some();
        let runs_as = match queued {
            Some(q) => q.runs_as,
            // Gone from the server (acked after its result was stored, while no
            // coordinator ran): the result there names the agent its worker ran it as.
            None if !first => self.answered_as(&hub, &task).await,
            None => None,
        };
        let rx = hub.wait(&task.key, &spec.id, &spec.name, runs_as.clone());
        // The task is looked up before its result: a worker stores the result before it
        // acks the task, so a task gone by then has its result there already.
        if first || !self.take_known(&hub, &task, on_server).await? {
            self.publish(&task).await?;
        }
        let mut rx = rx;
        let mut watch = tokio::time::interval_at(
            tokio::time::Instant::now() + self.watch_every,
            self.watch_every,
        );
        watch.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut lost = 0;
        let result = loop {
            tokio::select! {
                r = &mut rx => break r.map_err(|_| EngineError::Internal(format!(
                    "the result consumer of run {} stopped", spec.run_id)))?,
                _ = watch.tick() => {
                    if let Some(n) = self.watch(&hub, &task, lost).await? {
                        lost = n;
                    }
                }
                _ = stop.run_stopped() => {
                    // The worker running it stops it too (its slot and its model calls are
                    // not spent on a run nobody waits for); its result, if one comes, is
                    // still recorded.
                    let order = Control {
                        v: WIRE_VERSION,
                        key: task.key.clone(),
                        run_id: task.run_id.clone(),
                        agent_id: runs_as.map_or_else(|| task.agent_id.clone(), |a| a.to_string()),
                        order: Order::Stop,
                        message: None,
                    };
                    let client = self.js.client();
                    let subject = control_subject(&self.pool, &task.run_id, &task.key);
                    tokio::spawn(async move {
                        for _ in 0..STOP_TRIES {
                            if send_control(&client, &subject, &order).await {
                                return;
                            }
                        }
                    });
                    return Err(EngineError::Stopped(spec.run_id.clone()));
                }
            }
        };
        if let Some(b) = &result.branch {
            let claimed = git::ClaimedBranch {
                base: &b.base,
                tip: b.commits.last().unwrap_or(&b.base),
                crewbox_writable: self.services.config().workspace.agents_write_crewbox,
            };
            git::fetch_branch(repo, &self.remote, &b.branch, &claimed)
                .await
                .map_err(RemoteError::from)?;
        }
        Ok(ExecResult {
            agent_id: spec.id,
            outcome: AgentOutcome {
                state: result.state,
                stats: result.stats,
                result: result.result,
                error: result.error,
                exceeded: result.exceeded,
                reason: result.reason,
                history: result.history,
            },
            changed: result.changed,
            diff: result.diff,
            branch: result.branch,
            validation: result.validation,
            rounds: result.rounds,
        })
    }

    /// Looks after a task still unanswered after a while: one that left the server
    /// without a result (a worker stores the result before it acks the task, so only
    /// one that acked or dropped it without answering, or an operator's purge, does
    /// that) is published again under a new message id (the server would take the old
    /// one as a duplicate for two minutes), at most [`LOST_REPUBLISHES`] times; after
    /// that the agent ends with an error saying so. Anything short of a definite "not
    /// there" from the server changes nothing (a task published twice may run twice).
    /// Returns the new count of losses when there was one.
    async fn watch(
        &self,
        hub: &Arc<RunHub>,
        task: &Task,
        lost: u32,
    ) -> Result<Option<u32>, EngineError> {
        let subject = task_subject(&task.pool, &task.run_id, &task.key);
        match self.tasks.get_last_raw_message_by_subject(&subject).await {
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {}
            _ => return Ok(None),
        }
        // Its result may have come meanwhile (it is handed to the waiting agent).
        if self.take_known(hub, task, false).await? {
            return Ok(None);
        }
        let lost = lost + 1;
        if lost > LOST_REPUBLISHES {
            let why = format!(
                "task {} left the server {lost} times without a result (a worker acked or \
                 dropped it without answering, or the task stream was purged)",
                task.key
            );
            tracing::warn!(task = %task.key, %why, "task given up");
            let exec = uuid::Uuid::now_v7().simple().to_string();
            match hub
                .take_result(TaskResult::failure(task, &exec, NO_WORKER, why))
                .await
            {
                Ok(()) => {}
                Err(Refusal::Store(e)) => return Err(e),
                Err(Refusal::Refused(why) | Refusal::Unclaimed(why)) => {
                    tracing::warn!(task = %task.key, %why, "lost task's failure not taken");
                }
            }
            return Ok(Some(lost));
        }
        tracing::warn!(task = %task.key, lost, "task left the server without a result; publishing it again");
        self.publish_as(task, &format!("{}.{lost}", task.key))
            .await?;
        Ok(Some(lost))
    }

    /// The task's key; a repeat of a step whose earlier agent ended here (the same ask
    /// twice in one run, or a retry of one that failed with no conversation to continue)
    /// gets a key of its own, so it runs again instead of being answered by the earlier
    /// agent's result.
    async fn key_for(
        &self,
        hub: &RunHub,
        task: &Task,
        agent: &AgentId,
    ) -> Result<String, EngineError> {
        let run = &hub.run;
        let ask = serde_json::json!([
            task.run_id,
            task.name,
            task.role,
            task.task,
            task.system_prompt,
            task.base,
            task.caps,
            task.placement,
            task.history,
            task.validators,
        ]);
        let key = short_hash(ask.to_string().as_bytes());
        // In a run new to the server, only a key published here can have an answer.
        if hub.new && !hub.state().published.contains(&key) {
            return Ok(key);
        }
        let store = self.services.store();
        for earlier in store.remote_agents_of_task(run, &key).await? {
            if &earlier == agent {
                continue;
            }
            let ended = store
                .agent(&earlier)
                .await?
                .is_some_and(|a| a.state.is_terminal());
            if ended {
                return Ok(short_hash(format!("{key}/{agent}").as_bytes()));
            }
        }
        Ok(key)
    }

    /// Takes the stored result of `task`, when the server has one (`Ok(true)` also when
    /// the task itself was `on_server`: its result is awaited, nothing is published).
    async fn take_known(
        &self,
        hub: &Arc<RunHub>,
        task: &Task,
        on_server: bool,
    ) -> Result<bool, EngineError> {
        let result_at = result_subject(&task.run_id, &task.key);
        if let Ok(msg) = self
            .results
            .get_last_raw_message_by_subject(&result_at)
            .await
        {
            self.take_events_before(hub, task, msg.sequence).await?;
            match TaskResult::from_bytes(&msg.payload) {
                Ok(r) if r.key == task.key => match hub.take_result(r).await {
                    Ok(()) => return Ok(true),
                    Err(Refusal::Store(e)) => return Err(e),
                    Err(Refusal::Refused(why) | Refusal::Unclaimed(why)) => {
                        tracing::warn!(subject = %result_at, %why, "stored result refused");
                    }
                },
                Ok(r) => {
                    tracing::warn!(subject = %result_at, key = %r.key, "stored result is about another task; refused")
                }
                Err(e) => tracing::warn!(subject = %result_at, error = %e, "stored result refused"),
            }
        }
        if on_server {
            tracing::info!(task = %task.key, "task still on the server; awaiting its result");
        }
        Ok(on_server)
    }

    /// Takes the events of `task` stored on the server before its result (at stream
    /// sequence `until`), in their order: the ones its worker sent while no coordinator
    /// ran. The run's consumer would offer them too, but a result taken from the server
    /// ends the step at once, and a run that ends first never reads them (they were
    /// lost). Each is stored once, however often it is offered.
    async fn take_events_before(
        &self,
        hub: &RunHub,
        task: &Task,
        until: u64,
    ) -> Result<(), EngineError> {
        let subject = event_subject(&task.run_id, &task.key);
        let mut seq = 1;
        for _ in 0..MAX_EVENT_MESSAGES_TAKEN {
            let Ok(msg) = self
                .results
                .get_first_raw_message_by_subject(&subject, seq)
                .await
            else {
                break;
            };
            if msg.sequence >= until {
                break;
            }
            seq = msg.sequence + 1;
            let why = match Forwarded::from_bytes(&msg.payload) {
                Ok(f) if f.key == task.key => {
                    match hub.take_events(&task.key, &f.exec, f.events).await {
                        Ok(()) => continue,
                        Err(Refusal::Store(e)) => return Err(e),
                        Err(Refusal::Refused(why) | Refusal::Unclaimed(why)) => why,
                    }
                }
                Ok(f) => format!("it is about task {}", crate::text::escape(&f.key)),
                Err(e) => e.to_string(),
            };
            tracing::warn!(%subject, seq = msg.sequence, %why, "a stored message of events refused");
        }
        Ok(())
    }

    /// The agent a stored result of `task` names when that is the predecessor a resumed
    /// step replaced (see [`Self::predecessor`]): the task left the server once its
    /// worker stored that result, so the task no longer says whom it ran as.
    async fn answered_as(&self, hub: &RunHub, task: &Task) -> Option<AgentId> {
        let at = result_subject(&task.run_id, &task.key);
        let msg = self
            .results
            .get_last_raw_message_by_subject(&at)
            .await
            .ok()?;
        match TaskResult::from_bytes(&msg.payload) {
            Ok(r) if r.key == task.key && r.agent_id != task.agent_id => {
                self.predecessor(hub, task, r.agent_id).await
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(subject = %at, error = %e, "the stored result does not read");
                None
            }
        }
    }

    /// `named` (from a copy of `task` or its result on the server) as the agent that
    /// task runs under, when it is the predecessor a resumed step replaced: an agent
    /// this run recorded under the task's name, not ended but by the interruption, and
    /// not waiting here for another task. Any other id widens nothing.
    async fn predecessor(&self, hub: &RunHub, task: &Task, named: String) -> Option<AgentId> {
        let id = AgentId::from_string(named);
        let a = hub.store.agent(&id).await.ok().flatten()?;
        let interrupted = a.state == crate::vocab::AgentState::Error
            && a.error.as_deref() == Some(crate::store::INTERRUPTED_ERROR);
        let elsewhere = hub
            .state()
            .waiting
            .iter()
            .any(|(k, w)| *k != task.key && (w.agent == id || w.runs_as.as_ref() == Some(&id)));
        (a.run_id == hub.run
            && a.name == task.name
            && (!a.state.is_terminal() || interrupted)
            && !elsewhere)
            .then_some(id)
    }

    /// The copy of `task` on the server (queued or running on a worker), if there is
    /// one, with the agent id it names when that is another agent of this run: the
    /// predecessor a resumed step replaced, under which a worker runs it (its sub-agents
    /// start under that id, and orders go to it).
    async fn queued(&self, hub: &RunHub, task: &Task) -> Option<Queued> {
        let subject = task_subject(&task.pool, &task.run_id, &task.key);
        let msg = self
            .tasks
            .get_last_raw_message_by_subject(&subject)
            .await
            .ok()?;
        let runs_as = match Task::from_bytes(&msg.payload) {
            Ok(queued) if queued.key == task.key && queued.agent_id != task.agent_id => {
                self.predecessor(hub, task, queued.agent_id).await
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(%subject, error = %e, "the task on the server does not read");
                None
            }
        };
        Some(Queued { runs_as })
    }

    /// Publishes `task` (its key is the message id: the stream keeps one copy).
    async fn publish(&self, task: &Task) -> Result<(), EngineError> {
        self.publish_as(task, &task.key).await
    }

    /// Publishes `task` with message id `id`.
    async fn publish_as(&self, task: &Task, id: &str) -> Result<(), EngineError> {
        let subject = task_subject(&task.pool, &task.run_id, &task.key);
        let payload: bytes::Bytes = task.to_bytes().map_err(RemoteError::from)?.into();
        // A publish whose ack is late (a loaded server) is sent again: the task key is its
        // message id, so the stream keeps one copy however often it arrives.
        const ATTEMPTS: u32 = 4;
        let backoff = crate::backoff::Backoff::new(
            std::time::Duration::from_millis(250),
            std::time::Duration::from_secs(2),
        );
        let mut attempt = 0;
        loop {
            let publish = jetstream::message::PublishMessage::build()
                .payload(payload.clone())
                .message_id(id);
            let sent = match self.js.send_publish(subject.clone(), publish).await {
                Ok(ack) => ack.await.map(|_| ()).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match sent {
                Ok(()) => {
                    tracing::debug!(task = %task.key, agent = %task.name, "task published");
                    return Ok(());
                }
                Err(detail) if attempt + 1 < ATTEMPTS => {
                    tracing::warn!(subject = %subject, error = %detail, "publishing a task failed; sending it again");
                    tokio::time::sleep(backoff.wait(attempt)).await;
                    attempt += 1;
                }
                Err(detail) => {
                    return Err(RemoteError::Publish {
                        subject: subject.clone(),
                        detail,
                    }
                    .into());
                }
            }
        }
    }

    /// Whether `job` can run elsewhere, and how.
    fn remote_placement(&self, job: &Job) -> Option<(TaskPlacement, Option<String>)> {
        let writes = job.spec.perms.caps.contains(Capability::Write);
        match &job.placement {
            // A child works in its parent's workspace, on this machine.
            Placement::Held(_) | Placement::WithParent => None,
            Placement::Reader { base } => Some((TaskPlacement::Reader, Some(base.clone()))),
            Placement::Isolated { base } => {
                if writes {
                    (job.opts.isolation == Isolation::Worktree)
                        .then(|| (TaskPlacement::Worktree, base.clone()))
                } else if job.spec.workspace == self.services.repo() {
                    // A reader in the repository reads its commit (what a clone holds).
                    Some((TaskPlacement::Reader, base.clone()))
                } else {
                    // It reads one of this machine's worktrees.
                    None
                }
            }
        }
    }
}

#[async_trait]
impl Executor for NatsExecutor {
    async fn execute(&self, job: Job) -> Result<ExecResult, EngineError> {
        if job.stop.is_stopped() {
            return Err(EngineError::Stopped(job.spec.run_id));
        }
        match self.remote_placement(&job) {
            Some((placement, base)) => self.execute_remote(job, placement, base).await,
            None => self.local.execute(job).await,
        }
    }
}

fn short_hash(bytes: &[u8]) -> String {
    crate::text::hex(&sha2::Sha256::digest(bytes)[..16])
}

#[derive(Default)]
struct HubState {
    /// Task key → the agent waiting for it here and where its result goes.
    waiting: HashMap<String, Waiter>,
    /// Keys whose result this process has taken (a redelivery of one is a duplicate).
    answered: HashSet<String>,
    /// Keys this process has published (or is publishing), kept for a new run only
    /// ([`RunHub::new`]): there they say which keys can have anything on the server.
    published: HashSet<String>,
    /// Sub-agents that agents on workers started, while their task runs → that task's
    /// key: an order for one goes to the worker running the task.
    started: HashMap<AgentId, String>,
    /// What those sub-agents were started with (capabilities, depth): what one they
    /// start may have at most.
    started_grants: HashMap<AgentId, (Vec<String>, u32)>,
    /// Tokens the task's agent spent, by task key and by the execution that sent its
    /// `model.reply` events, while the task waits: an execution killed before its
    /// result (its task then redelivered) spent them too, and the result counts only
    /// its own.
    spent: HashMap<String, HashMap<String, crate::vocab::Usage>>,
    /// Orders a worker took for an agent of a task, not yet seen carried out (a steer:
    /// no `agent.steer` or `agent.steer-undelivered` event of it came back; a stop: the
    /// task has no result yet): when another execution of the task is heard from (the
    /// one that took them was killed and the task redelivered), they are queued again
    /// for it.
    handed: Vec<Handed>,
    /// The execution of each task last heard from (its events' `exec`).
    execs: HashMap<String, String>,
}

/// An order a worker took (see [`HubState::handed`]).
struct Handed {
    /// The task.
    key: String,
    /// The agent it was sent to as its queued order named it.
    target: String,
    /// The agent id its worker runs the task's agent as.
    on_worker: String,
    kind: ControlKind,
    /// A steer's message.
    message: Option<String>,
}

/// A task's copy on the server, as [`NatsExecutor::queued`] found it.
struct Queued {
    /// The agent id it names, when that is another agent of this run.
    runs_as: Option<AgentId>,
}

/// The agent waiting here for a task's result.
struct Waiter {
    agent: AgentId,
    /// The agent id the task on the server names, when it is another: the predecessor a
    /// resumed step replaced, under which its worker runs it.
    runs_as: Option<AgentId>,
    /// Its name (what its model calls are recorded under).
    name: String,
    result: oneshot::Sender<TaskResult>,
}

/// An event of a task that may be stored, and the sub-agent it says started.
struct Admitted {
    agent: AgentId,
    at: i64,
    event: Event,
    started: Option<Box<StartedAgent>>,
}

/// Why a worker's message was not taken.
#[derive(Debug)]
enum Refusal {
    /// It can never be right (malformed, on the wrong subject, about an agent this task
    /// is not): dropped for good.
    Refused(String),
    /// No agent here waits for its task (yet): a resumed run may re-create the step that
    /// does, so it is redelivered a few times, then dropped. A result that arrives this
    /// way is not lost: the step reads it from the server when it starts.
    Unclaimed(String),
    /// Storing it failed: redelivered.
    Store(EngineError),
}

impl From<EngineError> for Refusal {
    fn from(e: EngineError) -> Self {
        Self::Store(e)
    }
}

impl From<crate::store::StoreError> for Refusal {
    fn from(e: crate::store::StoreError) -> Self {
        Self::Store(e.into())
    }
}

/// Messages of events of one task read from the server before its stored result is
/// taken (a task's worker sends one at most every 200 ms).
const MAX_EVENT_MESSAGES_TAKEN: usize = 10_000;

/// Deliveries of a message no agent here claims before it is dropped.
const UNCLAIMED_DELIVERIES: i64 = 12;

/// How often a task waited for is looked after: three ack waits, within these bounds.
const WATCH_MIN: std::time::Duration = std::time::Duration::from_secs(5);
const WATCH_MAX: std::time::Duration = std::time::Duration::from_secs(60);
/// Times a task that left the server without a result is published again before its
/// agent ends with an error.
const LOST_REPUBLISHES: u32 = 2;
/// The worker recorded for a result no worker sent (a task given up here).
const NO_WORKER: &str = "(none)";

/// One run's consumer of events and results, and who waits for which result.
///
/// What a worker sends is taken only for a task this coordinator published in this
/// run and an agent of that task: a result is recorded for the agent waiting for its
/// key (never for an agent id the message names), an event only for a task in flight or
/// answered here, about the task's agent or an agent the worker started for it, and
/// only if it is about an agent (never a run's own facts). Names and text in them are a
/// worker's text: bounded by the wire checks, escaped wherever they are printed.
struct RunHub {
    run: RunId,
    /// Its consumer was made by this process: nothing of the run was published before.
    new: bool,
    store: Store,
    state: Mutex<HubState>,
    /// Its consumer loop and its forwarder of steer/stop orders.
    driver: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Drop for RunHub {
    fn drop(&mut self) {
        for d in self
            .driver
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            d.abort();
        }
    }
}

impl RunHub {
    fn state(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `agent` as waiting for task `key`, which its worker runs as `runs_as`
    /// when that is another agent id (see [`Waiter::runs_as`]).
    fn wait(
        &self,
        key: &str,
        agent: &AgentId,
        name: &str,
        runs_as: Option<AgentId>,
    ) -> oneshot::Receiver<TaskResult> {
        let (result, rx) = oneshot::channel();
        let waiter = Waiter {
            agent: agent.clone(),
            runs_as,
            name: name.to_owned(),
            result,
        };
        self.state().waiting.insert(key.to_owned(), waiter);
        rx
    }

    /// Whether agent id `named` (from a worker's message about task `key`) is the
    /// task's agent: the one waiting here, or the predecessor a resumed step replaced,
    /// under which the task on the server runs (`runs_as`). No other agent, of this run
    /// or another, ever is.
    fn is_task_agent(waiter: &AgentId, runs_as: Option<&AgentId>, named: &str) -> bool {
        waiter.as_str() == named || runs_as.is_some_and(|r| r.as_str() == named)
    }

    /// Whether the sub-agents a result lists are this task's to report: each of this
    /// run; one already recorded here must have been recorded under this task's agent
    /// (or another sub-agent the result lists) — its stored parent counts, not the one
    /// the message names — and may not be waiting for a task of its own; a new one
    /// must name such a parent. (A result listing another task's agent as its child
    /// overwrote that agent's row, and its real result was then lost.)
    async fn children_are_the_tasks(
        &self,
        key: &str,
        waiter: &AgentId,
        runs_as: Option<&AgentId>,
        result: &TaskResult,
    ) -> Result<Option<String>, Refusal> {
        let listed: HashSet<&str> = result.children.iter().map(|c| c.id.as_str()).collect();
        let parent_ok = |p: &str| Self::is_task_agent(waiter, runs_as, p) || listed.contains(p);
        for c in &result.children {
            let refused = |why: &str| {
                Some(format!(
                    "the result of task {key} lists sub-agent {}, {why}",
                    c.id
                ))
            };
            if c.run_id != self.run || Self::is_task_agent(waiter, runs_as, c.id.as_str()) {
                return Ok(refused("which is not a sub-agent of this run's task"));
            }
            let elsewhere =
                self.state().waiting.iter().any(|(k, w)| {
                    k != key && (w.agent == c.id || w.runs_as.as_ref() == Some(&c.id))
                });
            if elsewhere {
                return Ok(refused("which is another task's agent"));
            }
            let claimed = c.parent.as_ref().map(AgentId::as_str);
            match self.store.agent(&c.id).await? {
                Some(stored) => {
                    let stored_parent = stored.parent.as_ref().map(AgentId::as_str);
                    if stored.run_id != self.run
                        || stored_parent != claimed
                        || !stored_parent.is_some_and(&parent_ok)
                    {
                        return Ok(refused("which was not started under this task's agent"));
                    }
                }
                // New here: it holds no more than its parent could give, as one a
                // worker says started in an event (its parent may be listed too).
                None if claimed.is_some_and(&parent_ok) => {
                    let listed_parent = result
                        .children
                        .iter()
                        .find(|o| Some(o.id.as_str()) == claimed)
                        .map(|o| (o.caps.clone(), o.depth));
                    let checked = match listed_parent {
                        Some((caps, depth)) => within(c, &caps, depth),
                        None => self.within_parent(c).await?,
                    };
                    if let Err(why) = checked {
                        return Ok(refused(&why));
                    }
                }
                None => return Ok(refused("under a parent that is not this task's agent")),
            }
        }
        Ok(None)
    }

    /// Records a result for the agent waiting for its task and hands it on; a duplicate
    /// changes nothing in the store.
    async fn take_result(&self, mut result: TaskResult) -> Result<(), Refusal> {
        let (waiter, runs_as, name) = {
            let state = self.state();
            match state.waiting.get(&result.key) {
                Some(w) => (w.agent.clone(), w.runs_as.clone(), w.name.clone()),
                None if state.answered.contains(&result.key) => return Ok(()),
                None => {
                    return Err(Refusal::Unclaimed(format!(
                        "no agent of run {} waits for task {}",
                        self.run, result.key
                    )));
                }
            }
        };
        if !Self::is_task_agent(&waiter, runs_as.as_ref(), &result.agent_id) {
            return Err(Refusal::Refused(format!(
                "the result of task {} names agent {}, which is not this task's agent ({waiter})",
                result.key, result.agent_id
            )));
        }
        if let Some(why) = self
            .children_are_the_tasks(&result.key, &waiter, runs_as.as_ref(), &result)
            .await?
        {
            return Err(Refusal::Refused(why));
        }
        self.check_exchanges(&waiter, name, &result).await?;
        // Its last events first: they commit with (or before) the result.
        let events = std::mem::take(&mut result.events);
        let (events, _) = self.queue_events(&result.key, &result.exec, events).await?;
        // What executions of the task killed before their result spent is the agent's.
        let other: Option<crate::vocab::Usage> =
            self.state().spent.remove(&result.key).map(|by_exec| {
                by_exec
                    .into_iter()
                    .filter(|(exec, _)| *exec != result.exec)
                    .fold(crate::vocab::Usage::default(), |mut sum, (_, u)| {
                        sum.input = sum.input.saturating_add(u.input);
                        sum.output = sum.output.saturating_add(u.output);
                        sum
                    })
            });
        if let Some(u) = other.filter(|u| u.input > 0 || u.output > 0) {
            tracing::debug!(task = %result.key, input = u.input, output = u.output, "tokens of earlier executions counted");
            result.stats.tokens_in = result.stats.tokens_in.saturating_add(u.input);
            result.stats.tokens_out = result.stats.tokens_out.saturating_add(u.output);
        }
        record(&self.store, &self.run, &waiter, &result).await?;
        for pending in events {
            pending.committed().await?;
        }
        // Sub-agents recorded while they ran that the result does not list ended
        // anyway (the task is over on its worker): they must not stay running here.
        let unreported: Vec<AgentId> = self
            .state()
            .started
            .iter()
            .filter(|(a, k)| **k == result.key && !result.children.iter().any(|c| c.id == **a))
            .map(|(a, _)| a.clone())
            .collect();
        if !unreported.is_empty() {
            tracing::warn!(task = %result.key, agents = unreported.len(), "sub-agents its result does not list end as errors");
            self.store
                .queue_remote_unreported(&self.run, unreported)?
                .committed()
                .await?;
        }
        tracing::debug!(task = %result.key, worker = %result.worker, "result taken");
        let mut state = self.state();
        state.answered.insert(result.key.clone());
        // The task is over: an order it took and never told of is its worker's to
        // report (`agent.steer-undelivered`), not given to anyone again.
        state.handed.retain(|h| h.key != result.key);
        state.execs.remove(&result.key);
        // Its sub-agents ended with it: no order goes to them now.
        state.started.retain(|_, k| *k != result.key);
        let HubState {
            started,
            started_grants,
            ..
        } = &mut *state;
        started_grants.retain(|a, _| started.contains_key(a));
        if let Some(w) = state.waiting.remove(&result.key) {
            let _ = w.result.send(result);
        }
        Ok(())
    }

    /// Refuses a result carrying a model call that is not of the task's agent nor of a
    /// sub-agent the result lists, or not under that agent's name: a worker records
    /// only the calls of the agents it ran for this task.
    async fn check_exchanges(
        &self,
        waiter: &AgentId,
        name: String,
        result: &TaskResult,
    ) -> Result<(), Refusal> {
        if result.exchanges.is_empty() {
            return Ok(());
        }
        let mut names: HashMap<&str, String> = result
            .children
            .iter()
            .map(|c| (c.id.as_str(), c.name.clone()))
            .collect();
        names.insert(waiter.as_str(), name);
        // The predecessor a resumed step replaced is read from the store.
        if !names.contains_key(result.agent_id.as_str())
            && let Some(a) = self
                .store
                .agent(&AgentId::from_string(result.agent_id.clone()))
                .await?
        {
            names.insert(result.agent_id.as_str(), a.name);
        }
        for x in &result.exchanges {
            if names.get(x.agent_id.as_str()) != Some(&x.agent) {
                return Err(Refusal::Refused(format!(
                    "the result of task {} carries a model call of agent {} (`{}`), which is not this task's agent or a sub-agent it lists",
                    result.key,
                    x.agent_id,
                    crate::text::escape(&x.agent)
                )));
            }
            x.check_parts().map_err(|why| {
                Refusal::Refused(format!(
                    "the result of task {} carries a model call of agent {} turn {}: {why}",
                    result.key, x.agent_id, x.turn
                ))
            })?;
        }
        Ok(())
    }

    /// Stores the events a worker sent for task `key` (its execution `exec`), each once.
    /// An event that is not the task's to send is skipped and named in the log; a
    /// message none of whose events is stored is refused.
    async fn take_events(
        &self,
        key: &str,
        exec: &str,
        events: Vec<ForwardedEvent>,
    ) -> Result<(), Refusal> {
        {
            let state = self.state();
            if !state.waiting.contains_key(key) && !state.answered.contains(key) {
                return Err(Refusal::Unclaimed(format!(
                    "no task {} of run {} is in flight here",
                    crate::text::escape(key),
                    self.run
                )));
            }
        }
        let (stored, refused) = self.queue_events(key, exec, events).await?;
        let any = !stored.is_empty();
        for pending in stored {
            pending.committed().await?;
        }
        match refused {
            Some(why) if !any => Err(Refusal::Refused(why)),
            _ => Ok(()),
        }
    }

    /// Queues the events of task `key` that are its to send (see [`RunHub`]); the
    /// others are skipped, the last reason returned.
    async fn queue_events(
        &self,
        key: &str,
        exec: &str,
        events: Vec<ForwardedEvent>,
    ) -> Result<(Vec<crate::store::Pending>, Option<String>), Refusal> {
        self.requeue_lost_orders(key, exec).await?;
        let mut stored = Vec::with_capacity(events.len());
        let mut refused = None;
        for e in events {
            let seq = e.seq;
            match self.admit(key, e).await? {
                Ok(a) => {
                    if let Event::ModelReply { usage, .. } = &a.event {
                        self.tally(key, exec, &a.agent, *usage);
                    }
                    if let Event::AgentSteer { message }
                    | Event::AgentSteerUndelivered { message, .. } = &a.event
                    {
                        self.steer_seen(key, &a.agent, message);
                    }
                    // Recorded before its first event (in order with it).
                    if let Some(s) = a.started {
                        let StartedAgent { worker, agent } = *s;
                        stored.push(self.store.queue_remote_started(agent, worker)?);
                    }
                    stored.push(self.store.queue_remote_event(
                        &self.run,
                        Some(&a.agent),
                        a.at,
                        format!("{exec}/{seq}"),
                        a.event,
                    )?);
                }
                Err(why) => {
                    tracing::warn!(task = %crate::text::escape(key), %why, "a worker's event refused");
                    refused = Some(why);
                }
            }
        }
        Ok((stored, refused))
    }

    /// Queues again the orders a worker took for task `key` that it was not seen to
    /// carry out, when `exec` is another execution of the task than the one last heard
    /// from: the one that took them ended without a word (killed), and the task runs
    /// again on a worker that never had them.
    async fn requeue_lost_orders(&self, key: &str, exec: &str) -> Result<(), Refusal> {
        let lost: Vec<Handed> = {
            let mut state = self.state();
            // Most messages come from the execution heard from last: nothing allocated.
            match state.execs.get_mut(key) {
                Some(last) if last == exec => return Ok(()),
                Some(last) => *last = exec.to_owned(),
                None => {
                    state.execs.insert(key.to_owned(), exec.to_owned());
                    return Ok(());
                }
            }
            let (lost, kept) = std::mem::take(&mut state.handed)
                .into_iter()
                .partition(|h| h.key == key);
            state.handed = kept;
            lost
        };
        for h in lost {
            tracing::info!(task = %key, agent = %h.target, order = ?h.kind, "an order the task's killed execution took is given to the one running it now");
            self.store
                .push_control(&h.target, h.kind, h.message.as_deref())
                .await?;
        }
        Ok(())
    }

    /// Forgets the steer of task `key` that an `agent.steer` or `agent.steer-undelivered`
    /// event (its `message`, as an event holds it) about `agent` says reached its end.
    fn steer_seen(&self, key: &str, agent: &AgentId, message: &str) {
        let mut state = self.state();
        if let Some(at) = state.handed.iter().position(|h| {
            h.key == key
                && (h.on_worker == agent.as_str() || h.target == agent.as_str())
                && h.message
                    .as_deref()
                    .map(crate::agent::runner::cap)
                    .as_deref()
                    == Some(message)
        }) {
            state.handed.remove(at);
        }
    }

    /// Counts `usage` of a model reply of `agent` sent by execution `exec` of task `key`,
    /// when that agent is the task's and the task still waits.
    fn tally(&self, key: &str, exec: &str, agent: &AgentId, usage: crate::vocab::Usage) {
        let mut state = self.state();
        let ours = state
            .waiting
            .get(key)
            .is_some_and(|w| Self::is_task_agent(&w.agent, w.runs_as.as_ref(), agent.as_str()));
        if ours {
            let spent = state
                .spent
                .entry(key.to_owned())
                .or_default()
                .entry(exec.to_owned())
                .or_default();
            spent.input = spent.input.saturating_add(usage.input);
            spent.output = spent.output.saturating_add(usage.output);
        }
    }

    /// Whether event `e` of task `key` may be stored: about an agent, and that agent the
    /// task's (or the predecessor a resumed step replaced), or one its worker started
    /// (recorded here with its first event, which names it): never an agent of another
    /// run, nor one waiting for another task of this run.
    async fn admit(
        &self,
        key: &str,
        mut e: ForwardedEvent,
    ) -> Result<Result<Admitted, String>, Refusal> {
        let kind = crate::text::escape(&e.kind).into_owned();
        let task = crate::text::escape(key);
        let started = e.started.take();
        if let Some(s) = &started {
            let checked = match self.may_start(key, s) {
                Ok(()) => self.within_parent(&s.agent).await?,
                Err(why) => Err(why),
            };
            if let Err(why) = checked {
                return Ok(Err(format!("event `{kind}` of task {task}: {why}")));
            }
        }
        let event = Event::from_parts(e.kind, e.data);
        if let Event::ModelReply { usage, .. } = &event
            && !crate::remote::task::usage_in_bounds(usage)
        {
            return Ok(Err(format!(
                "event `{kind}` of task {task} says a reply used {} / {} tokens; at most {} each",
                usage.input,
                usage.output,
                crate::remote::task::MAX_WIRE_TOKENS
            )));
        }
        if !event.is_about_an_agent() {
            return Ok(Err(format!(
                "event `{kind}` of task {task} is not about an agent; workers forward only agents' events"
            )));
        }
        let Some(named) = e.agent_id else {
            return Ok(Err(format!("event of task {task} names no agent")));
        };
        let agent = AgentId::from_string(named);
        let Some((task_agent, runs_as)) = self
            .state()
            .waiting
            .get(key)
            .map(|w| (w.agent.clone(), w.runs_as.clone()))
        else {
            return Ok(Err(format!(
                "event `{kind}` of task {task}: the task has been answered; its events came with its result"
            )));
        };
        // The task's agent, a sub-agent its worker started for it (recorded here, or
        // being started by this very event), or — after this process started again —
        // one the store records under such a parent. Never another agent of the run.
        let ours = Self::is_task_agent(&task_agent, runs_as.as_ref(), agent.as_str())
            || self.state().started.get(&agent).is_some_and(|k| k == key)
            || started.as_ref().is_some_and(|s| s.agent.id == agent)
            || self
                .started_before(key, &agent, &task_agent, runs_as.as_ref())
                .await?;
        if !ours {
            return Ok(Err(format!(
                "event `{kind}` of task {task} is about agent {agent}, which is not this task's"
            )));
        }
        if let Some(s) = &started {
            let mut state = self.state();
            state.started.insert(agent.clone(), key.to_owned());
            state
                .started_grants
                .insert(agent.clone(), (s.agent.caps.clone(), s.agent.depth));
        }
        // What the worker does under the predecessor a resumed step replaced is the
        // step's agent's doing now: it is recorded about that agent (which then shows
        // running, and has the branch it commits to), not about the one the
        // interruption ended.
        let agent = if runs_as.as_ref() == Some(&agent) {
            task_agent
        } else {
            agent
        };
        Ok(Ok(Admitted {
            agent,
            at: e.at,
            event,
            started,
        }))
    }

    /// Whether `agent` is a sub-agent the store records under task `key`'s agent (or
    /// under one recorded for the task here): one started before this process took the
    /// run over. Remembered for the task when it is.
    async fn started_before(
        &self,
        key: &str,
        agent: &AgentId,
        task_agent: &AgentId,
        runs_as: Option<&AgentId>,
    ) -> Result<bool, Refusal> {
        let Some(stored) = self.store.agent(agent).await? else {
            return Ok(false);
        };
        let under = stored.run_id == self.run
            && stored.parent.as_ref().is_some_and(|p| {
                Self::is_task_agent(task_agent, runs_as, p.as_str())
                    || self.state().started.get(p).is_some_and(|k| k == key)
            });
        if under {
            self.state().started.insert(agent.clone(), key.to_owned());
        }
        Ok(under)
    }

    /// Whether a sub-agent a worker says was started holds no more than its parent
    /// could give: capabilities among the parent's, one level deeper. (It was
    /// recorded, and audited, exactly as the worker described it.)
    async fn within_parent(&self, a: &AgentRecord) -> Result<Result<(), String>, Refusal> {
        let Some(parent) = &a.parent else {
            return Ok(Err(format!(
                "it says agent {} started under no parent",
                a.id
            )));
        };
        let known = self.state().started_grants.get(parent).cloned();
        let (caps, depth) = match known {
            Some(grant) => grant,
            None => match self.store.agent(parent).await? {
                Some(p) => (p.caps, p.depth),
                None => {
                    return Ok(Err(format!(
                        "it says agent {} started under {parent}, which is not recorded",
                        a.id
                    )));
                }
            },
        };
        Ok(within(a, &caps, depth))
    }

    /// Whether a worker may say that the agent of task `key` (or one it started) started
    /// sub-agent `s`: of this run, under such a parent, within [`MAX_CHILDREN`] a task.
    fn may_start(&self, key: &str, s: &StartedAgent) -> Result<(), String> {
        let a = &s.agent;
        let state = self.state();
        let parent_ok = a.parent.as_ref().is_some_and(|p| {
            state
                .waiting
                .get(key)
                .is_some_and(|w| w.agent == *p || w.runs_as.as_ref() == Some(p))
                || state.started.get(p).is_some_and(|k| k == key)
        });
        if a.run_id != self.run || !parent_ok {
            return Err(format!(
                "it says agent {} started under a parent that is not this task's agent nor one it started",
                a.id
            ));
        }
        let of_task = state.started.values().filter(|k| *k == key).count();
        if of_task >= MAX_CHILDREN && !state.started.contains_key(&a.id) {
            return Err(format!("it says more than {MAX_CHILDREN} agents started"));
        }
        Ok(())
    }
}

/// Whether sub-agent `a` holds no more than a parent with `caps` at `depth` could give:
/// capabilities among the parent's, one level deeper.
fn within(a: &AgentRecord, caps: &[String], depth: u32) -> Result<(), String> {
    if let Some(extra) = a.caps.iter().find(|c| !caps.contains(c)) {
        return Err(format!(
            "it says agent {} started with capability `{}`, which its parent does not hold",
            a.id,
            crate::text::escape(extra)
        ));
    }
    if Some(a.depth) != depth.checked_add(1) {
        return Err(format!(
            "it says agent {} started at depth {} under a parent at depth {depth}",
            a.id, a.depth
        ));
    }
    Ok(())
}

/// Attempts to stop a stopped run's task on its worker (each waits up to
/// [`CONTROL_REPLY`] for the worker running it).
const STOP_TRIES: u32 = 3;
/// How long an order waits for the worker running its agent to take it.
const CONTROL_REPLY: std::time::Duration = std::time::Duration::from_secs(1);

/// Sends `order` to the worker running its agent; whether that worker took it (none
/// answers while the task is queued, or once its agent ended).
async fn send_control(client: &async_nats::Client, subject: &str, order: &Control) -> bool {
    let Ok(payload) = order.to_bytes() else {
        return false;
    };
    let sent = client.request(subject.to_owned(), payload.into());
    matches!(tokio::time::timeout(CONTROL_REPLY, sent).await, Ok(Ok(_)))
}

/// Hands the steer and stop orders stored for this run's remote agents (`crewbox
/// steer`/`stop` from any process) to the workers running them, polling as the agent
/// manager polls for local agents. An order is marked handled once its worker took it;
/// until then (the task still queued) it is offered again. An order for an agent that
/// ended is left to the run's own control loop, which reports an undelivered steer.
async fn forward_controls(hub: std::sync::Weak<RunHub>, client: async_nats::Client, pool: String) {
    loop {
        tokio::time::sleep(crate::agent::manager::CONTROL_POLL).await;
        let Some(hub) = hub.upgrade() else { return };
        // The tasks' agents, and the sub-agents their workers said they started: an
        // order's target → its task and the agent id its worker runs it as.
        let agents: HashMap<String, (String, String)> = {
            let state = hub.state();
            let tasks = state.waiting.iter().map(|(key, w)| {
                let on_worker = w.runs_as.as_ref().unwrap_or(&w.agent);
                (w.agent.to_string(), (key.clone(), on_worker.to_string()))
            });
            let started = state
                .started
                .iter()
                .filter(|(_, key)| state.waiting.contains_key(*key))
                .map(|(agent, key)| (agent.to_string(), (key.clone(), agent.to_string())));
            tasks.chain(started).collect()
        };
        if agents.is_empty() {
            continue;
        }
        let Ok(pending) = hub.store.pending_controls().await else {
            continue;
        };
        let orders = pending.into_iter().filter_map(|c| {
            let (key, on_worker) = agents.get(&c.target)?;
            let (order, message) = match c.kind {
                ControlKind::Steer => (Order::Steer, Some(c.message.unwrap_or_default())),
                ControlKind::Stop => (Order::Stop, None),
                ControlKind::Message => return None,
            };
            let order = Control {
                v: WIRE_VERSION,
                key: key.clone(),
                run_id: hub.run.to_string(),
                agent_id: on_worker.clone(),
                order,
                message,
            };
            let subject = control_subject(&pool, hub.run.as_str(), key);
            Some((c.seq, c.target, subject, order))
        });
        let sent = futures::future::join_all(orders.map(|(seq, target, subject, order)| {
            let client = &client;
            async move {
                send_control(client, &subject, &order)
                    .await
                    .then_some((seq, target, order))
            }
        }))
        .await;
        let mut taken: Vec<i64> = Vec::new();
        for (seq, target, order) in sent.into_iter().flatten() {
            taken.push(seq);
            hub.state().handed.push(Handed {
                key: order.key,
                target,
                on_worker: order.agent_id,
                kind: match order.order {
                    Order::Steer => ControlKind::Steer,
                    Order::Stop => ControlKind::Stop,
                },
                message: order.message,
            });
        }
        if !taken.is_empty()
            && let Err(e) = hub.store.consume_controls(taken).await
        {
            tracing::warn!(error = %e, "orders handed to workers not marked handled");
        }
    }
}

/// Stores `result` as `agent`'s (once per agent).
async fn record(
    store: &Store,
    run: &RunId,
    agent: &AgentId,
    r: &TaskResult,
) -> Result<(), EngineError> {
    store
        .record_remote_result(RemoteResult {
            run_id: run.clone(),
            agent_id: agent.clone(),
            task_key: r.key.clone(),
            worker: r.worker.clone(),
            state: r.state,
            stats: r.stats,
            result: Some(r.result.clone()),
            error: r.error.clone(),
            reason: r.reason,
            children: r
                .children
                .iter()
                .filter(|c| c.run_id == *run)
                .cloned()
                .collect(),
            conversation: (!r.history.is_empty())
                .then(|| serde_json::to_string(&r.history).ok())
                .flatten(),
            exchanges: r
                .exchanges
                .iter()
                .map(|x| ExchangeWrite {
                    run_id: run.clone(),
                    agent_id: AgentId::from_string(x.agent_id.clone()),
                    agent_name: x.agent.clone(),
                    turn: x.turn,
                    request: x.request.get().to_owned(),
                    reply: x.reply.get().to_owned(),
                    at: x.at,
                })
                .collect(),
        })
        .await?;
    Ok(())
}

/// Takes one message from `subject` (`crewbox.out.<run>.<kind>.<key>`): it must be about
/// this run and the task its subject names.
async fn take(hub: &RunHub, subject: &str, payload: &[u8]) -> Result<(), Refusal> {
    let parts: Vec<&str> = subject.split('.').collect();
    let [_, _, run, kind, key] = parts[..] else {
        return Err(Refusal::Refused("not a subject of a run's results".into()));
    };
    if run != hub.run.as_str() {
        return Err(Refusal::Refused(format!(
            "a message of run {} reached the consumer of run {}",
            crate::text::escape(run),
            hub.run
        )));
    }
    let named = |what: &str, inner: &str| {
        Refusal::Refused(format!(
            "the {what} on the subject of task {} is about task {}",
            crate::text::escape(key),
            crate::text::escape(inner)
        ))
    };
    match kind {
        "result" => {
            let r = TaskResult::from_bytes(payload)
                .map_err(|e| Refusal::Refused(format!("refused: {e}")))?;
            if r.key != key {
                return Err(named("result", &r.key));
            }
            hub.take_result(r).await
        }
        "event" => {
            let e = Forwarded::from_bytes(payload)
                .map_err(|e| Refusal::Refused(format!("refused: {e}")))?;
            if e.key != key {
                return Err(named("event", &e.key));
            }
            hub.take_events(key, &e.exec, e.events).await
        }
        other => Err(Refusal::Refused(format!(
            "unknown message kind `{}`",
            crate::text::escape(other)
        ))),
    }
}

/// The run's consumer loop: each message is acked only once what it carries is
/// committed to the store; one that does not read is terminated (never redelivered).
async fn consume(hub: std::sync::Weak<RunHub>, consumer: jetstream::consumer::PullConsumer) {
    let backoff = crate::backoff::Backoff::new(
        std::time::Duration::from_millis(200),
        std::time::Duration::from_secs(5),
    );
    let mut failures = 0;
    loop {
        let mut messages = match consumer.messages().await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the run's results; retrying");
                tokio::time::sleep(backoff.wait(failures)).await;
                failures = failures.saturating_add(1);
                continue;
            }
        };
        while let Some(msg) = messages.next().await {
            let Some(hub) = hub.upgrade() else { return };
            let msg = match msg {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "reading a result failed");
                    continue;
                }
            };
            let subject = msg.subject.to_string();
            // A message that makes its handling panic is refused like a malformed one:
            // the run's other messages are still taken (the consumer died with it, and
            // the run failed with its agents left queued).
            let taken = std::panic::AssertUnwindSafe(take(&hub, &subject, &msg.payload))
                .catch_unwind()
                .await
                .unwrap_or_else(|panic| {
                    let what = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("a panic");
                    tracing::error!(%subject, panic = %crate::text::escape(what), "taking a worker's message panicked");
                    Err(Refusal::Refused(format!("taking it panicked: {}", crate::text::escape(what))))
                });
            let ack = match taken {
                Ok(()) => msg.ack().await,
                Err(Refusal::Refused(why)) => {
                    tracing::warn!(%subject, %why, "message from a worker refused");
                    msg.ack_with(jetstream::AckKind::Term).await
                }
                Err(Refusal::Unclaimed(why)) => {
                    let delivered = msg.info().map(|i| i.delivered).unwrap_or(i64::MAX);
                    if delivered >= UNCLAIMED_DELIVERIES {
                        tracing::warn!(%subject, %why, "message no agent claimed dropped");
                        msg.ack_with(jetstream::AckKind::Term).await
                    } else {
                        msg.ack_with(jetstream::AckKind::Nak(Some(
                            std::time::Duration::from_secs(2),
                        )))
                        .await
                    }
                }
                Err(Refusal::Store(e)) => {
                    tracing::warn!(%subject, error = %e, "storing a worker's message failed; it is redelivered");
                    msg.ack_with(jetstream::AckKind::Nak(Some(
                        std::time::Duration::from_secs(1),
                    )))
                    .await
                }
            };
            if let Err(e) = ack {
                tracing::warn!(%subject, error = %e, "ack failed; the message is redelivered");
            }
        }
    }
}

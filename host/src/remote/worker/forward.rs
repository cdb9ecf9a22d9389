//! Forwarding a task's events to the coordinator while its agent runs: taken from the
//! worker store's channel of committed events (read back from the log only when the
//! channel dropped some), sent in batches, the last ones with the result.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use tokio::sync::broadcast::{self, error::TryRecvError};
use tokio_util::sync::CancellationToken;

use super::{Shared, lock};
use crate::event::EventRecord;
use crate::ids::{AgentId, RunId};
use crate::remote::RemoteError;
use crate::remote::streams::event_subject;
use crate::remote::task::{
    Forwarded, ForwardedEvent, MAX_EVENT_BYTES, MAX_RESULT_EVENT_BYTES, StartedAgent, Task,
    WIRE_VERSION,
};
use crate::store::Store;

/// How long a live event may wait on the worker for others to travel with: events go
/// in one message per this span (or with the result, for an agent that ends sooner),
/// not one message each.
const FORWARD_EVERY: Duration = Duration::from_millis(200);

/// Forwards the events of a task's agent (and of agents it starts) to the coordinator,
/// in batches, while the agent runs; [`Forwarder::finish`] hands back the last ones,
/// which go with the result. Events come from the store's channel of committed events;
/// when it dropped some, the log is read back from the last one taken, so a forwarder
/// that lags loses nothing.
pub(super) struct Forwarder {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<Vec<ForwardedEvent>, RemoteError>>,
}

/// A forwarder's batches on their way to the server.
struct Outbox {
    shared: Arc<Shared>,
    subject: String,
    key: String,
    exec: String,
    /// Read, not sent yet.
    pending: Vec<ForwardedEvent>,
    pending_bytes: usize,
    /// Sent, their PubAcks not read yet.
    acks: Vec<jetstream::context::PublishAckFuture>,
}

/// A message's bytes besides its events (version, key, execution).
const ENVELOPE_BYTES: usize = 512;

impl Outbox {
    fn publish_error(&self, detail: String) -> RemoteError {
        RemoteError::Publish {
            subject: self.subject.clone(),
            detail,
        }
    }

    /// Adds `e`, sending what is pending first when `e` would not fit with it.
    async fn push(&mut self, e: ForwardedEvent) -> Result<(), RemoteError> {
        let len = e.wire_len();
        if len > MAX_EVENT_BYTES - ENVELOPE_BYTES {
            tracing::warn!(seq = e.seq, kind = %e.kind, "event over the size bound; not forwarded");
            return Ok(());
        }
        if self.pending_bytes + len > MAX_EVENT_BYTES - ENVELOPE_BYTES {
            self.send().await?;
        }
        self.pending_bytes += len;
        self.pending.push(e);
        Ok(())
    }

    /// Sends the pending events as one message (its id names the execution and its
    /// first event: a resend is stored once).
    async fn send(&mut self) -> Result<(), RemoteError> {
        let Some(first) = self.pending.first().map(|e| e.seq) else {
            return Ok(());
        };
        let msg = Forwarded {
            v: WIRE_VERSION,
            key: self.key.clone(),
            exec: self.exec.clone(),
            events: std::mem::take(&mut self.pending),
        };
        self.pending_bytes = 0;
        let bytes = msg.to_bytes()?;
        let publish = jetstream::message::PublishMessage::build()
            .payload(bytes.into())
            .message_id(format!("ev-{}-{first}", self.exec));
        let ack = self
            .shared
            .js
            .send_publish(self.subject.clone(), publish)
            .await
            .map_err(|e| self.publish_error(e.to_string()))?;
        self.acks.push(ack);
        Ok(())
    }

    /// Waits until every message sent is stored on the server.
    async fn stored(&mut self) -> Result<(), RemoteError> {
        for ack in std::mem::take(&mut self.acks) {
            ack.await.map_err(|e| self.publish_error(e.to_string()))?;
        }
        Ok(())
    }
}

/// Which of the worker's events a forwarder sends: those of its task's agent and of the
/// agents it started, each once, in the log's order. They come from the store's channel
/// of committed events; when the channel dropped some (it holds a bounded number), they
/// are read back from the log.
struct Picker {
    wake: broadcast::Receiver<EventRecord>,
    /// Taken from the channel while waiting, not looked at yet.
    held: Vec<EventRecord>,
    /// The channel dropped events since the last look.
    lagged: bool,
    run: RunId,
    /// The last event looked at (sequence number in the worker's log).
    after: i64,
    /// The task's agent and the agents it started.
    mine: std::collections::HashSet<String>,
    /// Agents found to be another task's.
    others: std::collections::HashSet<String>,
    /// The last forwarded event's number in this execution.
    seq: u64,
    /// This worker's name (sent with each started agent).
    worker: String,
    /// The agents the task's agent started, shared with the order taker: an order may
    /// name one of them.
    family: Family,
}

/// The agents a task's agent started on this worker (their ids), as its forwarder
/// found them.
pub(super) type Family = Arc<std::sync::Mutex<std::collections::HashSet<String>>>;

/// What a forwarder's wait for events ended with.
#[derive(Debug, PartialEq, Eq)]
enum Woken {
    /// An event came, or the wait is over.
    Go,
    /// The store is gone.
    Closed,
}

impl Picker {
    /// Picks the events of `agent` (run `run`) committed after this call: subscribed
    /// before the log's end is read, so every event committed after that end is in the
    /// channel (the writer advances the end before it publishes).
    fn new(store: &Store, run: RunId, agent: &AgentId, worker: String, family: Family) -> Self {
        let wake = store.subscribe();
        Self {
            wake,
            held: Vec::new(),
            lagged: false,
            run,
            // The worker's store is its own: what it committed is the log's end.
            after: store.last_event_seq_written(),
            mine: [agent.to_string()].into(),
            others: Default::default(),
            seq: 0,
            worker,
            family,
        }
    }

    /// Waits up to `most` (or until `stop`) for an event.
    async fn wait(&mut self, stop: &CancellationToken, most: Duration) -> Woken {
        tokio::select! {
            r = self.wake.recv() => match r {
                Ok(e) => self.held.push(e),
                Err(broadcast::error::RecvError::Lagged(_)) => self.lagged = true,
                Err(broadcast::error::RecvError::Closed) => return Woken::Closed,
            },
            _ = stop.cancelled() => {}
            _ = tokio::time::sleep(most) => {}
        }
        Woken::Go
    }

    /// The task's events committed since the last call, in order.
    async fn drain(
        &mut self,
        store: &Store,
        running: &std::sync::Mutex<std::collections::HashSet<String>>,
    ) -> Result<Vec<ForwardedEvent>, crate::store::StoreError> {
        loop {
            match self.wake.try_recv() {
                Ok(e) => self.held.push(e),
                Err(TryRecvError::Lagged(_)) => self.lagged = true,
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        let mut out = Vec::new();
        if std::mem::take(&mut self.lagged) {
            // What the channel still holds is newer than what it dropped: the log from
            // the last event looked at has both, in order.
            self.held.clear();
            loop {
                let page = store
                    .events(Some(&self.run), self.after, READ_BACK_PAGE)
                    .await?;
                let full = page.len() == READ_BACK_PAGE as usize;
                for e in page {
                    out.extend(self.pick(e, store, running).await);
                }
                if !full {
                    break;
                }
            }
        } else {
            for e in std::mem::take(&mut self.held) {
                out.extend(self.pick(e, store, running).await);
            }
        }
        Ok(out)
    }

    /// `e` as forwarded, when it is the task's to send.
    async fn pick(
        &mut self,
        e: EventRecord,
        store: &Store,
        running: &std::sync::Mutex<std::collections::HashSet<String>>,
    ) -> Option<ForwardedEvent> {
        if e.seq <= self.after || e.run_id != self.run {
            return None;
        }
        self.after = e.seq;
        let a = e.agent_id.as_ref()?;
        if self.others.contains(a.as_str()) {
            return None;
        }
        let mut started = None;
        if !self.mine.contains(a.as_str()) {
            // Another task's agent on this worker, known to the worker: no store read.
            // Else looked up once: an agent's parent never changes, so one found not to
            // be this task's is skipped from then on.
            let child = if lock(running).contains(a.as_str()) {
                None
            } else {
                let record = store.agent(a).await.ok().flatten()?;
                record
                    .parent
                    .as_ref()
                    .is_some_and(|p| self.mine.contains(p.as_str()))
                    .then_some(record)
            };
            let Some(child) = child else {
                self.others.insert(a.to_string());
                return None;
            };
            self.mine.insert(a.to_string());
            lock(&self.family).insert(a.to_string());
            // Its first event tells the coordinator it runs.
            started = Some(Box::new(StartedAgent {
                worker: self.worker.clone(),
                agent: child,
            }));
        }
        let (kind, data) = e.event.to_stored();
        self.seq += 1;
        Some(ForwardedEvent {
            seq: self.seq,
            agent_id: Some(a.to_string()),
            at: e.at,
            kind,
            data: serde_json::from_str(&data).unwrap_or(serde_json::Value::Null),
            started,
        })
    }
}

/// Events read back from the log at a time, after the channel dropped some.
const READ_BACK_PAGE: u32 = 500;

impl Forwarder {
    /// Starts forwarding from the log's end as it is now, before the agent runs: read
    /// inside the spawned task, the start could fall after the agent's first events
    /// (its worktree, its `running` state), which would then never reach the
    /// coordinator.
    pub(super) fn start(
        shared: Arc<Shared>,
        task: &Task,
        exec: &str,
        run: RunId,
        agent: AgentId,
        family: Family,
    ) -> Self {
        let stop = CancellationToken::new();
        let mut pick = Picker::new(&shared.store, run, &agent, shared.name.clone(), family);
        let mut out = Outbox {
            subject: event_subject(&task.run_id, &task.key),
            key: task.key.clone(),
            exec: exec.to_owned(),
            shared,
            pending: Vec::new(),
            pending_bytes: 0,
            acks: Vec::new(),
        };
        let token = stop.clone();
        let handle = tokio::spawn(async move {
            let mut settled = false;
            loop {
                let stopping = token.is_cancelled();
                if stopping && !settled {
                    settled = true;
                    // Whatever the agent's run logged without waiting is committed, so
                    // it is in the channel (published before the barrier's answer).
                    out.shared.store.settled().await.map_err(|e| {
                        out.publish_error(format!("reading the worker's events: {e}"))
                    })?;
                }
                let read_at = tokio::time::Instant::now();
                let events = pick
                    .drain(&out.shared.store, &out.shared.running_agents)
                    .await
                    .map_err(|e| out.publish_error(format!("reading the worker's events: {e}")))?;
                for e in events {
                    out.push(e).await?;
                }
                if stopping {
                    break;
                }
                // What was read goes now; the next read is one span later at the
                // earliest, so the events of a short agent travel with its result.
                out.send().await?;
                if pick.wait(&token, Duration::from_millis(500)).await == Woken::Closed {
                    break;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(read_at + FORWARD_EVERY) => {}
                    _ = token.cancelled() => {}
                }
            }
            // The tail goes with the result when it is small; else ahead of it. The
            // result goes only after every message before it is stored on the server.
            if out.pending_bytes > MAX_RESULT_EVENT_BYTES {
                out.send().await?;
            }
            out.stored().await?;
            Ok(std::mem::take(&mut out.pending))
        });
        Self { stop, task: handle }
    }

    /// Stops forwarding once the agent's last events are read: those not sent yet.
    pub(super) async fn finish(self) -> Result<Vec<ForwardedEvent>, RemoteError> {
        self.stop.cancel();
        self.task.await.unwrap_or_else(|e| {
            Err(RemoteError::Publish {
                subject: "events".into(),
                detail: e.to_string(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::remote_run;
    use super::*;
    use crate::event::Event;
    use crate::store::AgentRecord;
    use crate::vocab::AgentState;

    fn state(n: usize) -> Event {
        Event::AgentState {
            state: AgentState::Running,
            error: Some(format!("n{n}")),
            exceeded: None,
            reason: None,
        }
    }

    /// More events than the store's channel holds arrive while the forwarder is not
    /// looking: it reads the dropped ones back from the log and forwards every event of
    /// its agent and of the agent's child exactly once, in order, and none of another
    /// task's agent or another run.
    #[tokio::test]
    async fn a_forwarder_that_falls_behind_reads_the_dropped_events_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (run, other_run) = (RunId::new(), RunId::new());
        store.insert_run(&remote_run(run.clone())).await.unwrap();
        store
            .insert_run(&remote_run(other_run.clone()))
            .await
            .unwrap();
        let (mine, child, theirs) = (AgentId::new(), AgentId::new(), AgentId::new());
        store
            .insert_agent(&AgentRecord::running(&mine, &run, None))
            .await
            .unwrap();
        store
            .insert_agent(&AgentRecord::running(&child, &run, Some(&mine)))
            .await
            .unwrap();
        store
            .insert_agent(&AgentRecord::running(&theirs, &run, None))
            .await
            .unwrap();
        let running = std::sync::Mutex::new([theirs.to_string()].into_iter().collect());
        let family = Family::default();
        let mut pick = Picker::new(&store, run.clone(), &mine, "w".into(), family.clone());
        let rounds = 2_000;
        for n in 0..rounds {
            store.log_event(&run, Some(&mine), state(n));
            store.log_event(&run, Some(&theirs), state(n));
            store.log_event(&other_run, Some(&mine), state(n));
            store.log_event(&run, Some(&child), state(n));
        }
        store.settled().await.unwrap();
        let got = pick.drain(&store, &running).await.unwrap();
        assert_eq!(
            got.len(),
            2 * rounds,
            "every event of the agent and its child"
        );
        // The child's first event names it (once), and the order taker knows it.
        let started: Vec<_> = got.iter().filter_map(|e| e.started.as_ref()).collect();
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].agent.id, child);
        assert_eq!(got[1].started.as_ref().map(|s| &s.agent.id), Some(&child));
        assert_eq!(*lock(&family), [child.to_string()].into());
        for (i, e) in got.iter().enumerate() {
            assert_eq!(e.seq, i as u64 + 1);
            let who = if i % 2 == 0 { &mine } else { &child };
            assert_eq!(e.agent_id.as_deref(), Some(who.as_str()));
            assert_eq!(e.data["error"], format!("n{}", i / 2));
        }
        // Caught up: later events come from the channel, numbered on.
        store.log_event(&run, Some(&mine), state(rounds));
        store.settled().await.unwrap();
        let next = pick.drain(&store, &running).await.unwrap();
        assert_eq!(next.len(), 1);
        assert_eq!(next[0].seq, 2 * rounds as u64 + 1);
        assert!(pick.drain(&store, &running).await.unwrap().is_empty());
    }
}

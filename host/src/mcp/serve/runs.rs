//! Runs started through the server. Each runs in its own task, counted in
//! [`InFlight`] (the server outlives its client until they end, or until a shutdown
//! leaves them resumable). A call returns the run id at once, or with `wait` the
//! report, sending progress notifications (agent states and the phase) when the
//! client gave a progress token. A client's `notifications/cancelled` of a waiting
//! call stops the run (as `crewbox stop` would); a disconnect does not.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::{CallToolResult, ProgressNotificationParam, ProgressToken, RequestMetaObject};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, oneshot};

use super::{Server, tool_error, tool_json};
use crate::control::{StopTarget, stop_target};
use crate::engine::{EngineError, RunReport};
use crate::event::{Event, EventRecord};
use crate::ids::{AgentId, RunId};
use crate::vocab::AgentState;

/// How many runs this server started are still going.
#[derive(Clone, Default)]
pub struct InFlight {
    count: Arc<AtomicUsize>,
    changed: Arc<Notify>,
}

impl InFlight {
    /// Runs still going.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until none is going.
    pub async fn drained(&self) {
        loop {
            let changed = self.changed.notified();
            if self.is_empty() {
                return;
            }
            changed.await;
        }
    }

    /// Counts one more run, unless [`MAX_RUNS`] are going already.
    fn try_enter(&self) -> Option<Guard> {
        self.count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_RUNS).then_some(n + 1)
            })
            .ok()
            .map(|_| Guard(self.clone()))
    }
}

/// The most runs one server keeps going at once (each holds a worktree, its agents and
/// their model calls): a client that asks for more is told to wait for one to end.
pub const MAX_RUNS: usize = 16;

/// Counts one run until dropped.
struct Guard(InFlight);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// Starts `work` in its own task and answers the call: the run id at once, or with
/// `wait` its report. `started` gets the run's id from the engine once the run is
/// recorded (a new run) or held by this process (a resumed one); a run refused before
/// drops it, and the engine's refusal is the answer.
pub async fn launch(
    server: &Server,
    work: impl Future<Output = Result<RunReport, EngineError>> + Send + 'static,
    started: oneshot::Receiver<RunId>,
    wait: bool,
    meta: &Option<RequestMetaObject>,
    context: RequestContext<RoleServer>,
) -> CallToolResult {
    // Registered first, so a cancellation that follows at once is kept.
    let _waiting = match wait.then(|| server.waiting(context.id.clone())) {
        Some(None) => {
            return tool_error(format!(
                "a call with request id {} waits already in this session; request ids \
                 must be unique among the calls in flight (nothing was started)",
                crate::text::escape(&context.id.to_string())
            ));
        }
        waiting => waiting.flatten(),
    };
    let Some(guard) = server.runs().try_enter() else {
        return tool_error(format!(
            "{MAX_RUNS} runs started through this server are still going; wait for one to \
             end (`status`) or stop one (`stop`), then ask again (nothing was started)"
        ));
    };
    // Subscribed before the run starts, so no event of it is missed.
    let events = server.engine().subscribe();
    let task = tokio::spawn(async move {
        let _guard = guard;
        work.await
    });
    let run_id = match started.await {
        Ok(id) => id,
        // Refused before it was recorded (or held): the engine's error is the answer.
        Err(_) => return finished(task.await),
    };
    if !wait {
        return tool_json(&json!({
            "run_id": run_id,
            "status": "running",
            "note": "the run goes on in the background; follow it with `status` or `events`, \
                     review it with `diff`",
        }));
    }
    let token = meta
        .as_ref()
        .and_then(RequestMetaObject::get_progress_token)
        .or_else(|| context.meta.get_progress_token());
    let progress = token.map(|token| {
        tokio::spawn(forward_progress(
            server.clone(),
            context.peer.clone(),
            token,
            run_id.clone(),
            events,
        ))
    });
    let mut task = task;
    let outcome = tokio::select! {
        result = &mut task => Some(result),
        () = context.ct.cancelled() => None,
    };
    if let Some(mut p) = progress {
        // A run that ended has its last progress (`run completed`) sent before the
        // answer: the forwarder ends once it sent the run's end, or is cut after a
        // bounded wait. Aborting it at once could drop that last notification.
        let ended = matches!(outcome, Some(Ok(Ok(_))));
        if !ended || tokio::time::timeout(PROGRESS_DRAIN, &mut p).await.is_err() {
            p.abort();
        }
    }
    match outcome {
        Some(result) => finished(result),
        None if server.client_cancelled(&context.id).await => {
            let store = server.engine().store();
            let why = match stop_target(store, StopTarget::Run(&run_id)).await {
                Ok(Ok(ack)) => ack,
                Ok(Err(why)) => why.to_string(),
                Err(e) => e.to_string(),
            };
            tool_error(format!("cancelled by the client: {why}"))
        }
        // The client went away: the run goes on (it is in the store).
        None => tool_error(format!("the client disconnected; run {run_id} goes on")),
    }
}

/// The answer of a run that ended: its report, or the engine's error as the CLI
/// prints it.
fn finished(
    result: Result<Result<RunReport, EngineError>, tokio::task::JoinError>,
) -> CallToolResult {
    match result {
        Ok(Ok(report)) => tool_json(&serde_json::to_value(&report).unwrap_or_default()),
        Ok(Err(e)) => tool_error(e.to_string()),
        Err(e) => tool_error(format!("the run's task failed: {e}")),
    }
}

/// How long an answer waits for the progress of its run's end to be sent.
const PROGRESS_DRAIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Sends a progress notification for each agent state change and phase of `run`,
/// until its end was sent.
async fn forward_progress(
    server: Server,
    peer: rmcp::Peer<RoleServer>,
    token: ProgressToken,
    run: RunId,
    mut events: tokio::sync::broadcast::Receiver<EventRecord>,
) {
    let store = server.engine().store().clone();
    let mut step = 0u32;
    let mut last = 0i64;
    let mut names: std::collections::HashMap<AgentId, String> = Default::default();
    loop {
        let batch = match events.recv().await {
            Ok(e) => vec![e],
            Err(RecvError::Lagged(_)) => match store.events(Some(&run), last, 1000).await {
                Ok(missed) => missed,
                Err(_) => continue,
            },
            Err(RecvError::Closed) => return,
        };
        for e in batch {
            if e.run_id != run || e.seq <= last {
                continue;
            }
            last = e.seq;
            let name = match &e.agent_id {
                Some(id) => match names.get(id) {
                    Some(n) => n.clone(),
                    // Remembered once stored (its first event can come before its row).
                    None => match store.agent(id).await {
                        Ok(Some(a)) => {
                            names.insert(id.clone(), a.name.clone());
                            a.name
                        }
                        _ => id.to_string(),
                    },
                },
                None => String::new(),
            };
            let Some(message) = describe(&e.event, &name) else {
                continue;
            };
            step += 1;
            let note = ProgressNotificationParam::new(token.clone(), f64::from(step))
                .with_message(super::inert(&message));
            if peer.notify_progress(note).await.is_err()
                || matches!(e.event, Event::RunFinished { .. })
            {
                return;
            }
        }
    }
}

/// The phase an agent's name says it is in (crew: planner, executor, reviewer).
fn phase(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    if n.contains("plan") {
        Some("planning")
    } else if n.contains("exec") {
        Some("executing")
    } else if n.contains("review") {
        Some("reviewing")
    } else {
        None
    }
}

/// One progress line, or nothing for events that are not progress.
fn describe(event: &Event, agent: &str) -> Option<String> {
    Some(match event {
        Event::RunStarted { mode, .. } => format!("run started ({mode})"),
        Event::AgentState { state, .. } => match (state, phase(agent)) {
            (AgentState::Running, Some(phase)) => format!("{phase}: {agent} running"),
            _ => format!("{agent} {state}"),
        },
        Event::ReflectIteration(it) => format!("iteration {}", it.iteration),
        Event::CrewReview(_) => "reviewed".to_owned(),
        Event::RunFinished { status, .. } => format!("run {status}"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crew_agents_name_their_phase() {
        assert_eq!(phase("planner"), Some("planning"));
        assert_eq!(phase("executor-2"), Some("executing"));
        assert_eq!(phase("reviewer"), Some("reviewing"));
        assert_eq!(phase("worker"), None);
    }

    #[tokio::test]
    async fn in_flight_drains_when_the_last_run_ends() {
        let runs = InFlight::default();
        let guard = runs.try_enter().unwrap();
        assert_eq!(runs.len(), 1);
        // Up to the bound, then none.
        let more: Vec<Guard> = (1..MAX_RUNS).map(|_| runs.try_enter().unwrap()).collect();
        assert!(runs.try_enter().is_none());
        drop(more);
        let waiter = tokio::spawn({
            let runs = runs.clone();
            async move { runs.drained().await }
        });
        drop(guard);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(runs.is_empty());
    }
}

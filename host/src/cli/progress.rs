//! Live progress on a terminal: subscribes to the engine's events and prints one line
//! per step. Events it fell behind on are read back from the event log by sequence
//! number, so nothing is skipped.

use crewbox::{AgentId, Engine, Event, EventRecord};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A running progress printer.
pub struct Progress {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Progress {
    /// Prints what is left and stops.
    pub async fn finish(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Starts printing the events `engine` stores from now on to stderr.
pub fn spawn(engine: &Engine, stop: CancellationToken) -> Progress {
    let mut events = engine.subscribe();
    let store = engine.store().clone();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut last = 0;
            loop {
                let next = tokio::select! {
                    next = events.recv() => next,
                    _ = stop.cancelled() => {
                        // Whatever was stored before the stop is still printed.
                        while let Ok(e) = events.try_recv() {
                            print(&e, &mut last);
                        }
                        return;
                    }
                };
                match next {
                    Ok(e) => print(&e, &mut last),
                    Err(RecvError::Lagged(_)) => {
                        if let Ok(missed) = store.events(None, last, 10_000).await {
                            for e in &missed {
                                print(e, &mut last);
                            }
                        }
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        }
    });
    Progress { stop, task }
}

fn print(e: &EventRecord, last: &mut i64) {
    if e.seq <= *last {
        return;
    }
    *last = e.seq;
    if let Some(line) = describe(e) {
        eprintln!("{line}");
    }
}

fn short(id: Option<&AgentId>) -> String {
    id.map(|a| {
        let s = a.as_str();
        let start = s.char_indices().rev().nth(5).map_or(0, |(i, _)| i);
        s[start..].to_owned()
    })
    .unwrap_or_default()
}

fn describe(e: &EventRecord) -> Option<String> {
    let who = short(e.agent_id.as_ref());
    Some(match &e.event {
        Event::RunStarted { mode, .. } => format!("▶ run {} ({mode})", e.run_id),
        Event::AgentState { state, .. } => format!("  [{who}] {state}"),
        Event::ModelReply { turn, text, .. } => {
            let text = text.lines().next().unwrap_or("");
            format!("  [{who}] turn {turn}: {text}")
        }
        Event::ToolCall { tool, args, ok, .. } => {
            format!("  [{who}]   {} {tool} {args}", if *ok { "✓" } else { "✗" })
        }
        Event::AgentWrapUp { .. } => format!("  [{who}] soft turn limit: wrapping up"),
        Event::AgentSteer { message } => format!("  [{who}] steered: {message}"),
        Event::AgentSteerUndelivered { why, .. } => format!("  [{who}] steer not delivered: {why}"),
        Event::ProviderBreakerOpen { breaker, cause } => {
            format!("  [{who}] circuit {breaker} opened: {cause}")
        }
        Event::RunFinished { status, .. } => format!("■ run {} {status}", e.run_id),
        Event::RunResumed { .. }
        | Event::RunInterrupted {}
        | Event::BatchFinalized(_)
        | Event::AgentWorktree { .. }
        | Event::AgentCompacted { .. }
        | Event::AgentContinue { .. }
        | Event::AgentFixRound { .. }
        | Event::AgentValidation { .. }
        | Event::AgentArtifact(_)
        | Event::AgentChain { .. }
        | Event::ValidatorVerdict(_)
        | Event::SwarmDelivery { .. }
        | Event::GroupDelivery { .. }
        | Event::GroupDeliveryFailed { .. }
        | Event::CrewReview(_)
        | Event::OrchestratePlan { .. }
        | Event::OrchestrateUnknownWorkers { .. }
        | Event::MergeConflict { .. }
        | Event::ReflectIteration(_)
        | Event::ReflectScoreUnreadable { .. }
        | Event::TeamMessages { .. }
        | Event::Other { .. } => return None,
    })
}

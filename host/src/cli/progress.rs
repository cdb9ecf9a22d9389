//! Live progress on a terminal: subscribes to the engine's events and prints one line
//! per step. Events it fell behind on are read back from the event log by sequence
//! number, so nothing is skipped. Agents are shown as `[tail name]`: the tail is an
//! id abbreviation every command accepts (`crewbox steer TAIL ...`).

use std::collections::HashMap;

use crewbox::{AgentId, Engine, Event, EventRecord};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::text::escape;

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
    let store = engine.watch();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut last = 0;
            let mut names = Names::default();
            loop {
                let next = tokio::select! {
                    next = events.recv() => next,
                    _ = stop.cancelled() => {
                        // Whatever was stored before the stop is still printed.
                        while let Ok(e) = events.try_recv() {
                            print(&store, &mut names, &e, &mut last).await;
                        }
                        return;
                    }
                };
                match next {
                    Ok(e) => print(&store, &mut names, &e, &mut last).await,
                    Err(RecvError::Lagged(_)) => {
                        if let Ok(missed) = store.page(None, last, 10_000).await {
                            for e in &missed {
                                print(&store, &mut names, e, &mut last).await;
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

/// The names of the agents seen so far, by id.
#[derive(Default)]
struct Names(HashMap<AgentId, String>);

impl Names {
    /// `[tail name]` for an agent.
    fn label(&self, id: Option<&AgentId>) -> String {
        match id {
            Some(id) => match self.0.get(id) {
                Some(name) => format!("[{} {}]", short(id), escape(name)),
                None => format!("[{}]", short(id)),
            },
            None => String::new(),
        }
    }
}

async fn print(store: &crewbox::Watch, names: &mut Names, e: &EventRecord, last: &mut i64) {
    if e.seq <= *last {
        return;
    }
    *last = e.seq;
    // A new agent: learn the names of the run's agents, and show the ones still
    // queued (team members waiting for a slot) so nobody looks missing.
    if let Some(id) = &e.agent_id
        && !names.0.contains_key(id)
        && let Ok(agents) = store.agents(&e.run_id).await
    {
        for a in agents {
            if names.0.contains_key(&a.id) {
                continue;
            }
            let queued = a.state == crewbox::types::AgentState::Queued && a.id != *id;
            names.0.insert(a.id.clone(), a.name.clone());
            if queued {
                errln!("  {} queued", names.label(Some(&a.id)));
            }
        }
    }
    if let Some(line) = describe(e, &names.label(e.agent_id.as_ref())) {
        errln!("{line}");
    }
}

/// The id's last [`MIN_TAIL`](crewbox::types::MIN_TAIL) characters.
fn short(id: &AgentId) -> String {
    let s = id.as_str();
    let tail = crewbox::types::MIN_TAIL;
    let start = s.char_indices().rev().nth(tail - 1).map_or(0, |(i, _)| i);
    s[start..].to_owned()
}

/// One progress line; every text a model, a tool or a worker wrote is escaped to one
/// line (the sink escapes controls anyway; this keeps it one line).
fn describe(e: &EventRecord, who: &str) -> Option<String> {
    Some(match &e.event {
        Event::RunStarted { mode, .. } => format!("▶ run {} ({mode})", e.run_id),
        Event::AgentState { state, .. } => format!("  {who} {state}"),
        Event::ModelReply { turn, text, .. } => {
            let text = text.lines().next().unwrap_or("");
            format!("  {who} turn {turn}: {}", escape(text))
        }
        Event::ToolCall { tool, args, ok, .. } => {
            format!(
                "  {who}   {} {} {}",
                if *ok { "✓" } else { "✗" },
                escape(tool),
                escape(args)
            )
        }
        Event::AgentWrapUp { .. } => format!("  {who} soft turn limit: wrapping up"),
        Event::AgentSteer { message } => format!("  {who} steered: {}", escape(message)),
        Event::AgentSteerUndelivered { why, .. } => {
            format!("  {who} steer not delivered: {}", escape(why))
        }
        Event::ProviderBreakerOpen { breaker, cause } => {
            format!(
                "  {who} circuit {} opened: {}",
                escape(breaker),
                escape(cause)
            )
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
        | Event::AgentLeftOut { .. }
        | Event::AgentChain { .. }
        | Event::AgentRecovered { .. }
        | Event::AgentCheckpoint { .. }
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

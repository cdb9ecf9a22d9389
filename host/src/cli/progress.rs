//! Live progress on a terminal: follows the event log and prints one line per step.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::store::{EventRecord, Store};

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

/// Starts printing events stored from now on to stderr.
pub fn spawn(store: Store, stop: CancellationToken) -> Progress {
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut after = store.last_event_seq().await.unwrap_or(0);
            loop {
                let stopping = stop.is_cancelled();
                if let Ok(events) = store.events(None, after, 500).await {
                    for e in &events {
                        after = e.seq;
                        if let Some(line) = describe(e) {
                            eprintln!("{line}");
                        }
                    }
                }
                if stopping {
                    return;
                }
                tokio::select! {
                    _ = stop.cancelled() => {}
                    _ = tokio::time::sleep(Duration::from_millis(150)) => {}
                }
            }
        }
    });
    Progress { stop, task }
}

fn short(id: Option<&crate::ids::AgentId>) -> String {
    id.map(|a| {
        a.as_str()
            .chars()
            .rev()
            .take(6)
            .collect::<String>()
            .chars()
            .rev()
            .collect()
    })
    .unwrap_or_default()
}

fn describe(e: &EventRecord) -> Option<String> {
    let d = &e.data;
    let who = short(e.agent_id.as_ref());
    Some(match e.kind.as_str() {
        "run.started" => format!("▶ run {} ({})", e.run_id, d["mode"].as_str().unwrap_or("?")),
        "agent.state" => format!("  [{who}] {}", d["state"].as_str().unwrap_or("?")),
        "model.reply" => {
            let text = d["text"]
                .as_str()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("")
                .to_owned();
            format!("  [{who}] turn {}: {text}", d["turn"])
        }
        "tool.call" => format!(
            "  [{who}]   {} {} {}",
            if d["ok"].as_bool() == Some(true) {
                "✓"
            } else {
                "✗"
            },
            d["tool"].as_str().unwrap_or("?"),
            d["args"].as_str().unwrap_or("")
        ),
        "agent.wrap-up" => format!("  [{who}] soft turn limit: wrapping up"),
        "agent.steer" => format!("  [{who}] steered: {}", d["message"].as_str().unwrap_or("")),
        "run.finished" => format!("■ run {} {}", e.run_id, d["status"].as_str().unwrap_or("?")),
        _ => return None,
    })
}

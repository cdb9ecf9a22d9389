//! Agent throughput: 10,000 single-turn scripted agents through spawn → run → complete,
//! with every store write, on this machine. Last line: one JSON object.
//!
//! - `agents_per_sec`: all 10,000 spawned at once into a queue of `max_concurrent` 4.
//! - `spawn_p50_ms` / `spawn_p99_ms`: spawn() call → the agent's first model call, with a
//!   free slot (agents spawned in waves of 4), i.e. the loop's own overhead.
//! - `queued_kb_per_agent`: resident memory added per queued agent (10,000 queued behind a
//!   single busy slot).
//! - `peak_rss_kb`: the process's high-water mark.

// A test or bench that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use crewbox::unstable::agent::manager::{Manager, SpawnOptions};
use crewbox::unstable::agent::permissions::{CapSet, Permissions};
use crewbox::unstable::agent::runner::AgentSpec;
use crewbox::unstable::config::Quotas;
use crewbox::unstable::ids::{AgentId, RunId};
use crewbox::unstable::provider::scripted::ScriptedProvider;
use crewbox::unstable::provider::{Completion, CompletionRequest, Provider, ProviderError};
use crewbox::unstable::store::Store;
use crewbox::unstable::tool::registry::ToolRegistry;

const AGENTS: usize = 10_000;

/// The scripted model, noting when each agent first reaches it.
struct Timed {
    inner: ScriptedProvider,
    first_call: Mutex<Vec<(String, Instant)>>,
}

#[async_trait]
impl Provider for Timed {
    fn name(&self) -> &str {
        "scripted"
    }
    fn model(&self) -> &str {
        "script"
    }
    fn acts(&self) -> bool {
        self.inner.acts()
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        self.first_call
            .lock()
            .unwrap()
            .push((request.agent.id.clone(), Instant::now()));
        self.inner.complete(request).await
    }
}

fn rss_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn spec(run: &RunId, workspace: &std::path::Path, provider: Arc<dyn Provider>) -> AgentSpec {
    AgentSpec {
        id: AgentId::new(),
        run_id: run.clone(),
        parent: None,
        name: "bench".into(),
        role: "executor".into(),
        task: "say done".into(),
        system_prompt: "bench agent".into(),
        perms: Permissions::root(CapSet::read_only()),
        workspace: workspace.to_path_buf(),
        quotas: Quotas::default(),
        provider,
        prices: None,
        network: false,
        mcp: Vec::new(),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn insert_run(store: &Store) -> RunId {
    let run = crewbox::unstable::store::RunRecord::started(
        crewbox::Mode::Single,
        "bench",
        serde_json::json!({}),
    );
    store.insert_run(&run).await.unwrap();
    run.id
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    let tools = Arc::new(ToolRegistry::builtin());
    let script = "[[reply]]\nrepeat = true\ntext = \"done\"\n";

    // Throughput: everything at once.
    let provider: Arc<dyn Provider> = Arc::new(ScriptedProvider::parse(script, "bench").unwrap());
    let manager = Manager::new(store.clone(), tools.clone(), 4);
    let run = insert_run(&store).await;
    let start = Instant::now();
    let mut handles = Vec::with_capacity(AGENTS);
    for _ in 0..AGENTS {
        handles.push(
            manager
                .spawn(
                    spec(&run, dir.path(), provider.clone()),
                    SpawnOptions::default(),
                )
                .await
                .unwrap(),
        );
    }
    for h in handles {
        assert!(h.wait().await.state.is_success());
    }
    let elapsed = start.elapsed();
    let agents_per_sec = AGENTS as f64 / elapsed.as_secs_f64();
    eprintln!(
        "throughput: {AGENTS} agents in {:.2} s",
        elapsed.as_secs_f64()
    );

    // Latency with a free slot: waves of 4.
    let timed = Arc::new(Timed {
        inner: ScriptedProvider::parse(script, "bench").unwrap(),
        first_call: Mutex::new(Vec::new()),
    });
    let manager = Manager::new(store.clone(), tools.clone(), 4);
    let run = insert_run(&store).await;
    let mut spawned = Vec::with_capacity(AGENTS);
    for _ in 0..AGENTS / 4 {
        let mut wave = Vec::new();
        for _ in 0..4 {
            let s = spec(&run, dir.path(), timed.clone());
            let t0 = Instant::now();
            let h = manager.spawn(s, SpawnOptions::default()).await.unwrap();
            spawned.push((h.id.to_string(), t0));
            wave.push(h);
        }
        for h in wave {
            h.wait().await;
        }
    }
    let firsts: std::collections::HashMap<String, Instant> =
        timed.first_call.lock().unwrap().drain(..).collect();
    let mut lat: Vec<f64> = spawned
        .iter()
        .map(|(id, t0)| (firsts[id] - *t0).as_secs_f64() * 1e3)
        .collect();
    lat.sort_by(f64::total_cmp);

    // Memory per queued agent: one slot held by a slow agent, 10,000 waiting.
    let slow: Arc<dyn Provider> = Arc::new(
        ScriptedProvider::parse("[[reply]]\nagent = \"blocker\"\ntext = \"x\"\ndelay_ms = 60000\n\n[[reply]]\nrepeat = true\ntext = \"done\"\n", "bench").unwrap(),
    );
    let manager = Manager::new(store.clone(), tools, 1);
    let run = insert_run(&store).await;
    let mut blocker = spec(&run, dir.path(), slow.clone());
    blocker.name = "blocker".into();
    let blocker = manager
        .spawn(blocker, SpawnOptions::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = rss_kb("VmRSS:");
    let mut queued = Vec::with_capacity(AGENTS);
    for _ in 0..AGENTS {
        queued.push(
            manager
                .spawn(
                    spec(&run, dir.path(), slow.clone()),
                    SpawnOptions::default(),
                )
                .await
                .unwrap(),
        );
    }
    // Their records committed (the writer has taken them in) and each agent's task
    // waiting for its slot, then measured.
    store.settled().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = rss_kb("VmRSS:");
    let queued_kb_per_agent = after.saturating_sub(before) as f64 / AGENTS as f64;
    manager.stop(blocker.id.as_str());
    blocker.wait().await;
    for h in queued {
        h.wait().await;
    }

    let figures = serde_json::json!({
        "agents": AGENTS,
        "agents_per_sec": (agents_per_sec * 10.0).round() / 10.0,
        "spawn_p50_ms": (percentile(&lat, 0.5) * 1000.0).round() / 1000.0,
        "spawn_p99_ms": (percentile(&lat, 0.99) * 1000.0).round() / 1000.0,
        "queued_kb_per_agent": (queued_kb_per_agent * 100.0).round() / 100.0,
        "peak_rss_kb": rss_kb("VmHWM:"),
        "targets": { "agents_per_sec": ">= 6000 (quiet machine)", "spawn_p50_ms": "<= 1", "spawn_p99_ms": "<= 5", "queued_kb_per_agent": "<= 20" },
    });
    println!("{figures}");
}

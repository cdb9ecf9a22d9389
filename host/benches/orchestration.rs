//! Orchestration benchmarks. The last output line is one JSON object of figures.
//!
//! - `batch_finalize_ms`: median time to collect (dedupe) and finalise (partition) a
//!   batch of 10,000 spawns, on one debouncer that serves every batch as a batcher's
//!   does (target ≤ 20 ms, and ≤ 2× the copy). Baseline in the same run: `batch_copy_ms`, a
//!   plain copy of the same spawns, so a slow machine shows in both.
//! - `tree_json_ms` / `tree_text_ms`: median time for `crewbox tree` over a stored run of
//!   50,000 agents (read from SQLite + build + render JSON or text; target ≤ 100 ms
//!   each). Baseline: `tree_read_ms`, the store read alone; `tree_json_read_ratio`
//!   (target ≤ 1.3) is what building the tree and writing its JSON add to the read.

// A test or bench that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use crewbox::types::AgentTree;
use crewbox::unstable::agent::AgentState;
use crewbox::unstable::batch::{DebounceConfig, Debouncer, GroupId, JoinMode, Spawn, SwarmId};
use crewbox::unstable::ids::{AgentId, RunId};
use crewbox::unstable::store::{AgentRecord, AgentStats, RunRecord, Store};
use crewbox::{Mode, RunStatus};

// The binary's renderings of the tree, as `crewbox tree` runs them.
#[allow(dead_code)]
#[path = "../src/cli/render/tree.rs"]
mod render;

const SPAWNS: usize = 10_000;
const RUNS: usize = 31;
/// Agents in the stored run for the tree figures.
const TREE_AGENTS: usize = 50_000;
/// Roots of that run; each has 7 children with 6 children each (1 + 7 + 42 = 50 per root).
const TREE_ROOTS: usize = 1_000;
const TREE_RUNS: usize = 7;

/// A realistic mix: pairs and larger groups, swarms, individuals and a few duplicates.
fn spawns() -> Vec<Spawn<u64>> {
    (0..SPAWNS)
        .map(|i| {
            let join = match i % 10 {
                0..=3 => JoinMode::Group(GroupId::new(format!("g{}", i / 8))),
                4..=5 => JoinMode::Swarm(SwarmId::new(format!("s{}", i / 20))),
                _ => JoinMode::Individual,
            };
            // Every 50th spawn repeats an earlier agent, so merges are exercised.
            let agent = if i % 50 == 49 { i - 7 } else { i };
            Spawn::new(
                AgentId::from_string(format!("a-{agent:08}")),
                join,
                i as u64,
            )
        })
        .collect()
}

fn agent(run: &RunId, i: usize, parent: Option<&AgentId>, join: Option<String>) -> AgentRecord {
    AgentRecord {
        id: AgentId::from_string(format!("a-{i:08}")),
        run_id: run.clone(),
        parent: parent.cloned(),
        name: format!("agent-{i}"),
        role: ["planner", "executor", "worker"][i % 3].into(),
        task: "work on the task".into(),
        caps: vec!["read".into(), "write".into()],
        depth: 0,
        join,
        state: if i.is_multiple_of(17) {
            AgentState::Error
        } else {
            AgentState::Completed
        },
        stats: AgentStats::default(),
        result: Some("done".into()),
        error: None,
        created_at: i as i64,
        started_at: Some(i as i64),
        finished_at: Some(i as i64 + 5),
    }
}

/// Roots, children and grandchildren; every 4th root's children form a group and every
/// 3rd child's children a swarm. Parents come first, as they are created first.
fn tree_agents(run: &RunId) -> Vec<AgentRecord> {
    let mut out = Vec::with_capacity(TREE_AGENTS);
    for _ in 0..TREE_ROOTS {
        out.push(agent(run, out.len(), None, None));
    }
    let mut children = Vec::with_capacity(TREE_ROOTS * 7);
    for r in 0..TREE_ROOTS {
        let parent = out[r].id.clone();
        for _ in 0..7 {
            let join = r.is_multiple_of(4).then(|| format!("group:g-{r}"));
            children.push(out.len());
            out.push(agent(run, out.len(), Some(&parent), join));
        }
    }
    for c in children {
        let parent = out[c].id.clone();
        for _ in 0..6 {
            let join = c.is_multiple_of(3).then(|| format!("swarm:{run}-{c}"));
            out.push(agent(run, out.len(), Some(&parent), join));
        }
    }
    out
}

/// Stores a run of [`TREE_AGENTS`] agents, then times `crewbox tree`'s work on it.
fn tree_figures() -> anyhow::Result<serde_json::Value> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let dir = tempfile::tempdir()?;
    rt.block_on(async {
        let store = Store::open(dir.path())?;
        let run = RunRecord {
            id: RunId::new(),
            mode: Mode::Orchestrate,
            prompt: "a large run".into(),
            team: None,
            status: RunStatus::Completed,
            exit_reason: None,
            result: None,
            spec: serde_json::json!({}),
            pid: None,
            pid_identity: None,
            created_at: 0,
            finished_at: None,
            details: None,
        };
        store.insert_run(&run).await?;
        let agents = tree_agents(&run.id);
        assert_eq!(agents.len(), TREE_AGENTS);
        let setup = Instant::now();
        // Concurrent inserts let the writer group them into few transactions.
        for chunk in agents.chunks(5_000) {
            for r in futures::future::join_all(chunk.iter().map(|a| store.insert_agent(a))).await {
                r?;
            }
        }
        eprintln!(
            "stored {TREE_AGENTS} agents in {:.0} ms",
            setup.elapsed().as_secs_f64() * 1000.0
        );

        let (mut read, mut json, mut text) = (Vec::new(), Vec::new(), Vec::new());
        let (mut json_len, mut text_len) = (0, 0);
        for _ in 0..TREE_RUNS {
            let start = Instant::now();
            let stored = store.agent_nodes(&run.id).await?;
            read.push(start.elapsed());
            assert_eq!(stored.len(), TREE_AGENTS);
            // Freed before the next read, as each figure's tree is before the one
            // after it: every read starts from the same heap (kept alive, the read below
            // would take fresh pages the baseline did not).
            drop(stored);

            let start = Instant::now();
            let built = AgentTree::build(store.agent_nodes(&run.id).await?);
            json_len = black_box(built.to_json(run.id.as_str())).len();
            json.push(start.elapsed());
            // Dropped outside the timing, as the read's result is.
            drop(built);

            let start = Instant::now();
            let built = AgentTree::build(store.agent_nodes(&run.id).await?);
            assert_eq!(built.roots().count(), TREE_ROOTS);
            text_len = black_box(render::text(&built)).len();
            text.push(start.elapsed());
        }
        eprintln!("tree of {TREE_AGENTS} agents: json {json_len} bytes, text {text_len} bytes");
        let (read_ms, json_ms) = (median(read), median(json));
        Ok(serde_json::json!({
            "tree_agents": TREE_AGENTS,
            "tree_read_ms": round3(read_ms),
            "tree_json_ms": round3(json_ms),
            "tree_json_read_ratio": round3(json_ms / read_ms),
            "tree_json_read_ratio_target": 1.3,
            "tree_text_ms": round3(median(text)),
            "tree_target_ms": 100,
        }))
    })
}

fn round3(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

fn median(mut xs: Vec<Duration>) -> f64 {
    xs.sort();
    xs[xs.len() / 2].as_secs_f64() * 1_000.0
}

fn main() {
    let input = spawns();
    let now = tokio::time::Instant::now();

    let mut finalize = Vec::with_capacity(RUNS);
    let mut copy = Vec::with_capacity(RUNS);
    let mut agents = 0;
    // One debouncer for every batch, as a batcher keeps one for its life.
    let mut debouncer = Debouncer::new(DebounceConfig::default());
    for _ in 0..RUNS {
        let batch = input.clone();
        let start = Instant::now();
        for spawn in batch {
            debouncer.push(spawn, now);
        }
        let out = black_box(debouncer.finalize());
        finalize.push(start.elapsed());
        agents = out.len();

        let start = Instant::now();
        black_box(input.clone());
        copy.push(start.elapsed());
    }

    let batch_finalize_ms = median(finalize);
    let batch_copy_ms = median(copy);
    eprintln!(
        "finalise {SPAWNS} spawns ({agents} agents after merges): median {batch_finalize_ms:.3} ms over {RUNS} runs (copy baseline {batch_copy_ms:.3} ms)"
    );
    let tree = match tree_figures() {
        Ok(figures) => figures,
        Err(e) => {
            eprintln!("tree figures failed: {e:#}");
            std::process::exit(1);
        }
    };
    let mut figures = serde_json::json!({
        "batch_spawns": SPAWNS,
        "batch_agents": agents,
        "batch_finalize_ms": (batch_finalize_ms * 1000.0).round() / 1000.0,
        "batch_copy_ms": (batch_copy_ms * 1000.0).round() / 1000.0,
        "batch_finalize_target_ms": 20,
        "batch_finalize_copy_ratio": ((batch_finalize_ms / batch_copy_ms) * 100.0).round() / 100.0,
        "batch_finalize_copy_ratio_target": "<= 2",
    });
    if let (Some(all), serde_json::Value::Object(tree)) = (figures.as_object_mut(), tree) {
        all.extend(tree);
    }
    println!("{figures}");
}

//! Orchestration benchmarks. The last output line is one JSON object of figures.
//!
//! - `batch_finalize_ms`: median time to finalise (dedupe + partition) a batch of
//!   10,000 spawns (target ≤ 20 ms). Baseline in the same run: `batch_copy_ms`, a
//!   plain copy of the same spawns, so a slow machine shows in both.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crewbox::batch::{DebounceConfig, Debouncer, GroupId, JoinMode, Spawn, SwarmId};
use crewbox::ids::AgentId;

const SPAWNS: usize = 10_000;
const RUNS: usize = 31;

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
    for _ in 0..RUNS {
        let batch = input.clone();
        let start = Instant::now();
        let mut debouncer = Debouncer::new(DebounceConfig::default());
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
    // Tree figures (crewbox tree over a large run) are added here by the observe work.
    let figures = serde_json::json!({
        "batch_spawns": SPAWNS,
        "batch_agents": agents,
        "batch_finalize_ms": (batch_finalize_ms * 1000.0).round() / 1000.0,
        "batch_copy_ms": (batch_copy_ms * 1000.0).round() / 1000.0,
        "batch_finalize_target_ms": 20,
    });
    println!("{figures}");
}

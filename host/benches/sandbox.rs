//! The cost of the process sandbox: `run_command` of `true` through the tool registry,
//! sandboxed (the real `crewbox` binary as the helper: namespaces, the view, Landlock,
//! limits) and unsandboxed (`sandbox = "off"`: `sh -c true` directly), alternating in
//! one run so both see the same machine; then again with every core kept busy by a
//! spinning thread (`loaded_*`). Last line: one JSON object.
//!
//! Targets: overhead p50 ≤ 2 ms, quiet and loaded; p99 ≤ 20 ms.

// A bench that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Instant;

use crewbox::unstable::agent::permissions::CapSet;
use crewbox::unstable::ids::AgentId;
use crewbox::unstable::sandbox::layout::HostPaths;
use crewbox::unstable::sandbox::{
    AgentScope, Helper, Sandbox, SandboxConfig, SandboxMode, SandboxOptions,
};
use crewbox::unstable::tool::{ToolContext, ToolRegistry};
use serde_json::json;

const WARMUP: usize = 20;
/// Pairs measured (`CREWBOX_BENCH_RUNS` overrides).
const RUNS: usize = 300;

fn context(state: &std::path::Path, workspace: &std::path::Path, mode: SandboxMode) -> ToolContext {
    let sandbox = Sandbox::new(SandboxOptions {
        config: SandboxConfig {
            mode,
            ..Default::default()
        },
        helper: Helper::Path(PathBuf::from(env!("CARGO_BIN_EXE_crewbox"))),
        paths: HostPaths::from_env(state, None),
        key_vars: Vec::new(),
        user_config: None,
    })
    .expect("sandbox");
    ToolContext {
        agent_id: AgentId::new(),
        root: workspace.to_path_buf(),
        spawner: None,
        sandbox: Some(sandbox.agent(AgentScope {
            id: format!("bench-{mode:?}"),
            workspace: Some(workspace.to_path_buf()),
            writable: true,
            network: false,
        })),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws").canonicalize().unwrap_or_else(|_| {
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        dir.path().join("ws").canonicalize().unwrap()
    });
    let state = dir.path().join("state");
    let on = context(&state, &workspace, SandboxMode::On);
    let off = context(&state, &workspace, SandboxMode::Off);
    let registry = ToolRegistry::builtin();
    let caps = CapSet::full();
    let call = |ctx: &ToolContext| {
        let (registry, caps) = (&registry, &caps);
        let ctx = ctx.clone();
        async move {
            let started = Instant::now();
            let out = registry
                .call("run_command", &ctx, json!({"command": "true"}), caps)
                .await
                .expect("run_command");
            assert_eq!(out.content, "[exit code 0]\n(no output)", "{}", out.content);
            started.elapsed().as_secs_f64() * 1000.0
        }
    };
    for _ in 0..WARMUP {
        call(&on).await;
        call(&off).await;
    }
    let runs = std::env::var("CREWBOX_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUNS);
    let measure = || async {
        let (mut sandboxed, mut unsandboxed) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            sandboxed.push(call(&on).await);
            unsandboxed.push(call(&off).await);
        }
        // The overhead of each pair (same moment, same load), then its distribution.
        let mut overhead: Vec<f64> = sandboxed
            .iter()
            .zip(&unsandboxed)
            .map(|(s, u)| s - u)
            .collect();
        for v in [&mut sandboxed, &mut unsandboxed, &mut overhead] {
            v.sort_by(f64::total_cmp);
        }
        json!({
            "sandboxed_p50_ms": ms(percentile(&sandboxed, 0.5)),
            "sandboxed_p99_ms": ms(percentile(&sandboxed, 0.99)),
            "unsandboxed_p50_ms": ms(percentile(&unsandboxed, 0.5)),
            "unsandboxed_p99_ms": ms(percentile(&unsandboxed, 0.99)),
            "overhead_p50_ms": ms(percentile(&sandboxed, 0.5) - percentile(&unsandboxed, 0.5)),
            "overhead_p99_ms": ms(percentile(&sandboxed, 0.99) - percentile(&unsandboxed, 0.99)),
            "pair_overhead_p50_ms": ms(percentile(&overhead, 0.5)),
            "pair_overhead_p99_ms": ms(percentile(&overhead, 0.99)),
        })
    };
    let quiet = measure().await;
    // Loaded: one spinning thread per core, for the whole second measurement.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners: Vec<_> = (0..cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        })
        .collect();
    let loaded = measure().await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in spinners {
        s.join().unwrap();
    }
    let mut figures = json!({ "runs": runs, "load_threads": cores });
    for (prefix, set) in [("", quiet), ("loaded_", loaded)] {
        for (k, v) in set.as_object().unwrap() {
            figures[format!("{prefix}{k}")] = v.clone();
        }
    }
    figures["targets"] = json!({
        "overhead_p50_ms": "<= 2",
        "loaded_overhead_p50_ms": "<= 2",
        "overhead_p99_ms": "<= 20",
    });
    println!("{figures}");
}

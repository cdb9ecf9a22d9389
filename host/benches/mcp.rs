//! The cost of MCP in crewbox, against a baseline measured in the same run:
//!
//! - `call_overhead_p50_ms`: server-everything's `echo` over stdio through crewbox's
//!   tool path (the agent's `AgentMcp`: name lookup, argument check, call timeout,
//!   rendering and redaction of the result; the server sandboxed) minus the same call
//!   by a bare `rmcp` client to an unsandboxed server-everything, calls alternating.
//!   The sandbox costs per server start, not per call. Target ≤ 0.5 ms.
//! - `startup_ms` / `startup_unsandboxed_ms`: a stdio server started (sandboxed / with
//!   `sandbox = "off"`) until its tools are listed, alternating. No target.
//! - `serve_status_p50_ms`: a `status` tool call round trip over stdio against
//!   `crewbox mcp serve` (the real binary). Target ≤ 2 ms.
//! - `serve_run_overhead_ms`: a scripted single-agent `run` with `wait: true` through
//!   `crewbox mcp serve` minus the same run through the library (`Repository` /
//!   `Engine`), alternating, medians. Target ≤ 5 ms.
//!
//! Needs the npm peers of `scripts/test-deps.sh` (`CREWBOX_TEST_NODE`); without them it
//! prints a note and the JSON with nulls. Last line: one JSON object.

// A bench that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use crewbox::unstable::agent::permissions::CapSet;
use crewbox::unstable::mcp::config::{McpFile, check};
use crewbox::unstable::mcp::{AgentMcp, Pool};
use crewbox::unstable::sandbox::layout::HostPaths;
use crewbox::unstable::sandbox::{Helper, Sandbox, SandboxConfig, SandboxMode, SandboxOptions};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

/// Calls measured per side (`CREWBOX_BENCH_RUNS` overrides).
const RUNS: usize = 200;
const WARMUP: usize = 20;
/// Server starts measured per side.
const STARTS: usize = 5;
/// Runs measured per side for `serve_run_overhead_ms`.
const RUN_PAIRS: usize = 10;
/// The scripted model of those runs: one agent that answers at once.
const SCRIPT: &str = "[[reply]]\nrepeat = true\ntext = \"done\"\n";

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn targets() -> Value {
    json!({ "call_overhead_p50_ms": "<= 0.5", "serve_status_p50_ms": "<= 2", "serve_run_overhead_ms": "<= 5" })
}

fn pool(state: &Path, node: &Path, everything: &Path, mode: SandboxMode) -> Pool {
    let sandbox = Sandbox::new(SandboxOptions {
        config: SandboxConfig {
            mode,
            read: vec![node.to_path_buf()],
            ..Default::default()
        },
        helper: Helper::Path(PathBuf::from(env!("CARGO_BIN_EXE_crewbox"))),
        paths: HostPaths::from_env(state, None),
        key_vars: Vec::new(),
        user_config: None,
    })
    .expect("sandbox");
    let file: McpFile = toml::from_str(&format!(
        "[servers.everything]\ncommand = {}\nargs = [\"stdio\"]\nstartup_timeout_s = 60\n",
        toml::Value::String(everything.display().to_string())
    ))
    .expect("mcp config");
    Pool::new(Arc::new(check(&file).expect("mcp config")), sandbox)
}

fn agent(pool: &Pool, run: &str, ws: &Path) -> Arc<AgentMcp> {
    pool.for_agent(run, ws, &["everything".to_owned()], CapSet::full())
        .expect("granted")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let everything = std::env::var_os("CREWBOX_TEST_NODE")
        .map(|d| PathBuf::from(d).join("node_modules/.bin/mcp-server-everything"))
        .filter(|p| p.is_file());
    let Some(everything) = everything else {
        println!(
            "note: server-everything is not installed (source scripts/test-deps.sh); nothing measured"
        );
        println!(
            "{}",
            json!({
                "call_overhead_p50_ms": null, "startup_ms": null, "startup_unsandboxed_ms": null,
                "serve_status_p50_ms": null, "serve_run_overhead_ms": null, "targets": targets(),
            })
        );
        return;
    };
    let node = PathBuf::from(std::env::var_os("CREWBOX_TEST_NODE").unwrap());
    let runs = std::env::var("CREWBOX_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUNS);
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    let state = dir.path().join("state");
    let on = pool(&state, &node, &everything, SandboxMode::On);
    let off = pool(&state, &node, &everything, SandboxMode::Off);

    // Startup: a new run's server until its tools are listed; dropped after.
    let (mut started_on, mut started_off) = (Vec::new(), Vec::new());
    for i in 0..STARTS {
        for (p, out) in [(&on, &mut started_on), (&off, &mut started_off)] {
            let t = Instant::now();
            let a = agent(p, &format!("start-{i}"), &ws);
            assert!(!a.specs().await.is_empty(), "no tools listed");
            out.push(t.elapsed().as_secs_f64() * 1000.0);
            drop(a);
        }
    }

    // Calls: crewbox's path (sandboxed server) against a bare rmcp client.
    let crew = agent(&on, "calls", &ws);
    assert!(!crew.specs().await.is_empty());
    let mut child = tokio::process::Command::new(&everything)
        .arg("stdio")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let bare =
        ().serve((child.stdout.take().unwrap(), child.stdin.take().unwrap()))
            .await
            .expect("bare rmcp client");
    let args = json!({"message": "bench"});
    let crew_call = || {
        let (crew, args) = (&crew, args.clone());
        async move {
            let t = Instant::now();
            let out = crew
                .call("mcp__everything__echo", args)
                .await
                .expect("echo");
            assert!(out.contains("bench"), "{out}");
            t.elapsed().as_secs_f64() * 1000.0
        }
    };
    let bare_call = || {
        let (bare, args) = (&bare, args.clone());
        async move {
            let t = Instant::now();
            let params = CallToolRequestParams::new("echo")
                .with_arguments(args.as_object().unwrap().clone());
            let out = bare.call_tool(params).await.expect("echo");
            assert!(serde_json::to_string(&out).unwrap().contains("bench"));
            t.elapsed().as_secs_f64() * 1000.0
        }
    };
    for _ in 0..WARMUP {
        crew_call().await;
        bare_call().await;
    }
    let (mut through_crewbox, mut through_rmcp) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        through_crewbox.push(crew_call().await);
        through_rmcp.push(bare_call().await);
    }
    let _ = bare.cancel().await;
    drop(crew);

    // `crewbox mcp serve` over stdio: `status` round trips.
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(&repo)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@localhost",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "init",
    ]);
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let cfg = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "default_provider = \"replay\"\n\n[providers.replay]\nkind = \"scripted\"\nscript = {}\n",
            toml::Value::String(script.display().to_string())
        ),
    )
    .unwrap();
    let mut serve = tokio::process::Command::new(env!("CARGO_BIN_EXE_crewbox"))
        .args(["mcp", "serve"])
        .current_dir(&repo)
        .env("CREWBOX_STATE_DIR", dir.path().join("serve-state"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("HOME", dir.path().join("home"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let client =
        ().serve((serve.stdout.take().unwrap(), serve.stdin.take().unwrap()))
            .await
            .expect("crewbox mcp serve");
    let status = || async {
        let t = Instant::now();
        let out = client
            .call_tool(CallToolRequestParams::new("status"))
            .await
            .expect("status");
        assert_ne!(out.is_error, Some(true), "{out:?}");
        t.elapsed().as_secs_f64() * 1000.0
    };
    for _ in 0..WARMUP {
        status().await;
    }
    let mut statuses = Vec::new();
    for _ in 0..runs {
        statuses.push(status().await);
    }
    // A run with `wait: true` through MCP against the same run through the library
    // (another store of the same repository, so neither sees the other's runs).
    let repository = crewbox::Repository::open(Some(&repo), Some(&dir.path().join("lib-state")))
        .expect("repository");
    let engine = repository
        .engine(tokio_util::sync::CancellationToken::new())
        .await
        .expect("engine");
    let request = crewbox::RunRequest {
        prompt: "do it".into(),
        mode: Some(crewbox::ModeChoice::Mode(crewbox::Mode::Single)),
        script: Some(script.clone()),
        ..crewbox::RunRequest::default()
    };
    let through_mcp = || async {
        let t = Instant::now();
        let out = client
            .call_tool(
                CallToolRequestParams::new("run").with_arguments(
                    json!({"prompt": "do it", "mode": "single", "wait": true})
                        .as_object()
                        .unwrap()
                        .clone(),
                ),
            )
            .await
            .expect("run");
        assert_ne!(out.is_error, Some(true), "{out:?}");
        t.elapsed().as_secs_f64() * 1000.0
    };
    let through_lib = || async {
        let t = Instant::now();
        let report = engine.run(request.clone()).await.expect("run");
        assert_eq!(report.status, crewbox::RunStatus::Completed);
        t.elapsed().as_secs_f64() * 1000.0
    };
    through_mcp().await;
    through_lib().await;
    let (mut runs_mcp, mut runs_lib) = (Vec::new(), Vec::new());
    for _ in 0..RUN_PAIRS {
        runs_mcp.push(through_mcp().await);
        runs_lib.push(through_lib().await);
    }
    let _ = client.cancel().await;
    let (runs_mcp, runs_lib) = (sorted(runs_mcp), sorted(runs_lib));

    let overhead: Vec<f64> = through_crewbox
        .iter()
        .zip(&through_rmcp)
        .map(|(c, r)| c - r)
        .collect();
    let (through_crewbox, through_rmcp, overhead) = (
        sorted(through_crewbox),
        sorted(through_rmcp),
        sorted(overhead),
    );
    let (started_on, started_off, statuses) =
        (sorted(started_on), sorted(started_off), sorted(statuses));
    let figures = json!({
        "runs": runs,
        "starts": STARTS,
        "call_crewbox_p50_ms": ms(percentile(&through_crewbox, 0.5)),
        "call_rmcp_p50_ms": ms(percentile(&through_rmcp, 0.5)),
        "call_overhead_p50_ms": ms(percentile(&through_crewbox, 0.5) - percentile(&through_rmcp, 0.5)),
        "pair_call_overhead_p50_ms": ms(percentile(&overhead, 0.5)),
        "startup_ms": ms(percentile(&started_on, 0.5)),
        "startup_unsandboxed_ms": ms(percentile(&started_off, 0.5)),
        "serve_status_p50_ms": ms(percentile(&statuses, 0.5)),
        "serve_status_p99_ms": ms(percentile(&statuses, 0.99)),
        "serve_run_mcp_p50_ms": ms(percentile(&runs_mcp, 0.5)),
        "serve_run_library_p50_ms": ms(percentile(&runs_lib, 0.5)),
        "serve_run_overhead_ms": ms(percentile(&runs_mcp, 0.5) - percentile(&runs_lib, 0.5)),
        "targets": targets(),
    });
    println!(
        "call overhead p50 {} ms (target <= 0.5); startup {} ms sandboxed, {} ms unsandboxed; \
         serve status p50 {} ms (target <= 2); serve run overhead {} ms (target <= 5)",
        figures["call_overhead_p50_ms"],
        figures["startup_ms"],
        figures["startup_unsandboxed_ms"],
        figures["serve_status_p50_ms"],
        figures["serve_run_overhead_ms"]
    );
    println!("{figures}");
}

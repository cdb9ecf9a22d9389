//! Plugin runtime benchmark: uncached and cached load, and warm-call latency (fresh
//! instance per call) for a dispatcher and a validator, against the same logic native.
//! Last line: one JSON object of figures.

// A test or bench that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crewbox::unstable::plugin::*;

const CALLS: usize = 10_000;

fn guest(name: &str) -> Arc<[u8]> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/guests/dist")
        .join(format!("{name}.wasm"));
    std::fs::read(path).expect("guest wasm").into()
}

fn runtime(cache: &Path) -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(cache.to_owned()),
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

/// The echo-dispatcher's logic as a plain function: the native baseline.
fn native_decide(request: &DispatchRequest) -> DispatchDecision {
    let tasks: Vec<String> = request
        .prompt
        .lines()
        .filter_map(|l| l.strip_prefix("- "))
        .map(str::to_owned)
        .collect();
    let (mode, reason) = if tasks.len() >= 2 && request.available_modes.contains(&Mode::Swarm) {
        (Mode::Swarm, "echo-tasks")
    } else {
        (
            request
                .available_modes
                .first()
                .copied()
                .unwrap_or(Mode::Single),
            "echo-first-mode",
        )
    };
    DispatchDecision {
        mode,
        reason: reason.to_owned(),
        swarm_size: (mode == Mode::Swarm).then_some(tasks.len() as u32),
        signals: vec![Signal {
            name: "length".to_owned(),
            detail: request.prompt.len().to_string(),
        }],
        tasks,
    }
}

/// The trivial-validator's logic as a plain function.
fn native_validate(output: &AgentOutput, criteria: &[String]) -> Result<Verdict, String> {
    let mut results = Vec::new();
    for criterion in criteria {
        let passed = if criterion == "non-empty" {
            !output.reply.trim().is_empty()
        } else if let Some(needle) = criterion.strip_prefix("contains:") {
            output.reply.contains(needle)
        } else {
            return Err(format!("unknown criterion `{criterion}`"));
        };
        let detail = if passed { "ok" } else { "not met" }.to_owned();
        results.push(CriterionResult {
            criterion: criterion.clone(),
            passed,
            detail,
        });
    }
    let passed = results.iter().all(|r| r.passed);
    Ok(Verdict {
        passed,
        results,
        fix_prompt: None,
    })
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)].as_secs_f64() * 1e6
    };
    (at(0.50), at(0.99))
}

async fn time_calls<F: AsyncFnMut()>(mut f: F) -> Vec<Duration> {
    for _ in 0..200 {
        f().await;
    }
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let t = Instant::now();
        f().await;
        samples.push(t.elapsed());
    }
    samples
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(run());
}

async fn run() {
    let cache = tempfile::tempdir().expect("tempdir");
    let dispatcher_bytes = guest("echo-dispatcher");
    let validator_bytes = guest("trivial-validator");

    let t = Instant::now();
    let dispatcher = runtime(cache.path())
        .load(
            "echo",
            PluginSource::Builtin,
            dispatcher_bytes.clone(),
            Grants::none().log(),
            None,
        )
        .await
        .expect("load");
    let uncached_load_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(dispatcher.cache_outcome(), CacheOutcome::Stored);

    let fresh = runtime(cache.path());
    let t = Instant::now();
    let cached = fresh
        .load(
            "echo",
            PluginSource::Builtin,
            dispatcher_bytes.clone(),
            Grants::none().log(),
            None,
        )
        .await
        .expect("load");
    let cached_load_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(cached.cache_outcome(), CacheOutcome::Hit);

    let validator = fresh
        .load(
            "trivial",
            PluginSource::Builtin,
            validator_bytes,
            Grants::none(),
            None,
        )
        .await
        .expect("load");

    let request = DispatchRequest {
        prompt: "split this\n- parser\n- lexer\n- tests".into(),
        team: None,
        available_modes: vec![Mode::Single, Mode::Swarm, Mode::Crew],
    };
    let expected = native_decide(&request);
    assert_eq!(cached.decide(&request).await.expect("decide"), expected);
    let call = time_calls(async || {
        black_box(cached.decide(black_box(&request)).await.expect("decide"));
    })
    .await;
    let native = time_calls(async || {
        black_box(native_decide(black_box(&request)));
    })
    .await;

    let output = AgentOutput {
        agent_id: "a1".into(),
        role: "executor".into(),
        task: "t".into(),
        status: AgentStatus::Completed,
        reply: "Done: added the parser tests.".into(),
    };
    let criteria = vec!["non-empty".to_owned(), "contains:tests".to_owned()];
    let vcall = time_calls(async || {
        black_box(
            validator
                .validate(CallEnv::default(), black_box(&output), &criteria)
                .await
                .expect("validate")
                .expect("verdict"),
        );
    })
    .await;
    let vnative = time_calls(async || {
        black_box(native_validate(black_box(&output), &criteria).expect("verdict"));
    })
    .await;

    let (call_p50_us, call_p99_us) = percentiles(call);
    let (native_p50_us, native_p99_us) = percentiles(native);
    let (validator_call_p50_us, validator_call_p99_us) = percentiles(vcall);
    let (validator_native_p50_us, _) = percentiles(vnative);
    println!(
        "dispatcher call: p50 {call_p50_us:.1} us, p99 {call_p99_us:.1} us (native p50 {native_p50_us:.2} us)"
    );
    println!(
        "validator call: p50 {validator_call_p50_us:.1} us, p99 {validator_call_p99_us:.1} us (native p50 {validator_native_p50_us:.2} us)"
    );
    println!("load: uncached {uncached_load_ms:.1} ms, cached {cached_load_ms:.2} ms");
    let json = serde_json::json!({
        "calls": CALLS,
        "call_p50_us": call_p50_us,
        "call_p99_us": call_p99_us,
        "native_p50_us": native_p50_us,
        "native_p99_us": native_p99_us,
        "validator_call_p50_us": validator_call_p50_us,
        "validator_call_p99_us": validator_call_p99_us,
        "validator_native_p50_us": validator_native_p50_us,
        "cached_load_ms": cached_load_ms,
        "uncached_load_ms": uncached_load_ms,
    });
    println!("{json}");
}

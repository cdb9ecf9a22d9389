//! Plugin runtime benchmark: uncached and cached load, and warm-call latency (fresh
//! instance per call) for a dispatcher and a validator, against the same logic native;
//! and per plugin template the first load of its component the way a user meets it:
//! `first_load_cold_ms` (empty cache: compiled by the limited compiler child) and
//! `first_load_after_build_ms` (after `crewbox plugin build` — the real binary —
//! compiled it into the cache), target ≤ 1000 ms. The Python and JavaScript templates
//! are scaffolded and built with the toolchains `scripts/test-deps.sh` installs
//! (skipped, with a line saying so, when missing); the Rust one stands in with the
//! committed Rust guest `trivial-validator` and `crewbox plugin check FILE` (the same
//! compile into the cache) because its `wasm32-wasip2` build is not always available.
//! Last line: one JSON object of figures.

// A test or bench that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crewbox::unstable::plugin::scaffold::Lang;
use crewbox::unstable::plugin::*;

const CALLS: usize = 10_000;
/// The most a user should wait the first time a plugin loads after `plugin build`.
const FIRST_LOAD_TARGET_MS: u64 = 1000;

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

/// A runtime as a run has it: the disk cache at `cache`, untrusted components compiled
/// by the crewbox binary's limited compiler child.
fn child_runtime(cache: &Path) -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(cache.to_owned()),
        compiler: Compiler::Child(PathBuf::from(env!("CARGO_BIN_EXE_crewbox"))),
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

/// `crewbox ARGS` in `dir` with the plugin cache in `cache` and `PATH` led by `tools`.
fn crewbox(args: &[&str], dir: &Path, cache: &Path, tools: Option<&Path>) -> String {
    let mut paths: Vec<PathBuf> = tools.map(Path::to_owned).into_iter().collect();
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let out = Command::new(env!("CARGO_BIN_EXE_crewbox"))
        .args(args)
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).unwrap())
        .env("XDG_CACHE_HOME", cache)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("HOME", dir)
        .output()
        .expect("crewbox");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "crewbox {args:?}: {said}");
    said
}

/// Where the pinned toolchain for `lang` is: the test peers `scripts/test-deps.sh`
/// installs (`CREWBOX_TEST_VENV`, `CREWBOX_TEST_NODE`, else under `target/`).
fn toolchain(lang: Lang) -> Option<PathBuf> {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    let from = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| target.join(default))
    };
    let dir = match lang {
        Lang::Python => from("CREWBOX_TEST_VENV", "test-venv").join("bin"),
        Lang::Js => from("CREWBOX_TEST_NODE", "test-node").join("node_modules/.bin"),
        Lang::Rust => return None,
    };
    let tool = if lang == Lang::Python {
        "componentize-py"
    } else {
        "jco"
    };
    dir.join(tool).is_file().then_some(dir)
}

/// Loads `bytes` as a validator with a fresh runtime over `cache`, timed.
async fn timed_load(cache: &Path, bytes: &Arc<[u8]>) -> (f64, CacheOutcome) {
    let rt = child_runtime(cache);
    let t = Instant::now();
    let plugin = rt
        .load(
            "template",
            PluginSource::File(PathBuf::from("template.wasm")),
            bytes.clone(),
            Grants::defaults_for(PluginKind::Validator),
            None,
        )
        .await
        .expect("load");
    (t.elapsed().as_secs_f64() * 1e3, plugin.cache_outcome())
}

/// The first-load figures of one template, or `None` (said on stderr) when its
/// toolchain is missing.
async fn first_load(lang: Lang) -> Option<serde_json::Value> {
    let work = tempfile::tempdir().expect("tempdir");
    let after_build = tempfile::tempdir().expect("tempdir");
    let name = lang.as_str();
    let started = Instant::now();
    let (wasm, made_by) = if lang == Lang::Rust {
        let wasm = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/guests/dist/trivial-validator.wasm");
        let wasm = wasm.canonicalize().expect("guest");
        let said = crewbox(
            &["plugin", "check", wasm.to_str().unwrap()],
            work.path(),
            after_build.path(),
            None,
        );
        assert!(said.contains("compiled into the plugin cache"), "{said}");
        (
            wasm,
            "stand-in tests/guests/dist/trivial-validator.wasm, `plugin check`",
        )
    } else {
        let Some(tools) = toolchain(lang) else {
            eprintln!(
                "SKIPPED: the {name} template (its toolchain is not installed: scripts/test-deps.sh)"
            );
            return None;
        };
        let project = format!("tpl-{name}");
        crewbox(
            &[
                "plugin",
                "new",
                &project,
                "--kind",
                "validator",
                "--lang",
                name,
            ],
            work.path(),
            after_build.path(),
            Some(&tools),
        );
        let root = work.path().join(&project);
        let said = crewbox(
            &["plugin", "build"],
            &root,
            after_build.path(),
            Some(&tools),
        );
        assert!(said.contains("compiled into the plugin cache"), "{said}");
        (
            root.join(format!("{project}.wasm")),
            "the template, `plugin build`",
        )
    };
    let build_s = started.elapsed().as_secs_f64();
    let bytes: Arc<[u8]> = std::fs::read(&wasm).expect("component").into();

    let cold = tempfile::tempdir().expect("tempdir");
    let (cold_ms, outcome) = timed_load(cold.path(), &bytes).await;
    assert_eq!(outcome, CacheOutcome::Stored);
    // The CLI's cache is `$XDG_CACHE_HOME/crewbox/plugins`.
    let built_into = after_build.path().join("crewbox/plugins");
    let (after_build_ms, outcome) = timed_load(&built_into, &bytes).await;
    assert_eq!(
        outcome,
        CacheOutcome::Hit,
        "`plugin build` left its artifact"
    );
    let mb = bytes.len() as f64 / (1 << 20) as f64;
    println!(
        "{name} template ({mb:.1} MB; {made_by}, {build_s:.1} s): first load cold {cold_ms:.0} ms, \
         after build {after_build_ms:.1} ms (target ≤ {FIRST_LOAD_TARGET_MS} ms)"
    );
    Some(serde_json::json!({
        "component_bytes": bytes.len(),
        "made_by": made_by,
        "first_load_cold_ms": (cold_ms * 10.0).round() / 10.0,
        "first_load_after_build_ms": (after_build_ms * 100.0).round() / 100.0,
    }))
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
    let mut templates = serde_json::Map::new();
    for lang in [Lang::Rust, Lang::Python, Lang::Js] {
        let figures = first_load(lang).await;
        templates.insert(
            lang.as_str().to_owned(),
            figures.unwrap_or(serde_json::Value::Null),
        );
    }
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
        "first_load": templates,
        "first_load_target_ms": FIRST_LOAD_TARGET_MS,
    });
    println!("{json}");
}

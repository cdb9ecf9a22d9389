//! Limits that hold per plugin, not per piece of one: memory summed over every memory a
//! component instantiates, counts of memories, tables and core instances, the total size
//! of one answer, compile size and time. Hostile components are generated in the
//! component text format ([`crate::support::wat`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crewbox::unstable::plugin::{
    AgentOutput, AgentStatus, CallEnv, CompileLimits, CompileRefusal, Compiler, Grants, Limits,
    Plugin, PluginError, PluginFault, PluginKind, PluginRuntime, PluginSource, RuntimeConfig,
    Verdict,
};

use crate::support::wat::Validator;

fn runtime(max_instances: u32) -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: None,
        max_instances,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(20),
        ..Limits::for_kind(PluginKind::Validator)
    }
}

async fn load(
    rt: &PluginRuntime,
    name: &str,
    bytes: Vec<u8>,
    limits: Limits,
) -> Result<Plugin, PluginError> {
    rt.load(
        name,
        PluginSource::File(format!("{name}.wasm").into()),
        Arc::from(bytes),
        Grants::defaults_for(PluginKind::Validator),
        Some(limits),
    )
    .await
}

fn output() -> AgentOutput {
    AgentOutput {
        agent_id: "a1".into(),
        role: "executor".into(),
        task: "t".into(),
        status: AgentStatus::Completed,
        reply: "done".into(),
    }
}

async fn validate(p: &Plugin) -> Result<Verdict, PluginFault> {
    p.validate(CallEnv::default(), &output(), &[])
        .await
        .map(|a| a.expect("judged"))
}

/// The fault of a call that must fault (never printing a possibly huge answer).
async fn fault(p: &Plugin) -> PluginFault {
    match validate(p).await {
        Ok(v) => panic!(
            "{} answered a verdict of {} results",
            p.name(),
            v.results.len()
        ),
        Err(f) => f,
    }
}

#[tokio::test]
async fn a_generated_validator_answers() {
    let rt = runtime(4);
    let v = Validator {
        results: 3,
        detail_bytes: 10,
        passed: true,
        results_pass: true,
        ..Validator::default()
    };
    let p = load(&rt, "wat", v.component(), limits()).await.unwrap();
    let verdict = validate(&p).await.unwrap();
    assert!(verdict.passed);
    assert_eq!(verdict.results.len(), 3);
    assert_eq!(verdict.results[2].detail, "x".repeat(10));
    assert_eq!(p.describe().await.unwrap().name, "wat-validator");
}

/// Regression: 120 criterion results all pointing at one 1 MiB guest buffer lifted into
/// 120 MiB on the host (and then into one fix prompt of that size), although each string
/// and the list were under their caps. The answer is capped in total while it is copied.
#[tokio::test]
async fn results_sharing_one_buffer_are_capped_in_total() {
    let rt = runtime(4);
    let flood = Validator {
        results: 120,
        detail_bytes: 1 << 20,
        passed: true,
        results_pass: true,
        ..Validator::default()
    };
    let p = load(&rt, "shared-buffer", flood.component(), limits())
        .await
        .unwrap();
    let cap = limits().max_answer_bytes;
    for _ in 0..2 {
        assert_eq!(
            fault(&p).await,
            PluginFault::TransferTooLarge {
                plugin: "shared-buffer".into(),
                limit: cap
            }
        );
    }
    // The same layout under the cap is an ordinary verdict.
    let small = Validator {
        results: 3,
        detail_bytes: 64 << 10,
        ..flood
    };
    let p = load(&rt, "shared-small", small.component(), limits())
        .await
        .unwrap();
    assert_eq!(validate(&p).await.unwrap().results.len(), 3);
}

/// Regression: the memory cap applied to each linear memory, so a component that
/// instantiated extra core modules, each with its own memory, went far past it (2.1 GB,
/// still answering). The cap is now the sum over every memory of the plugin.
#[tokio::test]
async fn memory_is_capped_per_plugin_not_per_memory() {
    let rt = runtime(4);
    let limits = Limits {
        memory_bytes: 64 << 20,
        ..limits()
    };
    // A second memory of 63 MiB: under 64 MiB alone, over it with the first (~1 MiB).
    let wide = Validator {
        extra_memories: 1,
        pages_each: 1008,
        results: 1,
        detail_bytes: 1,
        ..Validator::default()
    };
    let p = load(&rt, "wide", wide.component(), limits).await.unwrap();
    assert_eq!(
        fault(&p).await,
        PluginFault::MemoryLimit {
            plugin: "wide".into(),
            limit: 64 << 20
        }
    );
    // 60 MiB fits beside it.
    let fits = Validator {
        pages_each: 960,
        ..wide
    };
    let p = load(&rt, "fits", fits.component(), limits).await.unwrap();
    validate(&p).await.unwrap();
}

/// The built-in `no-secrets`, loaded as a run loads it.
async fn no_secrets(rt: &PluginRuntime) -> Plugin {
    let b = crewbox::unstable::plugin::builtin::builtin("no-secrets").unwrap();
    rt.load(
        b.name,
        PluginSource::Builtin,
        b.wasm().unwrap(),
        Grants::defaults_for(PluginKind::Validator),
        None,
    )
    .await
    .unwrap()
}

/// Regression: a component instantiating 127 core modules, each with its own memory,
/// took 127 of the pool's memory slots while it ran, so the built-in `no-secrets` could
/// not start beside it (in a daemon, every run). A plugin may now create only a few
/// memories, tables and core instances, and the pool holds that for every slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_with_many_memories_cannot_starve_the_pool() {
    let rt = runtime(4);
    let secrets = no_secrets(&rt).await;
    // Eight memories: the whole memory pool of a 4-slot runtime without per-plugin caps.
    let many = Validator {
        extra_memories: 7,
        pages_each: 1,
        spin: true,
        ..Validator::default()
    };
    let spin = Limits {
        deadline: Duration::from_secs(3),
        ..limits()
    };
    let hog = match load(&rt, "many", many.component(), spin).await {
        Err(e) => {
            let e = e.to_string();
            assert!(
                e.contains("many") && e.contains("8 Wasm linear memories"),
                "{e}"
            );
            None
        }
        Ok(p) => Some(tokio::spawn(async move { validate(&p).await })),
    };
    // Whatever the hostile plugin holds, the built-in still starts and judges.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for _ in 0..3 {
        let v = validate(&secrets).await.expect("no-secrets must still run");
        assert!(v.passed, "{v:?}");
    }
    if let Some(hog) = hog {
        let _ = hog.await;
        panic!("a component with 8 memories loaded");
    }
    // And the count that did it: 127 extra core instances.
    let huge = Validator {
        extra_memories: 127,
        pages_each: 256,
        ..Validator::default()
    };
    let e = load(&rt, "huge", huge.component(), limits())
        .await
        .err()
        .expect("refused");
    assert!(e.to_string().contains("128 core module instances"), "{e}");
}
/// A runtime that compiles untrusted components the way the CLI does: in a child
/// process (the crewbox binary) under `limits`, caching compiled code and refusals in
/// `cache`.
fn child_runtime(cache: &std::path::Path, limits: CompileLimits) -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(cache.to_owned()),
        max_instances: 2,
        compiler: Compiler::Child(env!("CARGO_BIN_EXE_crewbox").into()),
        compile_limits: limits,
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn refusal(e: PluginError) -> (CompileRefusal, bool) {
    match e {
        PluginError::Refused {
            refusal, cached, ..
        } => (refusal, cached),
        other => panic!("expected a compile refusal, got {other}"),
    }
}

/// Loads `bytes` and returns the compile refusal it must meet (and whether it was cached).
async fn refused(rt: &PluginRuntime, name: &str, bytes: &[u8]) -> (CompileRefusal, bool) {
    let e = load(rt, name, bytes.to_vec(), self::limits())
        .await
        .err()
        .expect("refused");
    refusal(e)
}

/// Regression: one function of nested blocks took a minute (and GBs) to compile, and as a
/// repository's dispatcher it cost that on every run. A function with more blocks than
/// any real toolchain emits is refused before compiling. Run under an address-space cap,
/// so a regression fails here instead of taking the machine.
#[test]
fn a_function_of_nested_blocks_is_refused_before_compiling() {
    if !crate::support::limited::in_child(
        "plugin_limits::a_function_of_nested_blocks_is_refused_before_compiling",
        6 << 30,
    ) {
        return;
    }
    let tokio = tokio::runtime::Runtime::new().unwrap();
    tokio.block_on(async {
        let rt = runtime(2);
        let bomb = Validator {
            nested_functions: 1,
            nesting: 100_000,
            ..Validator::default()
        };
        let started = Instant::now();
        let e = load(&rt, "nested", bomb.component(), limits())
            .await
            .err()
            .expect("refused");
        let elapsed = started.elapsed();
        let message = e.to_string();
        assert_eq!(
            refusal(e),
            (
                CompileRefusal::FunctionTooComplex {
                    index: 3,
                    blocks: 10_001,
                    limit: 10_000
                },
                false
            ),
            "{message}"
        );
        assert!(
            message.contains("`nested`") && message.contains("10001 blocks"),
            "{message}"
        );
        assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    });
}

/// A component within the scan's caps that still takes long to compile is compiled in a
/// child process, killed at the deadline, and the refusal is remembered: the next load
/// (the next run) refuses at once instead of compiling again.
#[tokio::test]
async fn compile_time_is_bounded_and_the_refusal_is_cached() {
    let cache = tempfile::tempdir().unwrap();
    let limits = CompileLimits {
        deadline: Duration::from_secs(2),
        ..CompileLimits::default()
    };
    // 40 functions of 9,000 blocks: each under the caps, together ~25 s of compiling.
    let slow = Validator {
        nested_functions: 40,
        nesting: 1000,
        nests: 9,
        ..Validator::default()
    }
    .component();
    let rt = child_runtime(cache.path(), limits);
    let started = Instant::now();
    let r = refused(&rt, "slow", &slow).await;
    let elapsed = started.elapsed();
    assert_eq!(r, (CompileRefusal::Deadline { secs: 2 }, false));
    assert!(
        elapsed < Duration::from_secs(8),
        "the child was not stopped at the deadline: {elapsed:?}"
    );
    // The next run (a fresh runtime on the same cache) refuses without compiling.
    let rt = child_runtime(cache.path(), limits);
    let started = Instant::now();
    let r = refused(&rt, "slow", &slow).await;
    assert_eq!(r, (CompileRefusal::Deadline { secs: 2 }, true));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    // Under other limits the refusal says nothing: it compiles again.
    let roomy = CompileLimits {
        deadline: Duration::from_secs(3),
        ..limits
    };
    let rt = child_runtime(cache.path(), roomy);
    let r = refused(&rt, "slow", &slow).await;
    assert_eq!(r, (CompileRefusal::Deadline { secs: 3 }, false));
    // An ordinary plugin compiles in the child and runs.
    let ok = Validator {
        results: 1,
        detail_bytes: 1,
        passed: true,
        results_pass: true,
        ..Validator::default()
    };
    let p = load(&rt, "ok", ok.component(), self::limits())
        .await
        .unwrap();
    assert!(validate(&p).await.unwrap().passed);
}

/// A deadline missed because the machine is busy says nothing about the component: it
/// is reported as such and not remembered, so the next load compiles again. (A refusal
/// cached under load once kept a real Python plugin refused until its entry was deleted.)
/// The compiler child is starved here for real: stopped (SIGSTOP) while it compiles.
#[tokio::test]
async fn a_compile_starved_of_cpu_is_not_remembered() {
    let cache = tempfile::tempdir().unwrap();
    let limits = CompileLimits {
        deadline: Duration::from_secs(2),
        ..CompileLimits::default()
    };
    // A memory setting no other test uses marks this test's compiler children.
    let memory: u64 = 40 << 20;
    let runtime = || {
        PluginRuntime::new(RuntimeConfig {
            cache_dir: Some(cache.path().to_owned()),
            max_instances: 2,
            max_memory_bytes: memory,
            compiler: Compiler::Child(env!("CARGO_BIN_EXE_crewbox").into()),
            compile_limits: limits,
            ..RuntimeConfig::default()
        })
        .unwrap()
    };
    let slow = Validator {
        nested_functions: 40,
        nesting: 1000,
        nests: 9,
        ..Validator::default()
    }
    .component();
    let stopper = std::thread::spawn(move || {
        let seen = crate::support::procs::wait_for(Duration::from_secs(5), || {
            compiler_child(memory).is_some()
        });
        seen && compiler_child(memory).is_some_and(|pid| {
            std::process::Command::new("kill")
                .args(["-STOP", &pid.to_string()])
                .status()
                .is_ok_and(|s| s.success())
        })
    });
    let rt = runtime();
    let started = Instant::now();
    let e = load(&rt, "slow", slow.clone(), self::limits())
        .await
        .err()
        .expect("a stopped compiler cannot finish");
    assert!(stopper.join().unwrap(), "the compiler child was never seen");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let message = e.to_string();
    assert!(
        matches!(e, PluginError::Task { .. }) && message.contains("machine is busy"),
        "{message}"
    );
    // The next run compiles it again (and, not stopped, meets the deadline as the
    // component's own fault — freshly, not from the cache).
    let rt = runtime();
    match load(&rt, "slow", slow, self::limits()).await {
        Err(PluginError::Refused {
            refusal, cached, ..
        }) => {
            assert_eq!(
                (refusal, cached),
                (CompileRefusal::Deadline { secs: 2 }, false)
            );
        }
        Err(PluginError::Task { reason, .. }) => assert!(reason.contains("busy"), "{reason}"),
        other => panic!(
            "expected a fresh compile: {:?}",
            other.err().map(|e| e.to_string())
        ),
    }
}

/// A compiler child whose memory argument is `memory` (only this test uses that value).
fn compiler_child(memory: u64) -> Option<u32> {
    let memory = memory.to_string();
    crate::support::procs::marked("__crewbox-compile-plugin")
        .into_iter()
        .find(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline.split(|b| *b == 0).any(|a| a == memory.as_bytes())
        })
}

/// The compiler child runs under a memory limit: a compile that needs more is refused
/// (and remembered), while ordinary plugins compile under the same limit.
#[tokio::test]
async fn compile_memory_is_bounded_in_the_child() {
    let cache = tempfile::tempdir().unwrap();
    let limits = CompileLimits {
        max_memory_bytes: 24 << 20,
        ..CompileLimits::default()
    };
    let rt = child_runtime(cache.path(), limits);
    let hungry = Validator {
        nested_functions: 8,
        nesting: 1000,
        nests: 9,
        ..Validator::default()
    }
    .component();
    let r = refused(&rt, "hungry", &hungry).await;
    assert_eq!(r, (CompileRefusal::Memory { limit: 24 << 20 }, false));
    let r = refused(&rt, "hungry", &hungry).await;
    assert!(r.1, "the second refusal comes from the cache");
    let trivial = crate::guest_wasm!("trivial-validator.wasm").to_vec();
    load(&rt, "trivial", trivial, self::limits()).await.unwrap();
}

/// A component larger than the cap is refused before anything reads its contents.
#[tokio::test]
async fn an_oversized_component_is_refused() {
    let cache = tempfile::tempdir().unwrap();
    let limits = CompileLimits {
        max_component_bytes: 64 << 10,
        ..CompileLimits::default()
    };
    let rt = child_runtime(cache.path(), limits);
    let big = Validator {
        results: 1,
        nested_functions: 30,
        nesting: 1000,
        ..Validator::default()
    }
    .component();
    let r = refused(&rt, "big", &big).await;
    assert_eq!(
        r,
        (
            CompileRefusal::ComponentTooLarge {
                size: big.len() as u64,
                limit: 64 << 10
            },
            false
        )
    );
}

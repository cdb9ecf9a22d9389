//! Hostile guests against the real plugin runtime: each one is contained with a clear,
//! typed error naming the plugin, and the same runtime keeps serving a healthy plugin
//! right after.
//!
//! The guests live in `tests/guests/hostile-*` and are committed prebuilt to
//! `tests/guests/dist/`; rebuild one with
//! `cargo build --profile plugin --target wasm32-wasip2 -p crewbox-guest-hostile-<what>`
//! and copy `<target>/wasm32-wasip2/plugin/crewbox_guest_hostile_<what>.wasm` there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crewbox::unstable::plugin::{
    AgentOutput, AgentStatus, CallEnv, Capability, DispatchRequest, Grants, Limits, Mode,
    ModelBudget, Plugin, PluginError, PluginFault, PluginKind, PluginRuntime, PluginSource, Rule,
    RuntimeConfig, Verdict, WorkspaceView,
};

const LOOP: &[u8] = crate::guest_wasm!("hostile-loop.wasm");
const MEMBOMB: &[u8] = crate::guest_wasm!("hostile-membomb.wasm");
const FSWRITE: &[u8] = crate::guest_wasm!("hostile-fswrite.wasm");
const ESCAPE: &[u8] = crate::guest_wasm!("hostile-escape.wasm");
const IMPORT: &[u8] = crate::guest_wasm!("hostile-import.wasm");
const BIGOUTPUT: &[u8] = crate::guest_wasm!("hostile-bigoutput.wasm");
const TRAP: &[u8] = crate::guest_wasm!("hostile-trap.wasm");
const TRIVIAL: &[u8] = crate::guest_wasm!("trivial-validator.wasm");

/// The resident-memory test takes this exclusively so no other test allocates meanwhile.
static RSS_GUARD: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Memory the runtime allows any plugin; large enough for the 64 MiB reply test.
const RUNTIME_MAX_MEMORY: u64 = 160 << 20;

fn runtime() -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: None,
        max_memory_bytes: RUNTIME_MAX_MEMORY,
        ..RuntimeConfig::default()
    })
    .expect("runtime")
}

/// Limits for guests that must finish: a generous deadline, so a loaded CI machine never
/// turns an ordinary call into a deadline fault.
fn validator_limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(20),
        ..Limits::for_kind(PluginKind::Validator)
    }
}

/// Limits for the spinning guest: it always runs into this short deadline.
fn spin_limits() -> Limits {
    Limits {
        deadline: Duration::from_millis(300),
        ..Limits::for_kind(PluginKind::Validator)
    }
}

async fn load(
    rt: &PluginRuntime,
    name: &str,
    bytes: &[u8],
    grants: Grants,
    limits: Limits,
) -> Plugin {
    rt.load(
        name,
        PluginSource::Builtin,
        Arc::from(bytes),
        grants,
        Some(limits),
    )
    .await
    .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

async fn load_err(rt: &PluginRuntime, name: &str, bytes: &[u8], grants: Grants) -> PluginError {
    match rt
        .load(name, PluginSource::Builtin, Arc::from(bytes), grants, None)
        .await
    {
        Ok(_) => panic!("{name} loaded but must be refused"),
        Err(e) => e,
    }
}

fn output(reply: &str) -> AgentOutput {
    AgentOutput {
        agent_id: "a1".into(),
        role: "executor".into(),
        task: "do the thing".into(),
        status: AgentStatus::Completed,
        reply: reply.into(),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A well-behaved validator on the same runtime: proves the host still serves calls.
struct Healthy(Plugin);

impl Healthy {
    async fn new(rt: &PluginRuntime) -> Self {
        Self(
            load(
                rt,
                "trivial",
                TRIVIAL,
                Grants::defaults_for(PluginKind::Validator),
                validator_limits(),
            )
            .await,
        )
    }

    async fn assert_serving(&self) {
        let verdict = self
            .0
            .validate(
                CallEnv::default(),
                &output("all done"),
                &strings(&["contains:done"]),
            )
            .await
            .expect("healthy plugin faulted")
            .expect("healthy plugin refused to judge");
        assert!(verdict.passed, "{verdict:?}");
    }
}

/// Runs a validator that must fault, checks the fault names the plugin, and returns it.
async fn validate_fault(plugin: &Plugin, env: CallEnv, criteria: &[&str]) -> PluginFault {
    let fault = match plugin.validate(env, &output("x"), &strings(criteria)).await {
        Ok(answer) => panic!("{} answered {answer:?} but must fault", plugin.name()),
        Err(fault) => fault,
    };
    assert_eq!(fault.plugin(), plugin.name());
    assert!(
        fault.to_string().contains(&format!("`{}`", plugin.name())),
        "message must name the plugin: {fault}"
    );
    fault
}

async fn verdict(plugin: &Plugin, env: CallEnv, criteria: &[String]) -> Verdict {
    plugin
        .validate(env, &output("x"), criteria)
        .await
        .unwrap_or_else(|f| panic!("{} faulted: {f}", plugin.name()))
        .unwrap_or_else(|e| panic!("{} refused to judge: {e}", plugin.name()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loop_hits_the_deadline() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let spinner = load(
        &rt,
        "hostile-loop",
        LOOP,
        Grants::defaults_for(PluginKind::Validator),
        spin_limits(),
    )
    .await;
    for _ in 0..2 {
        let started = Instant::now();
        let fault = validate_fault(&spinner, CallEnv::default(), &[]).await;
        assert_eq!(
            fault,
            PluginFault::Deadline {
                plugin: "hostile-loop".into(),
                ms: 300
            }
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "deadline took {:?}",
            started.elapsed()
        );
        healthy.assert_serving().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_plugin_does_not_stall_other_calls() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let limits = Limits {
        deadline: Duration::from_millis(1500),
        ..validator_limits()
    };
    let spinner = load(
        &rt,
        "hostile-loop",
        LOOP,
        Grants::defaults_for(PluginKind::Validator),
        limits,
    )
    .await;
    let spinning = tokio::spawn(async move {
        spinner
            .validate(CallEnv::default(), &output("x"), &[])
            .await
    });
    // Give the spinner time to start and occupy a worker.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    for _ in 0..20 {
        healthy.assert_serving().await;
    }
    assert!(
        !spinning.is_finished(),
        "20 healthy calls must finish while the spinner still runs"
    );
    assert!(started.elapsed() < Duration::from_millis(1400));
    let fault = spinning.await.unwrap().expect_err("spinner must fault");
    assert!(
        matches!(fault, PluginFault::Deadline { ms: 1500, .. }),
        "{fault}"
    );
}

/// On a single runtime thread, a spinning guest must yield to the executor at every epoch
/// tick; without that, nothing else could run until its deadline.
#[tokio::test(flavor = "current_thread")]
async fn a_spinning_plugin_yields_on_a_single_threaded_runtime() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let limits = Limits {
        deadline: Duration::from_secs(6),
        ..validator_limits()
    };
    let spinner = load(
        &rt,
        "hostile-loop",
        LOOP,
        Grants::defaults_for(PluginKind::Validator),
        limits,
    )
    .await;
    let spinning = tokio::spawn(async move {
        spinner
            .validate(CallEnv::default(), &output("x"), &[])
            .await
    });
    tokio::task::yield_now().await;
    let started = Instant::now();
    for _ in 0..20 {
        healthy.assert_serving().await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        !spinning.is_finished(),
        "the healthy calls must not wait for the spinner's deadline"
    );
    let fault = spinning.await.unwrap().expect_err("spinner must fault");
    assert!(
        matches!(fault, PluginFault::Deadline { ms: 6000, .. }),
        "{fault}"
    );
}

#[tokio::test]
async fn memory_bomb_hits_the_cap() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let limits = Limits {
        memory_bytes: 16 << 20,
        ..validator_limits()
    };
    let bomb = load(
        &rt,
        "hostile-membomb",
        MEMBOMB,
        Grants::defaults_for(PluginKind::Validator),
        limits,
    )
    .await;
    for _ in 0..2 {
        let fault = validate_fault(&bomb, CallEnv::default(), &[]).await;
        assert_eq!(
            fault,
            PluginFault::MemoryLimit {
                plugin: "hostile-membomb".into(),
                limit: 16 << 20
            }
        );
        healthy.assert_serving().await;
    }
}

#[tokio::test]
async fn traps_are_faults_not_verdicts() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let trapper = load(
        &rt,
        "hostile-trap",
        TRAP,
        Grants::defaults_for(PluginKind::Validator),
        validator_limits(),
    )
    .await;
    // Unbounded recursion runs off the bottom of Rust's shadow stack in linear memory
    // before the engine's own call-stack limit, hence an out-of-bounds access.
    let modes = [
        ("panic", "unreachable"),
        ("unreachable", "unreachable"),
        ("recurse", "out of bounds memory access"),
    ];
    for (mode, wasm_trap) in modes {
        let fault = validate_fault(&trapper, CallEnv::default(), &[mode]).await;
        let PluginFault::Trap { detail, .. } = &fault else {
            panic!("{mode}: expected a trap, got {fault}")
        };
        assert!(
            detail.contains(wasm_trap),
            "{mode}: trap detail should say `{wasm_trap}`: {detail}"
        );
        healthy.assert_serving().await;
    }
    // The same plugin still describes itself: a trap poisons one instance, not the plugin.
    assert_eq!(trapper.describe().await.unwrap().name, "hostile-trap");
}

#[tokio::test]
async fn wasi_write_without_a_filesystem_grant_does_not_load() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let err = load_err(
        &rt,
        "hostile-fswrite",
        FSWRITE,
        Grants::defaults_for(PluginKind::Validator),
    )
    .await;
    let PluginError::Denied { plugin, violations } = &err else {
        panic!("expected Denied, got {err}")
    };
    assert_eq!(plugin, "hostile-fswrite");
    let mut interfaces: Vec<&str> = violations.iter().map(|v| v.interface.as_str()).collect();
    interfaces.sort_unstable();
    assert_eq!(
        interfaces,
        ["wasi:filesystem/preopens", "wasi:filesystem/types"]
    );
    for v in violations {
        assert_eq!(
            v.rule,
            Rule::NeedsGrant {
                capability: Capability::ReadOnlyFs
            }
        );
    }
    let message = err.to_string();
    for needle in [
        "hostile-fswrite",
        "wasi:filesystem/preopens",
        "needs a read-only filesystem grant",
    ] {
        assert!(
            message.contains(needle),
            "message lacks `{needle}`: {message}"
        );
    }
    // `check` reports the same without loading.
    let checked = rt.check(
        "hostile-fswrite",
        FSWRITE,
        Some(PluginKind::Validator),
        &Grants::defaults_for(PluginKind::Validator),
    );
    assert_eq!(&checked, violations);
    healthy.assert_serving().await;
}

#[tokio::test]
async fn wasi_write_under_a_read_only_grant_fails_inside_the_guest() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("existing.txt"), "original\n").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let grants =
        Grants::defaults_for(PluginKind::Validator).wasi_read_only_dir(dir.path(), "/data");
    let writer = load(&rt, "hostile-fswrite", FSWRITE, grants, validator_limits()).await;
    let targets = strings(&[
        "/data/new.txt",
        "/data/existing.txt",
        "/data/sub/deep.txt",
        "/elsewhere.txt",
        "relative.txt",
    ]);
    let v = verdict(&writer, CallEnv::default(), &targets).await;
    assert_eq!(v.results.len(), targets.len());
    for r in &v.results {
        assert!(
            !r.passed,
            "write to {} succeeded: {}",
            r.criterion, r.detail
        );
        assert!(
            r.detail.starts_with("write failed:"),
            "{}: {}",
            r.criterion,
            r.detail
        );
    }
    assert!(!v.passed);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("existing.txt")).unwrap(),
        "original\n"
    );
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["existing.txt", "sub"]);
    assert_eq!(
        std::fs::read_dir(dir.path().join("sub")).unwrap().count(),
        0
    );
    healthy.assert_serving().await;
}

/// A workspace inside `base/ws` with a secret next to it in `base/outside`, reachable
/// only through `..`, an absolute path, or the symlinks the agent left in the workspace.
struct EscapeWorld {
    _base: tempfile::TempDir,
    view: WorkspaceView,
    secret_abs: String,
}

fn escape_world() -> EscapeWorld {
    let base = tempfile::tempdir().unwrap();
    let ws = base.path().join("ws");
    let outside = base.path().join("outside");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(ws.join("inside.txt"), "inside text").unwrap();
    std::fs::write(outside.join("secret.txt"), "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("escape-link")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), ws.join("leak.txt")).unwrap();
    std::os::unix::fs::symlink("../../outside/secret.txt", ws.join("sub/relative-leak.txt"))
        .unwrap();
    let secret_abs = outside.join("secret.txt").to_string_lossy().into_owned();
    EscapeWorld {
        _base: base,
        view: WorkspaceView {
            root: ws,
            ..WorkspaceView::default()
        },
        secret_abs,
    }
}

#[tokio::test]
async fn workspace_reads_outside_the_root_are_refused() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let world = escape_world();
    let escaper = load(
        &rt,
        "hostile-escape",
        ESCAPE,
        Grants::defaults_for(PluginKind::Validator),
        validator_limits(),
    )
    .await;
    let hostile = [
        "..",
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "/etc/passwd",
        world.secret_abs.as_str(),
        "escape-link",
        "escape-link/secret.txt",
        "leak.txt",
        "sub/relative-leak.txt",
    ];
    let mut criteria = strings(&hostile);
    criteria.push("inside.txt".into());
    let env = CallEnv {
        workspace: Some(world.view.clone()),
        model: None,
    };
    let v = verdict(&escaper, env, &criteria).await;
    assert_eq!(v.results.len(), criteria.len());
    for r in &v.results[..hostile.len()] {
        assert!(
            !r.passed,
            "escape through `{}` worked: {}",
            r.criterion, r.detail
        );
        assert!(
            !r.detail.contains("TOP-SECRET"),
            "secret leaked through `{}`",
            r.criterion
        );
        let (read, list) = r.detail.split_once(" list=").unwrap();
        assert!(
            read.starts_with("read=outside-workspace:"),
            "`{}`: {}",
            r.criterion,
            r.detail
        );
        assert!(
            list.starts_with("outside-workspace:"),
            "`{}`: {}",
            r.criterion,
            r.detail
        );
    }
    // The control: a file inside the root is readable, so the refusals above mean something.
    let control = v.results.last().unwrap();
    assert!(
        control.passed && control.detail.starts_with("read=ok:inside text"),
        "{control:?}"
    );
    healthy.assert_serving().await;
}

#[tokio::test]
async fn workspace_without_grant_does_not_load() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let err = load_err(&rt, "hostile-escape", ESCAPE, Grants::none().log()).await;
    let PluginError::Denied { violations, .. } = &err else {
        panic!("expected Denied, got {err}")
    };
    assert_eq!(violations.len(), 1, "{err}");
    assert_eq!(violations[0].interface, "crewbox:plugin/workspace");
    assert_eq!(
        violations[0].rule,
        Rule::NeedsGrant {
            capability: Capability::Workspace
        }
    );
    assert!(err.to_string().contains("validator `hostile-escape` imports `crewbox:plugin/workspace`, which needs a workspace grant"), "{err}");
}

#[tokio::test]
async fn dispatcher_importing_model_and_workspace_never_loads() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    // Even a config that grants everything cannot widen what a dispatcher may import.
    let generous = Grants::none().log().workspace().model(ModelBudget {
        tokens: 1000,
        time: Duration::from_secs(1),
    });
    for grants in [Grants::defaults_for(PluginKind::Dispatcher), generous] {
        let err = load_err(&rt, "hostile-import", IMPORT, grants).await;
        let PluginError::Denied { plugin, violations } = &err else {
            panic!("expected Denied, got {err}")
        };
        assert_eq!(plugin, "hostile-import");
        let mut found: Vec<(&str, &Rule)> = violations
            .iter()
            .map(|v| (v.interface.as_str(), &v.rule))
            .collect();
        found.sort_by_key(|(i, _)| *i);
        let never = Rule::NeverGranted {
            kind: PluginKind::Dispatcher,
        };
        assert_eq!(
            found,
            [
                ("crewbox:plugin/model", &never),
                ("crewbox:plugin/workspace", &never)
            ]
        );
        let message = err.to_string();
        for needle in [
            "dispatcher `hostile-import` imports `crewbox:plugin/model`, which dispatchers are never granted",
            "dispatcher `hostile-import` imports `crewbox:plugin/workspace`, which dispatchers are never granted",
        ] {
            assert!(
                message.contains(needle),
                "message lacks `{needle}`: {message}"
            );
        }
        healthy.assert_serving().await;
    }
}

#[tokio::test]
async fn oversized_output_is_a_fault() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let limits = Limits {
        memory_bytes: RUNTIME_MAX_MEMORY,
        deadline: Duration::from_secs(10),
        ..validator_limits()
    };
    let flood = async |limits| {
        load(
            &rt,
            "hostile-bigoutput",
            BIGOUTPUT,
            Grants::defaults_for(PluginKind::Validator),
            limits,
        )
        .await
    };
    // The whole answer is capped while it is copied out: a giant string never reaches
    // the per-string check.
    let roomy = Limits {
        max_answer_bytes: 128 << 20,
        ..limits
    };
    let capped = flood(limits).await;
    for criteria in [&[][..], &["fix-bytes=2097152"]] {
        let fault = validate_fault(&capped, CallEnv::default(), criteria).await;
        assert_eq!(
            fault,
            PluginFault::TransferTooLarge {
                plugin: "hostile-bigoutput".into(),
                limit: limits.max_answer_bytes
            }
        );
        healthy.assert_serving().await;
    }
    // With a larger answer budget, each string and each list still has its own cap.
    let flood = flood(roomy).await;
    let string_cap = limits.max_string_bytes;
    let list_cap = limits.max_list_items;
    let cases: [(&[&str], &str, u64, u64); 3] = [
        (&[], "detail", 64 << 20, string_cap),
        (&["results=5000"], "results", 5000, list_cap),
        (&["fix-bytes=2097152"], "fix prompt", 2 << 20, string_cap),
    ];
    for (criteria, what, size, limit) in cases {
        let fault = validate_fault(&flood, CallEnv::default(), criteria).await;
        assert_eq!(
            fault,
            PluginFault::OutputTooLarge {
                plugin: "hostile-bigoutput".into(),
                what,
                size,
                limit
            }
        );
        healthy.assert_serving().await;
    }
    // Just under the caps is an ordinary verdict.
    let v = verdict(
        &flood,
        CallEnv::default(),
        &strings(&["detail-bytes=1048576", "results=4096"]),
    )
    .await;
    assert_eq!(
        (v.results.len(), v.results[0].detail.len()),
        (4096, 1 << 20)
    );
}

/// The process's resident set, from `/proc/self/status`.
fn vm_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS line");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmRSS value");
    kib * 1024
}

#[tokio::test]
async fn ten_thousand_calls_keep_resident_memory_flat() {
    let _g = RSS_GUARD.write().await;
    let rt = runtime();
    let healthy = Healthy::new(&rt).await;
    let trapper = load(
        &rt,
        "hostile-trap",
        TRAP,
        Grants::defaults_for(PluginKind::Validator),
        validator_limits(),
    )
    .await;
    let criteria = strings(&["non-empty", "contains:done"]);
    let reply = output("all done");
    let call = async |i: usize| {
        let v = healthy
            .0
            .validate(CallEnv::default(), &reply, &criteria)
            .await
            .unwrap()
            .unwrap();
        assert!(v.passed, "call {i}: {v:?}");
        // A trap every 100 calls: poisoned instances must be released, not leaked.
        if i.is_multiple_of(100) {
            assert!(matches!(
                trapper.validate(CallEnv::default(), &reply, &[]).await,
                Err(PluginFault::Trap { .. })
            ));
        }
    };
    for i in 0..1_000 {
        call(i).await;
    }
    let before = vm_rss_bytes();
    let started = Instant::now();
    for i in 0..10_000 {
        call(i).await;
    }
    let elapsed = started.elapsed();
    let after = vm_rss_bytes();
    let growth = after.saturating_sub(before);
    eprintln!(
        "10000 calls (+100 traps) in {elapsed:?} ({:?}/call); VmRSS {} -> {} KiB (+{} KiB)",
        elapsed / 10_000,
        before / 1024,
        after / 1024,
        growth / 1024
    );
    assert!(
        growth < 20 << 20,
        "resident memory grew by {} KiB over 10,000 calls",
        growth / 1024
    );
}

#[tokio::test]
async fn a_validator_cannot_be_asked_to_decide() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let trapper = load(
        &rt,
        "hostile-trap",
        TRAP,
        Grants::defaults_for(PluginKind::Validator),
        validator_limits(),
    )
    .await;
    let request = DispatchRequest {
        prompt: "hi".into(),
        team: None,
        available_modes: vec![Mode::Single],
    };
    let fault = trapper
        .decide(&request)
        .await
        .expect_err("a validator cannot decide");
    assert_eq!(
        fault,
        PluginFault::WrongKind {
            plugin: "hostile-trap".into(),
            expected: PluginKind::Dispatcher,
            actual: PluginKind::Validator
        }
    );
}

/// Regression test for a runtime weakness found by this suite: `read-file` opened
/// whatever the path named, so a FIFO the agent left in its workspace blocked the read
/// (and a blocking-pool thread) until the call's deadline instead of being refused.
#[tokio::test]
async fn a_fifo_in_the_workspace_is_refused_not_waited_on() {
    let _g = RSS_GUARD.read().await;
    let rt = runtime();
    let world = escape_world();
    let fifo = world.view.root.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let limits = Limits {
        deadline: Duration::from_secs(2),
        ..validator_limits()
    };
    let escaper = load(
        &rt,
        "hostile-escape",
        ESCAPE,
        Grants::defaults_for(PluginKind::Validator),
        limits,
    )
    .await;
    let env = CallEnv {
        workspace: Some(world.view.clone()),
        model: None,
    };
    let started = Instant::now();
    let answer = escaper
        .validate(env, &output("x"), &strings(&["pipe"]))
        .await;
    let elapsed = started.elapsed();
    // Release a reader stuck on the FIFO, whatever the outcome, so no thread stays blocked.
    // (Non-blocking: with no reader the open fails at once instead of waiting.)
    {
        use std::os::unix::fs::OpenOptionsExt;
        drop(
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo),
        );
    }
    let v = answer
        .unwrap_or_else(|f| {
            panic!("reading a FIFO must be an fs-error, got a fault after {elapsed:?}: {f}")
        })
        .expect("the validator judged");
    let detail = &v.results[0].detail;
    assert!(
        detail.starts_with("read=io:") || detail.starts_with("read=not-text:"),
        "{detail}"
    );
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
}

//! The plugin runtime against real components: the test guests in `tests/guests/dist/`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use crewbox::unstable::plugin::*;

/// Every guest this file runs; a guest added to `tests/guests/` must be listed here.
const GUESTS: &[&str] = &[
    "echo-dispatcher",
    "trivial-validator",
    "ws-validator",
    "echo-role",
    "bad-import-dispatcher",
];

fn guest(name: &str) -> Arc<[u8]> {
    assert!(GUESTS.contains(&name), "unknown guest {name}");
    crate::support::guest_bytes(&format!("{name}.wasm"))
}

fn runtime(cache: &Path) -> PluginRuntime {
    PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(cache.to_owned()),
        ..RuntimeConfig::default()
    })
    .unwrap()
}

async fn load(rt: &PluginRuntime, name: &str, grants: Grants) -> Result<Plugin, PluginError> {
    rt.load(
        name,
        PluginSource::File(name.into()),
        guest(name),
        grants,
        None,
    )
    .await
}

fn output(reply: &str) -> AgentOutput {
    AgentOutput {
        agent_id: "a1".into(),
        role: "executor".into(),
        task: "t".into(),
        status: AgentStatus::Completed,
        reply: reply.into(),
    }
}

#[tokio::test]
async fn dispatcher_decides_and_kind_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let p = load(&rt, "echo-dispatcher", Grants::none().log())
        .await
        .unwrap();
    assert_eq!(p.kind(), PluginKind::Dispatcher);
    let req = DispatchRequest {
        prompt: "do these\n- one\n- two\n- three".into(),
        team: None,
        available_modes: vec![Mode::Single, Mode::Swarm],
    };
    let d = p.decide(&req).await.unwrap();
    assert_eq!(d.mode, Mode::Swarm);
    assert_eq!(d.swarm_size, Some(3));
    assert_eq!(d.tasks, ["one", "two", "three"]);
    // Printing to stdout is captured, not a fault.
    let req = DispatchRequest {
        prompt: "print:hello".into(),
        team: None,
        available_modes: vec![Mode::Crew],
    };
    assert_eq!(p.decide(&req).await.unwrap().mode, Mode::Crew);
    // Wrong-kind calls are refused with a clear fault.
    let err = p.describe().await.unwrap_err();
    assert!(
        matches!(
            err,
            PluginFault::WrongKind {
                expected: PluginKind::Validator,
                ..
            }
        ),
        "{err}"
    );

    for (name, kind) in [
        ("trivial-validator", PluginKind::Validator),
        ("echo-role", PluginKind::Role),
    ] {
        let info = rt.inspect(&guest(name)).unwrap();
        assert_eq!(info.kind, Some(kind), "{name}");
    }
}

#[tokio::test]
async fn validator_err_is_an_answer_not_a_fault() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let p = load(
        &rt,
        "trivial-validator",
        Grants::defaults_for(PluginKind::Validator),
    )
    .await
    .unwrap();
    assert_eq!(p.describe().await.unwrap().name, "trivial");
    let env = CallEnv::default;
    let v = p
        .validate(env(), &output("done: added tests"), &[])
        .await
        .unwrap()
        .unwrap();
    assert!(v.passed);
    let v = p
        .validate(env(), &output("done"), &["contains:tests".into()])
        .await
        .unwrap()
        .unwrap();
    assert!(!v.passed);
    assert!(v.fix_prompt.is_some());
    let e = p
        .validate(env(), &output("x"), &["frobnicate".into()])
        .await
        .unwrap()
        .unwrap_err();
    assert!(e.contains("frobnicate"), "{e}");
}

#[tokio::test]
async fn role_calls_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path());
    let p = load(&rt, "echo-role", Grants::defaults_for(PluginKind::Role))
        .await
        .unwrap();
    assert_eq!(p.role_spec().await.unwrap().access, Access::ReadOnly);
    let ctx = RoleContext {
        request: "req".into(),
        task: "task".into(),
        plan: None,
        diff: None,
        findings: vec![],
        revision: 1,
    };
    let ws = WorkspaceView {
        root: dir.path().into(),
        changed: vec![("a.rs".into(), ChangeKind::Added)],
        diff: String::new(),
    };
    let env = CallEnv {
        workspace: Some(ws),
        model: None,
    };
    assert_eq!(
        p.role_prompt(env.clone(), &ctx).await.unwrap(),
        "[r1] req: task (1 changed)"
    );
    assert_eq!(
        p.role_interpret(env, &ctx, "FAIL a; b").await.unwrap(),
        Outcome::Fail(vec!["a".into(), "b".into()])
    );
}

/// A model backend that answers every prompt and counts calls.
struct CountingModel(AtomicU32);

#[async_trait]
impl ModelAccess for CountingModel {
    async fn complete(
        &self,
        _s: Option<String>,
        prompt: String,
        _m: Option<u32>,
    ) -> Result<ModelReply, String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(ModelReply {
            text: format!("re:{prompt}"),
            input_tokens: 30,
            output_tokens: 10,
        })
    }
}

fn ws_grants() -> Grants {
    Grants::defaults_for(PluginKind::Validator).model(ModelBudget {
        tokens: 100,
        time: Duration::from_secs(5),
    })
}

#[tokio::test]
async fn workspace_reads_stay_inside_the_root() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/lib.rs"), "fn main() {}").unwrap();
    std::fs::write(dir.path().join("bin.dat"), [0xff, 0xfe, 0x00]).unwrap();
    std::fs::write(dir.path().join("big.txt"), "x".repeat(2 << 20)).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("escape"))
        .unwrap();
    std::os::unix::fs::symlink("src/lib.rs", dir.path().join("inside-link")).unwrap();

    let cache = tempfile::tempdir().unwrap();
    let rt = runtime(cache.path());
    let p = load(&rt, "ws-validator", ws_grants()).await.unwrap();
    let ws = WorkspaceView {
        root: dir.path().into(),
        changed: vec![("src/lib.rs".into(), ChangeKind::Modified)],
        diff: "--- a\n+++ b\n".into(),
    };
    let secret = outside.path().join("secret.txt").display().to_string();
    let criteria: Vec<String> = [
        "read:src/lib.rs",
        "read:inside-link",
        "read:../secret.txt",
        &format!("read:{secret}"),
        "read:escape",
        "read:missing.txt",
        "read:bin.dat",
        "read:big.txt",
        "list:src",
        "changed",
        "diff",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let env = CallEnv {
        workspace: Some(ws),
        model: None,
    };
    let v = p
        .validate(env, &output("ok"), &criteria)
        .await
        .unwrap()
        .unwrap();
    let details: Vec<&str> = v.results.iter().map(|r| r.detail.as_str()).collect();
    assert_eq!(details[0], "fn main() {}");
    // Links are never followed, even ones that stay inside (see plugin_workspace.rs).
    assert_eq!(details[1], "outside-workspace:inside-link");
    assert_eq!(details[2], "outside-workspace:../secret.txt");
    assert_eq!(details[3], format!("outside-workspace:{secret}"));
    assert_eq!(details[4], "outside-workspace:escape");
    assert_eq!(details[5], "not-found:missing.txt");
    assert_eq!(details[6], "not-text:bin.dat");
    assert_eq!(details[7], format!("too-large:{}", 1 << 20));
    assert_eq!(details[8], "lib.rs:file");
    assert_eq!(details[9], "src/lib.rs:modified");
    assert_eq!(details[10], "--- a\n+++ b\n");
}

#[tokio::test]
async fn model_budget_is_charged_per_call() {
    let cache = tempfile::tempdir().unwrap();
    let rt = runtime(cache.path());
    let p = load(&rt, "ws-validator", ws_grants()).await.unwrap();
    let model = Arc::new(CountingModel(AtomicU32::new(0)));
    let criteria: Vec<String> = ["model:a", "model:b", "model:c", "model:d"]
        .map(String::from)
        .to_vec();
    for _ in 0..2 {
        let env = CallEnv {
            workspace: None,
            model: Some(model.clone()),
        };
        let v = p
            .validate(env, &output("ok"), &criteria)
            .await
            .unwrap()
            .unwrap();
        let details: Vec<&str> = v.results.iter().map(|r| r.detail.as_str()).collect();
        // 100 tokens, 40 per call: two calls fit, the third takes the rest, the fourth is refused.
        assert_eq!(details[..3], ["re:a|30|10", "re:b|30|10", "re:c|30|10"]);
        assert!(details[3].starts_with("budget-exhausted:"), "{details:?}");
    }
    assert_eq!(model.0.load(Ordering::SeqCst), 6);
    // Without a model in the call env, the import answers `unavailable`.
    let v = p
        .validate(CallEnv::default(), &output("ok"), &criteria[..1])
        .await
        .unwrap()
        .unwrap();
    assert!(v.results[0].detail.starts_with("unavailable:"));
}

#[tokio::test]
async fn forbidden_imports_are_refused_with_interface_and_rule() {
    let cache = tempfile::tempdir().unwrap();
    let rt = runtime(cache.path());
    let Err(err) = load(
        &rt,
        "bad-import-dispatcher",
        Grants::none().log().workspace(),
    )
    .await
    else {
        panic!("a dispatcher importing workspace must not load");
    };
    let msg = err.to_string();
    assert!(
        msg.contains("dispatcher `bad-import-dispatcher` imports `crewbox:plugin/workspace`, which dispatchers are never granted"),
        "{msg}"
    );
    // A validator asking for a model without a model grant.
    let Err(err) = load(
        &rt,
        "ws-validator",
        Grants::defaults_for(PluginKind::Validator),
    )
    .await
    else {
        panic!("model import without a grant must not load");
    };
    assert!(
        err.to_string()
            .contains("imports `crewbox:plugin/model`, which needs a model grant"),
        "{err}"
    );
    // `check` reports every violation: log and workspace are not granted here either.
    let v = rt.check("ws", &guest("ws-validator"), None, &Grants::none());
    assert_eq!(v.len(), 3, "{v:?}");
    let v = rt.check(
        "ws",
        &guest("ws-validator"),
        Some(PluginKind::Dispatcher),
        &Grants::none().log(),
    );
    assert!(
        v.iter()
            .any(|v| matches!(v.rule, Rule::KindMismatch { .. })),
        "{v:?}"
    );
}

#[tokio::test]
async fn second_load_hits_the_disk_cache_and_corruption_recompiles() {
    let cache = tempfile::tempdir().unwrap();
    let first = load(&runtime(cache.path()), "trivial-validator", Grants::none())
        .await
        .unwrap();
    assert_eq!(first.cache_outcome(), CacheOutcome::Stored);
    let second = load(&runtime(cache.path()), "trivial-validator", Grants::none())
        .await
        .unwrap();
    assert_eq!(second.cache_outcome(), CacheOutcome::Hit);
    assert!(second.describe().await.is_ok());
    drop(second);
    // Replace (new inode), as another process would: entries are mapped, never rewritten in place.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"garbage").unwrap();
    }
    let third = load(&runtime(cache.path()), "trivial-validator", Grants::none())
        .await
        .unwrap();
    assert_eq!(third.cache_outcome(), CacheOutcome::Stored);
    assert!(third.describe().await.is_ok());
}

#[tokio::test]
async fn returned_sizes_are_capped() {
    let cache = tempfile::tempdir().unwrap();
    let rt = runtime(cache.path());
    let limits = Limits {
        max_list_items: 2,
        ..Limits::for_kind(PluginKind::Dispatcher)
    };
    let p = rt
        .load(
            "echo",
            PluginSource::Builtin,
            guest("echo-dispatcher"),
            Grants::none().log(),
            Some(limits),
        )
        .await
        .unwrap();
    let req = DispatchRequest {
        prompt: "- a\n- b\n- c".into(),
        team: None,
        available_modes: vec![Mode::Swarm],
    };
    let err = p.decide(&req).await.unwrap_err();
    assert!(
        matches!(
            err,
            PluginFault::OutputTooLarge {
                what: "tasks",
                size: 3,
                limit: 2,
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn every_builtin_loads_under_the_grants_crewbox_gives_it() {
    let cache = tempfile::tempdir().unwrap();
    let rt = runtime(cache.path());
    for b in &builtin::BUILTINS {
        let wasm = b.wasm().unwrap();
        // Kind defaults, plus the model for criteria-judge (and nothing else).
        let grants = crewbox::unstable::engine::grants_for(
            b.name,
            &PluginSource::Builtin,
            b.kind,
            &wasm,
            &[],
        );
        assert_eq!(
            grants.model_budget().is_some(),
            b.name == "criteria-judge",
            "{}",
            b.name
        );
        let p = rt
            .load(b.name, PluginSource::Builtin, wasm, grants, None)
            .await;
        let p = p.unwrap_or_else(|e| panic!("{}: {e}", b.name));
        assert_eq!(p.kind(), b.kind, "{}", b.name);
    }
    let heuristic = builtin::BUILTINS
        .iter()
        .find(|b| b.name == "heuristic")
        .expect("heuristic built-in");
    let p = rt
        .load(
            "heuristic",
            PluginSource::Builtin,
            heuristic.wasm().unwrap(),
            Grants::none().log(),
            None,
        )
        .await
        .unwrap();
    let req = DispatchRequest {
        prompt: "review src/lib.rs".into(),
        team: None,
        available_modes: vec![Mode::Single, Mode::Swarm, Mode::Crew],
    };
    let d = p.decide(&req).await.unwrap();
    assert!(!d.reason.is_empty());
}

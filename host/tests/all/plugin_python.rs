//! A validator written in Python (`tests/guests-py/validator/app.py`), built with
//! componentize-py against the same `wit/`, loaded and called by the real runtime.
//!
//! Needs `componentize-py` (installed by `scripts/test-deps.sh`; see
//! `tests/guests-py/README.md`); without it the test skips, or fails under `scripts/test`. The component
//! (~18 MB) is built into the target directory, keyed by a hash of its inputs, and the
//! runtime's compile cache lives there too, so only the first run pays for both.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crewbox::unstable::plugin::{
    AgentOutput, AgentStatus, CallEnv, ChangeKind, Grants, Limits, PluginKind, PluginRuntime,
    PluginSource, RuntimeConfig, WorkspaceView,
};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// Builds the Python validator (once per distinct input) and returns its bytes.
///
/// `--stub-wasi` replaces the WASI imports CPython would otherwise bring (sockets,
/// filesystem, …), which the runtime refuses; the interpreter is pre-initialised at build
/// time, so the validator does not need them at run time.
fn build_python_validator(tool: &Path) -> Vec<u8> {
    let root = repo_root();
    let app_dir = root.join("tests/guests-py/validator");
    let version = Command::new(tool)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "`{}` is not runnable ({e}); install it as tests/guests-py/README.md says",
                tool.display()
            )
        });
    let mut hash = Sha256::new();
    hash.update(&version.stdout);
    for input in [app_dir.join("app.py"), root.join("wit/plugin.wit")] {
        hash.update(std::fs::read(&input).unwrap_or_else(|e| panic!("{}: {e}", input.display())));
    }
    let digest = hash.finalize();
    let key: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("py-validator-{key}.wasm"));
    if !out.exists() {
        let started = Instant::now();
        let tmp = out.with_extension("wasm.partial");
        let status = Command::new(tool)
            .arg("-d")
            .arg(root.join("wit"))
            .args(["-w", "validator", "componentize", "--stub-wasi", "-p"])
            .arg(&app_dir)
            .arg("app")
            .arg("-o")
            .arg(&tmp)
            .current_dir(&app_dir)
            .status()
            .unwrap_or_else(|e| panic!("running {}: {e}", tool.display()));
        assert!(status.success(), "{} failed: {status}", tool.display());
        std::fs::rename(&tmp, &out).unwrap();
        eprintln!("built {} in {:?}", out.display(), started.elapsed());
    }
    std::fs::read(&out).unwrap()
}

fn output(reply: &str) -> AgentOutput {
    AgentOutput {
        agent_id: "py-1".into(),
        role: "executor".into(),
        task: "write the README".into(),
        status: AgentStatus::Completed,
        reply: reply.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_validator_judges_a_workspace() {
    let Some(tool) = crate::support::peers::tool("componentize-py") else {
        return;
    };
    let bytes: Arc<[u8]> = build_python_validator(&tool).into();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
    let rt = PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(cache),
        ..RuntimeConfig::default()
    })
    .unwrap();

    // componentize-py imports every interface of its world, used or not: the
    // `validator` world has no model, so the default grants load it.
    let defaults = Grants::defaults_for(PluginKind::Validator);
    let info = rt.inspect(&bytes).unwrap();
    assert!(
        !info
            .imports
            .iter()
            .any(|i| i.starts_with("crewbox:plugin/model")),
        "{:?}",
        info.imports
    );
    let grants = defaults;
    let limits = Limits {
        deadline: Duration::from_secs(10),
        ..Limits::for_kind(PluginKind::Validator)
    };
    let plugin = rt
        .load(
            "py-criteria",
            PluginSource::Builtin,
            bytes,
            grants,
            Some(limits),
        )
        .await
        .unwrap();
    assert_eq!(plugin.describe().await.unwrap().name, "py-criteria");

    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("README.md"), "# Demo\nUsage: run it.\n").unwrap();
    let view = WorkspaceView {
        root: ws.path().to_path_buf(),
        changed: vec![("README.md".into(), ChangeKind::Added)],
        diff: String::new(),
    };
    let env = CallEnv {
        workspace: Some(view),
        model: None,
    };
    let criteria: Vec<String> = [
        "reply-contains:README",
        "file-contains:README.md:Usage",
        "changed:README.md",
        "file-exists:../etc/passwd",
        "file-exists:missing.txt",
    ]
    .map(String::from)
    .to_vec();
    let started = Instant::now();
    let verdict = plugin
        .validate(env.clone(), &output("Wrote README.md"), &criteria)
        .await
        .unwrap()
        .unwrap();
    eprintln!("validate took {:?}", started.elapsed());
    let got: Vec<(bool, &str)> = verdict
        .results
        .iter()
        .map(|r| (r.passed, r.detail.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (true, "reply contains 'README'"),
            (true, "README.md contains 'Usage'"),
            (true, "README.md was changed"),
            (false, "outside-workspace:../etc/passwd"),
            (false, "not-found:missing.txt"),
        ]
    );
    assert!(!verdict.passed);
    let fix = verdict
        .fix_prompt
        .expect("a failed verdict carries a fix prompt");
    assert!(
        fix.contains("- file-exists:missing.txt: not-found:missing.txt"),
        "{fix}"
    );

    // An unknown criterion is the validator declining to judge, not a fault.
    let declined = plugin
        .validate(env, &output("x"), &["frobnicate".to_string()])
        .await
        .unwrap();
    assert_eq!(
        declined.unwrap_err(),
        "unknown criterion kind 'frobnicate' in 'frobnicate'"
    );
}

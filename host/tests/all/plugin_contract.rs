//! The WIT contract against its previous release: every component frozen in
//! `tests/contract/VERSION/` (built against that version of `crewbox:plugin`) still
//! loads, links and answers with the current host. A change to `wit/` that breaks a
//! plugin already built — a removed or retyped function, an interface the host stops
//! providing — fails here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crewbox::unstable::plugin::{
    AgentOutput, AgentStatus, CallEnv, DispatchRequest, Grants, Mode, ModelBudget, PluginKind,
    PluginRuntime, PluginSource, RoleContext, RuntimeConfig,
};

fn releases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/contract");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_component_of_the_previous_release_still_loads_and_answers() {
    let rt = PluginRuntime::new(RuntimeConfig {
        cache_dir: Some(crate::support::shared_cache_home().join("crewbox/plugins")),
        ..RuntimeConfig::default()
    })
    .unwrap();
    let mut seen = Vec::new();
    for release in releases() {
        for entry in std::fs::read_dir(&release).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "wasm") {
                continue;
            }
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let bytes: Arc<[u8]> = std::fs::read(&path).unwrap().into();
            let info = rt.inspect(&bytes).unwrap();
            let kind = info.kind.unwrap_or_else(|| panic!("{name}: no kind"));
            let mut grants = Grants::defaults_for(kind);
            if info
                .imports
                .iter()
                .any(|i| i.starts_with("crewbox:plugin/model@"))
            {
                grants = grants.model(ModelBudget {
                    tokens: 10,
                    time: Duration::from_secs(1),
                });
            }
            let violations = rt.check(&name, &bytes, Some(kind), &grants);
            assert!(violations.is_empty(), "{}: {violations:?}", path.display());
            let plugin = rt
                .load(&name, PluginSource::Builtin, bytes, grants, None)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // Each answers its world's first call: the exports still have their types.
            match kind {
                PluginKind::Dispatcher => {
                    let request = DispatchRequest {
                        prompt: "fix the bug".into(),
                        team: None,
                        available_modes: vec![Mode::Single],
                    };
                    plugin.decide(&request).await.unwrap();
                }
                PluginKind::Validator => {
                    let info = plugin.describe().await.unwrap();
                    assert!(!info.name.is_empty(), "{name}");
                    let output = AgentOutput {
                        agent_id: "a".into(),
                        role: "executor".into(),
                        task: "t".into(),
                        status: AgentStatus::Completed,
                        reply: "done".into(),
                    };
                    let env = CallEnv::default();
                    // An `err` answer is an answer; only a fault breaks the contract.
                    let _ = plugin.validate(env, &output, &[]).await.unwrap();
                }
                PluginKind::Role => {
                    plugin.role_spec().await.unwrap();
                    let context = RoleContext {
                        request: "r".into(),
                        task: "t".into(),
                        plan: None,
                        diff: None,
                        findings: Vec::new(),
                        revision: 0,
                    };
                    plugin
                        .role_prompt(CallEnv::default(), &context)
                        .await
                        .unwrap();
                }
            }
            seen.push(kind);
        }
    }
    for kind in [
        PluginKind::Dispatcher,
        PluginKind::Validator,
        PluginKind::Role,
    ] {
        assert!(seen.contains(&kind), "no frozen {kind} in tests/contract");
    }
}

//! The built-in `criteria-judge` validator, loaded the way a run loads it and judged by
//! a scripted model: only a well-formed, typed answer passes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crewbox::unstable::engine::PluginSet;
use crewbox::unstable::engine::ProviderModel;
use crewbox::unstable::plugin::{
    AgentOutput, AgentStatus, CallEnv, ChangeKind, ModelAccess, Plugin, PluginKind, PluginRuntime,
    RuntimeConfig, Verdict, WorkspaceView,
};
use crewbox::unstable::provider::{AgentLabel, ScriptedProvider};

/// One reply per call, in order; the first only answers if the prompt carries the
/// changed path, the diff and the numbered criterion.
const SCRIPT: &str = r#"
[[reply]]
when = '(?s)added src/greet\.rs.*\+pub fn greet.*1\. greet\(\) exists'
text = '''Sure.
```json
{"results": [{"criterion": "greet() exists", "passed": true, "detail": "src/greet.rs defines it"}]}
```'''

[[reply]]
text = '{"results":[{"criterion":"c","passed":"false","detail":"x"}]}'

[[reply]]
text = '{}'

[[reply]]
text = 'not json'
"#;

fn output() -> AgentOutput {
    AgentOutput {
        agent_id: "a1".into(),
        role: "executor".into(),
        task: "add greet()".into(),
        status: AgentStatus::Completed,
        reply: "Added greet() in src/greet.rs.".into(),
    }
}

fn env(root: &Path, model: Option<Arc<dyn ModelAccess>>) -> CallEnv {
    CallEnv {
        workspace: Some(WorkspaceView {
            root: root.to_owned(),
            changed: vec![("src/greet.rs".into(), ChangeKind::Added)],
            diff: "--- /dev/null\n+++ b/src/greet.rs\n@@ -0,0 +1 @@\n+pub fn greet() {}\n".into(),
        }),
        model,
    }
}

async fn judge(
    plugin: &Plugin,
    root: &Path,
    model: Option<Arc<dyn ModelAccess>>,
    criteria: &[&str],
) -> Result<Verdict, String> {
    let criteria: Vec<String> = criteria.iter().map(|c| c.to_string()).collect();
    plugin
        .validate(env(root, model), &output(), &criteria)
        .await
        .expect("the plugin runs without a fault")
}

#[tokio::test]
async fn judges_strictly_through_the_engine_plugin_set() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let runtime = PluginRuntime::new(RuntimeConfig {
        cache_dir: None,
        ..Default::default()
    })?;
    let set = PluginSet::new(runtime, dir.path().to_owned());
    let plugin = set.get("criteria-judge", PluginKind::Validator).await?;
    let budget = plugin
        .grants()
        .model_budget()
        .expect("criteria-judge is granted the model");
    assert_eq!(budget.tokens, 50_000);
    assert_eq!(budget.time, Duration::from_secs(120));

    let provider = ScriptedProvider::parse(SCRIPT, "test")?;
    let model: Arc<dyn ModelAccess> = Arc::new(ProviderModel::new(
        Arc::new(provider),
        AgentLabel {
            id: "v1".into(),
            name: "validator".into(),
            role: "validator".into(),
        },
    ));
    let root = dir.path();

    let v = judge(&plugin, root, Some(model.clone()), &["greet() exists"])
        .await
        .expect("a proper answer is a verdict");
    assert!(v.passed, "{v:?}");
    assert_eq!(v.results.len(), 1);
    assert_eq!(v.results[0].criterion, "greet() exists");
    assert_eq!(v.results[0].detail, "src/greet.rs defines it");
    assert_eq!(v.fix_prompt, None);

    let v = judge(&plugin, root, Some(model.clone()), &["c"])
        .await
        .unwrap();
    assert!(!v.passed, "the string \"false\" must not pass: {v:?}");
    assert!(v.results[0].detail.contains("`passed` must be a boolean"));
    assert!(v.fix_prompt.as_deref().unwrap().contains("- c: "));

    let v = judge(&plugin, root, Some(model.clone()), &["a", "b"])
        .await
        .unwrap();
    assert!(!v.passed, "{{}} must not pass: {v:?}");
    assert_eq!(v.results.len(), 2);
    assert!(v.results.iter().all(|r| !r.passed));
    assert!(v.results[0].detail.contains("no `results`"));

    let v = judge(&plugin, root, Some(model.clone()), &[])
        .await
        .unwrap();
    assert!(!v.passed);
    assert_eq!(v.results[0].criterion, "the reply fulfils the task");
    assert!(
        v.results[0]
            .detail
            .starts_with("the model's reply was not valid JSON: "),
        "{}",
        v.results[0].detail
    );

    // The script is used up: the model call fails, so the validator could not judge.
    let err = judge(&plugin, root, Some(model), &["c"]).await.unwrap_err();
    assert!(err.contains("the model call failed"), "{err}");
    // No model in the call: `unavailable`, also not a verdict.
    let err = judge(&plugin, root, None, &["c"]).await.unwrap_err();
    assert!(err.contains("no model is available"), "{err}");
    Ok(())
}

//! A manager, a real store and a workspace in a temp dir, for agent-loop tests.

use std::sync::Arc;

use crewbox::unstable::agent::manager::Manager;
use crewbox::unstable::agent::permissions::{CapSet, Permissions};
use crewbox::unstable::agent::runner::AgentSpec;
use crewbox::unstable::config::Quotas;
use crewbox::unstable::ids::{AgentId, RunId};
use crewbox::unstable::provider::Provider;
use crewbox::unstable::store::Store;
use crewbox::unstable::tool::registry::ToolRegistry;

/// The temp dir (`work/` holds `notes.txt` = "alpha\nbeta\n"), its store and a manager.
pub struct Fixture {
    _dir: tempfile::TempDir,
    /// The agents' workspace (canonical).
    pub work: std::path::PathBuf,
    /// The store in `state/`.
    pub store: Store,
    /// Runs agents with the built-in tools.
    pub manager: Manager,
}

/// A fresh fixture whose manager runs `max_concurrent` agents at once.
pub fn fixture(max_concurrent: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("notes.txt"), "alpha\nbeta\n").unwrap();
    let store = Store::open(&dir.path().join("state")).unwrap();
    let manager = Manager::sandboxed(
        store.clone(),
        Arc::new(ToolRegistry::builtin()),
        max_concurrent,
        crate::support::sandbox::sandbox(&dir.path().join("state")),
    );
    Fixture {
        work: work.canonicalize().unwrap(),
        _dir: dir,
        store,
        manager,
    }
}

/// A root agent `worker` (role `executor`) of a new run, working in the fixture.
pub fn agent_spec(
    f: &Fixture,
    provider: Arc<dyn Provider>,
    quotas: Quotas,
    caps: CapSet,
) -> AgentSpec {
    AgentSpec {
        id: AgentId::new(),
        run_id: RunId::new(),
        parent: None,
        name: "worker".into(),
        role: "executor".into(),
        task: "do the thing".into(),
        system_prompt: "you are a test agent".into(),
        perms: Permissions::root(caps),
        workspace: f.work.clone(),
        quotas,
        provider,
        prices: None,
        network: false,
        mcp: Vec::new(),
    }
}

/// Records the run an agent belongs to (events and agents reference it).
pub async fn insert_run(store: &Store, run: &RunId) {
    let record = crewbox::unstable::store::RunRecord {
        id: run.clone(),
        ..crewbox::unstable::store::RunRecord::started(
            crewbox::Mode::Single,
            "p",
            serde_json::json!({}),
        )
    };
    store.insert_run(&record).await.unwrap();
}

/// Records `spec`'s run, runs the agent to its end and returns how it ended.
pub async fn run_agent(
    f: &Fixture,
    spec: AgentSpec,
) -> (crewbox::unstable::agent::runner::AgentOutcome, RunId) {
    insert_run(&f.store, &spec.run_id).await;
    let run = spec.run_id.clone();
    let handle = f
        .manager
        .spawn(
            spec,
            crewbox::unstable::agent::manager::SpawnOptions::default(),
        )
        .await
        .unwrap();
    (handle.wait().await, run)
}

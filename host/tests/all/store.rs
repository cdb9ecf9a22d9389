//! The store against real SQLite files: schema guards, transitions, cross-process reads.

use crewbox::unstable::agent::AgentState;
use crewbox::unstable::ids::{AgentId, RunId};
use crewbox::unstable::store::{
    AgentRecord, AgentStats, ControlKind, RunRecord, Store, StoreError, now_ms,
};
use crewbox::{Event, ExitReason, Mode, RunStatus};

fn run_record() -> RunRecord {
    RunRecord {
        id: RunId::new(),
        mode: Mode::Single,
        prompt: "p".into(),
        team: None,
        status: RunStatus::Running,
        exit_reason: None,
        result: None,
        spec: serde_json::json!({"provider": "scripted"}),
        pid: Some(1),
        pid_identity: None,
        created_at: now_ms(),
        finished_at: None,
        details: None,
    }
}

/// A queued agent of `run`, as a spawn records it.
pub(crate) fn agent_record(run: &RunId) -> AgentRecord {
    AgentRecord {
        id: AgentId::new(),
        run_id: run.clone(),
        parent: None,
        name: "a".into(),
        role: "executor".into(),
        task: "t".into(),
        caps: vec!["read".into()],
        depth: 0,
        join: None,
        state: AgentState::Queued,
        stats: AgentStats::default(),
        result: None,
        error: None,
        created_at: now_ms(),
        started_at: None,
        finished_at: None,
    }
}

#[tokio::test]
async fn facts_round_trip_and_a_second_handle_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let run = run_record();
    store.insert_run(&run).await.unwrap();
    let agent = agent_record(&run.id);
    store.insert_agent(&agent).await.unwrap();
    store
        .set_agent_state(&agent.id, AgentState::Running)
        .await
        .unwrap();
    store
        .append_event(
            &run.id,
            Some(&agent.id),
            Event::ToolCall {
                turn: 1,
                tool: "read_file".into(),
                server: None,
                args: "{}".into(),
                ok: true,
                output: String::new(),
            },
        )
        .await
        .unwrap();

    // Another handle (as another process would open it) sees the committed facts.
    let other = Store::open_existing(dir.path()).unwrap();
    let agents = other.agents(&run.id).await.unwrap();
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0].state, AgentState::Running);
    assert_eq!(other.agent_counts().await.unwrap().running, 1);
    let events = other.events(Some(&run.id), 0, 10).await.unwrap();
    assert_eq!(events.len(), 1);
    assert!(
        matches!(&events[0].event, Event::ToolCall { tool, .. } if tool == "read_file"),
        "{:?}",
        events[0].event
    );

    let stats = AgentStats {
        turns: 3,
        tool_calls: 2,
        tokens_in: 10,
        tokens_out: 5,
        cost: None,
    };
    store
        .finish_agent(&agent.id, AgentState::Completed, stats, Some("done"), None)
        .await
        .unwrap();
    store
        .finish_run(
            &run.id,
            RunStatus::Completed,
            ExitReason::GoalMet,
            Some("done"),
        )
        .await
        .unwrap();
    let stored = other.run(&run.id).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Completed);
    assert_eq!(stored.exit_reason, Some(ExitReason::GoalMet));
    assert_eq!(other.agent(&agent.id).await.unwrap().unwrap().stats, stats);
}

#[tokio::test]
async fn terminal_agents_cannot_change_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let run = run_record();
    store.insert_run(&run).await.unwrap();
    let agent = agent_record(&run.id);
    store.insert_agent(&agent).await.unwrap();
    store
        .finish_agent(
            &agent.id,
            AgentState::Stopped,
            AgentStats::default(),
            None,
            None,
        )
        .await
        .unwrap();
    let err = store
        .set_agent_state(&agent.id, AgentState::Running)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Transition { .. }), "{err}");
    let err = store
        .finish_agent(
            &agent.id,
            AgentState::Completed,
            AgentStats::default(),
            None,
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Transition { .. }), "{err}");
    // A failed write does not take the writes grouped with it down.
    store
        .append_event(
            &run.id,
            None,
            Event::Other {
                kind: "x".into(),
                data: serde_json::json!({}),
            },
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn controls_are_delivered_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store
        .push_control("a-1", ControlKind::Steer, Some("look at tests"))
        .await
        .unwrap();
    store
        .push_control("r-1", ControlKind::Stop, None)
        .await
        .unwrap();
    let pending = store.pending_controls().await.unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0].message.as_deref(), Some("look at tests"));
    store.consume_controls(vec![pending[0].seq]).await.unwrap();
    let pending = store.pending_controls().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].kind, ControlKind::Stop);
}

#[test]
fn a_corrupt_database_is_an_error_and_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join(crewbox::unstable::store::DB_FILE);
    let garbage = b"this is not sqlite, but somebody's data".repeat(200);
    std::fs::write(&db, &garbage).unwrap();
    let err = Store::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("left untouched"), "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), garbage);
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(Store::open(dir.path()).unwrap());
    let conn =
        rusqlite::Connection::open(dir.path().join(crewbox::unstable::store::DB_FILE)).unwrap();
    conn.pragma_update(
        None,
        "user_version",
        crewbox::unstable::store::SCHEMA_VERSION + 1,
    )
    .unwrap();
    drop(conn);
    let err = Store::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::NewerSchema { .. }), "{err}");
}

#[test]
fn an_unwritable_state_dir_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let err = Store::open(&file.join("state")).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot create the state directory"),
        "{err}"
    );
}

#[test]
fn read_commands_do_not_create_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let err = Store::open_existing(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::Missing(_)));
    assert!(!dir.path().join(crewbox::unstable::store::DB_FILE).exists());
}

/// A step's conversation is stored in the transaction that stores its result, read
/// back by a second handle (a resuming process), and masked like every other row.
#[tokio::test]
async fn a_steps_conversation_is_stored_with_its_result_and_masked() {
    use crewbox::secrets as redact;
    let secret = format!("sk-conv-{}", uuid::Uuid::now_v7().simple());
    redact::register(&secret);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let run = run_record();
    store.insert_run(&run).await.unwrap();
    let data = serde_json::json!({"name": "alice"});
    store
        .begin_step(&run.id, "it1/worker/alice", None, &data)
        .await
        .unwrap();
    assert!(
        store.step_conversations(&run.id).await.unwrap().is_empty(),
        "a started step has none"
    );
    let conversation = format!(r#"[{{"role":"tool","content":"key {secret}"}}]"#);
    store
        .finish_step(
            &run.id,
            "it1/worker/alice",
            None,
            &data,
            Vec::new(),
            Some(conversation),
        )
        .await
        .unwrap();
    drop(store);
    let again = Store::open(dir.path()).unwrap();
    let stored = again.step_conversations(&run.id).await.unwrap();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(stored[0].0, "it1/worker/alice");
    assert!(!stored[0].1.contains(&secret), "{}", stored[0].1);
    assert!(stored[0].1.contains(redact::MASK), "{}", stored[0].1);
}

/// Under a steady stream of writes the WAL is written from its start again and again:
/// the checkpoint beside the writer leaves the frames committed during its run behind,
/// and the writer copies that tail so SQLite can restart the log. Without that, the WAL
/// grows for as long as the stream lasts (here to 121 MB in 4 s; with the catch-up, 3 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_stays_small_under_a_steady_stream_of_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let run = run_record();
    store.insert_run(&run).await.unwrap();
    let wal = dir
        .path()
        .join(format!("{}-wal", crewbox::unstable::store::DB_FILE));
    let started = std::time::Instant::now();
    let (mut written, mut largest) = (0usize, 0u64);
    // Bursts of queued agents with a little work between them, as an engine's batches.
    while started.elapsed() < std::time::Duration::from_secs(4) {
        let mut last = None;
        for _ in 0..200 {
            let mut agent = agent_record(&run.id);
            agent.task = "x".repeat(400);
            last = Some(store.queue_agent(agent).unwrap());
            written += 1;
        }
        last.unwrap().committed().await.unwrap();
        largest = largest.max(std::fs::metadata(&wal).map_or(0, |m| m.len()));
    }
    assert!(written > 10_000, "only {written} agents were written");
    assert!(
        largest < 16 << 20,
        "the WAL grew to {largest} bytes over {written} agents"
    );
}

/// A worker's own store forgets an answered task's agent with the agents it started
/// (their rows and events) in one write, and nothing of any other agent or of the run.
#[tokio::test]
async fn forgotten_agents_go_with_the_agents_they_started_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let run = run_record();
    store.insert_run(&run).await.unwrap();
    let parent = agent_record(&run.id);
    let mut child = agent_record(&run.id);
    child.parent = Some(parent.id.clone());
    let mut grandchild = agent_record(&run.id);
    grandchild.parent = Some(child.id.clone());
    let other = agent_record(&run.id);
    for a in [&parent, &child, &grandchild, &other] {
        store.insert_agent(a).await.unwrap();
        store
            .append_event(&run.id, Some(&a.id), Event::AgentWrapUp { turn: 1 })
            .await
            .unwrap();
    }
    store
        .append_event(&run.id, None, Event::AgentWrapUp { turn: 1 })
        .await
        .unwrap();
    // An id with no rows (a task that failed before its agent was stored) is no error.
    store
        .queue_forget_agents(vec![parent.id.clone(), AgentId::new()])
        .unwrap()
        .committed()
        .await
        .unwrap();
    let left: Vec<AgentId> = store
        .agents(&run.id)
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(left, vec![other.id.clone()]);
    let events: Vec<Option<AgentId>> = store
        .events(Some(&run.id), 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.agent_id)
        .collect();
    assert_eq!(events, vec![Some(other.id.clone()), None]);
    assert!(store.run(&run.id).await.unwrap().is_some(), "the run stays");
}

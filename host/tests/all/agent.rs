//! The agent loop end to end: scripted model, real tools in a temp dir, a real store.

use std::sync::Arc;
use std::time::Duration;

use crewbox::Event;
use crewbox::unstable::agent::AgentState;
use crewbox::unstable::agent::manager::SpawnOptions;
use crewbox::unstable::agent::permissions::CapSet;
use crewbox::unstable::agent::quota::Exceeded;
use crewbox::unstable::agent::runner::AgentSpec;
use crewbox::unstable::config::Quotas;
use crewbox::unstable::provider::scripted::ScriptedProvider;
use crewbox::unstable::store::{ControlKind, Store};

use crate::support::agents::{Fixture, agent_spec, fixture, insert_run};

fn spec(f: &Fixture, script: &str, quotas: Quotas, caps: CapSet) -> AgentSpec {
    let provider = Arc::new(ScriptedProvider::parse(script, "test script").unwrap());
    agent_spec(f, provider, quotas, caps)
}

const TOOLS_SCRIPT: &str = r#"
[[reply]]
turn = 1
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }

[[reply]]
when = "beta"
[[reply.tool_calls]]
name = "no_such_tool"
args = {}
[[reply.tool_calls]]
name = "write_file"
args = { path = "out.txt" }

[[reply]]
when = "(?s)missing field|invalid arguments"
[[reply.tool_calls]]
name = "write_file"
args = { path = "out.txt", content = "gamma" }

[[reply]]
turn = 4
text = "wrote out.txt"
"#;

#[tokio::test]
async fn tools_run_for_real_and_bad_calls_go_back_to_the_model() {
    let f = fixture(4);
    let s = spec(&f, TOOLS_SCRIPT, Quotas::default(), CapSet::full());
    insert_run(&f.store, &s.run_id).await;
    let run = s.run_id.clone();
    let outcome = f
        .manager
        .spawn(s, SpawnOptions::default())
        .await
        .unwrap()
        .wait()
        .await;
    assert_eq!(outcome.state, AgentState::Completed, "{:?}", outcome.error);
    assert_eq!(outcome.result, "wrote out.txt");
    assert_eq!(
        std::fs::read_to_string(f.work.join("out.txt")).unwrap(),
        "gamma"
    );
    assert_eq!(outcome.stats.turns, 4);
    assert_eq!(outcome.stats.tool_calls, 4);
    let events = f.store.events(Some(&run), 0, 100).await.unwrap();
    let failed: Vec<_> = events
        .iter()
        .filter(|e| matches!(e.event, Event::ToolCall { ok: false, .. }))
        .collect();
    assert_eq!(
        failed.len(),
        2,
        "unknown tool and malformed args are tool errors"
    );
    let agents = f.store.agents(&run).await.unwrap();
    assert_eq!(agents[0].state, AgentState::Completed);
    assert_eq!(agents[0].stats.turns, 4);
}

const LOOPING: &str = r#"
[[reply]]
repeat = true
text = "still looking"
[[reply.tool_calls]]
name = "list_dir"
args = { path = "." }
"#;

#[tokio::test]
async fn soft_turn_limit_steers_then_hard_limit_aborts() {
    let f = fixture(4);
    let wraps = r#"
[[reply]]
when = "turn limit"
text = "summary: nothing found"

[[reply]]
repeat = true
[[reply.tool_calls]]
name = "list_dir"
args = { path = "." }
"#;
    let q = Quotas {
        max_turns: 3,
        grace_turns: 2,
        ..Quotas::default()
    };
    let s = spec(&f, wraps, q.clone(), CapSet::read_only());
    insert_run(&f.store, &s.run_id).await;
    let out = f
        .manager
        .spawn(s, SpawnOptions::default())
        .await
        .unwrap()
        .wait()
        .await;
    assert_eq!(out.state, AgentState::Steered);
    assert_eq!(out.result, "summary: nothing found");
    assert_eq!(out.stats.turns, 4);

    let s = spec(&f, LOOPING, q, CapSet::read_only());
    insert_run(&f.store, &s.run_id).await;
    let out = f
        .manager
        .spawn(s, SpawnOptions::default())
        .await
        .unwrap()
        .wait()
        .await;
    assert_eq!(out.state, AgentState::Aborted);
    assert_eq!(out.exceeded, Some(Exceeded::Turns));
    assert_eq!(out.stats.turns, 5, "3 soft + 2 grace");
}

#[tokio::test]
async fn token_and_tool_call_budgets_abort() {
    let f = fixture(4);
    let s = spec(
        &f,
        LOOPING,
        Quotas {
            max_tool_calls: 3,
            ..Quotas::default()
        },
        CapSet::read_only(),
    );
    insert_run(&f.store, &s.run_id).await;
    let out = f
        .manager
        .spawn(s, SpawnOptions::default())
        .await
        .unwrap()
        .wait()
        .await;
    assert_eq!(
        (out.state, out.exceeded),
        (AgentState::Aborted, Some(Exceeded::ToolCalls))
    );
    assert_eq!(out.stats.tool_calls, 3);

    let heavy = r#"
[[reply]]
repeat = true
text = "x"
usage = { input = 400, output = 200 }
[[reply.tool_calls]]
name = "list_dir"
args = { path = "." }
"#;
    let s = spec(
        &f,
        heavy,
        Quotas {
            max_tokens: 1_000,
            ..Quotas::default()
        },
        CapSet::read_only(),
    );
    insert_run(&f.store, &s.run_id).await;
    let out = f
        .manager
        .spawn(s, SpawnOptions::default())
        .await
        .unwrap()
        .wait()
        .await;
    assert_eq!(
        (out.state, out.exceeded),
        (AgentState::Aborted, Some(Exceeded::Tokens))
    );
    assert_eq!(out.stats.turns, 2);
}

#[tokio::test]
async fn a_stalled_model_counts_against_wall_time() {
    let f = fixture(4);
    let slow = "[[reply]]\ntext = \"late\"\ndelay_ms = 5000\n";
    let q = Quotas {
        wall_time: Duration::from_millis(300),
        ..Quotas::default()
    };
    let s = spec(&f, slow, q, CapSet::read_only());
    insert_run(&f.store, &s.run_id).await;
    let out = f
        .manager
        .spawn(s, SpawnOptions::default())
        .await
        .unwrap()
        .wait()
        .await;
    assert_eq!(
        (out.state, out.exceeded),
        (AgentState::Aborted, Some(Exceeded::WallTime))
    );
}

#[tokio::test]
async fn steer_and_stop_arrive_through_the_store() {
    let f = fixture(4);
    let script = r#"
[[reply]]
when = "Message from the operator: focus on beta"
text = "focusing on beta"

[[reply]]
repeat = true
delay_ms = 50
[[reply.tool_calls]]
name = "list_dir"
args = { path = "." }
"#;
    let s = spec(&f, script, Quotas::default(), CapSet::read_only());
    insert_run(&f.store, &s.run_id).await;
    let run = s.run_id.clone();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let controls = tokio::spawn({
        let m = f.manager.clone();
        let stop = shutdown.clone();
        let run = run.clone();
        async move { m.control_loop(vec![run], stop).await }
    });
    let handle = f.manager.spawn(s, SpawnOptions::default()).await.unwrap();
    // Another process would open its own handle; do the same.
    let other = Store::open_existing(f.store.path().parent().unwrap()).unwrap();
    other
        .push_control(
            handle.id.as_str(),
            ControlKind::Steer,
            Some("focus on beta"),
        )
        .await
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), handle.wait())
        .await
        .unwrap();
    assert_eq!(out.state, AgentState::Completed);
    assert_eq!(out.result, "focusing on beta");

    // Stop a slowly looping agent by run id.
    let slow_loop = LOOPING.replace("repeat = true", "repeat = true\ndelay_ms = 100");
    let mut s = spec(&f, &slow_loop, Quotas::default(), CapSet::read_only());
    s.run_id = run.clone();
    let handle = f.manager.spawn(s, SpawnOptions::default()).await.unwrap();
    other
        .push_control(run.as_str(), ControlKind::Stop, None)
        .await
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), handle.wait())
        .await
        .unwrap();
    assert_eq!(out.state, AgentState::Stopped);
    shutdown.cancel();
    controls.await.unwrap();
    assert!(other.pending_controls().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_queue_is_fifo_and_bounded() {
    let f = fixture(2);
    let script = "[[reply]]\nrepeat = true\ntext = \"done\"\ndelay_ms = 100\n";
    let mut handles = Vec::new();
    for _ in 0..6 {
        let s = spec(&f, script, Quotas::default(), CapSet::read_only());
        insert_run(&f.store, &s.run_id).await;
        handles.push((
            s.run_id.clone(),
            f.manager.spawn(s, SpawnOptions::default()).await.unwrap(),
        ));
    }
    // Spawning returned at once; its records are queued to the store, in order.
    f.store.settled().await.unwrap();
    let counts = f.store.agent_counts().await.unwrap();
    assert!(
        counts.queued + counts.running == 6 && counts.running <= 2,
        "{counts:?}"
    );
    let mut starts = Vec::new();
    for (run, h) in handles {
        assert_eq!(h.wait().await.state, AgentState::Completed);
        let a = f.store.agents(&run).await.unwrap().remove(0);
        starts.push((a.started_at.unwrap(), a.finished_at.unwrap()));
    }
    // Never more than two at once, and started in spawn order.
    for (i, (s, _)) in starts.iter().enumerate() {
        let overlapping = starts.iter().filter(|(s2, f2)| s2 <= s && f2 > s).count();
        assert!(overlapping <= 2, "agent {i} overlapped {overlapping}");
    }
    assert!(
        starts.windows(2).all(|w| w[0].0 <= w[1].0),
        "FIFO: {starts:?}"
    );
}

#[tokio::test]
async fn a_read_only_agent_gets_no_write_or_exec_tools() {
    let f = fixture(4);
    let script = r#"
[[reply]]
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "x.txt", content = "no" }
[[reply.tool_calls]]
name = "run_command"
args = { command = "touch y.txt" }

[[reply]]
turn = 2
text = "could not"
"#;
    let s = spec(&f, script, Quotas::default(), CapSet::read_only());
    insert_run(&f.store, &s.run_id).await;
    let out = f
        .manager
        .spawn(s, SpawnOptions::default())
        .await
        .unwrap()
        .wait()
        .await;
    assert_eq!(out.state, AgentState::Completed);
    assert!(!f.work.join("x.txt").exists());
    assert!(!f.work.join("y.txt").exists());
    let denied = out
        .history
        .iter()
        .filter(|m| m.content.starts_with("error:"))
        .count();
    assert_eq!(denied, 2);
}

/// A model that asks for one `write_file` and counts how often it was asked; it says it
/// acts on the workspace (as an agent CLI does) when `acts`.
struct Counting {
    acts: bool,
    asked: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl crewbox::unstable::provider::Provider for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn model(&self) -> &str {
        "counting"
    }
    fn acts(&self) -> bool {
        self.acts
    }
    async fn complete(
        &self,
        _request: &crewbox::unstable::provider::CompletionRequest,
    ) -> Result<crewbox::unstable::provider::Completion, crewbox::unstable::provider::ProviderError>
    {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let reply = r#"
[[reply]]
[[reply.tool_calls]]
name = "write_file"
args = { path = "acted.txt", content = "the agent acted" }
"#;
        ScriptedProvider::parse(reply, "one call")
            .unwrap()
            .complete(_request)
            .await
    }
}

/// An agent whose start the store refuses (its run was never recorded, so its row
/// breaks a foreign key) changes nothing: spawning does not wait for the store, so the
/// refusal is seen before its first tool call, and before a model that acts is asked.
#[tokio::test]
async fn an_agent_whose_start_the_store_refuses_acts_on_nothing() {
    for acts in [false, true] {
        let f = fixture(2);
        let provider = Arc::new(Counting {
            acts,
            asked: Default::default(),
        });
        // No insert_run: the agent's record is refused.
        let s = crate::support::agents::agent_spec(
            &f,
            provider.clone(),
            Quotas::default(),
            CapSet::full(),
        );
        let outcome = f
            .manager
            .spawn(s, SpawnOptions::default())
            .await
            .expect("spawning waits for no store write")
            .wait()
            .await;
        assert_eq!(outcome.state, AgentState::Error, "acts={acts}");
        let error = outcome.error.unwrap_or_default();
        assert!(
            error.starts_with("cannot record the agent as queued:"),
            "acts={acts}: {error}"
        );
        assert!(
            !f.work.join("acted.txt").exists(),
            "acts={acts}: the tool ran although the agent's start was never stored"
        );
        let asked = provider.asked.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            asked,
            u32::from(!acts),
            "a model behind an API is asked while the start is in flight; one that acts is not asked"
        );
        assert!(f.store.agent_counts().await.unwrap().queued == 0);
    }
}

//! The agent loop against local servers speaking the OpenAI and Anthropic wire formats:
//! every request it sends must be one the real API accepts (steering, cut replies,
//! empty replies, bad tool arguments), and how the model stopped decides how it ends.

use std::sync::Arc;
use std::time::Duration;

use crewbox::Event;
use crewbox::unstable::agent::AgentState;
use crewbox::unstable::agent::manager::SpawnOptions;
use crewbox::unstable::agent::permissions::CapSet;
use crewbox::unstable::agent::runner::{AgentOutcome, FailReason};
use crewbox::unstable::config::Quotas;
use crewbox::unstable::ids::RunId;
use crewbox::unstable::provider::Provider;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::agents::{Fixture, agent_spec, fixture, insert_run, run_agent};
use crate::support::http::{Reply, TestServer, build_provider};
use crate::support::wire::{anthropic_violations, assert_well_formed, openai_violations};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Api {
    OpenAi,
    Anthropic,
}

impl Api {
    fn check(self) -> fn(&Value) -> Vec<String> {
        match self {
            Api::OpenAi => openai_violations,
            Api::Anthropic => anthropic_violations,
        }
    }

    /// A non-streamed reply with `text`, tool calls `(id, name, args)` and a stop reason
    /// in this API's words (`None`: the natural one).
    fn reply(self, text: &str, calls: &[(&str, &str, Value)], stop: Option<&str>) -> Reply {
        match self {
            Api::OpenAi => {
                let mut message = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    message["tool_calls"] = calls
                        .iter()
                        .map(|(id, name, args)| {
                            let arguments = match args {
                                Value::String(raw) => raw.clone(),
                                other => other.to_string(),
                            };
                            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
                        })
                        .collect();
                }
                let finish = stop.unwrap_or(if calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                });
                Reply::json(
                    200,
                    json!({"choices": [{"index": 0, "message": message, "finish_reason": finish}],
                           "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
                )
            }
            Api::Anthropic => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                for (id, name, args) in calls {
                    content
                        .push(json!({"type": "tool_use", "id": id, "name": name, "input": args}));
                }
                let stop = stop.unwrap_or(if calls.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                });
                Reply::json(
                    200,
                    json!({"type": "message", "role": "assistant", "content": content, "stop_reason": stop,
                           "usage": {"input_tokens": 10, "output_tokens": 5}}),
                )
            }
        }
    }
}

fn provider(api: Api, server: &TestServer) -> Arc<dyn Provider> {
    let (kind, base) = match api {
        Api::OpenAi => ("openai", format!("{}/v1", server.url)),
        Api::Anthropic => ("anthropic", server.url.clone()),
    };
    let text = format!(
        "kind = \"{kind}\"\nbase_url = \"{base}\"\nmodel = \"m\"\napi_key_env = \"K\"\n\
         stream = false\nmax_retries = 0\n"
    );
    build_provider("local", &text, &[("K", "test-key-not-secret")])
        .unwrap()
        .0
}

/// Runs one agent against `replies`; `steer` (if any) is sent while the first request
/// waits for its answer, i.e. while the model "thinks" about turn 1.
async fn run(
    api: Api,
    replies: Vec<Reply>,
    steer: Option<&str>,
    quotas: Quotas,
) -> (AgentOutcome, Vec<Value>, Fixture, RunId) {
    let gate = Arc::new(Notify::new());
    let mut replies = replies;
    if steer.is_some() {
        let first = replies.remove(0);
        replies.insert(0, Reply::after(&gate, first));
    }
    let server = TestServer::start(replies).await;
    let f = fixture(4);
    let s = agent_spec(&f, provider(api, &server), quotas, CapSet::full());
    insert_run(&f.store, &s.run_id).await;
    let run_id = s.run_id.clone();
    let handle = f.manager.spawn(s, SpawnOptions::default()).await.unwrap();
    if let Some(message) = steer {
        server.wait_for_requests(1).await;
        assert!(f.manager.steer(&handle.id, message.to_owned()));
        gate.notify_one();
    }
    let outcome = tokio::time::timeout(Duration::from_secs(30), handle.wait())
        .await
        .expect("the agent ends");
    let bodies = server.requests().iter().map(|r| r.json()).collect();
    (outcome, bodies, f, run_id)
}

fn two_reads() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        ("c1", "list_dir", json!({"path": "."})),
        ("c2", "read_file", json!({"path": "notes.txt"})),
    ]
}

async fn steer_during_a_batch(api: Api) {
    let (out, bodies, ..) = run(
        api,
        vec![
            api.reply("", &two_reads(), None),
            api.reply("done", &[], None),
        ],
        Some("look at beta"),
        Quotas::default(),
    )
    .await;
    assert_eq!(out.state, AgentState::Completed, "{:?}", out.error);
    assert_eq!(bodies.len(), 2);
    assert_well_formed(&bodies, api.check());
    let last = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let steer_text = match api {
        Api::OpenAi => last["content"].clone(),
        Api::Anthropic => last["content"].as_array().unwrap().last().unwrap()["text"].clone(),
    };
    assert_eq!(steer_text, json!("Message from the operator: look at beta"));
    // The agent's own history has the steer after the whole batch too (fix rounds and
    // resumed runs re-send it).
    use crewbox::unstable::provider::Role::*;
    let roles: Vec<_> = out.history.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [System, User, Assistant, Tool, Tool, User, Assistant]
    );
}

#[tokio::test]
async fn a_steer_during_a_tool_batch_follows_the_last_result_openai() {
    steer_during_a_batch(Api::OpenAi).await;
}

#[tokio::test]
async fn a_steer_during_a_tool_batch_follows_the_last_result_anthropic() {
    steer_during_a_batch(Api::Anthropic).await;
}

#[tokio::test]
async fn a_steer_on_a_text_only_turn_is_answered_before_the_agent_ends() {
    let api = Api::OpenAi;
    let (out, bodies, f, run) = run(
        api,
        vec![
            api.reply("plan A", &[], None),
            api.reply("plan B", &[], None),
        ],
        Some("prefer B"),
        Quotas::default(),
    )
    .await;
    assert_eq!(out.state, AgentState::Completed, "{:?}", out.error);
    assert_eq!(out.result, "plan B");
    assert_eq!(bodies.len(), 2, "the steer got its own model call");
    assert_well_formed(&bodies, api.check());
    assert_eq!(
        bodies[1]["messages"].as_array().unwrap().last().unwrap()["content"],
        json!("Message from the operator: prefer B")
    );
    let events = f.store.events(Some(&run), 0, 100).await.unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(e.event, Event::AgentSteer { .. }))
    );
}

#[tokio::test]
async fn a_steer_the_agent_has_no_turn_left_for_is_reported_undelivered() {
    let api = Api::Anthropic;
    let quotas = Quotas {
        max_turns: 1,
        grace_turns: 0,
        ..Quotas::default()
    };
    let (out, bodies, f, run) = run(
        api,
        vec![api.reply("final answer", &[], None)],
        Some("one more thing"),
        quotas,
    )
    .await;
    assert_eq!(out.state, AgentState::Completed, "{:?}", out.error);
    assert_eq!(out.result, "final answer");
    assert_eq!(bodies.len(), 1);
    let events = f.store.events(Some(&run), 0, 100).await.unwrap();
    let undelivered: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::AgentSteerUndelivered { message, .. } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(undelivered, ["one more thing"], "{events:#?}");
}

#[tokio::test]
async fn a_reply_cut_at_the_token_limit_is_continued() {
    let api = Api::OpenAi;
    let (out, bodies, ..) = run(
        api,
        vec![
            api.reply("The answer is forty", &[], Some("length")),
            api.reply("-two.", &[], None),
        ],
        None,
        Quotas::default(),
    )
    .await;
    assert_eq!(out.state, AgentState::Completed, "{:?}", out.error);
    assert_eq!(out.result, "The answer is forty-two.");
    assert_eq!(bodies.len(), 2);
    assert_well_formed(&bodies, api.check());
    let last = bodies[1]["messages"].as_array().unwrap().last().unwrap();
    assert!(
        last["content"].as_str().unwrap().contains("cut off"),
        "{last}"
    );
}

#[tokio::test]
async fn cut_tool_calls_never_run_and_repeated_cuts_fail_as_truncated() {
    let api = Api::OpenAi;
    // Cut inside the call: its arguments are not JSON.
    let raw = "{\"path\": \"out.txt\", \"content\": \"half a fi";
    let cut = |id| api.reply("", &[(id, "write_file", json!(raw))], Some("length"));
    let (out, bodies, f, _) = run(
        api,
        vec![cut("t1"), cut("t2"), cut("t3")],
        None,
        Quotas::default(),
    )
    .await;
    assert_eq!(out.state, AgentState::Error);
    assert_eq!(out.reason, Some(FailReason::Truncated));
    assert!(
        out.error.as_deref().unwrap().starts_with("truncated: "),
        "{:?}",
        out.error
    );
    assert!(!f.work.join("out.txt").exists(), "a cut call must not run");
    assert_eq!(bodies.len(), 3);
    assert_well_formed(&bodies, api.check());
    let msgs = bodies[1]["messages"].as_array().unwrap();
    let result = msgs.last().unwrap()["content"].as_str().unwrap();
    assert!(
        result.starts_with("error: not run: your reply was cut off"),
        "{result}"
    );
    // Never re-sent as the model's broken text: servers fail the whole request on it.
    let assistant = &msgs[msgs.len() - 2];
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], "{}");
}

#[tokio::test]
async fn the_complete_calls_of_a_cut_reply_run() {
    let api = Api::Anthropic;
    let (out, bodies, f, _) = run(
        api,
        vec![
            api.reply(
                "",
                &[(
                    "t1",
                    "write_file",
                    json!({"path": "out.txt", "content": "whole"}),
                )],
                Some("max_tokens"),
            ),
            api.reply("done", &[], None),
        ],
        None,
        Quotas::default(),
    )
    .await;
    assert_eq!(out.state, AgentState::Completed, "{:?}", out.error);
    assert_eq!(
        std::fs::read_to_string(f.work.join("out.txt")).unwrap(),
        "whole"
    );
    assert_well_formed(&bodies, api.check());
}

#[tokio::test]
async fn an_empty_reply_is_nudged_once_then_fails_as_empty_reply() {
    for api in [Api::OpenAi, Api::Anthropic] {
        let (out, bodies, ..) = run(
            api,
            vec![api.reply("", &[], None), api.reply("", &[], None)],
            None,
            Quotas::default(),
        )
        .await;
        assert_eq!(out.state, AgentState::Error, "{api:?}");
        assert_eq!(out.reason, Some(FailReason::EmptyReply), "{api:?}");
        assert!(out.error.as_deref().unwrap().starts_with("empty-reply: "));
        assert_eq!(bodies.len(), 2, "{api:?}: one nudge");
        // The empty assistant turn is not re-sent as an empty text block.
        assert_well_formed(&bodies, api.check());
    }
}

#[tokio::test]
async fn invalid_argument_json_goes_back_as_an_empty_object() {
    let api = Api::OpenAi;
    let raw = "{\"path\": \"notes.t";
    let (out, bodies, ..) = run(
        api,
        vec![
            api.reply("", &[("c1", "read_file", json!(raw))], None),
            api.reply("gave up", &[], None),
        ],
        None,
        Quotas::default(),
    )
    .await;
    assert_eq!(out.state, AgentState::Completed, "{:?}", out.error);
    let msgs = bodies[1]["messages"].as_array().unwrap();
    let assistant = &msgs[msgs.len() - 2];
    assert_eq!(
        assistant["tool_calls"][0]["function"]["arguments"],
        json!("{}"),
        "never the broken text: llama.cpp fails every later request on it"
    );
    let result = msgs.last().unwrap()["content"].as_str().unwrap();
    assert!(
        result.contains("not valid JSON") && result.contains("`{}`"),
        "{result}"
    );
}

#[tokio::test]
async fn the_breaker_opening_is_an_event_naming_the_cause() {
    let server =
        TestServer::start((0..6).map(|_| Reply::text(500, "disk on fire")).collect()).await;
    let f = fixture(4);
    let text = format!(
        "kind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"m\"\nstream = false\n\
         max_retries = 5\nretry_base_ms = 1\n",
        server.url
    );
    let (p, _) = build_provider("local", &text, &[]).unwrap();
    let (out, run) = run_agent(&f, agent_spec(&f, p, Quotas::default(), CapSet::full())).await;
    assert_eq!(out.state, AgentState::Error);
    let error = out.error.unwrap();
    assert!(
        error.contains("opened") && error.contains("disk on fire"),
        "{error}"
    );
    assert_eq!(
        server.requests().len(),
        5,
        "no attempt after the circuit opened"
    );
    let events = f.store.events(Some(&run), 0, 100).await.unwrap();
    let opened: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ProviderBreakerOpen { breaker, cause } => {
                Some((breaker.as_str(), cause.as_str()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(opened.len(), 1, "{events:#?}");
    assert_eq!(opened[0].0, "local/m");
    assert!(opened[0].1.contains("disk on fire"));
}

#[tokio::test]
async fn a_steer_that_arrives_after_the_agent_ended_is_reported_not_left_pending() {
    use crewbox::unstable::provider::scripted::ScriptedProvider;
    use crewbox::unstable::store::ControlKind;
    let f = fixture(4);
    let p = Arc::new(ScriptedProvider::parse("[[reply]]\ntext = \"done\"\n", "s").unwrap());
    let (out, run) = run_agent(&f, agent_spec(&f, p, Quotas::default(), CapSet::full())).await;
    assert_eq!(out.state, AgentState::Completed);
    let agent = f.store.agents(&run).await.unwrap()[0].id.clone();
    // `crewbox steer` raced the agent's end: the control is in the store, the agent gone.
    f.store
        .push_control(agent.as_str(), ControlKind::Steer, Some("too late"))
        .await
        .unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let controls = tokio::spawn({
        let (m, stop) = (f.manager.clone(), shutdown.clone());
        async move { m.control_loop(Vec::new(), stop).await }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f.store.pending_controls().await.unwrap().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the steer stays pending"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    shutdown.cancel();
    controls.await.unwrap();
    let events = f.store.events(Some(&run), 0, 100).await.unwrap();
    let undelivered: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::AgentSteerUndelivered { message, .. } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(undelivered, ["too late"], "{events:#?}");
}

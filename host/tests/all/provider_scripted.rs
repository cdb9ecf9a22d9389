//! The scripted provider: filters, consumption, repeat, injected faults, errors.

use std::sync::Arc;
use std::time::Duration;

use crewbox::unstable::provider::{
    AgentLabel, CompletionRequest, Message, Provider, ProviderError, ScriptError, ScriptedProvider,
    StopReason, Usage,
};
use pretty_assertions::assert_eq;

fn req(name: &str, role: &str, turn: u32, latest: &str) -> CompletionRequest {
    CompletionRequest {
        progress: None,
        agent: AgentLabel {
            id: format!("{name}-id"),
            name: name.into(),
            role: role.into(),
        },
        turn,
        messages: vec![Message::system("be brief"), Message::user(latest)],
        tools: Vec::new().into(),
        max_tokens: None,
        workspace: None,
    }
}

fn script(text: &str) -> ScriptedProvider {
    ScriptedProvider::parse(text, "test.toml").expect("script parses")
}

async fn text(p: &ScriptedProvider, r: &CompletionRequest) -> String {
    p.complete(r).await.expect("reply").text
}

#[tokio::test]
async fn filters_by_agent_name_or_role_turn_and_latest_message() {
    let p = script(
        r#"
        [[reply]]
        agent = "reviewer"
        text = "by role"
        [[reply]]
        agent = "alice"
        turn = 2
        text = "alice turn 2"
        [[reply]]
        when = "(?i)fail(ed|ure)"
        text = "saw a failure"
        [[reply]]
        agent = "alice"
        text = "alice any turn"
        "#,
    );
    assert_eq!(text(&p, &req("bob", "reviewer", 1, "x")).await, "by role");
    assert_eq!(
        text(&p, &req("alice", "executor", 1, "all good")).await,
        "alice any turn"
    );
    assert_eq!(
        text(&p, &req("alice", "executor", 2, "x")).await,
        "alice turn 2"
    );
    assert_eq!(
        text(&p, &req("carol", "executor", 3, "Build FAILED")).await,
        "saw a failure"
    );
    assert_eq!(p.remaining(), 0);
}

#[tokio::test]
async fn file_order_wins_across_filters() {
    let p = script(
        r#"
        [[reply]]
        text = "generic first"
        [[reply]]
        agent = "alice"
        turn = 1
        text = "specific second"
        "#,
    );
    let r = req("alice", "executor", 1, "go");
    assert_eq!(text(&p, &r).await, "generic first");
    assert_eq!(text(&p, &r).await, "specific second");
}

#[tokio::test]
async fn when_matches_only_the_latest_message() {
    let p = script(
        r#"
        [[reply]]
        when = "be brief"
        text = "matched the system prompt"
        "#,
    );
    let err = p.complete(&req("a", "r", 1, "task")).await.unwrap_err();
    assert!(
        matches!(err, ProviderError::NoScriptedReply { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn system_matches_only_the_system_prompt() {
    let p = script(
        r#"
        [[reply]]
        system = "task"
        text = "wrong: matched the task"
        [[reply]]
        system = "^be brief$"
        when = "task"
        text = "both"
        "#,
    );
    assert_eq!(text(&p, &req("a", "r", 1, "task")).await, "both");
    let err = parse_err("[[reply]]\nsystem = \"(\"\ntext = \"x\"\n");
    assert!(err.to_string().contains("key `system`"), "{err}");
}

#[tokio::test]
async fn conversation_matches_the_whole_exchange_but_the_system_prompt() {
    let p = script(
        r#"
        [[reply]]
        conversation = "be brief"
        text = "wrong: matched the system prompt"
        [[reply]]
        conversation = "(?s)^user: first\nassistant: one\ncall read_file \\{\"path\":\"a\"\\}\ntool: A\nuser: second\n$"
        text = "whole exchange"
        "#,
    );
    let mut r = req("a", "r", 1, "first");
    r.messages.extend([
        Message::assistant(
            "one",
            vec![crewbox::unstable::provider::ToolCall::new(
                "c1",
                "read_file",
                serde_json::json!({"path": "a"}),
            )],
        ),
        Message::tool("c1", "A"),
        Message::user("second"),
    ]);
    assert_eq!(text(&p, &r).await, "whole exchange");
    let err = parse_err("[[reply]]\nconversation = \"(\"\ntext = \"x\"\n");
    assert!(err.to_string().contains("key `conversation`"), "{err}");
}

#[tokio::test]
async fn entries_are_consumed_unless_repeat() {
    let p = script(
        r#"
        [[reply]]
        text = "once"
        [[reply]]
        text = "again"
        repeat = true
        [[reply]]
        text = "never reached"
        "#,
    );
    let r = req("a", "r", 1, "x");
    assert_eq!(text(&p, &r).await, "once");
    for _ in 0..5 {
        assert_eq!(text(&p, &r).await, "again");
    }
    assert_eq!(p.remaining(), 2);
}

#[tokio::test]
async fn tool_calls_get_sequential_ids_and_tool_use_stop() {
    let p = script(
        r#"
        [[reply]]
        repeat = true
        text = "writing"
        [[reply.tool_calls]]
        name = "write_file"
        args = { path = "a.txt", content = "hi", lines = [1, 2] }
        [[reply.tool_calls]]
        name = "finish"
        "#,
    );
    let c = p.complete(&req("a", "r", 1, "x")).await.unwrap();
    assert_eq!(c.stop, StopReason::ToolUse);
    assert_eq!(c.tool_calls.len(), 2);
    assert_eq!(c.tool_calls[0].id, "call_1");
    assert_eq!(c.tool_calls[0].name, "write_file");
    assert_eq!(
        c.tool_calls[0].args,
        serde_json::json!({"path": "a.txt", "content": "hi", "lines": [1, 2]})
    );
    assert_eq!(c.tool_calls[1].args, serde_json::json!({}));
    let c = p.complete(&req("a", "r", 2, "x")).await.unwrap();
    assert_eq!(c.tool_calls[0].id, "call_3");
}

#[tokio::test]
async fn usage_is_given_or_estimated() {
    let p = script(
        r#"
        [[reply]]
        text = "12345678"
        [[reply]]
        text = "x"
        usage = { input = 100, output = 7 }
        "#,
    );
    let r = req("a", "r", 1, "abcd");
    let c = p.complete(&r).await.unwrap();
    assert_eq!(c.stop, StopReason::EndTurn);
    assert_eq!(
        c.usage,
        Usage {
            input: 3,
            output: 2
        }
    );
    let c = p.complete(&r).await.unwrap();
    assert_eq!(
        c.usage,
        Usage {
            input: 100,
            output: 7
        }
    );
}

#[tokio::test]
async fn injected_faults_map_to_provider_errors() {
    let p = script(
        r#"
        [[reply]]
        error = "timeout"
        [[reply]]
        error = "server"
        [[reply]]
        error = "rate-limit"
        [[reply]]
        error = "connection"
        [[reply]]
        text = "recovered"
        "#,
    );
    let r = req("a", "r", 1, "x");
    assert!(matches!(
        p.complete(&r).await,
        Err(ProviderError::Timeout(_))
    ));
    assert!(matches!(
        p.complete(&r).await,
        Err(ProviderError::Server { status: 500, .. })
    ));
    assert!(matches!(
        p.complete(&r).await,
        Err(ProviderError::RateLimited {
            retry_after: None,
            ..
        })
    ));
    assert!(matches!(
        p.complete(&r).await,
        Err(ProviderError::Connection(_))
    ));
    assert_eq!(text(&p, &r).await, "recovered");
}

#[tokio::test(start_paused = true)]
async fn delay_is_applied() {
    let p = script("[[reply]]\ntext = \"slow\"\ndelay_ms = 1500\n");
    let t0 = tokio::time::Instant::now();
    assert_eq!(text(&p, &req("a", "r", 1, "x")).await, "slow");
    assert_eq!(t0.elapsed(), Duration::from_millis(1500));
}

#[tokio::test]
async fn no_match_names_agent_role_and_turn() {
    let p = script("[[reply]]\nagent = \"planner\"\ntext = \"plan\"\n");
    let err = p
        .complete(&req("alice", "executor", 4, "x"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "script has no reply for agent `alice` (role `executor`) at turn 4"
    );
    assert!(!err.is_retryable());
}

fn parse_err(text: &str) -> String {
    match ScriptedProvider::parse(text, "bad.toml") {
        Ok(_) => panic!("script should not parse"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn parse_errors_name_file_entry_and_key() {
    let e = parse_err("[[reply]]\ntext = \"a\"\n[[reply]]\ntext = \"b\"\nagnet = \"x\"\n");
    assert!(
        e.starts_with("script bad.toml: [[reply]] #2, key `agnet`: unknown key"),
        "{e}"
    );
    let e = parse_err("[[reply]]\nwhen = \"(unclosed\"\n");
    assert!(
        e.starts_with("script bad.toml: [[reply]] #1, key `when`: invalid regex"),
        "{e}"
    );
    let e = parse_err("[[reply]]\nerror = \"exploded\"\n");
    assert!(
        e.starts_with("script bad.toml: [[reply]] #1, key `error`:"),
        "{e}"
    );
    assert!(e.contains("exploded"), "{e}");
    let e = parse_err("[[reply]]\ntext = \"a\"\n[[reply.tool_calls]]\nname = \"x\"\nargz = {}\n");
    assert!(e.contains("key `tool_calls`") && e.contains("argz"), "{e}");
    let e = parse_err("[[reply]]\nturn = 0\ntext = \"a\"\n");
    assert!(e.contains("key `turn`: turns are 1-based"), "{e}");
    let e = parse_err("[[reply]]\nagent = \"a\"\n");
    assert!(e.contains("needs `text`, `tool_calls` or `error`"), "{e}");
    let e = parse_err("[[replies]]\ntext = \"a\"\n");
    assert!(e.contains("unknown top-level key `replies`"), "{e}");
    let e = parse_err("[[reply]\n");
    assert!(e.starts_with("script bad.toml:"), "{e}");
}

#[test]
fn from_file_reads_and_reports_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, "[[reply]]\ntext = \"hi\"\n").unwrap();
    let p = ScriptedProvider::from_file(&path).unwrap();
    assert_eq!(p.len(), 1);
    let missing = dir.path().join("nope.toml");
    let err = ScriptedProvider::from_file(&missing).unwrap_err();
    assert!(matches!(err, ScriptError::Read { .. }));
    assert!(err.to_string().contains("nope.toml"), "{err}");
}

#[test]
fn the_documented_example_parses() {
    let doc = include_str!("../../src/provider/SCRIPT_FORMAT.md");
    let example = doc
        .split("```toml")
        .nth(2)
        .and_then(|s| s.split("```").next())
        .expect("example block");
    let p = ScriptedProvider::parse(example, "SCRIPT_FORMAT.md").unwrap();
    assert_eq!(p.len(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_agents_share_one_script_without_double_answers() {
    let mut text = String::new();
    for i in 0..2000 {
        text.push_str(&format!(
            "[[reply]]\nagent = \"a{}\"\ntext = \"r{i}\"\n",
            i % 500
        ));
    }
    let p = Arc::new(script(&text));
    let mut tasks = Vec::new();
    for a in 0..500 {
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for turn in 1..=4 {
                got.push(
                    p.complete(&req(&format!("a{a}"), "worker", turn, "x"))
                        .await
                        .unwrap()
                        .text,
                );
            }
            got
        }));
    }
    let mut all = Vec::new();
    for (a, t) in tasks.into_iter().enumerate() {
        let got = t.await.unwrap();
        let want: Vec<String> = (0..4).map(|k| format!("r{}", a + 500 * k)).collect();
        assert_eq!(got, want);
        all.extend(got);
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 2000);
    assert_eq!(p.remaining(), 0);
}

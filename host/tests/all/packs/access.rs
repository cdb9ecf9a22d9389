//! The access ceiling: granted = min(requested, ceiling). Imported repository packs
//! are read-only until the user raises their ceiling (in the user's config for every
//! trusted repository, or in one repository's trust record); an untrusted repository
//! is always read-only; the user's own agents get what they ask for; a read-only run
//! lowers everything again — checked in `team show` and in the tools a real model
//! server is offered.

use std::collections::BTreeMap;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::fixtures;
use super::{Fx, member, text, warnings};
use crate::support::http::{Reply, TestServer};

fn access_of(t: &serde_json::Value) -> BTreeMap<String, String> {
    t["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                m["access"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn all(t: &serde_json::Value, want: &str) -> bool {
    access_of(t).values().all(|a| a == want)
}

fn fixture() -> Fx {
    let fx = Fx::new(|work| {
        fixtures::squad(work);
        fixtures::claude(work);
        Fx::write(
            work,
            ".crewbox/teams/ops.toml",
            "mode = \"broadcast\"\n[[members]]\nname = \"op\"\naccess = \"full\"\n",
        );
        // What a repository says about packs is never a ceiling.
        Fx::write(
            work,
            ".crewbox/config.toml",
            "[packs]\nmax_access = \"full\"\n",
        );
    });
    fixtures::user_claude(&fx.home());
    fx
}

#[test]
fn packs_are_read_only_until_the_user_raises_their_ceiling() {
    let fx = fixture();
    // Untrusted: every repository member is read-only; the user's own is not.
    let squad = fx.show("squad");
    assert!(all(&squad, "read-only"), "{squad:#}");
    assert!(all(&fx.show("ops"), "read-only"));
    let claude = fx.show("claude");
    assert_eq!(member(&claude, "helper")["access"], "full");
    assert_eq!(member(&claude, "fixer")["access"], "read-only");
    assert!(
        warnings(&squad)
            .iter()
            .any(|w| w.contains("`read-only` (squad declares no tools")
                && w.contains("the repository is not trusted")),
        "{:?}",
        warnings(&squad)
    );
    // Trusted: the native team keeps its access, packs stay read-only and say how
    // to raise it; the repository's own `[packs]` is ignored.
    fx.trust(&[]);
    assert!(all(&fx.show("ops"), "full"));
    let squad = fx.show("squad");
    assert!(all(&squad, "read-only"), "{squad:#}");
    assert!(
        warnings(&squad)
            .iter()
            .any(|w| w.contains("`[packs] max_access = \"full\"`")
                && w.contains("crewbox trust --pack-access full")),
        "{:?}",
        warnings(&squad)
    );
    let show = fx.run(&["team", "show", "squad"]);
    assert!(
        String::from_utf8_lossy(&show.stderr).contains("packs"),
        "the ignored repository setting is announced: {}",
        text(&show)
    );
    // The user's config raises it for every trusted repository; requested stays the
    // floor (a read-only agent stays read-only).
    fx.user_config("[packs]\nmax_access = \"full\"\n");
    assert!(all(&fx.show("squad"), "full"));
    let claude = fx.show("claude");
    assert_eq!(member(&claude, "fixer")["access"], "full");
    assert_eq!(member(&claude, "code-reviewer")["access"], "read-only");
    assert_eq!(member(&claude, "planner")["access"], "read-only");
    // One repository's trust record wins over the user's default, both ways.
    fx.trust(&["--pack-access", "read-only"]);
    assert!(all(&fx.show("squad"), "read-only"));
    let config = fx.json(&["config"]);
    let setting = config["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == "packs.max_access")
        .unwrap()
        .clone();
    assert_eq!(setting["value"], "read-only");
    assert_eq!(setting["source"]["kind"], "trust");
    fx.user_config("");
    fx.trust(&["--pack-access", "full"]);
    assert!(all(&fx.show("squad"), "full"));
    // A plain re-trust keeps the record's ceiling; revoking drops it with the trust.
    fx.trust(&[]);
    assert!(all(&fx.show("squad"), "full"));
    let out = fx.run(&["trust", "--revoke"]);
    assert!(out.status.success());
    fx.user_config("[packs]\nmax_access = \"full\"\n");
    assert!(
        all(&fx.show("squad"), "read-only"),
        "untrusted is always read-only"
    );
    fx.trust(&[]);
    assert!(all(&fx.show("squad"), "full"));
    assert_eq!(
        fx.json(&["trust", "--list"])[0]["pack_access"],
        json!(null),
        "the revoked record's ceiling is gone"
    );
}

fn answer(text: &str) -> Reply {
    Reply::json(
        200,
        json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 3}
        }),
    )
}

/// Runs every Squad member at once against a model server and returns, per member
/// (found by the charter file its system prompt names), whether it was offered a
/// tool that writes or runs commands.
async fn tools_offered(fx: &Fx, extra: &[&str]) -> BTreeMap<String, bool> {
    let server = TestServer::start((0..8).map(|_| answer("done")).collect()).await;
    fx.user_config(&format!(
        "{}[providers.mine]\nkind = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"claude-test\"\n\
         stream = false\nmax_retries = 0\n",
        extra.first().copied().unwrap_or(""),
        server.url
    ));
    let mut args = vec![
        "run",
        "look around",
        "--team",
        "squad",
        "--mode",
        "broadcast",
        "--provider",
        "mine",
        "--json",
    ];
    args.extend(&extra[1..]);
    let mut cmd = crate::support::repo::command(fx.path(), &args);
    cmd.env("ANTHROPIC_API_KEY", "sk-test");
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    server.wait_for_requests(4).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut by_member = BTreeMap::new();
    for r in server.requests() {
        let body = r.json();
        let system = body["system"].to_string();
        let Some(at) = system.find("from .squad/agents/") else {
            continue;
        };
        let name: String = system[at + "from .squad/agents/".len()..]
            .chars()
            .take_while(|c| *c != '/')
            .collect();
        let writes = body["tools"].as_array().is_some_and(|tools| {
            tools.iter().any(|t| {
                matches!(
                    t["name"].as_str(),
                    Some("write_file" | "edit_file" | "run_command")
                )
            })
        });
        by_member.insert(name, writes);
    }
    by_member
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_offered_follow_the_granted_access() {
    let fx = Fx::new(fixtures::squad);
    fx.trust(&[]);
    let members = ["eecom", "fact-checker", "flight", "mcmanus"];
    let none: BTreeMap<String, bool> = members.iter().map(|m| ((*m).to_owned(), false)).collect();
    let every: BTreeMap<String, bool> = members.iter().map(|m| ((*m).to_owned(), true)).collect();
    assert_eq!(tools_offered(&fx, &[""]).await, none, "trusted, not raised");
    let raised = "[packs]\nmax_access = \"full\"\n";
    assert_eq!(
        tools_offered(&fx, &[raised]).await,
        every,
        "raised by the user"
    );
    assert_eq!(
        tools_offered(&fx, &[raised, "--read-only"]).await,
        none,
        "a read-only run lowers it again"
    );
}

//! A repository team may shadow the user's, never escalate; its size is capped.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repository_team_shadows_the_users_but_never_escalates() {
    let fx = Fx::new(|work, _| {
        write(&work.join(".crewbox/teams/review.toml"), FULL_REVIEW);
    })
    .await;
    let user_team = fx.home().join("config/crewbox/teams/review.toml");
    write(
        &user_team,
        "mode = \"broadcast\"\n[[members]]\nname = \"a\"\n[[members]]\nname = \"b\"\n",
    );
    let mut outputs = Vec::new();
    for trusted in [false, true] {
        if trusted {
            fx.trust().await;
        }
        let show = fx.run(&["team", "show", "review", "--json"]).await;
        let t = json_of(&show);
        assert_eq!(t["source"], "repo", "{t}");
        assert_eq!(
            t["shadows"],
            json!([{"source": "user", "path": user_team}]),
            "{t}"
        );
        let want = if trusted { "full" } else { "read-only" };
        for m in t["members"].as_array().unwrap() {
            assert_eq!(m["access"], want, "{t}");
            assert_eq!(m["requested_access"], "full", "{t}");
            assert_eq!(
                m["provider"],
                Value::Null,
                "`pwn` is no provider of the user's: {t}"
            );
        }
        let list = fx.run(&["team", "list"]).await;
        assert!(
            String::from_utf8_lossy(&list.stdout).contains("(shadows user"),
            "{}",
            text(&list)
        );
        let before = fx.legit.requests().len();
        let run = fx
            .run(&["run", "review it", "--team", "review", "--json"])
            .await;
        assert!(run.status.success(), "{}", text(&run));
        let sent = &fx.legit.requests()[before..];
        assert_eq!(sent.len(), 2);
        for r in sent {
            let tools: Vec<String> = r.json()["tools"]
                .as_array()
                .map(|t| {
                    t.iter()
                        .map(|t| t["name"].as_str().unwrap().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            let writes = tools
                .iter()
                .any(|n| n == "write_file" || n == "run_command");
            assert_eq!(writes, trusted, "tools offered: {tools:?}");
        }
        outputs.extend([show, list, run]);
    }
    fx.assert_clean(&outputs.iter().collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_teams_texts_and_quotas_are_capped() {
    let fx = Fx::new(|work, _| {
        let mut many = String::from("mode = \"broadcast\"\n");
        for i in 0..300 {
            many.push_str(&format!("[[members]]\nname = \"m{i}\"\n"));
        }
        write(&work.join(".crewbox/teams/big.toml"), &many);
        write(
            &work.join(".crewbox/teams/wordy.toml"),
            &format!(
                "mode = \"broadcast\"\n[[members]]\nname = \"w\"\ncharter = \"{}END\"\n",
                "x".repeat(10_000)
            ),
        );
        write(
            &work.join(".crewbox/config.toml"),
            "default_mode = \"crew\"\nmax_concurrent = 256\n[quotas]\nmax_tokens = 1000000000\nmax_turns = 3\n",
        );
    })
    .await;
    let script = fx.home().join("echo.toml");
    write(&script, "[[reply]]\nrepeat = true\ntext = \"ok\"\n");
    let mut outputs = Vec::new();
    for trusted in [false, true] {
        if trusted {
            fx.trust().await;
        }
        let show = fx.run(&["team", "show", "big", "--json"]).await;
        let t = json_of(&show);
        assert_eq!(
            t["members"].as_array().unwrap().len(),
            64,
            "{}",
            text(&show)
        );
        assert!(
            t["warnings"][0].as_str().unwrap().contains("300 members"),
            "{t}"
        );
        let run = fx
            .run(&[
                "run",
                "hi",
                "--team",
                "big",
                "--script",
                script.to_str().unwrap(),
                "--json",
            ])
            .await;
        assert!(run.status.success(), "{}", text(&run));
        assert_eq!(json_of(&run)["agents"].as_array().unwrap().len(), 64);
        // A charter over 4,000 characters reaches the model cut, with a marker.
        let before = fx.legit.requests().len();
        let wordy = fx.run(&["run", "hi", "--team", "wordy", "--json"]).await;
        assert!(wordy.status.success(), "{}", text(&wordy));
        let body = &fx.legit.requests()[before].body;
        assert!(
            body.contains("[truncated]") && !body.contains("END"),
            "charter not cut"
        );
        assert!(!body.contains(&"x".repeat(4_001)));
        let config = fx.run(&["config", "--json"]).await;
        let c = json_of(&config);
        assert_eq!(setting(&c, "quotas.max_tokens")["value"], 500_000, "{c}");
        assert_eq!(setting(&c, "max_concurrent")["value"], 4, "{c}");
        let ignored: Vec<&str> = c["ignored"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["key"].as_str().unwrap())
            .collect();
        if trusted {
            // Lowering applies; raising is clamped, with a note each.
            assert_eq!(setting(&c, "default_mode")["value"], "crew");
            assert_eq!(setting(&c, "quotas.max_turns")["value"], 3);
            assert_eq!(setting(&c, "quotas.max_turns")["source"]["kind"], "repo");
            assert_eq!(ignored, ["max_concurrent", "quotas.max_tokens"], "{c}");
            assert!(
                stderr(&config).is_empty(),
                "config prints, it does not warn"
            );
            assert!(
                stderr(&show).contains("`quotas.max_tokens = 1000000000` is clamped to 500000"),
                "{}",
                text(&show)
            );
        } else {
            assert_eq!(setting(&c, "default_mode")["value"], "auto");
            assert_eq!(setting(&c, "quotas.max_turns")["value"], 30);
            assert_eq!(ignored, ["*"], "{c}");
        }
        outputs.extend([show, run, wordy, config]);
    }
    fx.assert_clean(&outputs.iter().collect::<Vec<_>>());
}

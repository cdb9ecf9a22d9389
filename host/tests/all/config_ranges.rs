//! Settings that cannot mean what was written are refused when the file is loaded,
//! with an error naming the file, the key and what is allowed — a user's file, a
//! trusted repository's and a team file alike — and nothing runs or is stored: a wall
//! time of `u64::MAX` once panicked a tokio worker and left the agent `running`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crewbox::unstable::agent::AgentState;
use crewbox::unstable::agent::manager::SpawnOptions;
use crewbox::unstable::agent::permissions::CapSet;
use crewbox::unstable::config::Quotas;
use crewbox::unstable::provider::scripted::ScriptedProvider;

use crate::support::agents::{agent_spec, fixture, insert_run};
use crate::support::repo::{bin, git_repo};

const SCRIPT: &str = "[[reply]]\nrepeat = true\ntext = \"done\"\n";

fn user_config(dir: &Path, text: &str) -> std::path::PathBuf {
    let config = dir.join("config/crewbox/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, text).unwrap();
    config
}

/// `crewbox run` with the scripted model; returns its stderr after checking it failed
/// as a usage error and stored nothing.
fn refused(dir: &Path) -> String {
    let script = dir.join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = bin(
        dir,
        &[
            "run",
            "go",
            "--mode",
            "single",
            "--script",
            script.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        !crate::support::repo::state_dir(dir)
            .join("crewbox.db")
            .exists(),
        "nothing is stored: {stderr}"
    );
    stderr
}

#[test]
fn out_of_range_settings_are_refused_naming_file_key_and_range() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    std::fs::create_dir_all(d.join("home")).unwrap();
    let home = d.join("home").display().to_string();
    let state = d.join("xdg-state").display().to_string();
    let cases: Vec<(String, &str, &str)> = vec![
        (
            "[quotas]\nwall_time_s = 18446744073709551615\n".into(),
            "quotas.wall_time_s",
            "1..=31536000 seconds",
        ),
        ("[quotas]\nmax_cost = -1.0\n".into(), "quotas.max_cost", "above 0"),
        ("[quotas]\nmax_cost = nan\n".into(), "quotas.max_cost", "finite"),
        ("[quotas]\nmax_cost = inf\n".into(), "quotas.max_cost", "finite"),
        ("[quotas]\nmodel_timeout_s = 0\n".into(), "quotas.model_timeout_s", "1..="),
        ("[quotas]\nmax_turns = 0\n".into(), "quotas.max_turns", "at least 1"),
        ("[quotas]\nmax_tokens = 0\n".into(), "quotas.max_tokens", "at least 1"),
        (
            "[quotas]\nmax_output_tokens = 0\n".into(),
            "quotas.max_output_tokens",
            "at least 1",
        ),
        (
            "[providers.x]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n\
             temperature = 2.5\n"
                .into(),
            "providers.x.temperature",
            "0..=2",
        ),
        (
            "[providers.x]\nkind = \"anthropic\"\nmodel = \"m\"\ntemperature = 1.5\n".into(),
            "providers.x.temperature",
            "0..=1",
        ),
        (
            "[providers.x]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n\
             stop = [\"a\", \"b\", \"c\", \"d\", \"e\"]\n"
                .into(),
            "providers.x.stop",
            "at most 4",
        ),
        (
            "[providers.x]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n\
             max_concurrent = 0\n"
                .into(),
            "providers.x.max_concurrent",
            "at least 1",
        ),

        ("dispatch_history = 0\n".into(), "dispatch_history", "at least 1"),
        ("max_concurrent = 0\n".into(), "max_concurrent", "1..=256"),
        (
            "[providers.x]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n\
             stall_timeout_s = 1e300\n"
                .into(),
            "providers.x.stall_timeout_s",
            "at most 31536000 seconds",
        ),
        (
            "[providers.x]\nkind = \"anthropic\"\nmodel = \"m\"\nthinking_budget_tokens = 1000\n"
                .into(),
            "providers.x.thinking_budget_tokens",
            "at least 1024",
        ),
        (
            "[providers.x]\nkind = \"anthropic\"\nmodel = \"m\"\nthinking_budget_tokens = 2048\n\
             temperature = 0.5\n"
                .into(),
            "providers.x.temperature",
            "thinking_budget_tokens",
        ),
        (
            "[providers.x]\nkind = \"anthropic\"\nmodel = \"m\"\nprice_input_per_mtok = -3.0\n"
                .into(),
            "providers.x.price_input_per_mtok",
            "0 or more",
        ),
        (
            "[plugins.grants.judge]\npath = \"judge.wasm\"\nmodel = { max_tokens = 100, timeout_s = 0 }\n"
                .into(),
            "plugins.grants.judge.model.timeout_s",
            "1..=",
        ),
        ("[nats]\nack_wait_s = 0\n".into(), "nats.ack_wait_s", "1..=3600"),
        ("[sandbox]\nwrite = [\"/\"]\n".into(), "sandbox.write", "the whole filesystem"),
        ("[sandbox]\nwrite = [\"~\"]\n".into(), "sandbox.write", "must be an absolute path"),
        (
            format!("[sandbox]\nwrite = [\"{home}\"]\n"),
            "sandbox.write",
            "your home directory",
        ),
        ("[sandbox]\nread = [\"~/../\"]\n".into(), "sandbox.read", "your home directory"),
        (
            format!("[sandbox]\nwrite = [\"{state}\"]\n"),
            "sandbox.write",
            "crewbox's state directory",
        ),
        (
            "[providers.cli]\nkind = \"command\"\ncommand = [\"true\"]\nread = [\"~/\"]\n".into(),
            "providers.cli.read",
            "your home directory",
        ),
    ];
    for (text, key, allowed) in &cases {
        let path = user_config(d, text);
        let stderr = refused(d);
        assert!(
            stderr.contains(&path.display().to_string())
                && stderr.contains(key)
                && stderr.contains(allowed),
            "{text}: {stderr}"
        );
    }
    // The state base in use, from the command line, is protected too.
    let base = d.join("state");
    user_config(d, &format!("[sandbox]\nwrite = [\"{}\"]\n", base.display()));
    let stderr = refused(d);
    assert!(stderr.contains("crewbox's state base"), "{stderr}");

    // A trusted repository's values are checked as strictly, with their line.
    user_config(d, "");
    std::fs::create_dir_all(d.join("repo/.crewbox")).unwrap();
    std::fs::write(
        d.join("repo/.crewbox/config.toml"),
        "default_mode = \"single\"\n[quotas]\nwall_time_s = 18446744073709551615\n",
    )
    .unwrap();
    assert!(bin(d, &["trust"]).status.success());
    let stderr = refused(d);
    assert!(
        stderr.contains(".crewbox/config.toml:3") && stderr.contains("quotas.wall_time_s"),
        "{stderr}"
    );
    std::fs::write(
        d.join("repo/.crewbox/config.toml"),
        "dispatch_history = 0\n",
    )
    .unwrap();
    // Trust covers the files as they were: the changed config is trusted again.
    assert!(bin(d, &["trust"]).status.success());
    let stderr = refused(d);
    assert!(
        stderr.contains(".crewbox/config.toml:1") && stderr.contains("dispatch_history"),
        "{stderr}"
    );
    std::fs::remove_file(d.join("repo/.crewbox/config.toml")).unwrap();

    // A team file's durations become deadlines: one no clock holds is refused.
    std::fs::create_dir_all(d.join("repo/.crewbox/teams")).unwrap();
    std::fs::write(
        d.join("repo/.crewbox/teams/t.toml"),
        "mode = \"broadcast\"\nfirst_wave_s = 18446744073709551615\n[[members]]\nname = \"a\"\n",
    )
    .unwrap();
    let script = d.join("script.toml");
    let out = bin(
        d,
        &[
            "run",
            "go",
            "--team",
            "t",
            "--script",
            script.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("t.toml") && stderr.contains("first_wave_s") && stderr.contains("a year"),
        "{stderr}"
    );
}

/// A quota that never went through a file check (a task from another machine) with a
/// wall time no clock can hold: the agent runs and ends; no worker panics.
#[tokio::test]
async fn a_wall_time_no_clock_can_hold_is_no_deadline_not_a_panic() {
    let f = fixture(1);
    let provider = Arc::new(ScriptedProvider::parse(SCRIPT, "test script").unwrap());
    let quotas = Quotas {
        wall_time: Duration::from_secs(u64::MAX),
        model_timeout: Duration::from_secs(u64::MAX),
        max_turns: u32::MAX,
        grace_turns: u32::MAX,
        ..Quotas::default()
    };
    let spec = agent_spec(&f, provider, quotas, CapSet::read_only());
    insert_run(&f.store, &spec.run_id).await;
    let id = spec.id.clone();
    let out = f
        .manager
        .spawn(spec, SpawnOptions::default())
        .await
        .unwrap()
        .wait()
        .await;
    assert_eq!(out.state, AgentState::Completed, "{:?}", out.error);
    let stored = f.store.agent(&id).await.unwrap().unwrap();
    assert_eq!(stored.state, AgentState::Completed);
}

//! One daemon per state directory; `schedule add` refuses what would fail every fire;
//! `schedule list` shows what a job runs and why its last fire failed.

use std::process::Stdio;
use std::time::Duration;

use crate::support::procs::wait_for;
use crate::support::repo::{bin, command, git_repo};

fn user_config(dir: &std::path::Path, text: &str) {
    let config = dir.join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), text).unwrap();
}

fn jobs(dir: &std::path::Path) -> serde_json::Value {
    let out = bin(dir, &["schedule", "list", "--json"]);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn schedule_add_refuses_what_every_fire_would_fail_on() {
    let dir = git_repo(|_| {});
    user_config(dir.path(), "");
    let add = |extra: &[&str]| {
        let mut args = vec!["schedule", "add", "--every", "1h", "--prompt", "x"];
        args.extend(extra);
        bin(dir.path(), &args)
    };
    for (extra, says) in [
        (&["--tz", "Mars/Base"][..], "Mars/Base"),
        (&["--team", "nope"], "unknown team `nope`"),
        (&["--provider", "nope"], "unknown provider `nope`"),
        (&["--mode", "orchestrate"], "runs a team"),
    ] {
        let out = add(extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?}: {err}");
    }
    assert_eq!(jobs(dir.path()), serde_json::json!([]), "nothing was added");
    let ok = add(&[
        "--tz",
        "Europe/Paris",
        "--provider",
        "anthropic",
        "--model",
        "m1",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    // The prompt is positional, as in `crewbox run`; `--prompt` still works.
    let positional = bin(dir.path(), &["schedule", "add", "--every", "2h", "tidy up"]);
    assert!(
        positional.status.success(),
        "{}",
        String::from_utf8_lossy(&positional.stderr)
    );
    let prompts: Vec<_> = jobs(dir.path())
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["prompt"].clone())
        .collect();
    assert!(
        prompts.contains(&serde_json::json!("tidy up")),
        "{prompts:?}"
    );
    let list = String::from_utf8_lossy(&bin(dir.path(), &["schedule", "list"]).stdout).into_owned();
    assert!(
        list.contains("mode default · team - · provider anthropic · model m1"),
        "{list}"
    );
}

#[test]
fn a_second_daemon_exits_2_naming_the_first_and_list_shows_the_last_error() {
    let dir = git_repo(|_| {});
    // A provider whose script is missing: the name checks out, every run fails.
    user_config(
        dir.path(),
        "[providers.broken]\nkind = \"scripted\"\nscript = \"/nonexistent/crewbox-script.toml\"\n",
    );
    let add = bin(
        dir.path(),
        &[
            "schedule",
            "add",
            "--every",
            "1h",
            "--prompt",
            "x",
            "--name",
            "j",
            "--mode",
            "single",
            "--provider",
            "broken",
        ],
    );
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );
    assert!(
        bin(dir.path(), &["schedule", "run-now", "j"])
            .status
            .success()
    );
    let mut first = command(dir.path(), &["daemon"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let failed = wait_for(Duration::from_secs(60), || {
        jobs(dir.path())[0]["last_error"].is_string()
    });
    let mut second = command(dir.path(), &["daemon"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut refused = false;
    while !refused && std::time::Instant::now() < deadline {
        refused = matches!(second.try_wait(), Ok(Some(_)));
        std::thread::sleep(Duration::from_millis(20));
    }
    if !refused {
        let _ = second.kill();
    }
    let second = second.wait_with_output().unwrap();
    let _ = unsafe { libc::kill(first.id() as libc::pid_t, libc::SIGTERM) };
    let first_exit = first.wait().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(refused, "a second daemon ran beside the first: {err}");
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("pid {}", first.id())), "{err}");
    assert!(first_exit.success(), "the first daemon stops cleanly");
    assert!(
        failed,
        "the fire never recorded an error: {}",
        jobs(dir.path())
    );
    let job = &jobs(dir.path())[0];
    assert_eq!(job["provider"], "broken", "{job}");
    assert_eq!(job["mode"], "single", "{job}");
    assert!(
        job["last_error"]
            .as_str()
            .unwrap()
            .contains("crewbox-script.toml"),
        "{job}"
    );
    let list = String::from_utf8_lossy(&bin(dir.path(), &["schedule", "list"]).stdout).into_owned();
    assert!(list.contains("last error: "), "{list}");
}

//! The real `crewbox` binary in temp dirs.

use std::path::Path;
use std::process::{Command, Output};

fn crewbox(dir: &Path, args: &[&str]) -> Output {
    use crate::support::cli;
    cli::crewbox(dir, &cli::Homes::hidden_in(dir), args)
        .output()
        .expect("running crewbox")
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn demo_runs_a_crew_that_fixes_the_failing_test_on_a_branch() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let out = crewbox(
        dir.path(),
        &["demo", "--json", "--dir", demo.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["mode"], "crew");
    assert_eq!(report["status"], "completed");
    assert_eq!(report["exit_reason"], "goal-met");
    assert_eq!(report["decision"]["source"], "explicit");
    assert_eq!(report["verdict"]["verdict"], "PASS");
    assert_eq!(report["revisions"], 0);
    let agents = report["agents"].as_array().unwrap();
    let roles: Vec<&str> = agents.iter().map(|a| a["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["planner", "executor", "reviewer"]);
    for key in [
        "id",
        "name",
        "role",
        "parent",
        "task",
        "state",
        "turns",
        "tool_calls",
        "tokens",
        "duration_ms",
        "result",
    ] {
        assert!(agents[0].get(key).is_some(), "agent lacks `{key}`");
    }
    let executor = &agents[1];
    assert!(executor["tool_calls"].as_u64().unwrap() >= 4);
    assert!(
        executor["task"]
            .as_str()
            .unwrap()
            .contains("Run the test suite"),
        "the plan reached the executor"
    );
    // Self-healing: handoff-schema failed the first summary, passed after one fix round.
    let verdicts = executor["verdicts"].as_array().unwrap();
    let handoff: Vec<_> = verdicts
        .iter()
        .filter(|v| v["validator"] == "handoff-schema")
        .collect();
    assert_eq!(handoff.len(), 2, "{verdicts:?}");
    assert_eq!(
        (handoff[0]["round"].as_u64(), handoff[0]["outcome"].as_str()),
        (Some(0), Some("failed"))
    );
    assert_eq!(
        (handoff[1]["round"].as_u64(), handoff[1]["outcome"].as_str()),
        (Some(1), Some("passed"))
    );
    assert_eq!(executor["validation"], "passed");
    // The fix is committed on the executor's branch; the checkout is untouched.
    let branch = report["branch"]["branch"].as_str().unwrap();
    assert!(branch.starts_with("crewbox/"), "{branch}");
    let project = demo.join("project");
    assert!(
        std::fs::read_to_string(project.join("calc.py"))
            .unwrap()
            .contains("return a - b")
    );
    let show = Command::new("git")
        .args(["show", &format!("{branch}:calc.py")])
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&show.stdout).contains("return a + b"));
    // The reviewer saw the diff.
    assert!(
        agents[2]["task"]
            .as_str()
            .unwrap()
            .contains("+    return a + b")
    );
}

#[test]
fn run_with_a_script_prints_the_documented_json_and_status_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hi").unwrap();
    let script = dir.path().join("s.toml");
    std::fs::write(
        &script,
        "[[reply]]\nturn = 1\n[[reply.tool_calls]]\nname = \"read_file\"\nargs = { path = \"hello.txt\" }\n\n[[reply]]\nwhen = \"hi\"\ntext = \"it says hi\"\n",
    )
    .unwrap();
    let args = [
        "run",
        "what does hello.txt say?",
        "--mode",
        "single",
        "--script",
        "s.toml",
        "--json",
    ];
    // A plain directory is not a git repository: isolation must be turned off explicitly.
    let refused = crewbox(dir.path(), &args);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("not a git repository"),
        "{}",
        stderr(&refused)
    );
    let out = crewbox(dir.path(), &[&args[..], &["--isolation", "none"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(&out);
    for key in [
        "run_id",
        "mode",
        "status",
        "exit_reason",
        "result",
        "agents",
    ] {
        assert!(report.get(key).is_some(), "report lacks `{key}`");
    }
    assert_eq!(report["result"], "it says hi");
    let run_id = report["run_id"].as_str().unwrap();

    let status = crewbox(dir.path(), &["status", run_id, "--json"]);
    assert!(status.status.success(), "{}", stderr(&status));
    assert_eq!(json(&status)["result"], "it says hi");

    let events = crewbox(dir.path(), &["events", "--run", run_id]);
    assert!(events.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&events.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|e| e["kind"] == "tool.call" && e["data"]["tool"] == "read_file")
    );
    assert!(lines.iter().any(|e| e["kind"] == "run.finished"));
}

#[test]
fn bad_input_is_a_clear_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = crewbox(dir.path(), &["run", "x", "--provider", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown provider `nope`"),
        "{}",
        stderr(&out)
    );

    let out = crewbox(dir.path(), &["run", "x", "--script", "missing.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("missing.toml"), "{}", stderr(&out));

    std::fs::write(dir.path().join("bad.toml"), "[[reply]]\ntxet = \"typo\"\n").unwrap();
    let out = crewbox(dir.path(), &["run", "x", "--script", "bad.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("txet"), "{}", stderr(&out));

    // The user's config: unknown keys are errors there (a repository's are ignored).
    std::fs::create_dir_all(dir.path().join(".config/crewbox")).unwrap();
    std::fs::write(
        dir.path().join(".config/crewbox/config.toml"),
        "max_concurent = 3\n",
    )
    .unwrap();
    let out = crewbox(dir.path(), &["run", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("max_concurent") && err.contains("config.toml"),
        "{err}"
    );

    std::fs::write(
        dir.path().join(".config/crewbox/config.toml"),
        "[providers.remote]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\napi_key_env = \"CREWBOX_TEST_UNSET_KEY\"\n",
    )
    .unwrap();
    let out = crewbox(dir.path(), &["run", "x", "--provider", "remote"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("CREWBOX_TEST_UNSET_KEY"),
        "{}",
        stderr(&out)
    );

    let fresh = tempfile::tempdir().unwrap();
    // Nothing has run: an empty listing (every read-side command agrees), no store.
    let out = crewbox(fresh.path(), &["status"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "status without a store: {}",
        stderr(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("none yet"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !fresh.path().join(".state").exists(),
        "status must not create state"
    );
}

/// A value the command line parser refuses is quoted escaped, as all text crewbox
/// prints (probe 18: an OSC 52 clipboard write and a screen clear in `--mode` reached
/// the terminal raw); the exit code stays 2.
#[test]
fn a_refused_argument_is_quoted_escaped() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["run", "x", "--mode", "\x1b]52;c;aGk=\x07\x1b[2J"][..],
        &["run", "x", "--bogus\x1b[2J"][..],
        &["bogus\u{202e}cmd"][..],
    ] {
        let out = crewbox(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            !err.contains('\x1b') && !err.contains('\x07') && !err.contains('\u{202e}'),
            "{args:?}: {err:?}"
        );
        assert!(err.contains("error"), "{err}");
    }
}

/// An empty or blank prompt is a usage error, as `schedule add` says (probe 18: `run ""`
/// ran an agent on nothing).
#[test]
fn an_empty_prompt_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), "[[reply]]\ntext = \"done\"\n").unwrap();
    for prompt in ["", "  \n\t"] {
        let out = crewbox(
            dir.path(),
            &[
                "run",
                prompt,
                "--isolation",
                "none",
                "--script",
                "s.toml",
                "--json",
            ],
        );
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("prompt is empty"), "{}", stderr(&out));
    }
}

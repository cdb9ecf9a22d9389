//! Replaying recorded runs through the real binary: a crew run with the
//! scripted model is recorded; `crewbox replay RUN` re-runs it in a scratch state with
//! every model call answered from the recording and reproduces it (same report but
//! ids and times, same trees), leaving the repository's branches as they were; its
//! cassette (`crewbox export RUN --cassette FILE`) answers a run through a
//! `kind = "replay"` provider, as does the store's recording (`run = "r-…"`); a tool
//! that reads a changed file makes a later request differ, and the replay ends
//! `diverged` naming the first differing message. A cassette holds no key, and a
//! hostile one (malformed, another version, huge) is a clear error.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::support::repo::{bin, command, crewbox, git_repo};
use crate::support::script::writes_then;

const PROMPT: &str = "put gamma into notes.txt";

/// The planner reads `notes.txt` from the repository (it is read-only), the executor
/// writes it in its worktree, the reviewer passes the diff.
fn crew_script() -> String {
    format!(
        r#"
[[reply]]
agent = "planner"
turn = 1
[[reply.tool_calls]]
name = "read_file"
args = {{ path = "notes.txt" }}

[[reply]]
agent = "planner"
turn = 2
text = "1. Write gamma into notes.txt"
{}
[[reply]]
agent = "reviewer"
when = "(?m)^\\+gamma$"
text = "Correct.\nVERDICT: PASS"
"#,
        writes_then("executor", "notes.txt", "gamma\n", 0, "wrote it")
    )
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn branches(dir: &Path) -> BTreeSet<String> {
    let git = git2::Repository::open(dir.join("repo")).unwrap();
    git.branches(Some(git2::BranchType::Local))
        .unwrap()
        .map(|b| b.unwrap().0.name().unwrap().unwrap().to_owned())
        .collect()
}

/// The tree of the tip of an agent's branch artifact.
fn tip_tree(dir: &Path, agent: &Value) -> String {
    let git = git2::Repository::open(dir.join("repo")).unwrap();
    let tip = agent["branch"]["commits"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no commits on {agent}"));
    let commit = git.find_commit(git2::Oid::from_str(tip).unwrap()).unwrap();
    commit.tree_id().to_string()
}

/// A report with what differs between two runs of the same work taken out: ids (the
/// run's and its agents', also inside text such as branch names), times, commit ids
/// (they hold a commit time) and the replay's own counters.
fn normalised(report: &Value) -> Value {
    let mut ids = vec![report["run_id"].as_str().unwrap().to_owned()];
    for a in report["agents"].as_array().unwrap() {
        ids.push(a["id"].as_str().unwrap().to_owned());
    }
    // The repository's commits (a run's base) are the same in both runs; a commit the
    // run made (a later member's base is an earlier one's commit) holds its commit time.
    let mut kept: Vec<&str> = Vec::new();
    kept.extend(
        report
            .pointer("/integration/branch/base")
            .and_then(Value::as_str),
    );
    if report.get("integration").is_none() {
        kept.extend(
            report["agents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a["parent"].is_null())
                .filter_map(|a| a.pointer("/branch/base").and_then(Value::as_str)),
        );
    }
    fn walk(v: &mut Value, ids: &[String], kept: &[&str]) {
        match v {
            Value::String(s) => {
                for id in ids {
                    *s = s.replace(id.as_str(), "<id>");
                }
                let made_here = s.len() == 40
                    && s.bytes().all(|b| b.is_ascii_hexdigit())
                    && !kept.contains(&s.as_str());
                if made_here {
                    *s = "<commit>".into();
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, ids, kept)),
            Value::Object(map) => {
                for key in [
                    "duration_ms",
                    "commits",
                    "replay",
                    "created_at",
                    "finished_at",
                ] {
                    map.remove(key);
                }
                map.values_mut().for_each(|i| walk(i, ids, kept));
            }
            _ => {}
        }
    }
    let mut v = report.clone();
    walk(&mut v, &ids, &kept);
    v
}

fn write_user_config(dir: &Path, text: &str) {
    let config = dir.join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), text).unwrap();
}

#[test]
fn replay_reproduces_a_crew_run_and_reports_a_divergence() {
    let dir = git_repo(|_| {});
    let (out, original) = crewbox(
        dir.path(),
        &crew_script(),
        &["run", PROMPT, "--mode", "crew"],
    );
    assert!(out.status.success(), "{original}");
    assert_eq!(original["status"], "completed", "{original}");
    let run = original["run_id"].as_str().unwrap().to_owned();
    let before = branches(dir.path());

    // The replay reproduces the run: the same report but ids and times, the same
    // trees, every recorded call answered; the repository's branches are untouched.
    let out = bin(dir.path(), &["replay", &run, "--json"]);
    let replay = json(&out);
    assert!(
        out.status.success(),
        "{replay:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(replay["outcome"], "matched", "{replay:#}");
    assert_eq!(replay["identical"], true, "{replay:#}");
    assert_eq!(replay["recorded_calls"], replay["answered_calls"]);
    assert_eq!(
        replay["recorded_calls"], 5,
        "planner 2, executor 2, reviewer 1: {replay:#}"
    );
    let report = &replay["report"];
    assert_ne!(report["run_id"], original["run_id"]);
    assert_eq!(normalised(report), normalised(&original));
    let (o_exec, r_exec) = (
        original["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "executor")
            .unwrap(),
        report["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == "executor")
            .unwrap(),
    );
    assert_eq!(tip_tree(dir.path(), o_exec), tip_tree(dir.path(), r_exec));
    assert!(
        replay["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["same_tree"] == true),
        "{replay:#}"
    );
    assert_eq!(
        branches(dir.path()),
        before,
        "the replay's branches are removed"
    );
    let replays = crate::support::repo::state_dir(dir.path()).join("replays");
    assert_eq!(
        std::fs::read_dir(&replays).map(|d| d.count()).unwrap_or(0),
        0
    );

    // Its cassette answers a run through a `kind = "replay"` provider; so does the
    // store's own recording.
    let cassette = dir.path().join("run.cassette.json");
    let out = bin(
        dir.path(),
        &["export", &run, "--cassette", cassette.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&cassette).unwrap();
    let tape: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (tape["format"].as_str(), tape["version"].as_u64()),
        (Some("crewbox-cassette"), Some(1))
    );
    assert_eq!(tape["exchanges"].as_array().unwrap().len(), 5);
    write_user_config(
        dir.path(),
        &format!(
            "[providers.tape]\nkind = \"replay\"\ncassette = {}\n\n[providers.rec]\nkind = \"replay\"\nrun = \"{run}\"\n",
            toml::Value::String(cassette.display().to_string())
        ),
    );
    for provider in ["tape", "rec"] {
        let out = bin(
            dir.path(),
            &[
                "run",
                PROMPT,
                "--mode",
                "crew",
                "--provider",
                provider,
                "--json",
            ],
        );
        let again = json(&out);
        assert_eq!(again["status"], "completed", "{provider}: {again:#}");
        assert_eq!(again["replay"]["answered"], 5, "{provider}: {again:#}");
        assert_eq!(normalised(&again), normalised(&original), "{provider}");
    }

    // The file the planner's tool reads changes: its second request differs from the
    // recording at the tool result, and the replay ends diverged.
    std::fs::write(dir.path().join("repo/notes.txt"), "changed\n").unwrap();
    // (The runs above made branches of their own, as any run does.)
    let before = branches(dir.path());
    let out = bin(dir.path(), &["replay", &run, "--json"]);
    let diverged = json(&out);
    assert_eq!(out.status.code(), Some(1), "{diverged:#}");
    assert_eq!(diverged["outcome"], "diverged", "{diverged:#}");
    assert_eq!(diverged["identical"], false);
    assert_eq!(diverged["report"]["status"], "diverged", "{diverged:#}");
    assert_eq!(diverged["report"]["exit_reason"], "diverged");
    let d = &diverged["divergence"];
    assert_eq!(
        (d["agent"].as_str(), d["turn"].as_u64()),
        (Some("planner"), Some(2)),
        "{d}"
    );
    assert_eq!(d["difference"]["kind"], "message", "{d}");
    assert_eq!(
        d["difference"]["index"], 3,
        "system, task, call, its result: {d}"
    );
    assert_eq!(d["difference"]["role"], "tool", "{d}");
    let text = bin(dir.path(), &["replay", &run]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.contains("diverged")
            && stdout.contains("agent `planner` turn 2")
            && stdout.contains("message 3 (tool result) differs"),
        "{stdout}"
    );
    assert_eq!(branches(dir.path()), before);
}

#[test]
fn cassettes_carry_no_key_and_hostile_ones_are_refused() {
    const KEY: &str = "sk-replay-test-5f0c1e9a7d";
    let dir = git_repo(|_| {});
    write_user_config(
        dir.path(),
        "[providers.cloud]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\napi_key_env = \"CREWBOX_REPLAY_TEST_KEY\"\n",
    );
    let script = dir.path().join("script.toml");
    std::fs::write(
        &script,
        format!("[[reply]]\nagent = \"executor\"\ntext = \"the key is {KEY}\"\n"),
    )
    .unwrap();
    let out = command(
        dir.path(),
        &[
            "run",
            &format!("use {KEY} for it"),
            "--mode",
            "single",
            "--script",
            script.to_str().unwrap(),
            "--json",
        ],
    )
    .env("CREWBOX_REPLAY_TEST_KEY", KEY)
    .output()
    .unwrap();
    let report = json(&out);
    assert_eq!(report["status"], "completed", "{report:#}");
    let run = report["run_id"].as_str().unwrap();
    let cassette = dir.path().join("c.json");
    let out = command(
        dir.path(),
        &["export", run, "--cassette", cassette.to_str().unwrap()],
    )
    .env("CREWBOX_REPLAY_TEST_KEY", KEY)
    .output()
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(text.contains("the key is"), "the reply is recorded: {text}");
    assert!(!text.contains(KEY), "the cassette holds the key: {text}");
    assert!(!text.contains("CREWBOX_REPLAY_TEST_KEY"), "{text}");
    // The store's rows, in the database file or still in its write-ahead log.
    let state = crate::support::repo::state_dir(dir.path());
    for file in ["crewbox.db", "crewbox.db-wal"] {
        let bytes = std::fs::read(state.join(file)).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "the store ({file}) holds the key"
        );
    }
    let conn = rusqlite::Connection::open(state.join("crewbox.db")).unwrap();
    let replies: i64 = conn
        .query_row(
            "SELECT count(*) FROM model_exchanges WHERE reply LIKE '%the key is%'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(replies, 1, "the reply is recorded in the store");

    // Hostile cassettes: a clear error naming the file and what is wrong.
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(crewbox::unstable::provider::replay::cassette::MAX_CASSETTE_BYTES + 1)
        .unwrap();
    let cases: [(&str, &[u8], &str); 4] = [
        (
            "malformed.json",
            b"{\"format\": \"crewbox-cassette\", \"vers",
            "is malformed",
        ),
        (
            "version.json",
            b"{\"format\": \"crewbox-cassette\", \"version\": 99, \"run\": {}, \"exchanges\": []}",
            "has version 99",
        ),
        ("other.json", b"{\"hello\": 1}", "not a crewbox cassette"),
        ("huge.json", b"", "is larger than"),
    ];
    for (name, body, says) in cases {
        let path = dir.path().join(name);
        if name != "huge.json" {
            std::fs::write(&path, body).unwrap();
        }
        write_user_config(
            dir.path(),
            &format!(
                "[providers.tape]\nkind = \"replay\"\ncassette = {}\n",
                toml::Value::String(path.display().to_string())
            ),
        );
        let out = bin(
            dir.path(),
            &[
                "run",
                "x",
                "--mode",
                "single",
                "--provider",
                "tape",
                "--json",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(name) && stderr.contains(says),
            "{name}: {stderr}"
        );
    }
    // A run of the store that recorded nothing, and a replay provider naming both
    // sources, are refused too.
    let out = bin(dir.path(), &["replay", "r-nope"]);
    assert_eq!(out.status.code(), Some(2));
    write_user_config(
        dir.path(),
        "[providers.tape]\nkind = \"replay\"\nrun = \"r-x\"\ncassette = \"c.json\"\n",
    );
    let out = bin(
        dir.path(),
        &["run", "x", "--mode", "single", "--provider", "tape"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("exactly one of `run`"), "{stderr}");
}

/// A trusted repository whose team `pair` (alice and bob, both writing) runs in
/// `mode`, and the run of it on `script` ("write both"), which must succeed: the
/// repository, the run's id and its report.
pub(crate) fn recorded_pair_run(mode: &str, script: &str) -> (tempfile::TempDir, String, Value) {
    let team = format!(
        "mode = \"{mode}\"\n[[members]]\nname = \"alice\"\naccess = \"full\"\n\
         [[members]]\nname = \"bob\"\naccess = \"full\"\n"
    );
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/pair.toml"), team).unwrap();
    });
    assert!(bin(dir.path(), &["trust"]).status.success());
    let (out, original) = crewbox(dir.path(), script, &["run", "write both", "--team", "pair"]);
    assert!(out.status.success(), "{original:#}");
    let run = original["run_id"].as_str().unwrap().to_owned();
    (dir, run, original)
}

/// Alice writes a.txt, bob b.txt (alice's answer after `alice_ms`).
pub(crate) fn both_write(alice_ms: u64) -> String {
    writes_then("alice", "a.txt", "a\n", alice_ms, "ALICE: wrote a.txt")
        + &writes_then("bob", "b.txt", "b\n", 0, "BOB: wrote b.txt")
}

#[test]
fn replay_reproduces_a_team_run_with_its_integration_branch() {
    let (dir, run, original) = recorded_pair_run("sequential", &both_write(0));
    let before = branches(dir.path());
    let out = bin(dir.path(), &["replay", &run, "--json"]);
    let replay = json(&out);
    assert!(out.status.success(), "{replay:#}");
    assert_eq!(replay["outcome"], "matched");
    assert_eq!(replay["identical"], true, "{replay:#}");
    assert_eq!(replay["same_integration_tree"], true, "{replay:#}");
    assert_eq!(replay["report"]["mode"], "sequential");
    assert_eq!(normalised(&replay["report"]), normalised(&original));
    assert_eq!(
        branches(dir.path()),
        before,
        "the replay's integration branch is removed"
    );
}

/// A replay starts where the recorded run started, not at a HEAD that moved since:
/// after a commit that adds `b.txt` (which bob's tool then replaced instead of
/// creating: a different tool result) the team run still replays identical, and so
/// does a single run after an unrelated commit. Shown failing without the fix
/// (`diverged` at bob's tool result; the single run "did not reproduce").
#[test]
fn a_replay_starts_at_the_recorded_runs_base_not_at_head() {
    let (dir, run, _) = recorded_pair_run("sequential", &both_write(0));
    let script = crate::support::script::writes_then("agent", "c.txt", "c\n", 0, "wrote c.txt");
    let (out, single) = crewbox(dir.path(), &script, &["run", "write c", "--mode", "single"]);
    assert!(out.status.success(), "{single:#}");
    let d = dir.path();
    let work = d.join("repo");
    std::fs::write(work.join("b.txt"), "moved on\n").unwrap();
    std::fs::write(work.join("other.txt"), "unrelated\n").unwrap();
    for args in [
        &["add", "b.txt", "other.txt"][..],
        &["commit", "-qm", "later work"],
    ] {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&work)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    for id in [run.as_str(), single["run_id"].as_str().unwrap()] {
        let out = bin(d, &["replay", id, "--json"]);
        let replay = json(&out);
        assert!(out.status.success(), "{id}: {replay:#}");
        assert_eq!(replay["outcome"], "matched", "{id}: {replay:#}");
        assert_eq!(replay["identical"], true, "{id}: {replay:#}");
    }
}

/// An orchestrated team whose workers write replays to a match. Its synthesis prompt
/// held each worker's wall-clock time (`alice (completed, 0.2s)`) and its progress
/// section the run's integration branch (`crewbox/run/<run-id>`), both new in every
/// replay, so every such replay reported `diverged`; shown failing without the fix.
#[test]
fn replay_reproduces_an_orchestrated_run_whose_workers_write() {
    let script = format!(
        "{}{}",
        r#"
[[reply]]
agent = "synthesis"
text = "SYNTHESIS: both files written"
repeat = true

[[reply]]
agent = "orchestrator"
text = "@worker:alice\nWrite a.txt.\n@end\n@worker:bob\nWrite b.txt.\n@end"
repeat = true
"#,
        both_write(150),
    );
    let (dir, run, _) = recorded_pair_run("orchestrate", &script);
    let out = bin(dir.path(), &["replay", &run, "--json"]);
    let replay = json(&out);
    assert!(out.status.success(), "{replay:#}");
    assert_eq!(replay["outcome"], "matched", "{replay:#}");
    assert_eq!(replay["same_integration_tree"], true, "{replay:#}");
}

/// The worktrees registered in the repository whose directories are under the state
/// directory's `replays/`, and the scratch directories there.
fn replay_leftovers(dir: &Path) -> (Vec<String>, Vec<String>) {
    let git = git2::Repository::open(dir.join("repo")).unwrap();
    let worktrees = git
        .worktrees()
        .unwrap()
        .iter()
        .flatten()
        .filter_map(|n| git.find_worktree(n?).ok())
        .map(|w| w.path().display().to_string())
        .filter(|p| p.contains("/replays/"))
        .collect();
    let scratch = std::fs::read_dir(crate::support::repo::state_dir(dir).join("replays"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    (worktrees, scratch)
}

/// A replay killed with SIGKILL (after any of its store's writes) leaves its scratch
/// state, a worktree registration and its agents' branches behind; the next replay
/// removes them, and its own, so the repository ends as it was. Shown failing without
/// the sweep: the branches of dead replays stayed (listed as unmerged work).
#[test]
fn a_replay_killed_midway_leaves_nothing_once_another_replay_ran() {
    let (dir, run, _) = recorded_pair_run("sequential", &both_write(0));
    let before = branches(dir.path());
    let mut leaked = 0;
    for n in (4..400).step_by(4) {
        let status = command(dir.path(), &["replay", &run])
            .env("CREWBOX_FAULT_AFTER_WRITES", n.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        if status.code().is_some() {
            // Past the replay's last write: every point was tried.
            break;
        }
        if branches(dir.path()) != before {
            leaked += 1;
        }
    }
    assert!(
        leaked > 0,
        "no kill left a branch behind: the test proves nothing"
    );
    let out = bin(dir.path(), &["replay", &run, "--json"]);
    let replay = json(&out);
    assert_eq!(replay["outcome"], "matched", "{replay:#}");
    assert_eq!(
        branches(dir.path()),
        before,
        "branches of dead replays stayed"
    );
    let (worktrees, scratch) = replay_leftovers(dir.path());
    assert!(worktrees.is_empty(), "{worktrees:?}");
    assert!(scratch.is_empty(), "{scratch:?}");
}

/// A plugin author tries a new validator on a past run: `--validator` replaces the
/// recorded (none here) and its verdict is the replay's. The recorded run passed; a
/// validator that rejects the same work makes the replayed run fail validation, with
/// every model call still answered from the recording (no fix round is asked for:
/// the recorded run allowed none).
#[test]
fn replay_with_another_validator_reports_its_verdict() {
    use crate::support::wat::Validator;
    let dir = git_repo(|_| {});
    let (out, original) = crewbox(
        dir.path(),
        "[[reply]]\nrepeat = true\ntext = \"done\"\n",
        &["run", "do it", "--mode", "single", "--max-fix-rounds", "0"],
    );
    assert!(out.status.success(), "{original}");
    assert_eq!(original["status"], "completed", "{original}");
    let run = original["run_id"].as_str().unwrap().to_owned();

    let rejecter = dir.path().join("rejecter.wasm");
    let v = Validator {
        results: 1,
        detail: Some("not good enough".into()),
        passed: false,
        results_pass: false,
        ..Validator::default()
    };
    std::fs::write(&rejecter, v.component()).unwrap();
    let out = bin(
        dir.path(),
        &[
            "replay",
            &run,
            "--validator",
            rejecter.to_str().unwrap(),
            "--json",
        ],
    );
    let replay = json(&out);
    assert_eq!(out.status.code(), Some(1), "{replay:#}");
    let report = &replay["report"];
    assert_eq!(report["status"], "failed", "{replay:#}");
    let agent = &report["agents"][0];
    assert_eq!(agent["validation"], "validation-failed", "{replay:#}");
    let verdicts = agent["verdicts"].as_array().unwrap();
    assert!(
        verdicts
            .iter()
            .all(|v| v["outcome"] == "failed"
                && v["source"] == format!("file:{}", rejecter.display())),
        "{verdicts:#?}"
    );
    assert_eq!(
        replay["answered_calls"], replay["recorded_calls"],
        "{replay:#}"
    );
    assert_ne!(replay["outcome"], "diverged", "{replay:#}");
    // Without `--validator` the same replay passes as recorded.
    let out = bin(dir.path(), &["replay", &run, "--json"]);
    let again = json(&out);
    assert!(out.status.success(), "{again:#}");
    assert_eq!(again["report"]["status"], "completed", "{again:#}");
}

/// `--dispatcher FILE` asks that dispatcher for the mode instead of keeping the
/// recorded one: the replay's decision is the dispatcher's, the recorded calls still
/// answer it, and without the flag the recorded (explicit) decision stays.
#[test]
fn replay_with_a_dispatcher_asks_it_for_the_mode() {
    let dir = git_repo(|_| {});
    let (out, original) = crewbox(
        dir.path(),
        "[[reply]]\nrepeat = true\ntext = \"done\"\n",
        &["run", "do it", "--mode", "single"],
    );
    assert!(out.status.success(), "{original}");
    assert_eq!(original["decision"]["source"], "explicit", "{original}");
    let run = original["run_id"].as_str().unwrap().to_owned();
    let dispatcher = dir.path().join("echo-dispatcher.wasm");
    std::fs::write(&dispatcher, crate::guest_wasm!("echo-dispatcher.wasm")).unwrap();

    let out = bin(
        dir.path(),
        &[
            "replay",
            &run,
            "--dispatcher",
            dispatcher.to_str().unwrap(),
            "--json",
        ],
    );
    let replay = json(&out);
    assert!(out.status.success(), "{replay:#}");
    let decision = &replay["report"]["decision"];
    assert_eq!(decision["reason"], "echo-first-mode", "{replay:#}");
    assert_ne!(decision["source"], "explicit", "{replay:#}");
    assert_eq!(replay["report"]["mode"], "single", "{replay:#}");
    assert_eq!(replay["outcome"], "matched", "{replay:#}");
    assert_eq!(
        replay["answered_calls"], replay["recorded_calls"],
        "{replay:#}"
    );

    let out = bin(dir.path(), &["replay", &run, "--json"]);
    let again = json(&out);
    assert!(out.status.success(), "{again:#}");
    assert_eq!(
        again["report"]["decision"]["source"], "explicit",
        "{again:#}"
    );
}

/// A sub-agent's prompt names its parent by name, not by the id that differs on every
/// run: a run whose agent spawns one replays to a match.
#[test]
fn a_run_whose_agent_starts_a_sub_agent_replays_to_a_match() {
    let dir = git_repo(|_| {});
    let (out, original) = crewbox(
        dir.path(),
        &crate::support::script::delegates(0),
        &["run", "go", "--mode", "single"],
    );
    assert!(out.status.success(), "{original}");
    assert_eq!(original["status"], "completed", "{original}");
    let run = original["run_id"].as_str().unwrap().to_owned();
    let out = bin(dir.path(), &["replay", &run, "--json"]);
    let replay = json(&out);
    assert_eq!(replay["outcome"], "matched", "{replay:#}");
    assert_eq!(replay["recorded_calls"], 4, "{replay:#}");
    assert_eq!(replay["answered_calls"], 4, "{replay:#}");
}

/// A run whose failed agent was retried replays to a match, and reproduces it: the
/// comparison leaves out the attempt the retry replaced (a replay runs each step once;
/// it was paired with the replay's agent by position, so the run never came out
/// identical), and the recorded calls of the attempt that went on answer first.
/// Shown failing without the fix.
#[test]
fn a_run_whose_agent_was_retried_replays_identical() {
    let dir = git_repo(|r| std::fs::write(r.join("notes.txt"), "hello\n").unwrap());
    let d = dir.path();
    let down = d.join("down.toml");
    std::fs::write(
        &down,
        "[[reply]]\nturn = 1\ntext = \"Reading first.\"\n[[reply.tool_calls]]\nname = \"read_file\"\n\
         args = { path = \"notes.txt\" }\n\n[[reply]]\nturn = 2\nrepeat = true\nerror = \"connection\"\n",
    )
    .unwrap();
    // The retry starts afresh and its first turn answers otherwise than the failed
    // attempt's: a replay must take the first turn of the attempt that went on.
    let ok = d.join("ok.toml");
    std::fs::write(
        &ok,
        "[[reply]]\nturn = 1\ntext = \"Looking at the notes.\"\n[[reply.tool_calls]]\nname = \"read_file\"\n\
         args = { path = \"notes.txt\" }\n\n[[reply]]\nturn = 2\ntext = \"NOTES READ\"\n",
    )
    .unwrap();
    write_user_config(
        d,
        &format!(
            "[providers.down]\nkind = \"scripted\"\nscript = {:?}\n\
             [providers.ok]\nkind = \"scripted\"\nscript = {:?}\n",
            down.display().to_string(),
            ok.display().to_string()
        ),
    );
    let failed = json(&bin(
        d,
        &[
            "run",
            "read the notes",
            "--mode",
            "single",
            "--provider",
            "down",
            "--json",
        ],
    ));
    assert_eq!(failed["status"], "failed", "{failed:#}");
    let run = failed["run_id"].as_str().unwrap().to_owned();
    let letters = json(&bin(d, &["dead", "--json"]));
    let agent = letters[0]["agent_id"].as_str().unwrap().to_owned();
    let retried = json(&bin(
        d,
        &["retry", &agent, "--provider", "ok", "--fresh", "--json"],
    ));
    assert_eq!(retried["status"], "completed", "{retried:#}");
    assert_eq!(retried["result"], "NOTES READ", "{retried:#}");

    let out = bin(d, &["replay", &run, "--json"]);
    let replay = json(&out);
    assert_eq!(replay["outcome"], "matched", "{replay:#}");
    assert_eq!(replay["identical"], true, "{replay:#}");
    assert_eq!(replay["agents"].as_array().unwrap().len(), 1, "{replay:#}");
    assert_eq!(out.status.code(), Some(0), "{replay:#}");
}

/// A batch swarm run replays identical: its merged report names each member's id and
/// branch (new in a replay) and lists the members as they finished (probe 13: every
/// such replay said "did not reproduce" and exited 1, all calls matched).
#[test]
fn a_swarm_run_replays_identical() {
    let dir = git_repo(|_| {});
    let script = "[[reply]]\nagent = \"swarm-1\"\ndelay_ms = 400\ntext = \"ONE\"\n\
                  [[reply.tool_calls]]\nname = \"write_file\"\nargs = { path = \"one.txt\", content = \"1\\n\" }\n\
                  [[reply]]\nagent = \"swarm-1\"\nturn = 2\ntext = \"ONE DONE\"\n\
                  [[reply]]\nagent = \"swarm-2\"\ntext = \"TWO DONE\"\n";
    let (out, original) = crewbox(
        dir.path(),
        script,
        &[
            "run",
            "split it",
            "--mode",
            "swarm",
            "--swarm-size",
            "2",
            "--strategy",
            "batch",
        ],
    );
    assert!(out.status.success(), "{original}");
    let result = original["result"].as_str().unwrap();
    let (one, two) = (
        result.find("ONE DONE").unwrap(),
        result.find("TWO DONE").unwrap(),
    );
    assert!(two < one, "the later member is listed later: {result}");
    let run = original["run_id"].as_str().unwrap().to_owned();
    let out = bin(dir.path(), &["replay", &run, "--json"]);
    let replay = json(&out);
    assert_eq!(replay["outcome"], "matched", "{replay:#}");
    assert_eq!(replay["identical"], true, "{replay:#}");
    assert!(out.status.success(), "{replay:#}");
}

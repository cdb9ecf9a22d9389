//! The modes end to end through the real binary: a real git repository in a temp dir,
//! the scripted model, real worktrees, real validator components.

use std::process::Command;

use crate::support::repo::{crewbox, events, git_repo};

fn repo() -> tempfile::TempDir {
    git_repo(|_| {})
}

/// Writes the user config of the temp dir's runs.
fn user_config(dir: &std::path::Path, toml: &str) {
    let config = dir.join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), toml).unwrap();
}

/// The names of the files on `branch` of the temp dir's repository, one per line.
fn branch_files(dir: &std::path::Path, branch: &str) -> String {
    let ls = Command::new("git")
        .args(["ls-tree", "--name-only", branch])
        .current_dir(dir.join("repo"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&ls.stdout).into_owned()
}

const NO_HANDOFF_EVER: &str = r#"
[[reply]]
agent = "executor"
repeat = true
text = "done, no handoff"
"#;

#[test]
fn validators_fail_after_the_last_fix_round() {
    let dir = repo();
    let (out, report) = crewbox(
        dir.path(),
        NO_HANDOFF_EVER,
        &[
            "run",
            "do it",
            "--mode",
            "single",
            "--validator",
            "handoff-schema",
            "--max-fix-rounds",
            "2",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed validation fails the run"
    );
    assert_eq!(report["status"], "failed");
    let agent = &report["agents"][0];
    assert_eq!(agent["validation"], "validation-failed");
    let rounds: Vec<u64> = agent["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["round"].as_u64().unwrap())
        .collect();
    assert_eq!(rounds, [0, 1, 2], "initial check + 2 fix rounds");
    assert_eq!(agent["turns"], 3);
}

/// Replies that never hand off, each claiming 610 tokens.
const NO_HANDOFF_610_TOKENS: &str = r#"
[[reply]]
agent = "executor"
repeat = true
text = "done, no handoff"
usage = { input = 600, output = 10 }
"#;

/// An agent's quotas hold across its fix rounds (probe 17: each round had a fresh
/// budget, so an agent of 2 turns and 2,000 tokens ended `completed` after 5 turns and
/// 3,050 tokens); the rounds are bounded too.
#[test]
fn fix_rounds_share_the_agents_budget() {
    let dir = repo();
    user_config(dir.path(), "[quotas]\ngrace_turns = 0\nmax_tokens = 2000\n");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "do it",
            "--mode",
            "single",
            "--validator",
            "handoff-schema",
            "--max-fix-rounds",
            "3",
        ];
        args.extend(extra);
        crewbox(dir.path(), NO_HANDOFF_610_TOKENS, &args).1
    };
    // Turns: round 0 takes turn 1, round 1 turn 2; round 2 may not take a third.
    let report = run(&["--max-turns", "2"]);
    let agent = &report["agents"][0];
    assert_eq!(report["status"], "failed", "{report}");
    assert_eq!(agent["state"], "aborted", "{report}");
    assert_eq!(
        agent["error"], "turn limit (soft + grace) reached",
        "{report}"
    );
    assert_eq!(agent["turns"], 2, "{report}");
    // The last answer is still the agent's result.
    assert_eq!(agent["result"], "done, no handoff", "{report}");
    // Tokens: 610 a round; a fourth request would pass 2,000 and is not sent.
    let report = run(&[]);
    let agent = &report["agents"][0];
    assert_eq!(agent["state"], "aborted", "{report}");
    assert_eq!(agent["error"], "token budget exhausted", "{report}");
    assert_eq!(agent["turns"], 3, "{report}");
    let turns: Vec<u64> = events(dir.path(), report["run_id"].as_str().unwrap())
        .iter()
        .filter(|e| e["kind"] == "model.reply")
        .map(|e| e["data"]["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, [1, 2, 3], "turns count on across rounds");
    // Rounds are bounded whatever the quotas.
    let out = crate::support::repo::bin(
        dir.path(),
        &[
            "run",
            "x",
            "--validator",
            "handoff-schema",
            "--max-fix-rounds",
            "11",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--max-fix-rounds"),
        "{out:?}"
    );
}

#[test]
fn a_faulting_validator_is_a_fault_and_starts_no_fix_round() {
    let dir = repo();
    let trap = crate::support::guest_path("hostile-trap.wasm");
    let (_, report) = crewbox(
        dir.path(),
        NO_HANDOFF_EVER,
        &[
            "run",
            "do it",
            "--mode",
            "single",
            "--validator",
            &format!("{trap}=panic"),
        ],
    );
    let agent = &report["agents"][0];
    assert_eq!(agent["validation"], "faulted");
    let verdicts = agent["verdicts"].as_array().unwrap();
    assert_eq!(
        verdicts.len(),
        1,
        "no fix round after a fault: {verdicts:?}"
    );
    assert_eq!(verdicts[0]["outcome"], "fault");
    assert!(
        verdicts[0]["fault"]
            .as_str()
            .unwrap()
            .contains("hostile-trap")
    );
    assert_eq!(agent["turns"], 1);
}

const SWARM: &str = r#"
[[reply]]
agent = "executor"
turn = 1
repeat = true
[[reply.tool_calls]]
name = "write_file"
args = { path = "notes.txt", content = "beta\n" }

[[reply]]
agent = "executor"
turn = 2
repeat = true
text = "Wrote   BETA into notes.txt"
"#;

#[test]
fn swarm_vote_groups_equal_answers_and_lists_conflicts() {
    let dir = repo();
    let (out, report) = crewbox(
        dir.path(),
        SWARM,
        &[
            "run",
            "write beta",
            "--mode",
            "swarm",
            "--swarm-size",
            "3",
            "--strategy",
            "vote",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["strategy"], "vote");
    assert_eq!(report["groups"][0]["count"], 3, "{report}");
    assert_eq!(report["conflicts"], serde_json::json!(["notes.txt"]));
    let agents = report["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 3);
    let branches: Vec<&str> = report["branches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap())
        .collect();
    assert_eq!(branches.len(), 3, "each member committed on its own branch");
    assert!(
        agents
            .iter()
            .all(|a| a["join"].as_str().unwrap().starts_with("swarm:"))
    );
    // The checkout itself is untouched.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("repo/notes.txt")).unwrap(),
        "alpha\n"
    );
    // The members went through the spawn batcher as one swarm, recorded before they ran.
    let events = events(dir.path(), report["run_id"].as_str().unwrap());
    let batch = events
        .iter()
        .position(|e| e["kind"] == "batch.finalized")
        .expect("a batch event");
    assert_eq!(
        events[batch]["data"]["swarms"][0]["members"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    let first_start = events
        .iter()
        .position(|e| e["kind"] == "agent.state" && e["data"]["state"] == "running")
        .unwrap();
    assert!(
        batch < first_start,
        "the batch is recorded before any member runs"
    );
}

#[test]
fn swarm_live_delivers_each_member_once() {
    let dir = repo();
    let (_, report) = crewbox(
        dir.path(),
        SWARM,
        &["run", "write beta", "--mode", "swarm", "--strategy", "live"],
    );
    let waves = report["deliveries"].as_array().unwrap();
    let delivered: Vec<&str> = waves
        .iter()
        .flat_map(|w| w.as_array().unwrap())
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(delivered.len(), 3, "{waves:?}");
    let unique: std::collections::BTreeSet<_> = delivered.iter().collect();
    assert_eq!(unique.len(), 3, "no record delivered twice");
    assert_eq!(waves.len(), 3, "live: one delivery per completion");
}

const CREW_FAIL_THEN_PASS: &str = r#"
[[reply]]
agent = "planner"
text = "1. Write gamma into notes.txt"

[[reply]]
agent = "executor"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "notes.txt", content = "gama\n" }

[[reply]]
agent = "executor"
turn = 2
text = "wrote it"

[[reply]]
agent = "reviewer"
when = "\\+gama"
text = "Typo.\n- notes.txt says gama, not gamma\nVERDICT: FAIL"

[[reply]]
agent = "executor"
when = "notes.txt says gama"
[[reply.tool_calls]]
name = "write_file"
args = { path = "notes.txt", content = "gamma\n" }

[[reply]]
agent = "executor"
when = "wrote|created|replaced"
text = "fixed the typo"

[[reply]]
agent = "reviewer"
when = "\\+gamma"
text = "Correct now.\nVERDICT: PASS"
"#;

#[test]
fn crew_revises_after_a_failed_review() {
    let dir = repo();
    let (out, report) = crewbox(
        dir.path(),
        CREW_FAIL_THEN_PASS,
        &["run", "write gamma", "--mode", "crew"],
    );
    assert!(
        out.status.success(),
        "{}\n{report}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["verdict"]["verdict"], "PASS");
    assert_eq!(report["revisions"], 1);
    let roles: Vec<&str> = report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["planner", "executor", "reviewer", "executor", "reviewer"]
    );
    // Permissions come from tool sets: the planner and reviewer were read-only.
    let branch = report["branch"]["branch"].as_str().unwrap();
    let show = Command::new("git")
        .args(["show", &format!("{branch}:notes.txt")])
        .current_dir(dir.path().join("repo"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&show.stdout), "gamma\n");
}

#[test]
fn crew_with_zero_revisions_fails_on_a_failed_review() {
    let dir = repo();
    let (out, report) = crewbox(
        dir.path(),
        CREW_FAIL_THEN_PASS,
        &[
            "run",
            "write gamma",
            "--mode",
            "crew",
            "--max-revisions",
            "0",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report["verdict"]["verdict"], "FAIL");
    assert_eq!(
        report["verdict"]["findings"][0],
        "notes.txt says gama, not gamma"
    );
    assert_eq!(report["revisions"], 0);
}

#[test]
fn auto_asks_the_dispatcher_and_records_its_reason() {
    let dir = repo();
    let script = "[[reply]]\nrepeat = true\ntext = \"ok\"\n";
    let (_, report) = crewbox(
        dir.path(),
        script,
        &[
            "run",
            "compare the two approaches in parallel",
            "--mode",
            "auto",
        ],
    );
    assert_eq!(report["decision"]["source"], "auto");
    assert_eq!(report["decision"]["mode"], "swarm");
    assert_eq!(report["mode"], "swarm");
    assert!(!report["decision"]["reason"].as_str().unwrap().is_empty());
}

const CHAIN: &str = r#"
[[reply]]
agent = "agent"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "step1.txt", content = "one\n" }

[[reply]]
agent = "agent"
turn = 2
text = '''
```json
{"status": "partial", "summary": "wrote step1", "findings": ["step1 done"], "next_steps": ["write step2 next to step1"]}
```
'''

[[reply]]
agent = "agent-2"
turn = 1
[[reply.tool_calls]]
name = "read_file"
args = { path = "step1.txt" }

[[reply]]
agent = "agent-2"
when = "one"
[[reply.tool_calls]]
name = "write_file"
args = { path = "step2.txt", content = "two\n" }

[[reply]]
agent = "agent-2"
turn = 3
text = '''
```json
{"status": "success", "summary": "wrote step2", "findings": ["both steps done"]}
```
'''
"#;

#[test]
fn chain_continues_on_the_previous_branch_until_no_next_steps() {
    let dir = repo();
    let (out, report) = crewbox(
        dir.path(),
        CHAIN,
        &["run", "two steps", "--mode", "single", "--chain"],
    );
    assert!(
        out.status.success(),
        "{}\n{report}",
        String::from_utf8_lossy(&out.stderr)
    );
    let agents = report["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2);
    assert_eq!(
        agents[1]["parent"], agents[0]["id"],
        "the follow-up is the first agent's child"
    );
    assert!(
        agents[1]["task"]
            .as_str()
            .unwrap()
            .contains("write step2 next to step1")
    );
    // The follow-up saw step1 (it started on the first branch) and its branch has both.
    let branch = report["branch"]["branch"].as_str().unwrap();
    let files = branch_files(dir.path(), branch);
    assert!(
        files.contains("step1.txt") && files.contains("step2.txt"),
        "{files}"
    );
}

/// Work that failed validation is not built on (probe 17: the follow-up started on the
/// failed branch, its validators saw only its own diff, and the run completed); a link
/// that changed nothing leaves the chain's branch at the link before it.
#[test]
fn a_chain_stops_at_work_that_failed_validation_and_keeps_its_last_branch() {
    let dir = repo();
    let leaky = r#"
[[reply]]
agent = "agent"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "cfg.txt", content = "aws_access_key_id = AKIAZ7QX3MPLE4TESTKY\n" }

[[reply]]
agent = "agent"
turn = 2
text = '''
```json
{"status": "partial", "summary": "wrote cfg", "findings": ["cfg written"], "next_steps": ["tidy up"]}
```
'''

[[reply]]
agent = "agent-2"
repeat = true
text = '''
```json
{"status": "success", "summary": "tidied", "findings": ["nothing to do"]}
```
'''
"#;
    let (out, report) = crewbox(
        dir.path(),
        leaky,
        &[
            "run",
            "configure",
            "--mode",
            "single",
            "--chain",
            "--validator",
            "no-secrets",
            "--max-fix-rounds",
            "0",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(report["status"], "failed", "{report}");
    assert_eq!(report["validation"], "validation-failed", "{report}");
    assert_eq!(report["agents"].as_array().unwrap().len(), 1, "{report}");

    // A follow-up that only reads: the chain's branch is its predecessor's.
    let reads_only = CHAIN.replace(
        "[[reply.tool_calls]]\nname = \"write_file\"\nargs = { path = \"step2.txt\", content = \"two\\n\" }",
        "text = \"nothing to write\"",
    );
    assert_ne!(reads_only, CHAIN);
    let (out, report) = crewbox(
        dir.path(),
        &reads_only,
        &["run", "two steps", "--mode", "single", "--chain"],
    );
    assert!(out.status.success(), "{report}");
    let agents = report["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2, "{report}");
    assert_eq!(
        report["branch"]["branch"],
        format!("crewbox/{}", agents[0]["id"].as_str().unwrap()),
        "{report}"
    );
}

/// An agent working in place (`--isolation none`) is validated on the checkout's
/// changes (probe 17: validators saw no change and an empty diff, and `no-secrets`
/// passed a key the agent wrote into the user's checkout).
#[test]
fn an_agent_working_in_place_is_validated_on_its_changes() {
    let dir = repo();
    let leaky = r#"
[[reply]]
agent = "agent"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "conf/cfg.txt", content = "aws_access_key_id = AKIAZ7QX3MPLE4TESTKY\n" }

[[reply]]
agent = "agent"
repeat = true
text = "configured"
"#;
    let (out, report) = crewbox(
        dir.path(),
        leaky,
        &[
            "run",
            "configure",
            "--mode",
            "single",
            "--isolation",
            "none",
            "--validator",
            "no-secrets",
            "--max-fix-rounds",
            "0",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(report["validation"], "validation-failed", "{report}");
    assert!(
        report["agents"][0]["verdicts"]
            .to_string()
            .contains("conf/cfg.txt"),
        "{report}"
    );
    // The same agent writing nothing secret passes.
    let clean = leaky.replace("AKIAZ7QX3MPLE4TESTKY", "from-the-environment");
    std::fs::remove_file(dir.path().join("repo/conf/cfg.txt")).unwrap();
    let (out, report) = crewbox(
        dir.path(),
        &clean,
        &[
            "run",
            "configure",
            "--mode",
            "single",
            "--isolation",
            "none",
            "--validator",
            "no-secrets",
        ],
    );
    assert!(out.status.success(), "{report}");
    assert_eq!(report["validation"], "passed", "{report}");
}

/// Agents side by side never write the user's checkout together (probe 17: a swarm with
/// `--isolation none` had its members overwrite one another's files, and reported no
/// conflict); one writer at a time, or readers, still may.
#[test]
fn writers_side_by_side_in_place_are_refused() {
    let dir = repo();
    std::fs::write(dir.path().join("script.toml"), NO_HANDOFF_EVER).unwrap();
    let out = crate::support::repo::bin(
        dir.path(),
        &[
            "run",
            "x",
            "--mode",
            "swarm",
            "--isolation",
            "none",
            "--script",
        ]
        .into_iter()
        .chain([dir.path().join("script.toml").to_str().unwrap()])
        .collect::<Vec<_>>(),
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("side by side") && err.contains("swarm"),
        "{err}"
    );
    let (out, report) = crewbox(
        dir.path(),
        NO_HANDOFF_EVER,
        &[
            "run",
            "x",
            "--mode",
            "swarm",
            "--isolation",
            "none",
            "--read-only",
        ],
    );
    assert!(out.status.success(), "{report}");
}

/// A worker's time limit counts its running time, not its wait for a slot (probe 17:
/// with one slot, the second of two 1.5 s workers was timed out and stopped after
/// running half a second of its 2 s).
#[test]
fn a_workers_time_limit_does_not_count_its_wait_for_a_slot() {
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(
            work.join(".crewbox/teams/slow.toml"),
            "mode = \"orchestrate\"\nworker_timeout_s = 2\n\n[[members]]\nname = \"alice\"\n\n[[members]]\nname = \"bob\"\n",
        )
        .unwrap();
    });
    user_config(dir.path(), "max_concurrent = 1\n");
    let script = r#"
[[reply]]
agent = "orchestrator"
turn = 1
text = "@worker:alice\na\n@end\n@worker:bob\nb\n@end"

[[reply]]
agent = "alice"
delay_ms = 1500
text = "alice result"

[[reply]]
agent = "bob"
delay_ms = 1500
text = "bob result"

[[reply]]
agent = "synthesis"
text = "SYNTH"
"#;
    let (_, report) = crewbox(dir.path(), script, &["run", "do it", "--team", "slow"]);
    let statuses: Vec<&str> = report["assignments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["completed", "completed"], "{report}");
    assert_eq!(report["status"], "completed", "{report}");
    // One that runs past its limit is still timed out.
    let (_, report) = crewbox(
        dir.path(),
        &script.replace(
            "delay_ms = 1500\ntext = \"bob",
            "delay_ms = 4000\ntext = \"bob",
        ),
        &["run", "do it", "--team", "slow"],
    );
    let bob = report["assignments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["worker"] == "bob")
        .unwrap();
    assert_eq!(bob["status"], "timed-out", "{report}");
}

/// `finish` ends the agent's work: a call after it in the same reply is answered "not
/// run" (probe 17: a write after `finish` ran and was committed), and an agent that
/// used all its tool calls may still finish (it was aborted, its summary lost).
#[test]
fn finish_ends_the_work_and_is_never_refused() {
    let dir = repo();
    user_config(dir.path(), "[quotas]\nmax_tool_calls = 1\n");
    let script = r#"
[[reply]]
agent = "agent"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "a.txt", content = "a\n" }

[[reply]]
agent = "agent"
turn = 2
[[reply.tool_calls]]
name = "finish"
args = { summary = "wrote a.txt" }
[[reply.tool_calls]]
name = "write_file"
args = { path = "sneaky.txt", content = "s\n" }
"#;
    let (out, report) = crewbox(dir.path(), script, &["run", "write", "--mode", "single"]);
    assert!(out.status.success(), "{report}");
    let agent = &report["agents"][0];
    assert_eq!(agent["state"], "completed", "{report}");
    assert_eq!(report["result"], "wrote a.txt", "{report}");
    let branch = report["branch"]["branch"].as_str().unwrap();
    let files = branch_files(dir.path(), branch);
    assert!(
        files.contains("a.txt") && !files.contains("sneaky.txt"),
        "{files}"
    );
}

/// A swarm member whose work failed validation is marked in the merged report (probe
/// 17: it read `(…, completed)` like the good results beside it).
#[test]
fn a_swarm_report_marks_work_that_failed_validation() {
    let dir = repo();
    let script = r#"
[[reply]]
agent = "swarm-1"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "a.txt", content = "aws_access_key_id = AKIAZ7QX3MPLE4TESTKY\n" }

[[reply]]
agent = "swarm-1"
turn = 2
text = "wrote a"

[[reply]]
agent = "swarm-2"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "b.txt", content = "fine\n" }

[[reply]]
agent = "swarm-2"
turn = 2
text = "wrote b"
"#;
    let (_, report) = crewbox(
        dir.path(),
        script,
        &[
            "run",
            "x",
            "--mode",
            "swarm",
            "--swarm-size",
            "2",
            "--strategy",
            "merge",
            "--validator",
            "no-secrets",
            "--max-fix-rounds",
            "0",
        ],
    );
    let result = report["result"].as_str().unwrap();
    let marked: Vec<&str> = result
        .lines()
        .filter(|l| l.starts_with("## swarm-") && l.contains("did not pass validation"))
        .collect();
    assert_eq!(marked.len(), 1, "{result}");
    assert!(marked[0].starts_with("## swarm-1 "), "{result}");
}

#[test]
fn chain_depth_bounds_follow_ups() {
    let dir = repo();
    let endless = r#"
[[reply]]
repeat = true
text = '''
```json
{"status": "partial", "summary": "more to do", "findings": ["x"], "next_steps": ["keep going"]}
```
'''
"#;
    let (_, report) = crewbox(
        dir.path(),
        endless,
        &[
            "run",
            "go",
            "--mode",
            "single",
            "--chain",
            "--chain-depth",
            "2",
        ],
    );
    assert_eq!(
        report["agents"].as_array().unwrap().len(),
        3,
        "the first agent + 2 follow-ups"
    );
    assert_eq!(report["chain"].as_array().unwrap().len(), 2);
}

/// Every agent a mode starts goes through the spawn queue and its batcher: each crew
/// agent (and a single run's agent) is named in a `batch.finalized` event recorded
/// before that agent runs.
#[test]
fn every_agent_of_single_and_crew_runs_goes_through_the_batcher() {
    let dir = repo();
    let single = "[[reply]]\nagent = \"agent\"\ntext = \"done\"\n";
    for (script, mode) in [(single, "single"), (CREW_FAIL_THEN_PASS, "crew")] {
        let (out, report) = crewbox(dir.path(), script, &["run", "write gamma", "--mode", mode]);
        assert!(
            out.status.success(),
            "{mode}: {}\n{report}",
            String::from_utf8_lossy(&out.stderr)
        );
        let events = events(dir.path(), report["run_id"].as_str().unwrap());
        for agent in report["agents"].as_array().unwrap() {
            let id = agent["id"].as_str().unwrap();
            let batched = events
                .iter()
                .position(|e| {
                    e["kind"] == "batch.finalized"
                        && e["data"]["individuals"]
                            .as_array()
                            .is_some_and(|a| a.iter().any(|i| i == id))
                })
                .unwrap_or_else(|| panic!("{mode}: agent {id} was never batched"));
            let running = events
                .iter()
                .position(|e| {
                    e["agent_id"] == id
                        && e["kind"] == "agent.state"
                        && e["data"]["state"] == "running"
                })
                .unwrap_or_else(|| panic!("{mode}: agent {id} never ran"));
            assert!(batched < running, "{mode}: {id} ran before its batch");
        }
    }
}

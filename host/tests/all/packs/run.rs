//! Imported teams run like any team, through the real binary and the scripted model:
//! the orchestrator sees their roles, each charter is its member's system prompt
//! (naming the file it came from), full members work in worktrees under the
//! validators, `maxTurns` lowers the turn limit, and nothing a pack holds is run.

use pretty_assertions::assert_eq;

use super::fixtures;
use super::{Fx, text};

fn agent<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == name)
        .unwrap_or_else(|| panic!("no agent {name}: {report:#}"))
}

/// The orchestrator sees every member's role; McManus's charter (with its file) is
/// its system prompt; it writes a file in its worktree; the synthesis sees it.
const SQUAD_SCRIPT: &str = r#"
[[reply]]
agent = "orchestrator"
when = "(?s)`flight` — Lead.*`mcmanus` — Backend Dev.*`fact-checker` \\(Fact Checker\\) — Verification.*`eecom` — Core Dev.*## Routing hints.*\\| Storage \\| McManus \\|"
text = """
@worker:mcmanus
Add a storage note to STORAGE.md.
@end
@worker:fact-checker
Check the storage claim.
@end
"""

[[reply]]
agent = "mcmanus"
turn = 1
system = "(?s)tools allow: read, write, exec.*## Your charter \\(from \\.squad/agents/mcmanus/charter\\.md\\)\n# McManus — Backend Dev\n\nOwns the storage layer\\."
when = "(?s)## Shared context\n## Project Context\n- \\*\\*Owner:\\*\\* Test Owner.*## Your task\nAdd a storage note"
tool_calls = [{ name = "write_file", args = { path = "STORAGE.md", content = "SQLite, WAL.\n" } }]

[[reply]]
agent = "mcmanus"
turn = 2
text = "wrote STORAGE.md"

[[reply]]
agent = "fact-checker"
system = "(?s)## Your charter \\(from \\.squad/agents/fact-checker/charter\\.md\\)\n# Fact Checker"
text = "the claim holds"

[[reply]]
agent = "synthesis"
when = "(?s)mcmanus \\(completed.*wrote STORAGE.md.*fact-checker \\(completed.*the claim holds"
text = "SQUAD DONE"
"#;

#[test]
fn an_imported_squad_team_orchestrates_with_charters_as_system_prompts() {
    let fx = Fx::new(fixtures::squad);
    fx.trust(&[]);
    fx.user_config("[packs]\nmax_access = \"full\"\n");
    let (out, report) = fx.run_script(
        SQUAD_SCRIPT,
        &[
            "run",
            "document storage",
            "--team",
            "squad",
            "--validator",
            "no-secrets",
        ],
    );
    assert!(out.status.success(), "{report:#}\n{}", text(&out));
    assert_eq!(report["mode"], "orchestrate", "the pack's mode");
    assert_eq!(report["team"], "squad");
    assert_eq!(report["result"], "SQUAD DONE");
    let mc = agent(&report, "mcmanus");
    assert_eq!(mc["role"], "Backend Dev");
    assert_eq!(mc["state"], "completed");
    assert_eq!(mc["validation"], "passed", "{mc:#}");
    let branch = mc["branch"]["branch"].as_str().expect("a result branch");
    // The work happened in a worktree: the branch has the file, the checkout not.
    let git = git2::Repository::open(fx.repo()).unwrap();
    let tree = git.revparse_single(branch).unwrap().peel_to_tree().unwrap();
    let blob = tree
        .get_name("STORAGE.md")
        .unwrap()
        .to_object(&git)
        .unwrap();
    assert_eq!(blob.as_blob().unwrap().content(), b"SQLite, WAL.\n");
    assert!(!fx.repo().join("STORAGE.md").exists());
    assert_eq!(agent(&report, "fact-checker")["state"], "completed");
}

/// Reflect with a Claude pack: the fixer keeps calling a tool; its `maxTurns: 4`
/// stops it long before the configured 30 turns; its hooks never run.
const CLAUDE_SCRIPT: &str = r#"
[[reply]]
agent = "orchestrator"
when = "(?s)`code-reviewer` — Use this agent when you need a review of recent changes.*`fixer` — Fixes failing tests"
text = """
@worker:fixer
Fix the failing test.
@end
"""

[[reply]]
agent = "fixer"
system = "(?s)## Your charter \\(from \\.claude/agents/fixer\\.md\\)\nYou fix tests\\. Keep \\$\\{HOME\\} and \\$\\(whoami\\) as text\\."
repeat = true
tool_calls = [{ name = "read_file", args = { path = "notes.txt" } }]

[[reply]]
agent = "synthesis"
text = "CLAUDE DONE"

[[reply]]
agent = "orchestrator"
when = "Judge whether"
text = "COMPLETE"
"#;

#[test]
fn an_imported_claude_team_reflects_and_max_turns_only_lowers() {
    let fx = Fx::new(fixtures::claude);
    let marker = fx.path().join("PWNED");
    let fixer = fx.repo().join(".claude/agents/fixer.md");
    let text_before = std::fs::read_to_string(&fixer).unwrap();
    std::fs::write(
        &fixer,
        text_before.replace(
            "${CLAUDE_PLUGIN_ROOT}/hooks/pwn.sh",
            &format!("touch {}", marker.display()),
        ),
    )
    .unwrap();
    let (out, report) = fx.run_script(
        CLAUDE_SCRIPT,
        &[
            "run",
            "make the tests pass",
            "--team",
            "claude",
            "--mode",
            "reflect",
            "--max-iterations",
            "1",
        ],
    );
    assert_eq!(report["mode"], "reflect", "{report:#}\n{}", text(&out));
    let f = agent(&report, "fixer");
    let turns = f["turns"].as_u64().unwrap();
    assert!(
        (4..=6).contains(&turns),
        "maxTurns 4 (plus grace) stopped the fixer, not the configured 30: {f:#}"
    );
    assert_ne!(f["state"], "completed", "{f:#}");
    assert!(!marker.exists(), "a pack's hook ran");
    // A maxTurns above the configured limit does not raise it.
    fx.user_config("[quotas]\nmax_turns = 2\n");
    let (out, report) = fx.run_script(
        CLAUDE_SCRIPT,
        &[
            "run",
            "make the tests pass",
            "--team",
            "claude",
            "--mode",
            "reflect",
            "--max-iterations",
            "1",
        ],
    );
    let f = agent(&report, "fixer");
    assert!(f["turns"].as_u64().unwrap() <= 4, "{f:#}\n{}", text(&out));
}

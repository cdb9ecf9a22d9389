//! The boundary is the agent, not only its commands: what a scripted agent's file tools
//! write and what crewbox's own git steps then do with its worktree, end to end against
//! the real binary, in real repositories.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::repo::{crewbox, events, git_repo};

/// A script whose first reply makes these tool calls, then says done.
fn script(calls: &[(&str, Value)]) -> String {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(name, args)| json!({"name": name, "args": args}))
        .collect();
    toml::to_string(&json!({"reply": [
        {"turn": 1, "text": "working", "tool_calls": tool_calls},
        {"turn": 2, "text": "done"},
    ]}))
    .unwrap()
}

/// `crewbox run go --mode single ARGS` with the calls; the report and each call's
/// (ok, output), in order.
fn run(dir: &Path, calls: &[(&str, Value)], args: &[&str]) -> (Value, Vec<(bool, String)>) {
    let mut all = vec!["run", "go", "--mode", "single"];
    all.extend(args);
    let (_out, report) = crewbox(dir, &script(calls), &all);
    let run = report["run_id"].as_str().unwrap().to_owned();
    let outputs = events(dir, &run)
        .into_iter()
        .filter(|e| e["kind"] == "tool.call")
        .map(|e| {
            (
                e["data"]["ok"].as_bool().unwrap(),
                e["data"]["output"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (report, outputs)
}

/// Writes the user's config file.
fn user_config(dir: &Path, text: &str) {
    let config = dir.join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), text).unwrap();
}

fn repo(dir: &Path) -> git2::Repository {
    git2::Repository::open(dir.join("repo")).unwrap()
}

fn main_git(dir: &Path) -> PathBuf {
    dir.join("repo/.git").canonicalize().unwrap()
}

/// The paths in branch `name`'s tip tree.
fn branch_files(dir: &Path, name: &str) -> Vec<String> {
    let repo = repo(dir);
    let tree = repo
        .find_branch(name, git2::BranchType::Local)
        .unwrap()
        .get()
        .peel_to_tree()
        .unwrap();
    let mut out = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            out.push(format!("{root}{}", entry.name().unwrap()));
        }
        git2::TreeWalkResult::Ok
    })
    .unwrap();
    out.sort();
    out
}

/// The agent's branch in a report.
fn branch_of(report: &Value) -> String {
    report["agents"][0]["branch"]["branch"]
        .as_str()
        .unwrap_or_else(|| panic!("no branch: {report:#}"))
        .to_owned()
}

/// The user's repository mid-merge with a staged change, as someone would leave it
/// while crewbox runs: what a reset through a forged `.git` would undo.
struct UserState {
    head: String,
    staged: bool,
}

fn leave_the_user_mid_merge(dir: &Path) -> UserState {
    let repo = repo(dir);
    let head = repo.head().unwrap().peel_to_commit().unwrap().id();
    std::fs::write(dir.join("repo/staged.txt"), "the user's staged work\n").unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("staged.txt")).unwrap();
    index.write().unwrap();
    std::fs::write(repo.path().join("MERGE_HEAD"), format!("{head}\n")).unwrap();
    std::fs::write(repo.path().join("MERGE_MSG"), "Merge branch 'topic'\n").unwrap();
    user_state(dir)
}

fn user_state(dir: &Path) -> UserState {
    let repo = repo(dir);
    let head = repo.find_reference("HEAD").unwrap();
    UserState {
        head: format!("{:?}", head.symbolic_target()),
        staged: repo
            .index()
            .unwrap()
            .get_path(Path::new("staged.txt"), 0)
            .is_some(),
    }
}

fn assert_user_state_intact(dir: &Path, before: &UserState) {
    let now = user_state(dir);
    assert_eq!(now.head, before.head, "the user's HEAD moved");
    assert!(
        now.staged && before.staged,
        "the user's staged change was unstaged"
    );
    let git = main_git(dir);
    assert!(git.join("MERGE_HEAD").exists(), "MERGE_HEAD was removed");
    assert!(git.join("MERGE_MSG").exists(), "MERGE_MSG was removed");
}

/// Regression: four `write_file` calls (`evil/commondir`, `evil/gitdir`, `evil/HEAD`,
/// then `.git` = `gitdir: evil`) made libgit2 treat another directory as the work
/// tree: the snapshot committed its files onto the agent's branch and the pool reset
/// deleted them — again on the next run, from the poisoned pooled slot.
#[test]
fn four_write_files_cannot_make_another_directory_the_work_tree() {
    let dir = git_repo(|_| {});
    let victim = dir.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("precious.txt"), "PRECIOUS\n").unwrap();
    let head = repo(dir.path())
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .id()
        .to_string();
    let calls = [
        (
            "write_file",
            json!({"path": "evil/commondir", "content": main_git(dir.path()).display().to_string()}),
        ),
        (
            "write_file",
            json!({"path": "evil/gitdir", "content": victim.join(".git").display().to_string()}),
        ),
        ("write_file", json!({"path": "evil/HEAD", "content": head})),
        (
            "write_file",
            json!({"path": ".git", "content": "gitdir: evil\n"}),
        ),
    ];
    let (report, outputs) = run(dir.path(), &calls, &[]);
    assert_eq!(report["status"], "completed", "{report:#}");
    let (ok, refused) = &outputs[3];
    assert!(
        !ok && refused.contains("off limits") && refused.contains("git's own directory"),
        "{refused}"
    );
    let files = branch_files(dir.path(), &branch_of(&report));
    assert!(!files.iter().any(|f| f.contains("precious")), "{files:?}");
    // The slot went back to the pool; the next, benign run reuses it.
    let (second, _) = run(
        dir.path(),
        &[(
            "write_file",
            json!({"path": "next.txt", "content": "next\n"}),
        )],
        &[],
    );
    assert_eq!(second["status"], "completed", "{second:#}");
    assert_eq!(
        branch_files(dir.path(), &branch_of(&second)),
        ["next.txt", "notes.txt"]
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("precious.txt")).unwrap(),
        "PRECIOUS\n"
    );
    assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
}

/// Regression: one `write_file` (`.git` = `gitdir: <main>/.git`) made crewbox's pool
/// reset run on the user's repository: it detached their HEAD, removed `MERGE_HEAD`
/// and `MERGE_MSG` and unstaged their staged changes.
#[test]
fn a_git_file_naming_the_main_repository_leaves_the_users_head_merge_and_index_alone() {
    let dir = git_repo(|_| {});
    let before = leave_the_user_mid_merge(dir.path());
    let forged = format!("gitdir: {}\n", main_git(dir.path()).display());
    let calls = [
        ("write_file", json!({"path": ".git", "content": forged})),
        (
            "write_file",
            json!({"path": "work.txt", "content": "work\n"}),
        ),
    ];
    let (report, outputs) = run(dir.path(), &calls, &[]);
    assert_eq!(report["status"], "completed", "{report:#}");
    assert!(
        !outputs[0].0 && outputs[0].1.contains("off limits"),
        "{outputs:?}"
    );
    assert_eq!(
        branch_files(dir.path(), &branch_of(&report)),
        ["notes.txt", "work.txt"]
    );
    assert_user_state_intact(dir.path(), &before);
}

/// Whatever writes the worktree's `.git` (here a command with the sandbox turned off,
/// which the file tools cannot stop), crewbox checks it through the main repository
/// before its snapshot: nothing is committed, nothing is reset, the slot is retired,
/// and the next run gets a fresh one.
#[test]
fn a_tampered_worktree_is_never_committed_or_reset_and_is_retired() {
    let dir = git_repo(|_| {});
    user_config(dir.path(), "[sandbox]\nmode = \"off\"\n");
    let before = leave_the_user_mid_merge(dir.path());
    let command = format!(
        "printf 'gitdir: %s\\n' '{}' > .git && echo work > work.txt",
        main_git(dir.path()).display()
    );
    let (report, outputs) = run(
        dir.path(),
        &[("run_command", json!({"command": command}))],
        &[],
    );
    assert!(outputs[0].0, "{outputs:?}");
    assert_eq!(report["status"], "failed", "{report:#}");
    let text = report.to_string();
    assert!(
        text.contains("was tampered with") && text.contains("points to"),
        "{report:#}"
    );
    assert_user_state_intact(dir.path(), &before);
    let branches: Vec<String> = repo(dir.path())
        .branches(Some(git2::BranchType::Local))
        .unwrap()
        .map(|b| b.unwrap().0.name().unwrap().unwrap().to_owned())
        .collect();
    assert!(
        branches.iter().all(|b| !b.starts_with("crewbox/")),
        "{branches:?}"
    );
    let worktrees = crate::support::repo::state_dir(dir.path()).join("worktrees");
    let slots: Vec<_> = std::fs::read_dir(&worktrees)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(slots.is_empty(), "the tampered slot was kept: {slots:?}");
    let (next, _) = run(
        dir.path(),
        &[(
            "write_file",
            json!({"path": "next.txt", "content": "next\n"}),
        )],
        &[],
    );
    assert_eq!(next["status"], "completed", "{next:#}");
    assert_user_state_intact(dir.path(), &before);
}

/// Regression: with `--isolation none` the file tools wrote the main repository's
/// `.git/config` (`core.fsmonitor` then ran on the user's next `git status`),
/// `.git/hooks/*` and `.crewbox/`; and a command could plant `.crewbox/` where the
/// repository had none.
#[test]
fn isolation_none_leaves_git_and_crewbox_alone() {
    let dir = git_repo(|_| {});
    let config_before = std::fs::read(dir.path().join("repo/.git/config")).unwrap();
    let calls = [
        (
            "write_file",
            json!({"path": ".git/config", "content": "[core]\n\tfsmonitor = touch PWNED\n"}),
        ),
        (
            "write_file",
            json!({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch PWNED\n"}),
        ),
        (
            "edit_file",
            json!({"path": ".git/config", "old": "[core]", "new": "[core]\n\tfsmonitor = x"}),
        ),
        (
            "write_file",
            json!({"path": ".crewbox/config.toml", "content": "default_mode = \"crew\"\n"}),
        ),
        (
            "run_command",
            json!({"command": "mkdir -p .crewbox/teams && echo evil > .crewbox/config.toml"}),
        ),
        (
            "run_command",
            json!({"command": "echo evil >> .git/config; echo 'touch PWNED' > .git/hooks/post-checkout"}),
        ),
        ("write_file", json!({"path": "ok.txt", "content": "fine\n"})),
    ];
    let (report, outputs) = run(dir.path(), &calls, &["--isolation", "none"]);
    assert_eq!(report["status"], "completed", "{report:#}");
    for (i, (ok, output)) in outputs[..4].iter().enumerate() {
        assert!(!ok && output.contains("off limits"), "call {i}: {output}");
    }
    for (i, (_, output)) in outputs[4..6].iter().enumerate() {
        assert!(
            output.contains("Read-only file system"),
            "command {i}: {output}"
        );
    }
    assert!(outputs[6].0);
    let repo_dir = dir.path().join("repo");
    assert_eq!(
        std::fs::read(repo_dir.join(".git/config")).unwrap(),
        config_before
    );
    assert!(!repo_dir.join(".git/hooks/pre-commit").exists());
    assert!(!repo_dir.join(".git/hooks/post-checkout").exists());
    assert!(
        !repo_dir.join(".crewbox").exists(),
        "no .crewbox (not even the empty mount point) is left"
    );
    assert_eq!(
        std::fs::read_to_string(repo_dir.join("ok.txt")).unwrap(),
        "fine\n"
    );
}

/// Regression: an agent planted `.crewbox/` on its branch (`run_command` where the
/// repository had none, `write_file` always); merging the branch silently changed a
/// trusted repository's configuration.
#[test]
fn agents_cannot_plant_crewbox_on_their_branch() {
    let dir = git_repo(|_| {});
    let calls = [
        (
            "write_file",
            json!({"path": ".crewbox/config.toml", "content": "default_mode = \"crew\"\n"}),
        ),
        (
            "run_command",
            json!({"command": "mkdir -p .crewbox/teams; echo evil > .crewbox/teams/x.toml; echo kept > kept.txt"}),
        ),
    ];
    let (report, outputs) = run(dir.path(), &calls, &[]);
    assert_eq!(report["status"], "completed", "{report:#}");
    assert!(
        !outputs[0].0 && outputs[0].1.contains("off limits"),
        "{outputs:?}"
    );
    assert!(
        outputs[1].1.contains("Read-only file system"),
        "{outputs:?}"
    );
    assert_eq!(
        branch_files(dir.path(), &branch_of(&report)),
        ["kept.txt", "notes.txt"]
    );
}

/// The backstop: whatever put `.crewbox/` changes in the worktree (here commands with
/// the sandbox off), crewbox's commit leaves them out and the report names them; with
/// the user's grant they are committed.
#[test]
fn the_commit_leaves_out_crewbox_changes_it_was_not_granted_and_says_so() {
    let dir = git_repo(|_| {});
    user_config(dir.path(), "[sandbox]\nmode = \"off\"\n");
    let calls = [(
        "run_command",
        json!({"command": "mkdir -p .crewbox .CREWBOX && echo evil > .crewbox/config.toml && echo x > .CREWBOX/x && echo kept > kept.txt"}),
    )];
    let (report, _) = run(dir.path(), &calls, &[]);
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(
        branch_files(dir.path(), &branch_of(&report)),
        ["kept.txt", "notes.txt"]
    );
    let left: Vec<(&str, &str)> = report["agents"][0]["left_out"]
        .as_array()
        .unwrap_or_else(|| panic!("{report:#}"))
        .iter()
        .map(|l| (l["path"].as_str().unwrap(), l["why"].as_str().unwrap()))
        .collect();
    assert_eq!(
        left,
        [
            (".CREWBOX/x", "crewbox"),
            (".crewbox/config.toml", "crewbox")
        ]
    );
    let text =
        crate::support::repo::bin(dir.path(), &["status", report["run_id"].as_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("left out") && text.contains(".crewbox/config.toml"),
        "{text}"
    );

    user_config(
        dir.path(),
        "[sandbox]\nmode = \"off\"\n[workspace]\nagents_write_crewbox = true\n",
    );
    let (granted, _) = run(dir.path(), &calls, &[]);
    assert_eq!(
        branch_files(dir.path(), &branch_of(&granted)),
        [
            ".CREWBOX/x",
            ".crewbox/config.toml",
            "kept.txt",
            "notes.txt"
        ]
    );
    assert!(
        granted["agents"][0].get("left_out").is_none(),
        "{granted:#}"
    );
}

/// Regression: a 3 GiB sparse file took 190 s to commit and landed on the branch. The
/// limits are checked before a file is read: it is left out, named, in seconds.
#[test]
fn a_3_gib_sparse_file_is_left_out_of_the_commit_in_seconds() {
    let dir = git_repo(|_| {});
    let calls = [(
        "run_command",
        json!({"command": "truncate -s 3G big.bin && echo small > small.txt"}),
    )];
    let started = Instant::now();
    let (report, outputs) = run(dir.path(), &calls, &[]);
    let took = started.elapsed();
    assert!(outputs[0].0, "{outputs:?}");
    assert_eq!(report["status"], "completed", "{report:#}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_eq!(
        branch_files(dir.path(), &branch_of(&report)),
        ["notes.txt", "small.txt"]
    );
    let left = &report["agents"][0]["left_out"][0];
    assert_eq!(left["path"], "big.bin", "{report:#}");
    assert_eq!(left["why"], "file-too-large");
    assert_eq!(left["bytes"], 3u64 << 30);
}

/// A trusted repository may lower the commit limits, never raise them.
#[test]
fn a_trusted_repository_lowers_the_commit_limits_only() {
    let dir = git_repo(|w| {
        std::fs::create_dir_all(w.join(".crewbox")).unwrap();
        std::fs::write(
            w.join(".crewbox/config.toml"),
            "[workspace]\nmax_files = 1\nmax_file_bytes = 999999999999\n",
        )
        .unwrap();
    });
    let trusted = crate::support::repo::bin(dir.path(), &["trust"]);
    assert!(trusted.status.success(), "{trusted:?}");
    let calls = [
        ("write_file", json!({"path": "a.txt", "content": "a\n"})),
        ("write_file", json!({"path": "b.txt", "content": "b\n"})),
    ];
    let (report, _) = run(dir.path(), &calls, &[]);
    assert_eq!(
        branch_files(dir.path(), &branch_of(&report)),
        ["a.txt", "notes.txt"]
    );
    let left = &report["agents"][0]["left_out"][0];
    assert_eq!(left["path"], "b.txt", "{report:#}");
    assert_eq!(left["why"], "too-many-files");
    let config = crate::support::repo::bin(dir.path(), &["config", "--json"]);
    let config: Value = serde_json::from_slice(&config.stdout).unwrap();
    let ignored = config["ignored"].to_string();
    assert!(ignored.contains("workspace.max_file_bytes"), "{config:#}");
}

/// Regression: in a shallow clone the run failed after the agent finished (`object not
/// found` in `git log`): the walk of the agent's commits asked a linked worktree's
/// repository, which does not read the clone's grafts, for the missing parents.
#[test]
fn a_shallow_clone_runs_to_the_end() {
    let dir = git_repo(|_| {});
    let origin = repo(dir.path());
    let sig = git2::Signature::now("t", "t@localhost").unwrap();
    for n in 2..=3 {
        std::fs::write(dir.path().join("repo/notes.txt"), format!("v{n}\n")).unwrap();
        let mut index = origin.index().unwrap();
        index.add_path(Path::new("notes.txt")).unwrap();
        index.write().unwrap();
        let tree = origin.find_tree(index.write_tree().unwrap()).unwrap();
        let parent = origin.head().unwrap().peel_to_commit().unwrap();
        origin
            .commit(
                Some("HEAD"),
                &sig,
                &sig,
                &format!("c{n}"),
                &tree,
                &[&parent],
            )
            .unwrap();
    }
    let shallow = tempfile::tempdir().unwrap();
    let cloned = std::process::Command::new("git")
        .args(["clone", "--quiet", "--depth", "1"])
        .arg(format!("file://{}", dir.path().join("repo").display()))
        .arg(shallow.path().join("repo"))
        .status()
        .unwrap();
    assert!(cloned.success());
    assert!(shallow.path().join("repo/.git/shallow").exists());
    let (report, _) = run(
        shallow.path(),
        &[("write_file", json!({"path": "new.txt", "content": "new\n"}))],
        &[],
    );
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(
        report["agents"][0]["branch"]["commits"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        branch_files(shallow.path(), &branch_of(&report)),
        ["new.txt", "notes.txt"]
    );
}

fn trust_of(dir: &Path) -> (String, String) {
    let out = crate::support::repo::bin(dir, &["config", "--json"]);
    let config: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (
        config["trust"].as_str().unwrap().to_owned(),
        config["trust_error"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// Regression: trust was keyed by path alone, so merging an agent's branch that changed
/// `.crewbox/` silently changed what a trusted repository makes crewbox do. Trust now
/// covers the crewbox files as they were: after the merge crewbox asks again, saying
/// what changed.
#[test]
fn a_merged_crewbox_change_asks_for_trust_again() {
    let dir = git_repo(|w| {
        std::fs::create_dir_all(w.join(".crewbox")).unwrap();
        std::fs::write(
            w.join(".crewbox/config.toml"),
            "default_mode = \"single\"\n",
        )
        .unwrap();
    });
    // Commit `.crewbox/` so the agent's branch can change it.
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@localhost"])
            .args(args)
            .current_dir(dir.path().join("repo"))
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["add", ".crewbox"]);
    git(&["commit", "-q", "-m", "crewbox config"]);
    assert!(
        crate::support::repo::bin(dir.path(), &["trust"])
            .status
            .success()
    );
    assert_eq!(trust_of(dir.path()).0, "trusted");
    // The user lets agents change `.crewbox/`; one does.
    user_config(dir.path(), "[workspace]\nagents_write_crewbox = true\n");
    let calls = [(
        "write_file",
        json!({"path": ".crewbox/config.toml", "content": "default_mode = \"crew\"\n"}),
    )];
    let (report, outputs) = run(dir.path(), &calls, &[]);
    assert!(outputs[0].0, "{outputs:?}");
    let branch = branch_of(&report);
    git(&["merge", "-q", "--ff-only", &branch]);
    let (trust, stderr) = trust_of(dir.path());
    assert_eq!(trust, "untrusted", "{stderr}");
    assert!(
        stderr.contains("changed since you trusted it (.crewbox/config.toml changed)")
            && stderr.contains("run `crewbox trust` there again"),
        "{stderr}"
    );
    assert!(
        crate::support::repo::bin(dir.path(), &["trust"])
            .status
            .success()
    );
    assert_eq!(trust_of(dir.path()).0, "trusted");
}

/// A trust record written before records held the files: kept, but not trusted until
/// the user trusts the repository again (there is no telling what it covered).
#[test]
fn a_trust_record_without_files_is_not_trusted_until_renewed() {
    let dir = git_repo(|_| {});
    let root = dir.path().join("repo").canonicalize().unwrap();
    let store = dir.path().join("xdg-state/crewbox/trust");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(
        store.join(format!("{}.toml", crewbox::unstable::paths::repo_id(&root))),
        format!(
            "root = {:?}\ntrusted_at = \"2025-01-01T00:00:00Z\"\n",
            root.display().to_string()
        ),
    )
    .unwrap();
    let (trust, stderr) = trust_of(dir.path());
    assert_eq!(trust, "untrusted");
    assert!(stderr.contains("trusted by an earlier crewbox"), "{stderr}");
    let listed = crate::support::repo::bin(dir.path(), &["trust", "--list"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("run `crewbox trust` there again"),
        "{listed:?}"
    );
    assert!(
        crate::support::repo::bin(dir.path(), &["trust"])
            .status
            .success()
    );
    assert_eq!(trust_of(dir.path()).0, "trusted");
}

/// Commits everything in the repository (`git add -A`).
fn commit_all(dir: &Path, message: &str) {
    let repo = repo(dir);
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.update_all(["*"], None).unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@localhost").unwrap();
    let parent = repo.head().unwrap().peel_to_commit().unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &[&parent])
        .unwrap();
}

/// Regression (critical): an agent's sandboxed command replaced a tracked file with a
/// symlink to a file outside every sandbox (`~/.bashrc`) and a tracked directory with
/// one to a directory outside (`~/.ssh`). crewbox's own reset of the worktree as it
/// went back to the pool (libgit2's forced checkout, as the user, outside the sandbox)
/// then wrote repository content through both links and deleted a file in the outside
/// directory; the links stayed in the pooled slot, where a later run in another
/// process wrote through them again and committed them as its own agent's work. Shown
/// failing without `clear_links`: the outside files held the repository's content.
#[test]
fn the_worktree_reset_never_writes_through_links_an_agent_planted() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    let victims = d.join("victims");
    std::fs::create_dir_all(victims.join("dotssh")).unwrap();
    std::fs::write(victims.join("bashrc"), "ORIGINAL\n").unwrap();
    std::fs::write(victims.join("dotssh/authorized_keys"), "ORIGINAL\n").unwrap();
    std::fs::write(victims.join("dotssh/id"), "UNRELATED\n").unwrap();
    std::fs::write(d.join("repo/README.md"), "echo REPO-CONTENT\n").unwrap();
    std::fs::create_dir_all(d.join("repo/keys")).unwrap();
    std::fs::write(d.join("repo/keys/authorized_keys"), "attacker-key\n").unwrap();
    std::fs::write(d.join("repo/keys/id"), "repo-id\n").unwrap();
    commit_all(d, "content");
    let untouched = |when: &str| {
        for (file, text) in [
            ("bashrc", "ORIGINAL\n"),
            ("dotssh/authorized_keys", "ORIGINAL\n"),
            ("dotssh/id", "UNRELATED\n"),
        ] {
            assert_eq!(
                std::fs::read_to_string(victims.join(file)).ok().as_deref(),
                Some(text),
                "{when}: {file} outside the worktree was written or deleted"
            );
        }
    };
    let plant = format!(
        "ln -sf '{v}/bashrc' README.md && rm -rf keys && ln -s '{v}/dotssh' keys && rm notes.txt && mkfifo notes.txt",
        v = victims.display()
    );
    let (report, outputs) = run(d, &[("run_command", json!({"command": plant}))], &[]);
    assert!(outputs[0].0, "{outputs:?}");
    assert_eq!(report["status"], "completed", "{report:#}");
    untouched("after the run that planted the links");

    // The user's HEAD moves (the pooled slot is reset again when handed out), and a
    // benign agent runs in a new process.
    std::fs::write(d.join("repo/README.md"), "echo LATER\n").unwrap();
    std::fs::remove_file(d.join("repo/keys/id")).unwrap();
    commit_all(d, "later");
    let (next, _) = run(
        d,
        &[(
            "write_file",
            json!({"path": "next.txt", "content": "next\n"}),
        )],
        &[],
    );
    assert_eq!(next["status"], "completed", "{next:#}");
    untouched("after the next run");
    // Its branch holds its own work on the new HEAD, none of the planted links.
    let branch = branch_of(&next);
    assert_eq!(
        branch_files(d, &branch),
        ["README.md", "keys/authorized_keys", "next.txt", "notes.txt"]
    );
    let git = repo(d);
    let tree = git
        .find_branch(&branch, git2::BranchType::Local)
        .unwrap()
        .get()
        .peel_to_tree()
        .unwrap();
    assert_eq!(
        tree.get_name("README.md").unwrap().filemode(),
        0o100644,
        "README.md is a link on the next agent's branch"
    );
}

/// An agent that makes a repository of its own in its worktree (`git init`, a clone:
/// agents do) failed its whole commit ("invalid path: 'sub/'"), and with it the run;
/// and the nested repository outlived the worktree's reset into the next agent's
/// checkout. Now it is left out of the commit, named, and removed by the reset. Shown
/// failing without the fix (the run failed).
#[test]
fn a_repository_an_agent_makes_inside_its_worktree_is_left_out_and_cleaned() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    let command = "git init -q sub && echo hi > sub/f.txt && mkdir plain && echo x > plain/y.txt";
    let (report, outputs) = run(d, &[("run_command", json!({"command": command}))], &[]);
    assert!(outputs[0].0, "{outputs:?}");
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(
        branch_files(d, &branch_of(&report)),
        ["notes.txt", "plain/y.txt"]
    );
    let left = &report["agents"][0]["left_out"];
    assert!(
        left.as_array()
            .unwrap()
            .iter()
            .any(|l| l["path"].as_str().unwrap().starts_with("sub")
                && l["why"] == "nested-repository"),
        "{left:#}"
    );
    // The pooled worktree holds no trace of it.
    let worktrees = crate::support::repo::state_dir(d).join("worktrees");
    for slot in std::fs::read_dir(&worktrees).unwrap().flatten() {
        assert!(
            !slot.path().join("sub").exists(),
            "the nested repository outlived the reset in {}",
            slot.path().display()
        );
    }
}

/// A repository without a `.git` entry — a bare one an agent made, its `config` naming
/// a program (`core.fsmonitor`) — is left out of the commit like one with a `.git`: on
/// the agent's branch, any git the user ran in that directory after checking it out
/// ran the agent's program outside the sandbox. Shown failing without the fix.
#[test]
fn a_bare_repository_an_agent_makes_is_left_out_too() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    let command = "mkdir -p docs/tool && git init -q --bare docs/tool \
                   && git -C docs/tool config core.fsmonitor 'touch PWNED; false' \
                   && touch docs/tool/objects/.keep docs/tool/refs/.keep \
                   && echo hi > docs/readme.md";
    let (report, outputs) = run(d, &[("run_command", json!({"command": command}))], &[]);
    assert!(outputs[0].0, "{outputs:?}");
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(
        branch_files(d, &branch_of(&report)),
        ["docs/readme.md", "notes.txt"]
    );
    let left = &report["agents"][0]["left_out"];
    assert!(
        left.as_array()
            .unwrap()
            .iter()
            .any(|l| l["path"] == "docs/tool/" && l["why"] == "nested-repository"),
        "{left:#}"
    );
}

/// A secret in what an agent says (its finish summary, its last reply) does not reach
/// its branch's commit message, which leaves crewbox with the branch: the store, events
/// and report were redacted, the message was not. Shown failing without the fix.
#[test]
fn a_commit_message_carries_no_secret() {
    const SECRET: &str = "sk-canary-commit-5be1d0c4";
    let dir = git_repo(|_| {});
    let d = dir.path();
    let script = format!(
        "[[reply]]\nturn = 1\ntext = \"writing\"\n[[reply.tool_calls]]\nname = \"write_file\"\n\
         args = {{ path = \"out.txt\", content = \"x\\n\" }}\n\n\
         [[reply.tool_calls]]\nname = \"finish\"\nargs = {{ summary = \"used {SECRET} to do it\" }}\n"
    );
    std::fs::write(d.join("script.toml"), &script).unwrap();
    let out = crate::support::repo::command(
        d,
        &[
            "run",
            "go",
            "--mode",
            "single",
            "--script",
            d.join("script.toml").to_str().unwrap(),
            "--json",
        ],
    )
    .env("CANARY_API_KEY", SECRET)
    .output()
    .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["status"], "completed", "{report:#}");
    let branch = branch_of(&report);
    let git = repo(d);
    let commit = git
        .find_branch(&branch, git2::BranchType::Local)
        .unwrap()
        .get()
        .peel_to_commit()
        .unwrap();
    let message = commit.message().unwrap_or_default().to_owned();
    assert!(!message.contains(SECRET), "{message}");
    assert!(message.contains("[redacted]"), "{message}");
}

/// A directory tree deeper than git's library walks (100) is left out, named, and the
/// rest of the agent's work is committed: libgit2 refused the whole commit, and in
/// `single` the run failed with every change lost. Shown failing without the fix.
#[test]
fn a_tree_nested_deeper_than_git_walks_is_left_out_not_the_run() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    let command = "p=deep; for i in $(seq 150); do p=$p/d; done; mkdir -p $p \
                   && echo bottom > $p/f.txt && echo kept > kept.txt";
    let (report, outputs) = run(d, &[("run_command", json!({"command": command}))], &[]);
    assert!(outputs[0].0, "{outputs:?}");
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(
        branch_files(d, &branch_of(&report)),
        ["kept.txt", "notes.txt"]
    );
    let left = &report["agents"][0]["left_out"];
    assert!(
        left.as_array()
            .unwrap()
            .iter()
            .any(|l| l["why"] == "path-too-deep"
                && l["path"].as_str().is_some_and(|p| p.starts_with("deep/d/"))),
        "{left:#}"
    );
}

/// Names git keeps for its own directory, written by an agent anywhere in its worktree:
/// the NTFS spellings libgit2 refuses to add (`git~1`, `.git.`, `.git:x`) failed the
/// agent's whole commit ("invalid path"), and with it the run; a `.git` file in a
/// directory the base tracks was passed over without a word. Now each is left out and
/// named, and the rest is committed. Shown failing without the fix (the run failed).
#[test]
fn names_git_keeps_for_itself_are_left_out_named_and_the_rest_committed() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    std::fs::create_dir_all(d.join("repo/docs")).unwrap();
    std::fs::write(d.join("repo/docs/a.md"), "a\n").unwrap();
    commit_all(d, "docs");
    let command = "echo y > docs/git~1 && echo z > .git. && echo w > 'docs/.git:x' \
                   && printf 'gitdir: /nowhere\\n' > docs/.git && echo b > docs/b.md";
    let (report, outputs) = run(d, &[("run_command", json!({"command": command}))], &[]);
    assert!(outputs[0].0, "{outputs:?}");
    assert_eq!(report["status"], "completed", "{report:#}");
    assert_eq!(
        branch_files(d, &branch_of(&report)),
        ["docs/a.md", "docs/b.md", "notes.txt"]
    );
    let mut left: Vec<(String, String)> = report["agents"][0]["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["path"].as_str().unwrap().into(),
                l["why"].as_str().unwrap().into(),
            )
        })
        .collect();
    left.sort();
    let want = [".git.", "docs/.git", "docs/.git:x", "docs/git~1"]
        .map(|p| (p.to_owned(), "git-name".to_owned()));
    assert_eq!(left, want);
    // The pooled worktree holds none of them for the next agent.
    let worktrees = crate::support::repo::state_dir(d).join("worktrees");
    for slot in std::fs::read_dir(&worktrees).unwrap().flatten() {
        for name in [".git.", "docs/.git", "docs/.git:x", "docs/git~1"] {
            assert!(
                std::fs::symlink_metadata(slot.path().join(name)).is_err(),
                "{name} outlived the reset in {}",
                slot.path().display()
            );
        }
    }
}

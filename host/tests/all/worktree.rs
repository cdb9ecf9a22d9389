//! Worktree isolation against real repositories in temp dirs, checked with the git CLI.

use std::path::{Path, PathBuf};
use std::process::Command;

use crewbox::unstable::worktree::{
    BranchArtifact, ChangeKind, ChangedPath, FinishOutcome, Identity, PruneReason, WorktreeError,
    WorktreeManager, WorktreeOptions, WorktreeState, sanitize_branch_component,
};
use pretty_assertions::assert_eq;

/// Runs git in `dir`, returning trimmed stdout; panics with stderr on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A temp dir holding `repo/` (3 files, one commit, `.gitignore` for `*.log`) and
/// `state/worktrees/`.
struct Fixture {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    wt_dir: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["config", "user.name", "Human"]);
        git(&repo, &["config", "user.email", "human@example.com"]);
        std::fs::write(repo.join("README.md"), "hello\n").unwrap();
        std::fs::write(repo.join(".gitignore"), "*.log\n").unwrap();
        std::fs::create_dir(repo.join("src")).unwrap();
        std::fs::write(repo.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "initial"]);
        let wt_dir = tmp.path().join("state/worktrees");
        Self {
            _tmp: tmp,
            repo,
            wt_dir,
        }
    }

    async fn manager(&self, pool_size: usize) -> WorktreeManager {
        let opts = WorktreeOptions {
            pool_size,
            ..WorktreeOptions::default()
        };
        WorktreeManager::open(&self.repo, &self.wt_dir, opts)
            .await
            .unwrap()
    }

    fn head(&self) -> String {
        git(&self.repo, &["rev-parse", "HEAD"])
    }

    fn branches(&self) -> Vec<String> {
        let out = git(&self.repo, &["branch", "--format=%(refname:short)"]);
        out.lines().map(str::to_owned).collect()
    }

    /// Names of worktrees git has registered (besides the main one).
    fn registered(&self) -> Vec<String> {
        let out = git(&self.repo, &["worktree", "list", "--porcelain"]);
        out.lines()
            .filter_map(|l| l.strip_prefix("worktree "))
            .skip(1)
            .map(|p| {
                Path::new(p)
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect()
    }

    fn fsck(&self) {
        git(&self.repo, &["fsck", "--full", "--strict"]);
    }
}

fn committed(outcome: FinishOutcome) -> BranchArtifact {
    match outcome {
        FinishOutcome::Committed(a) => a,
        FinishOutcome::Unchanged => panic!("expected a commit"),
    }
}

/// A pid that certainly is not running: a child we started and reaped.
fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// Rewrites a slot's owner marker as if it had been left by `pid`.
fn set_marker_pid(wt_dir: &Path, slot: &str, pid: u32) {
    let path = wt_dir.join(format!("{slot}.owner"));
    let mut data: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    data["pid"] = pid.into();
    std::fs::write(&path, data.to_string()).unwrap();
}

fn slot_name(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy().into_owned()
}

#[tokio::test]
async fn unchanged_worktree_is_removed_without_a_branch() {
    let fx = Fixture::new();
    let m = fx.manager(0).await;
    let wt = m.acquire("a-1").await.unwrap();
    assert!(wt.path().starts_with(m.worktrees_dir()));
    assert!(!wt.path().starts_with(m.repo_root()));
    assert_eq!(wt.base_commit(), fx.head());
    assert_eq!(
        std::fs::read_to_string(wt.path().join("README.md")).unwrap(),
        "hello\n"
    );
    // Ignored files are not changes.
    std::fs::write(wt.path().join("build.log"), "noise").unwrap();
    assert_eq!(m.changed_paths(&wt).await.unwrap(), vec![]);
    let path = wt.path().to_owned();
    assert_eq!(
        m.finish(wt, "nothing").await.unwrap(),
        FinishOutcome::Unchanged
    );
    assert!(!path.exists());
    assert_eq!(fx.branches(), vec!["main"]);
    assert_eq!(fx.registered(), Vec::<String>::new());
    assert_eq!(m.list().await.unwrap(), vec![]);
    fx.fsck();
}

#[tokio::test]
async fn changes_are_committed_to_an_agent_branch_with_sanitised_message_and_identity() {
    let fx = Fixture::new();
    let opts = WorktreeOptions {
        pool_size: 0,
        identity: Identity {
            name: "Bot".into(),
            email: "bot@example.com".into(),
        },
        ..WorktreeOptions::default()
    };
    let m = WorktreeManager::open(&fx.repo, &fx.wt_dir, opts)
        .await
        .unwrap();
    let wt = m.acquire("agent/7 <x>").await.unwrap();
    let p = wt.path().to_owned();
    std::fs::write(p.join("README.md"), "hello\nworld\n").unwrap();
    std::fs::remove_file(p.join("src/lib.rs")).unwrap();
    std::fs::create_dir_all(p.join("docs/new")).unwrap();
    std::fs::write(p.join("docs/new/guide.md"), "untracked\n").unwrap();
    std::fs::write(p.join("debug.log"), "ignored").unwrap();

    let expected = vec![
        ChangedPath {
            path: "README.md".into(),
            kind: ChangeKind::Modified,
        },
        ChangedPath {
            path: "docs/new/guide.md".into(),
            kind: ChangeKind::Added,
        },
        ChangedPath {
            path: "src/lib.rs".into(),
            kind: ChangeKind::Deleted,
        },
    ];
    assert_eq!(m.changed_paths(&wt).await.unwrap(), expected);
    let diff = m.diff(&wt, 1 << 20).await.unwrap();
    assert!(diff.contains("+world\n"), "{diff}");
    assert!(diff.contains("+++ b/docs/new/guide.md\n"), "{diff}");
    assert!(diff.contains("+untracked\n"), "{diff}");
    assert!(diff.contains("-pub fn a() {}\n"), "{diff}");
    assert!(!diff.contains("debug.log"), "{diff}");
    let short = m.diff(&wt, 60).await.unwrap();
    assert!(
        short.len() <= 60 && short.ends_with("[diff truncated]\n"),
        "{short:?}"
    );
    // A cap that cannot hold the marker still says the diff was cut (an empty diff
    // read as "no changes").
    for tiny in [0, 1, 17] {
        let cut = m.diff(&wt, tiny).await.unwrap();
        assert_eq!(cut, "[diff truncated]\n", "{tiny}");
    }

    let base = fx.head();
    let artifact = committed(
        m.finish(
            wt,
            "\u{1b}[31mFix `rm` $HOME\n\n\"quoted\" back\\slash\u{7f}",
        )
        .await
        .unwrap(),
    );
    assert_eq!(artifact.branch, "crewbox/agent-7-x");
    assert_eq!(artifact.base, base);
    assert_eq!(artifact.commits.len(), 1);
    assert_eq!(
        git(&fx.repo, &["rev-parse", "crewbox/agent-7-x"]),
        artifact.commits[0]
    );
    assert_eq!(
        git(
            &fx.repo,
            &[
                "log",
                "-1",
                "--format=%an <%ae>|%cn <%ce>|%B",
                "crewbox/agent-7-x"
            ]
        ),
        "Bot <bot@example.com>|Bot <bot@example.com>|Fix rm HOME quoted backslash"
    );
    assert_eq!(
        git(
            &fx.repo,
            &["diff", "--name-status", &base, "crewbox/agent-7-x"]
        ),
        "M\tREADME.md\nA\tdocs/new/guide.md\nD\tsrc/lib.rs"
    );
    // The main working tree and HEAD are untouched.
    assert_eq!(fx.head(), base);
    assert_eq!(git(&fx.repo, &["status", "--porcelain"]), "");
    assert!(!p.exists());
    fx.fsck();
}

#[tokio::test]
async fn agent_commits_are_kept_and_the_rest_goes_on_top() {
    let fx = Fixture::new();
    let m = fx.manager(0).await;
    let wt = m.acquire("committer").await.unwrap();
    std::fs::write(wt.path().join("a.txt"), "a\n").unwrap();
    git(wt.path(), &["add", "a.txt"]);
    git(wt.path(), &["commit", "-q", "-m", "agent commit"]);
    std::fs::write(wt.path().join("b.txt"), "b\n").unwrap();
    let artifact = committed(m.finish(wt, "rest").await.unwrap());
    assert_eq!(artifact.commits.len(), 2);
    assert_eq!(
        git(
            &fx.repo,
            &[
                "log",
                "--format=%s",
                &format!("{}..{}", artifact.base, artifact.branch)
            ]
        ),
        "rest\nagent commit"
    );
    assert_eq!(
        git(&fx.repo, &["show", &format!("{}:a.txt", artifact.branch)]),
        "a"
    );
    fx.fsck();
}

#[tokio::test]
async fn branch_name_collision_gets_a_timestamp_suffix() {
    let fx = Fixture::new();
    let m = fx.manager(1).await;
    let mut names = Vec::new();
    for n in 0..3 {
        let wt = m.acquire("dup").await.unwrap();
        std::fs::write(wt.path().join("n.txt"), format!("{n}\n")).unwrap();
        names.push(committed(m.finish(wt, "dup").await.unwrap()).branch);
    }
    assert_eq!(names[0], "crewbox/dup");
    let re = regex::Regex::new(r"^crewbox/dup-\d{8}T\d{6}Z(-\d+)?$").unwrap();
    assert!(
        re.is_match(&names[1]) && re.is_match(&names[2]),
        "{names:?}"
    );
    assert_ne!(names[1], names[2]);
    for (n, name) in names.iter().enumerate() {
        assert_eq!(
            git(&fx.repo, &["show", &format!("{name}:n.txt")]),
            n.to_string()
        );
    }
}

#[tokio::test]
async fn non_repository_and_empty_repository_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let wt_dir = tmp.path().join("wts");
    let err = WorktreeManager::open(&plain, &wt_dir, WorktreeOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, WorktreeError::NotARepository { ref path, .. } if path == &plain),
        "{err:?}"
    );

    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    git(&empty, &["init", "-q"]);
    let err = WorktreeManager::open(&empty, &wt_dir, WorktreeOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, WorktreeError::NoCommits { .. }), "{err:?}");
    assert!(err.to_string().contains("no commit"), "{err}");

    let fx = Fixture::new();
    let inside = fx.repo.join(".crewbox/worktrees");
    let err = WorktreeManager::open(&fx.repo, &inside, WorktreeOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, WorktreeError::InsideRepository { .. }),
        "{err:?}"
    );
    assert!(!inside.exists());
}

#[tokio::test]
async fn pooled_worktree_is_reused_clean_at_the_new_head() {
    let fx = Fixture::new();
    let m = fx.manager(1).await;
    let first = m.acquire("first").await.unwrap();
    let path = first.path().to_owned();
    std::fs::write(path.join("README.md"), "scribbled\n").unwrap();
    std::fs::write(path.join("left-behind.txt"), "x").unwrap();
    std::fs::create_dir_all(path.join("tmp/deep")).unwrap();
    std::fs::write(path.join("tmp/deep/x.log"), "ignored").unwrap();
    std::fs::write(path.join("cache.log"), "ignored").unwrap();
    m.discard(first).await.unwrap();

    let listed = m.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].state, WorktreeState::Pooled);
    assert_eq!(listed[0].owner_pid, Some(std::process::id()));
    assert_eq!(fx.branches(), vec!["main"]);

    // The main repository moves on.
    std::fs::write(fx.repo.join("NEW.md"), "new\n").unwrap();
    git(&fx.repo, &["add", "NEW.md"]);
    git(&fx.repo, &["commit", "-q", "-m", "second"]);

    let second = m.acquire("second").await.unwrap();
    assert_eq!(second.path(), path);
    assert_eq!(second.base_commit(), fx.head());
    assert_eq!(git(second.path(), &["rev-parse", "HEAD"]), fx.head());
    assert_eq!(
        git(second.path(), &["status", "--porcelain", "--ignored"]),
        ""
    );
    assert!(!path.join("left-behind.txt").exists());
    assert!(!path.join("tmp").exists());
    assert_eq!(
        std::fs::read_to_string(path.join("README.md")).unwrap(),
        "hello\n"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("NEW.md")).unwrap(),
        "new\n"
    );
    let listed = m.list().await.unwrap();
    assert_eq!(listed[0].state, WorktreeState::Active);
    assert_eq!(listed[0].agent_id.as_deref(), Some("second"));
    assert_eq!(listed[0].head.as_deref(), Some(fx.head().as_str()));
    std::fs::write(path.join("NEW.md"), "changed\n").unwrap();
    std::fs::write(path.join("second.txt"), "x").unwrap();
    m.discard(second).await.unwrap();

    // Same HEAD this time: the slot was cleaned on release and is handed out as is.
    let third = m.acquire("third").await.unwrap();
    assert_eq!(third.path(), path);
    assert_eq!(
        git(third.path(), &["status", "--porcelain", "--ignored"]),
        ""
    );
    assert_eq!(
        std::fs::read_to_string(path.join("NEW.md")).unwrap(),
        "new\n"
    );
    assert_eq!(
        m.finish(third, "x").await.unwrap(),
        FinishOutcome::Unchanged
    );
    assert_eq!(fx.registered(), vec![slot_name(&path)]);
    fx.fsck();
}

#[tokio::test]
async fn prune_removes_dead_processes_worktrees_and_spares_live_ones() {
    let fx = Fixture::new();
    // A process that died with an agent running and one pooled worktree.
    let dead = fx.manager(1).await;
    assert_eq!(dead.warm().await.unwrap(), 1);
    let pooled = dead.list().await.unwrap()[0].name.clone();
    let orphan = dead.acquire("killed").await.unwrap();
    let orphan_path = orphan.path().to_owned();
    std::fs::write(orphan_path.join("half-done.txt"), "x").unwrap();
    // The pooled slot went to the agent; warm another so one pooled slot is left over.
    dead.warm().await.unwrap();
    let pooled_left = dead
        .list()
        .await
        .unwrap()
        .into_iter()
        .find(|i| i.state == WorktreeState::Pooled)
        .unwrap()
        .name;
    assert_ne!(pooled_left, pooled);
    drop(orphan);
    drop(dead); // releases the marker locks, as process exit would
    let pid = dead_pid();
    set_marker_pid(&fx.wt_dir, &slot_name(&orphan_path), pid);
    set_marker_pid(&fx.wt_dir, &pooled_left, pid);

    // A directory nobody owns, and a registration whose directory vanished.
    let stray = fx.wt_dir.join("crewbox-wt-0000stray");
    std::fs::create_dir(&stray).unwrap();
    let live_mgr = fx.manager(0).await;
    let gone = live_mgr.acquire("vanishing").await.unwrap();
    let gone_path = gone.path().to_owned();

    // A live process's worktree, owned by another manager.
    let live = live_mgr.acquire("alive").await.unwrap();

    let starter = fx.manager(1).await;
    let before = starter.list().await.unwrap();
    let state_of = |name: &str| before.iter().find(|i| i.name == name).map(|i| i.state);
    assert_eq!(
        state_of(&slot_name(&orphan_path)),
        Some(WorktreeState::Orphaned)
    );
    assert_eq!(
        state_of(&slot_name(live.path())),
        Some(WorktreeState::Active)
    );
    assert_eq!(
        state_of("crewbox-wt-0000stray"),
        Some(WorktreeState::Orphaned)
    );

    // The vanishing worktree's files are deleted behind its owner's back, then the owner
    // dies; registration and marker are left.
    std::fs::remove_dir_all(&gone_path).unwrap();
    drop(gone);

    let report = starter.prune().await.unwrap();
    let reason_of = |name: &str| {
        report
            .removed
            .iter()
            .find(|r| r.name == name)
            .map(|r| r.reason)
    };
    assert_eq!(
        reason_of(&slot_name(&orphan_path)),
        Some(PruneReason::OwnerDead { pid: Some(pid) })
    );
    assert_eq!(
        reason_of("crewbox-wt-0000stray"),
        Some(PruneReason::NoMarker)
    );
    assert_eq!(report.adopted, vec![pooled_left.clone()]);
    let mut kept = report.kept_live.clone();
    kept.sort();
    let mut expected_kept = vec![slot_name(live.path()), slot_name(&gone_path)];
    expected_kept.sort();
    assert_eq!(
        kept, expected_kept,
        "a live owner's slots are kept even if damaged"
    );
    assert!(!orphan_path.exists());
    assert!(!stray.exists());
    assert!(live.path().exists());

    // After the live owner exits, its damaged slot goes too. A child process spawned by
    // a concurrently running test can hold a copy of the marker's descriptor (and so its
    // lock) for the instant between fork and exec, so allow a few attempts.
    drop(live);
    drop(live_mgr);
    let mut removed = false;
    for _ in 0..50 {
        let report = starter.prune().await.unwrap();
        if report
            .removed
            .iter()
            .any(|r| r.name == slot_name(&gone_path))
        {
            removed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(removed, "the dead owner's damaged slot was never pruned");
    let mut registered = fx.registered();
    registered.sort();
    assert_eq!(
        registered,
        vec![pooled_left.clone()],
        "only the adopted slot is left"
    );
    assert_eq!(fx.branches(), vec!["main"]);

    // The adopted pooled slot is handed out next.
    let next = starter.acquire("next").await.unwrap();
    assert_eq!(slot_name(next.path()), pooled_left);
    assert!(!next.path().join("half-done.txt").exists());
    fx.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_parallel_agents_lose_nothing() {
    let fx = Fixture::new();
    let m = fx.manager(2).await;
    let base = fx.head();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..20 {
        let m = m.clone();
        tasks.spawn(async move {
            let wt = m.acquire(&format!("agent-{i}")).await?;
            std::fs::write(
                wt.path().join(format!("agent-{i}.txt")),
                format!("agent {i}\n"),
            )?;
            std::fs::write(wt.path().join("README.md"), format!("hello from {i}\n"))?;
            if i % 2 == 0 {
                std::fs::remove_file(wt.path().join("src/lib.rs"))?;
            }
            let changed = m.changed_paths(&wt).await?;
            anyhow::ensure!(
                changed.len() == if i % 2 == 0 { 3 } else { 2 },
                "{changed:?}"
            );
            let outcome = m.finish(wt, &format!("work of {i}")).await?;
            anyhow::Ok((i, outcome))
        });
    }
    let mut artifacts = Vec::new();
    while let Some(done) = tasks.join_next().await {
        let (i, outcome) = done.unwrap().unwrap();
        artifacts.push((i, committed(outcome)));
    }
    assert_eq!(artifacts.len(), 20);
    fx.fsck();
    for (i, artifact) in &artifacts {
        assert_eq!(artifact.branch, format!("crewbox/agent-{i}"));
        assert_eq!(artifact.base, base);
        let show = |file: &str| git(&fx.repo, &["show", &format!("{}:{file}", artifact.branch)]);
        assert_eq!(show(&format!("agent-{i}.txt")), format!("agent {i}"));
        assert_eq!(show("README.md"), format!("hello from {i}"));
        assert_eq!(
            git(
                &fx.repo,
                &["ls-tree", "--name-only", &artifact.branch, "src"]
            )
            .is_empty(),
            i % 2 == 0
        );
        assert_eq!(
            git(
                &fx.repo,
                &["rev-list", &format!("{base}..{}", artifact.branch)]
            ),
            artifact.commits.join("\n")
        );
    }
    let mut branches = fx.branches();
    branches.sort();
    assert_eq!(branches.len(), 21, "{branches:?}");
    assert!(fx.registered().len() <= 2, "only the pool remains");
    let listed = m.list().await.unwrap();
    assert!(
        listed.iter().all(|i| i.state == WorktreeState::Pooled),
        "{listed:?}"
    );
}

#[test]
fn sanitised_branch_names_pass_git_check_ref_format() {
    let tmp = tempfile::tempdir().unwrap();
    for id in [
        "a-019a",
        "../../etc/passwd",
        "x.lock",
        "@{-1}",
        "héllo wörld",
        "-",
        "a//b",
        "trailing.",
        &"z".repeat(300),
    ] {
        let name = format!(
            "refs/heads/crewbox/{}-20250101T000000Z-2",
            sanitize_branch_component(id)
        );
        git(tmp.path(), &["check-ref-format", &name]);
    }
}

/// The manager keeps the repository open for HEAD lookups: the head it reports still
/// follows new commits, a switch to another branch and refs packed meanwhile.
#[tokio::test]
async fn the_head_is_read_afresh_each_time_from_a_repository_kept_open() {
    let fx = Fixture::new();
    let m = fx.manager(1).await;
    assert_eq!(m.head().await.unwrap(), fx.head());
    std::fs::write(fx.repo.join("NEW.md"), "new\n").unwrap();
    git(&fx.repo, &["add", "NEW.md"]);
    git(&fx.repo, &["commit", "-q", "-m", "second"]);
    assert_eq!(m.head().await.unwrap(), fx.head());
    let second = fx.head();
    git(&fx.repo, &["checkout", "-q", "-b", "other", "HEAD~1"]);
    assert_ne!(fx.head(), second);
    assert_eq!(m.head().await.unwrap(), fx.head());
    git(&fx.repo, &["pack-refs", "--all"]);
    git(&fx.repo, &["checkout", "-q", "main"]);
    assert_eq!(m.head().await.unwrap(), second);
    // A commit on a packed branch writes a loose ref that shadows the packed one.
    std::fs::write(fx.repo.join("THIRD.md"), "third\n").unwrap();
    git(&fx.repo, &["add", "THIRD.md"]);
    git(&fx.repo, &["commit", "-q", "-m", "third"]);
    assert_eq!(m.head().await.unwrap(), fx.head());
}

//! Per-agent worktree setup + teardown on a generated 5,000-file repository: a pooled
//! worktree (reset + clean), a fresh git2 worktree, and the `git worktree add/remove` CLI
//! as the baseline, all in one run. Each agent edits one tracked file and adds one new
//! file, then its worktree is thrown away. The last line is one JSON object of medians.
//!
//! The repository goes in `$TMPDIR` if set, else `/dev/shm` if present (tmpfs, so disk
//! speed does not drown the difference), else the system temp dir.

// A test or bench that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, ensure};
use crewbox::unstable::worktree::{FinishOutcome, WorktreeManager, WorktreeOptions};

const FILES: usize = 5_000;
const FILES_PER_DIR: usize = 100;
const POOLED_RUNS: usize = 15;
const FRESH_RUNS: usize = 5;
const CLI_RUNS: usize = 5;

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .context("running git")?;
    ensure!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

/// Where the scratch repository goes, and a label saying why.
fn scratch_root() -> (PathBuf, &'static str) {
    if let Some(dir) = std::env::var_os("TMPDIR") {
        return (PathBuf::from(dir), "TMPDIR");
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        return (shm.to_owned(), "/dev/shm");
    }
    (std::env::temp_dir(), "system temp dir")
}

/// A repository of `FILES` small files in `FILES / FILES_PER_DIR` directories, one commit.
fn generate_repo(repo: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(repo)?;
    git(repo, &["init", "-q", "-b", "main"])?;
    git(repo, &["config", "user.name", "bench"])?;
    git(repo, &["config", "user.email", "bench@localhost"])?;
    for i in 0..FILES {
        let dir = repo.join(format!("mod{:02}", i / FILES_PER_DIR));
        if i % FILES_PER_DIR == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        let body = format!("// file {i}\n{}", "pub fn f() -> u32 { 42 }\n".repeat(30));
        std::fs::write(dir.join(format!("f{i:04}.rs")), body)?;
    }
    git(repo, &["add", "-A"])?;
    git(repo, &["commit", "-q", "-m", "generated"])?;
    Ok(())
}

/// The agent's work: one tracked file changed, one file added.
fn agent_edits(wt: &Path, n: usize) -> anyhow::Result<()> {
    std::fs::write(wt.join("mod00/f0000.rs"), format!("// edited {n}\n"))?;
    std::fs::write(wt.join(format!("new-{n}.txt")), "new\n")?;
    Ok(())
}

fn median(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

/// Acquire + edit + discard through a manager; returns per-agent times in ms.
async fn run_manager(manager: &WorktreeManager, runs: usize) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(runs);
    for n in 0..runs {
        let start = Instant::now();
        let wt = manager.acquire(&format!("bench-{n}")).await?;
        agent_edits(wt.path(), n)?;
        manager.discard(wt).await?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(times)
}

fn main() -> anyhow::Result<()> {
    let (root, root_kind) = scratch_root();
    let tmp = tempfile::Builder::new()
        .prefix("crewbox-bench-worktree")
        .tempdir_in(&root)?;
    let repo = tmp.path().join("repo");
    let gen_start = Instant::now();
    generate_repo(&repo)?;
    let generate_ms = gen_start.elapsed().as_secs_f64() * 1e3;
    println!("generated {FILES}-file repository in {generate_ms:.0} ms under {root_kind}");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()?;
    let (pooled, fresh, commit_ms) = rt.block_on(async {
        let pooled_mgr = WorktreeManager::open(
            &repo,
            &tmp.path().join("state-pooled"),
            WorktreeOptions {
                pool_size: 2,
                ..WorktreeOptions::default()
            },
        )
        .await?;
        let warm_start = Instant::now();
        pooled_mgr.warm().await?;
        println!(
            "warmed pool of 2 in {:.0} ms",
            warm_start.elapsed().as_secs_f64() * 1e3
        );
        let pooled = run_manager(&pooled_mgr, POOLED_RUNS).await?;

        // A pooled agent that commits: snapshot, commit, branch, recycle.
        let start = Instant::now();
        let wt = pooled_mgr.acquire("committer").await?;
        agent_edits(wt.path(), 0)?;
        let outcome = pooled_mgr.finish(wt, "bench commit").await?;
        let commit_ms = start.elapsed().as_secs_f64() * 1e3;
        ensure!(matches!(outcome, FinishOutcome::Committed(_)));

        let fresh_mgr = WorktreeManager::open(
            &repo,
            &tmp.path().join("state-fresh"),
            WorktreeOptions {
                pool_size: 0,
                ..WorktreeOptions::default()
            },
        )
        .await?;
        let fresh = run_manager(&fresh_mgr, FRESH_RUNS).await?;
        anyhow::Ok((pooled, fresh, commit_ms))
    })?;

    let cli_dir = tmp.path().join("state-cli");
    std::fs::create_dir_all(&cli_dir)?;
    let mut cli = Vec::with_capacity(CLI_RUNS);
    for n in 0..CLI_RUNS {
        let wt = cli_dir.join(format!("wt-{n}"));
        let wt_str = wt.to_str().context("utf-8 temp path")?;
        let start = Instant::now();
        git(
            &repo,
            &["worktree", "add", "-q", "--detach", wt_str, "HEAD"],
        )?;
        agent_edits(&wt, n)?;
        git(&repo, &["worktree", "remove", "--force", wt_str])?;
        cli.push(start.elapsed().as_secs_f64() * 1e3);
    }

    let (pooled_ms, git2_fresh_ms, cli_ms) = (median(pooled), median(fresh), median(cli));
    println!(
        "pooled {pooled_ms:.1} ms, git2 fresh {git2_fresh_ms:.1} ms, git CLI {cli_ms:.1} ms (medians)"
    );
    let json = serde_json::json!({
        "bench": "worktree",
        "files": FILES,
        "storage": root_kind,
        "runs": { "pooled": POOLED_RUNS, "git2_fresh": FRESH_RUNS, "cli": CLI_RUNS },
        "generate_ms": round(generate_ms),
        "pooled_ms": round(pooled_ms),
        "pooled_commit_ms": round(commit_ms),
        "git2_fresh_ms": round(git2_fresh_ms),
        "cli_ms": round(cli_ms),
        "pooled_vs_cli": (pooled_ms / cli_ms * 1000.0).round() / 1000.0,
        "git2_fresh_vs_cli": (git2_fresh_ms / cli_ms * 1000.0).round() / 1000.0,
    });
    println!("{json}");
    Ok(())
}

fn round(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

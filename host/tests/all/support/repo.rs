//! Shared by the end-to-end tests that drive the real binary in a temp git repository
//! (`#[path]`-included, so each test crate uses only some of it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temp dir holding `repo/` (one commit: `notes.txt` = "alpha"), after `setup` wrote
/// any untracked extras into the work tree; `state/` and `config/` go beside it.
pub fn git_repo(setup: impl FnOnce(&Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("repo");
    std::fs::create_dir_all(&work).unwrap();
    setup(&work);
    std::fs::write(work.join("notes.txt"), "alpha\n").unwrap();
    let git = git2::Repository::init(&work).unwrap();
    let mut index = git.index().unwrap();
    index.add_path(Path::new("notes.txt")).unwrap();
    index.write().unwrap();
    let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@localhost").unwrap();
    git.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
        .unwrap();
    dir
}

/// `crewbox ARGS` in the repository with state, config and home inside the temp dir
/// and the suite's shared plugin cache.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    super::cli::crewbox(&dir.join("repo"), &super::cli::Homes::beside_in(dir), args)
}

/// The state directory `crewbox` uses for the repository at `repo` under the state
/// base `base` (`CREWBOX_STATE_DIR`): each repository gets its own directory there.
pub fn repo_state_dir(base: &Path, repo: &Path) -> PathBuf {
    crewbox::unstable::paths::repo_state_dir(base, &repo.canonicalize().unwrap())
}

/// The state directory of the temp dir's `repo/` (see [`command`]).
pub fn state_dir(dir: &Path) -> PathBuf {
    repo_state_dir(&dir.join("state"), &dir.join("repo"))
}

/// Runs `crewbox ARGS` (see [`command`]) to its end.
pub fn bin(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().unwrap()
}

/// Runs `crewbox ARGS --script <script> --json` and parses the report.
pub fn crewbox(dir: &Path, script: &str, args: &[&str]) -> (Output, serde_json::Value) {
    let script_path = dir.join("script.toml");
    std::fs::write(&script_path, script).unwrap();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--script", script_path.to_str().unwrap(), "--json"]);
    let out = bin(dir, &all);
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report)
}

/// The stored events of a run, oldest first.
pub fn events(dir: &Path, run: &str) -> Vec<serde_json::Value> {
    let out = bin(dir, &["events", "--run", run]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

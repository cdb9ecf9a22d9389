//! Role packs through the real binary: Squad's `.squad/` and `.ai-team/`,
//! Claude Code subagents in `.claude/agents/` and `~/.claude/agents/`, the access
//! ceiling, write-back, and imported teams running with the scripted model.
//!
//! The fixtures are written here, each reproducing a shape real repositories use
//! (see `fixtures.rs`); none is a copy of one.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::support::repo::{bin, git_repo};

mod access;
mod claude;
mod export;
mod fixtures;
mod hostile;
mod run;
mod squad;

/// A temp dir with `repo/` (a git repository), `home/` (the user's `HOME`) and
/// `config/` (`XDG_CONFIG_HOME`).
struct Fx {
    dir: tempfile::TempDir,
}

impl Fx {
    /// A repository whose work tree `setup` fills (before its one commit).
    fn new(setup: impl FnOnce(&Path)) -> Self {
        let dir = git_repo(setup);
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn repo(&self) -> PathBuf {
        self.path().join("repo")
    }

    fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    /// Writes `text` at `rel` under `root`, creating directories.
    fn write(root: &Path, rel: &str, text: &str) -> PathBuf {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// The user's own config file.
    fn user_config(&self, text: &str) {
        Self::write(&self.path().join("config"), "crewbox/config.toml", text);
    }

    fn run(&self, args: &[&str]) -> Output {
        bin(self.path(), args)
    }

    /// `crewbox ARGS --json`, which must succeed, parsed.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.push("--json");
        let out = self.run(&all);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
    }

    fn show(&self, team: &str) -> Value {
        self.json(&["team", "show", team])
    }

    fn trust(&self, extra: &[&str]) {
        let mut args = vec!["trust"];
        args.extend(extra);
        let out = self.run(&args);
        assert!(out.status.success(), "{}", text(&out));
    }

    /// `crewbox run PROMPT ARGS --script S --json` with `script`, parsed.
    fn run_script(&self, script: &str, args: &[&str]) -> (Output, Value) {
        crate::support::repo::crewbox(self.path(), script, args)
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The member called `name` of a `team show --json` object.
fn member<'a>(team: &'a Value, name: &str) -> &'a Value {
    team["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no member {name}: {team:#}"))
}

fn names(team: &Value) -> Vec<String> {
    team["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The skipped entries as (name or file, reason).
fn skipped(team: &Value) -> Vec<(String, String)> {
    team["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let what = s["name"].as_str().or(s["file"].as_str()).unwrap();
            (what.to_owned(), s["reason"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn warnings(team: &Value) -> Vec<String> {
    team["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_owned())
        .collect()
}

/// Every file under `root` (but `.git`) with its bytes and inode, sorted: equal
/// snapshots mean nothing was written, not even rewritten in place.
fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>, u64)> {
    use std::os::unix::fs::MetadataExt;
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>, u64)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                walk(root, &p, out);
            } else if meta.is_file() {
                let rel = p.strip_prefix(root).unwrap().to_owned();
                out.push((rel, std::fs::read(&p).unwrap(), meta.ino()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// A hash of the tree's paths and bytes.
fn tree_hash(root: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (p, bytes, _) in snapshot(root) {
        h.update(p.to_string_lossy().as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

//! What a trust decision covers: the repository's crewbox files as they were when the
//! user trusted it. Every entry under `.crewbox/` (its config, teams, charters and
//! plugins) is recorded by path with a digest of its content (a symlink by what it
//! says); trust holds only while they are the same, so a merged branch, a pull or a
//! checkout that changes them asks for `crewbox trust` again, as Claude Code and Codex
//! re-ask when a project's settings change.
//!
//! The walk goes through descriptors (`crate::fs`), follows no link, never reads
//! `.git`, and is bounded in entries, depth and bytes: a tree too large to verify is
//! not trusted.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::fs::{Kind, Root, Rules};
use crate::text::hex;

/// The most entries recorded under `.crewbox/`.
const MAX_ENTRIES: usize = 4096;
/// The deepest directory recorded under `.crewbox/`.
const MAX_DEPTH: usize = 16;
/// The most bytes hashed in all (plugins included).
const MAX_BYTES: u64 = 512 * 1024 * 1024;

/// The repository directory a trust decision covers.
pub const COVERED: &str = ".crewbox";

/// Relative path (`/`-separated) → `sha256:<hex>`, `link:<target>` or `special`.
pub type Files = BTreeMap<String, String>;

/// Why the files could not be recorded.
#[derive(Debug, thiserror::Error)]
#[error("cannot record {}/{COVERED}: {detail}", root.display())]
pub struct DigestError {
    /// The repository root.
    pub root: std::path::PathBuf,
    /// What went wrong.
    pub detail: String,
}

/// The crewbox files of the repository at `root` (canonical) as they are now. Blocking.
pub fn crewbox_files(root: &Path) -> Result<Files, DigestError> {
    let fail = |detail: String| DigestError {
        root: root.to_owned(),
        detail,
    };
    let repo = Root::open(root).map_err(|e| fail(e.to_string()))?;
    let mut files = Files::new();
    let mut budget = MAX_BYTES;
    let name = OsStr::new(COVERED);
    match repo.kind(Path::new(COVERED), Rules::NO_LINKS) {
        Ok(None) => {}
        Ok(Some(Kind::Directory)) => {
            let dir = repo.child_dir(name).map_err(|e| fail(e.to_string()))?;
            walk(&dir, COVERED, 0, &mut files, &mut budget).map_err(fail)?;
        }
        Ok(Some(kind)) => {
            record_entry(&repo, name, COVERED, kind, &mut files, &mut budget).map_err(fail)?;
        }
        // `.crewbox` is itself a link: recorded by what it says.
        Err(crate::fs::FsError::Link { .. }) => {
            record_entry(&repo, name, COVERED, Kind::Symlink, &mut files, &mut budget)
                .map_err(fail)?;
        }
        Err(e) => return Err(fail(e.to_string())),
    }
    Ok(files)
}

fn walk(
    dir: &Root,
    rel: &str,
    depth: usize,
    files: &mut Files,
    budget: &mut u64,
) -> Result<(), String> {
    let (mut entries, more) = dir.entries(MAX_ENTRIES).map_err(|e| e.to_string())?;
    if more {
        return Err(format!("`{rel}` holds more than {MAX_ENTRIES} entries"));
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for entry in entries {
        let path = format!("{rel}/{}", entry.name.to_string_lossy());
        if files.len() >= MAX_ENTRIES {
            return Err(format!("more than {MAX_ENTRIES} entries under `{COVERED}`"));
        }
        if entry.kind == Kind::Directory {
            if depth + 1 >= MAX_DEPTH {
                return Err(format!("`{path}` is deeper than {MAX_DEPTH} levels"));
            }
            let sub = dir.child_dir(&entry.name).map_err(|e| e.to_string())?;
            walk(&sub, &path, depth + 1, files, budget)?;
        } else {
            record_entry(dir, &entry.name, &path, entry.kind, files, budget)?;
        }
    }
    Ok(())
}

fn record_entry(
    dir: &Root,
    name: &OsStr,
    path: &str,
    kind: Kind,
    files: &mut Files,
    budget: &mut u64,
) -> Result<(), String> {
    let value = match kind {
        Kind::File => {
            let (mut file, size) = dir.child_file(name).map_err(|e| e.to_string())?;
            if size > *budget {
                return Err(format!(
                    "its files are larger than the {MAX_BYTES} bytes crewbox verifies"
                ));
            }
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 64 * 1024];
            let mut read = 0u64;
            loop {
                let n = file.read(&mut buf).map_err(|e| format!("`{path}`: {e}"))?;
                if n == 0 {
                    break;
                }
                read += n as u64;
                if read > *budget {
                    return Err(format!("`{path}` grew while it was read"));
                }
                hasher.update(&buf[..n]);
            }
            *budget -= read;
            format!("sha256:{}", hex(&hasher.finalize()))
        }
        Kind::Symlink => {
            let target = dir.read_link(name).map_err(|e| e.to_string())?;
            format!("link:{}", target.display())
        }
        Kind::Directory | Kind::Other => "special".to_owned(),
    };
    files.insert(path.to_owned(), value);
    Ok(())
}

/// How the files differ from what was recorded: one line per path (`… added`,
/// `… removed`, `… changed`), sorted, at most `max` (then `and N more`).
pub fn changes(recorded: &Files, now: &Files, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (path, value) in now {
        match recorded.get(path) {
            None => out.push(format!("{path} added")),
            Some(v) if v != value => out.push(format!("{path} changed")),
            Some(_) => {}
        }
    }
    for path in recorded.keys().filter(|p| !now.contains_key(*p)) {
        out.push(format!("{path} removed"));
    }
    out.sort();
    if out.len() > max {
        let more = out.len() - max;
        out.truncate(max);
        out.push(format!("and {more} more"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_every_crewbox_file_and_tells_what_changed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        assert!(crewbox_files(&root).unwrap().is_empty());
        std::fs::create_dir_all(root.join(".crewbox/teams")).unwrap();
        std::fs::write(
            root.join(".crewbox/config.toml"),
            "default_mode = \"crew\"\n",
        )
        .unwrap();
        std::fs::write(root.join(".crewbox/teams/a.toml"), "x").unwrap();
        std::os::unix::fs::symlink("../../elsewhere", root.join(".crewbox/teams/l.md")).unwrap();
        crate::fs::make_fifo(&root.join(".crewbox/pipe"));
        std::fs::write(root.join("README.md"), "not covered").unwrap();
        let before = crewbox_files(&root).unwrap();
        let keys: Vec<&str> = before.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                ".crewbox/config.toml",
                ".crewbox/pipe",
                ".crewbox/teams/a.toml",
                ".crewbox/teams/l.md"
            ]
        );
        assert_eq!(before[".crewbox/teams/l.md"], "link:../../elsewhere");
        assert_eq!(before[".crewbox/pipe"], "special");
        std::fs::write(root.join("README.md"), "changed, not covered").unwrap();
        assert_eq!(crewbox_files(&root).unwrap(), before);
        std::fs::write(
            root.join(".crewbox/config.toml"),
            "default_mode = \"single\"\n",
        )
        .unwrap();
        std::fs::remove_file(root.join(".crewbox/teams/a.toml")).unwrap();
        std::fs::write(root.join(".crewbox/teams/b.toml"), "y").unwrap();
        let now = crewbox_files(&root).unwrap();
        assert_eq!(
            changes(&before, &now, 10),
            [
                ".crewbox/config.toml changed",
                ".crewbox/teams/a.toml removed",
                ".crewbox/teams/b.toml added"
            ]
        );
        assert_eq!(changes(&before, &now, 1)[1], "and 2 more");
    }

    #[test]
    fn a_linked_crewbox_is_recorded_by_what_it_says() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink("/tmp", root.join(".crewbox")).unwrap();
        let files = crewbox_files(&root).unwrap();
        assert_eq!(files[".crewbox"], "link:/tmp");
    }
}

//! `grep {pattern, path?, glob?}` (read): regex search over the workspace's files.
//!
//! Walks the tree itself through directory descriptors (no ignore files are read: what
//! an agent can read it can search), skipping `.git` in every spelling, symlinks (a
//! symlink could lead outside the workspace), binary files and files over
//! [`GREP_MAX_FILE_BYTES`]. Entries are visited in name order so results are stable.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use globset::{Glob, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::{Value, json};

use super::support::{self, blocking, human_bytes, invalid, looks_binary, truncate_at_char};
use super::{Capability, FileAccess, Tool, ToolContext, ToolError, ToolOutput, path};
use crate::fs::{Kind, Root};
use crate::provider::ToolSpec;

/// At most this many matches are returned.
pub const GREP_CAP_MATCHES: usize = 200;
/// Files larger than this are skipped (generated or data files, rarely source).
pub const GREP_MAX_FILE_BYTES: u64 = 1024 * 1024;
/// A matching line is shown up to this many bytes.
const LINE_SHOWN_BYTES: usize = 400;
/// Directories deeper than this below the start are not searched (each level holds a
/// descriptor open).
const MAX_DEPTH: usize = 128;
/// At most this many entries are read from one directory.
const MAX_DIR_ENTRIES: usize = 100_000;

const NAME: &str = "grep";

/// Searches files for a regular expression.
#[derive(Debug, Default, Clone, Copy)]
pub struct Grep;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
}

#[async_trait]
impl Tool for Grep {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capability(&self) -> Capability {
        Capability::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: format!(
                "Search files for a regular expression (Rust `regex` syntax, matched per line). Results are \
                 `path:line: text`, paths relative to the workspace root. Searches every file under `path` \
                 except `.git`, symlinks, binary files and files over {}; ignore files are not read. \
                 At most {GREP_CAP_MATCHES} matches.",
                human_bytes(GREP_MAX_FILE_BYTES as usize)
            ),
            parameters: support::object_schema(
                json!({
                    "pattern": {"type": "string", "description": "Regular expression, e.g. `fn\\s+main`."},
                    "path": {"type": "string", "description": "File or directory to search, relative to the workspace root (default: the root)."},
                    "glob": {"type": "string", "description": "Only search files whose root-relative path matches this glob, e.g. `*.rs` or `src/**/*.toml`. A glob without `/` also matches the file name alone."}
                }),
                &["pattern"],
            ),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = support::parse(NAME, args)?;
        let regex = RegexBuilder::new(&args.pattern)
            .size_limit(10 * 1024 * 1024)
            .build()
            .map_err(|e| {
                invalid(
                    NAME,
                    format!("`pattern` is not a valid regular expression: {e}"),
                )
            })?;
        let glob = args
            .glob
            .as_deref()
            .map(|g| {
                Glob::new(g)
                    .map(|glob| FileFilter {
                        matcher: glob.compile_matcher(),
                        name_only: !g.contains('/'),
                    })
                    .map_err(|e| invalid(NAME, format!("`glob` is not a valid glob: {e}")))
            })
            .transpose()?;
        let root = ctx.root.clone();
        blocking(move || {
            let root = path::open_root(&root)?;
            let input = args.path.as_deref().unwrap_or(".");
            let rules = FileAccess::default().rules();
            let rel = PathBuf::from(path::shown(input));
            let search = Search {
                regex,
                glob,
                cap: GREP_CAP_MATCHES,
            };
            let err = |e| path::error(input, e);
            let start = match root.kind(Path::new(input), rules).map_err(err)? {
                None => {
                    return Err(ToolError::Failed(format!(
                        "`{}` does not exist",
                        rel.display()
                    )));
                }
                Some(Kind::Directory) => {
                    Start::Dir(root.open_dir(Path::new(input), rules).map_err(err)?)
                }
                // A FIFO or device named explicitly would block the search forever: the
                // open refuses it and nothing is searched.
                Some(_) => Start::File(root.open_file(Path::new(input), rules).ok()),
            };
            let rel = if rel == Path::new(".") {
                PathBuf::new()
            } else {
                rel
            };
            Ok(ToolOutput::text(search.run(start, &rel)))
        })
        .await
    }
}

/// Where a search starts.
enum Start {
    Dir(Root),
    /// A file named explicitly (searched whatever the glob says); `None` when it is no
    /// regular file.
    File(Option<(File, u64)>),
}

struct FileFilter {
    matcher: GlobMatcher,
    /// A glob without `/` may match the file name alone (`main.rs` finds `src/main.rs`).
    name_only: bool,
}

impl FileFilter {
    fn accepts(&self, rel: &Path) -> bool {
        self.matcher.is_match(rel)
            || (self.name_only && rel.file_name().is_some_and(|n| self.matcher.is_match(n)))
    }
}

struct Search {
    regex: Regex,
    glob: Option<FileFilter>,
    cap: usize,
}

#[derive(Default)]
struct Found {
    lines: Vec<String>,
    files: usize,
    skipped_large: usize,
    capped: bool,
}

impl Search {
    /// Searches from `start`, whose path relative to the workspace root is `rel`.
    fn run(&self, start: Start, rel: &Path) -> String {
        let mut found = Found::default();
        match start {
            Start::Dir(dir) => self.walk(&dir, rel, 0, &mut found),
            Start::File(Some((file, size))) => self.search_file(file, size, rel, &mut found),
            Start::File(None) => {}
        }
        let mut out = if found.lines.is_empty() {
            format!("no matches ({} files searched)", found.files)
        } else {
            found.lines.join("\n")
        };
        if found.capped {
            let _ = write!(
                out,
                "\n[stopped after {} matches; narrow the pattern, path or glob]",
                self.cap
            );
        }
        if found.skipped_large > 0 {
            let _ = write!(
                out,
                "\n[{} files over {} skipped]",
                found.skipped_large,
                human_bytes(GREP_MAX_FILE_BYTES as usize)
            );
        }
        out
    }

    fn walk(&self, dir: &Root, rel: &Path, depth: usize, found: &mut Found) {
        // Unreadable directories are skipped rather than failing the whole search.
        let Ok((mut entries, _)) = dir.entries(MAX_DIR_ENTRIES) else {
            return;
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            if found.capped {
                return;
            }
            let name: &OsStr = &entry.name;
            let path = rel.join(name);
            match entry.kind {
                Kind::Directory if depth < MAX_DEPTH => {
                    if let Ok(sub) = dir.child_dir(name) {
                        self.walk(&sub, &path, depth + 1, found);
                    }
                }
                Kind::File => {
                    if !self.glob.as_ref().is_none_or(|g| g.accepts(&path)) {
                        continue;
                    }
                    if entry.size > GREP_MAX_FILE_BYTES {
                        found.skipped_large += 1;
                        continue;
                    }
                    if let Ok((file, size)) = dir.child_file(name) {
                        self.search_file(file, size, &path, found);
                    }
                }
                Kind::Directory | Kind::Symlink | Kind::Other => {}
            }
        }
    }

    fn search_file(&self, file: File, size: u64, rel: &Path, found: &mut Found) {
        if size > GREP_MAX_FILE_BYTES {
            found.skipped_large += 1;
            return;
        }
        let mut reader = BufReader::new(file);
        match reader.fill_buf() {
            Ok(head) if !looks_binary(head) => {}
            _ => return,
        }
        found.files += 1;
        let rel = rel.display().to_string();
        let mut line = Vec::new();
        let mut number = 0u64;
        let mut limited = reader.take(GREP_MAX_FILE_BYTES);
        loop {
            line.clear();
            match limited.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            number += 1;
            if !self.regex.is_match(&line) {
                continue;
            }
            if found.lines.len() >= self.cap {
                found.capped = true;
                return;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            let shown = truncate_at_char(text, LINE_SHOWN_BYTES);
            let ellipsis = if shown.len() < text.len() { " …" } else { "" };
            found
                .lines
                .push(format!("{rel}:{number}: {shown}{ellipsis}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(root: &Path, pattern: &str, glob: Option<&str>, cap: usize) -> String {
        let search = Search {
            regex: Regex::new(pattern).unwrap(),
            glob: glob.map(|g| FileFilter {
                matcher: Glob::new(g).unwrap().compile_matcher(),
                name_only: !g.contains('/'),
            }),
            cap,
        };
        search.run(Start::Dir(Root::open(root).unwrap()), Path::new(""))
    }

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n// needle\n").unwrap();
        std::fs::write(
            root.join("src/deep/lib.rs"),
            "needle one\nnothing\nneedle two\n",
        )
        .unwrap();
        std::fs::write(root.join("notes.md"), "a needle in md\n").unwrap();
        std::fs::write(root.join(".git/config"), "needle in git\n").unwrap();
        std::fs::create_dir_all(root.join("sub/.Git")).unwrap();
        std::fs::write(root.join("sub/.Git/config"), "needle in git\n").unwrap();
        std::fs::write(root.join("blob.bin"), b"needle\0binary").unwrap();
        dir
    }

    #[test]
    fn finds_in_order_skipping_git_and_binary() {
        let dir = tree();
        assert_eq!(
            search(dir.path(), "needle", None, 100),
            "notes.md:1: a needle in md\nsrc/deep/lib.rs:1: needle one\nsrc/deep/lib.rs:3: needle two\nsrc/main.rs:2: // needle"
        );
    }

    #[test]
    fn glob_filters_relative_paths_and_names() {
        let dir = tree();
        let out = search(dir.path(), "needle", Some("*.rs"), 100);
        assert!(
            !out.contains("notes.md") && out.contains("src/main.rs"),
            "{out}"
        );
        let out = search(dir.path(), "needle", Some("src/deep/**"), 100);
        assert_eq!(out.lines().count(), 2, "{out}");
        let out = search(dir.path(), "needle", Some("main.rs"), 100);
        assert_eq!(out, "src/main.rs:2: // needle");
    }

    #[test]
    fn caps_and_reports_no_matches() {
        let dir = tree();
        let out = search(dir.path(), "needle", None, 2);
        assert_eq!(out.lines().filter(|l| l.contains(": ")).count(), 2, "{out}");
        assert!(
            out.ends_with("[stopped after 2 matches; narrow the pattern, path or glob]"),
            "{out}"
        );
        assert_eq!(
            search(dir.path(), "absent", None, 2),
            "no matches (3 files searched)"
        );
    }

    #[test]
    fn skips_huge_files_and_symlinks() {
        let dir = tree();
        let big = vec![b'n'; GREP_MAX_FILE_BYTES as usize + 1];
        std::fs::write(dir.path().join("big.txt"), big).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("x"), "needle outside\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let out = search(dir.path(), "n+", Some("*.txt"), 100);
        assert!(out.contains("[1 files over 1 MiB skipped]"), "{out}");
        assert!(search(dir.path(), "outside", None, 100).starts_with("no matches"));
    }
}

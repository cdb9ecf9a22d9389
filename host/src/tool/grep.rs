//! `grep {pattern, path?, glob?}` (read): regex search over the workspace's files.
//!
//! Walks the tree itself (no ignore files are read: what an agent can read it can
//! search), skipping `.git`, symlinks (a symlink could lead outside the workspace),
//! binary files and files over [`GREP_MAX_FILE_BYTES`]. Entries are visited in name
//! order so results are stable.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use globset::{Glob, GlobMatcher};
use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::{Value, json};

use super::support::{self, blocking, human_bytes, invalid, looks_binary, truncate_at_char};
use super::{Capability, Tool, ToolContext, ToolError, ToolOutput, path};
use crate::provider::ToolSpec;

/// At most this many matches are returned.
pub const GREP_CAP_MATCHES: usize = 200;
/// Files larger than this are skipped (generated or data files, rarely source).
pub const GREP_MAX_FILE_BYTES: u64 = 1024 * 1024;
/// A matching line is shown up to this many bytes.
const LINE_SHOWN_BYTES: usize = 400;

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
            let start = path::resolve(&root, args.path.as_deref().unwrap_or("."))?;
            if !start.abs.exists() {
                return Err(ToolError::Failed(format!(
                    "`{}` does not exist",
                    start.display()
                )));
            }
            let search = Search {
                regex,
                glob,
                cap: GREP_CAP_MATCHES,
                root: root
                    .canonicalize()
                    .map_err(|e| ToolError::Failed(format!("workspace root: {e}")))?,
            };
            Ok(ToolOutput::text(search.run(&start.abs)))
        })
        .await
    }
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
    root: PathBuf,
}

#[derive(Default)]
struct Found {
    lines: Vec<String>,
    files: usize,
    skipped_large: usize,
    capped: bool,
}

impl Search {
    fn run(&self, start: &Path) -> String {
        let mut found = Found::default();
        if start.is_dir() {
            self.walk(start, &mut found);
        } else {
            // A file named explicitly is searched whatever the glob says.
            self.search_file(start, &mut found);
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

    fn walk(&self, dir: &Path, found: &mut Found) {
        // Unreadable directories are skipped rather than failing the whole search.
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = read.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            if found.capped {
                return;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                if entry.file_name() != ".git" {
                    self.walk(&path, found);
                }
            } else if kind.is_file() {
                let rel = path.strip_prefix(&self.root).unwrap_or(&path);
                if self.glob.as_ref().is_none_or(|g| g.accepts(rel)) {
                    self.search_file(&path, found);
                }
            }
        }
    }

    fn search_file(&self, file: &Path, found: &mut Found) {
        let Ok(meta) = file.metadata() else { return };
        if !meta.is_file() {
            // A FIFO or device named explicitly would block the search forever.
            return;
        }
        if meta.len() > GREP_MAX_FILE_BYTES {
            found.skipped_large += 1;
            return;
        }
        let Ok(handle) = std::fs::File::open(file) else {
            return;
        };
        let mut reader = BufReader::new(handle);
        match reader.fill_buf() {
            Ok(head) if !looks_binary(head) => {}
            _ => return,
        }
        found.files += 1;
        let rel = file
            .strip_prefix(&self.root)
            .unwrap_or(file)
            .display()
            .to_string();
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
            root: root.canonicalize().unwrap(),
        };
        search.run(&root.canonicalize().unwrap())
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

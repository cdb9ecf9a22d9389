//! `list_dir {path}` (read): a directory's entries, sorted.

use std::fmt::Write as _;
use std::path::Path;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::support::{self, blocking};
use super::{Capability, Tool, ToolContext, ToolError, ToolOutput, path};
use crate::provider::ToolSpec;

/// At most this many entries are listed.
pub const LIST_CAP_ENTRIES: usize = 1000;

const NAME: &str = "list_dir";

/// Lists one directory (not recursive).
#[derive(Debug, Default, Clone, Copy)]
pub struct ListDir;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
}

#[async_trait]
impl Tool for ListDir {
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
                "List one directory of the workspace (not recursive), one entry per line, sorted by name. \
                 Directories end with `/`, symlinks with `@`. `.git` is not shown. At most {LIST_CAP_ENTRIES} entries."
            ),
            parameters: support::object_schema(
                json!({
                    "path": {"type": "string", "description": "Directory relative to the workspace root; `.` is the root."}
                }),
                &["path"],
            ),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = support::parse(NAME, args)?;
        let root = ctx.root.clone();
        blocking(move || {
            let target = path::resolve(&root, &args.path)?;
            list(&target.abs, &target.display(), LIST_CAP_ENTRIES).map(ToolOutput::text)
        })
        .await
    }
}

fn list(dir: &Path, shown: &str, cap: usize) -> Result<String, ToolError> {
    let fail = |e: std::io::Error| ToolError::Failed(format!("cannot list `{shown}`: {e}"));
    if !dir.is_dir() {
        return Err(ToolError::Failed(if dir.exists() {
            format!("`{shown}` is a file, not a directory; use read_file")
        } else {
            format!("`{shown}` does not exist")
        }));
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(fail)? {
        let entry = entry.map_err(fail)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == ".git" {
            continue;
        }
        let kind = entry.file_type().map_err(fail)?;
        let suffix = if kind.is_symlink() {
            "@"
        } else if kind.is_dir() {
            "/"
        } else {
            ""
        };
        entries.push(format!("{name}{suffix}"));
    }
    if entries.is_empty() {
        return Ok("(empty directory)".to_owned());
    }
    entries.sort();
    let total = entries.len();
    let mut out = entries.into_iter().take(cap).collect::<Vec<_>>().join("\n");
    if total > cap {
        let _ = write!(
            out,
            "\n[{} more entries not shown; {total} in all]",
            total - cap
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_with_kinds_and_no_git() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/objects")).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("b.txt"), "").unwrap();
        std::fs::write(root.join("a.txt"), "").unwrap();
        std::os::unix::fs::symlink("a.txt", root.join("link")).unwrap();
        assert_eq!(list(root, ".", 100).unwrap(), "a.txt\nb.txt\nlink@\nsrc/");
        assert_eq!(
            list(&root.join("src"), "src", 100).unwrap(),
            "(empty directory)"
        );
    }

    #[test]
    fn caps_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
        }
        assert_eq!(
            list(dir.path(), ".", 2).unwrap(),
            "f0\nf1\n[3 more entries not shown; 5 in all]"
        );
        assert!(
            list(&dir.path().join("f0"), "f0", 2)
                .unwrap_err()
                .to_string()
                .contains("is a file")
        );
        assert!(
            list(&dir.path().join("nope"), "nope", 2)
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
    }
}

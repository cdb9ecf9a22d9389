//! `list_dir {path}` (read): a directory's entries, sorted.

use std::fmt::Write as _;
use std::path::Path;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::support::{self, blocking};
use super::{Capability, FileAccess, Tool, ToolContext, ToolError, ToolOutput, path};
use crate::fs::{FsError, Kind, Root};
use crate::provider::ToolSpec;

/// At most this many entries are listed.
pub const LIST_CAP_ENTRIES: usize = 1000;

/// At most this many entries are read from one directory (then sorted and cut).
const LIST_SCAN_ENTRIES: usize = 100 * LIST_CAP_ENTRIES;

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
            let root = path::open_root(&root)?;
            list(&root, &args.path, LIST_CAP_ENTRIES).map(ToolOutput::text)
        })
        .await
    }
}

fn list(root: &Root, input: &str, cap: usize) -> Result<String, ToolError> {
    let shown = path::shown(input);
    let (found, more) = match root.list(
        Path::new(input),
        FileAccess::default().rules(),
        LIST_SCAN_ENTRIES,
    ) {
        Ok(found) => found,
        Err(FsError::NotDirectory { .. }) => {
            return Err(ToolError::Failed(format!(
                "`{shown}` is a file, not a directory; use read_file"
            )));
        }
        Err(e) => return Err(path::error(input, e)),
    };
    let mut entries: Vec<String> = found
        .iter()
        .map(|e| {
            let suffix = match e.kind {
                Kind::Symlink => "@",
                Kind::Directory => "/",
                Kind::File | Kind::Other => "",
            };
            format!("{}{suffix}", e.name.to_string_lossy())
        })
        .collect();
    if entries.is_empty() {
        return Ok("(empty directory)".to_owned());
    }
    entries.sort();
    let total = entries.len();
    let mut out = entries.into_iter().take(cap).collect::<Vec<_>>().join("\n");
    if more {
        let _ = write!(
            out,
            "\n[more than {total} entries; {} shown]",
            cap.min(total)
        );
    } else if total > cap {
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
        std::fs::write(root.join(".GIT"), "").unwrap();
        let root = Root::open(root).unwrap();
        assert_eq!(list(&root, ".", 100).unwrap(), "a.txt\nb.txt\nlink@\nsrc/");
        assert_eq!(list(&root, "src", 100).unwrap(), "(empty directory)");
    }

    #[test]
    fn caps_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("f{i}")), "").unwrap();
        }
        let root = Root::open(dir.path()).unwrap();
        assert_eq!(
            list(&root, ".", 2).unwrap(),
            "f0\nf1\n[3 more entries not shown; 5 in all]"
        );
        assert!(
            list(&root, "f0", 2)
                .unwrap_err()
                .to_string()
                .contains("is a file")
        );
        assert!(
            list(&root, "nope", 2)
                .unwrap_err()
                .to_string()
                .contains("does not exist")
        );
    }
}

//! `write_file {path, content}` (write): creates or replaces a file.

use std::path::Path;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::support::{self, blocking, require_regular_file};
use super::{Capability, Tool, ToolContext, ToolError, ToolOutput, path};
use crate::provider::ToolSpec;

const NAME: &str = "write_file";

/// Writes a whole file, creating missing parent directories inside the workspace.
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteFile;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    content: String,
}

#[async_trait]
impl Tool for WriteFile {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capability(&self) -> Capability {
        Capability::Write
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: "Create a file or replace its whole content. Missing parent directories are created. \
                          To change part of an existing file prefer edit_file."
                .into(),
            parameters: support::object_schema(
                json!({
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                }),
                &["path", "content"],
            ),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = support::parse(NAME, args)?;
        let root = ctx.root.clone();
        blocking(move || {
            let target = path::resolve(&root, &args.path)?;
            write(&target.abs, &target.display(), &args.content).map(ToolOutput::text)
        })
        .await
    }
}

fn write(file: &Path, shown: &str, content: &str) -> Result<String, ToolError> {
    let fail =
        |what: &str, e: std::io::Error| ToolError::Failed(format!("cannot {what} `{shown}`: {e}"));
    let existed = file.exists();
    if existed {
        // Refuses directories, and FIFOs or devices, which would block the write.
        require_regular_file(file, shown)?;
    }
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent).map_err(|e| fail("create the parent directories of", e))?;
    }
    std::fs::write(file, content).map_err(|e| fail("write", e))?;
    let verb = if existed { "replaced" } else { "created" };
    Ok(format!("{verb} `{shown}` ({} bytes)", content.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_parents_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a/b/c.txt");
        assert_eq!(
            write(&file, "a/b/c.txt", "hi").unwrap(),
            "created `a/b/c.txt` (2 bytes)"
        );
        assert_eq!(
            write(&file, "a/b/c.txt", "hello").unwrap(),
            "replaced `a/b/c.txt` (5 bytes)"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello");
        assert!(
            write(&dir.path().join("a"), "a", "x")
                .unwrap_err()
                .to_string()
                .contains("is a directory")
        );
    }
}

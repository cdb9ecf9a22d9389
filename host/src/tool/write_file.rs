//! `write_file {path, content}` (write): creates or replaces a file.

use std::path::Path;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::support::{self, blocking};
use super::{Capability, FileAccess, Tool, ToolContext, ToolError, ToolOutput, path};
use crate::fs::{Root, WriteOptions, Written};
use crate::provider::ToolSpec;

const NAME: &str = "write_file";

/// Writes a whole file atomically, creating missing parent directories inside the
/// workspace; never `.git`, and `.crewbox/` only as [`FileAccess`] allows.
#[derive(Debug, Default, Clone, Copy)]
pub struct WriteFile {
    /// What beyond ordinary files it may change.
    pub access: FileAccess,
}

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
                          To change part of an existing file prefer edit_file. `.git` is never written \
                          and `.crewbox/` is read-only."
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
        let access = self.access;
        blocking(move || {
            let root = path::open_root(&root)?;
            write(&root, access, &args.path, &args.content).map(ToolOutput::text)
        })
        .await
    }
}

fn write(root: &Root, access: FileAccess, input: &str, content: &str) -> Result<String, ToolError> {
    let opts = WriteOptions::new(access.rules()).creating_dirs();
    let written = root
        .write(Path::new(input), content.as_bytes(), opts)
        .map_err(|e| path::error(input, e))?;
    let verb = match written {
        Written::Created => "created",
        Written::Replaced => "replaced",
    };
    Ok(format!(
        "{verb} `{}` ({} bytes)",
        path::shown(input),
        content.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_parents_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let access = FileAccess::default();
        assert_eq!(
            write(&root, access, "a/b/c.txt", "hi").unwrap(),
            "created `a/b/c.txt` (2 bytes)"
        );
        assert_eq!(
            write(&root, access, "./a/b/c.txt", "hello").unwrap(),
            "replaced `a/b/c.txt` (5 bytes)"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "hello"
        );
        assert!(
            write(&root, access, "a", "x")
                .unwrap_err()
                .to_string()
                .contains("is a directory")
        );
    }

    #[test]
    fn crewbox_is_written_only_when_granted() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::open(dir.path()).unwrap();
        let err = write(&root, FileAccess::default(), ".crewbox/config.toml", "x").unwrap_err();
        assert!(matches!(err, ToolError::Refused { .. }), "{err}");
        assert!(!dir.path().join(".crewbox").exists());
        let granted = FileAccess {
            crewbox_writable: true,
        };
        write(&root, granted, ".crewbox/config.toml", "x").unwrap();
        let err = write(&root, granted, ".git/config", "x").unwrap_err();
        assert!(matches!(err, ToolError::Refused { .. }), "{err}");
    }
}

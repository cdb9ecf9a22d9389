//! `edit_file {path, old, new}` (write): replaces one exact, unique piece of text.

use std::path::Path;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::support::{self, blocking, human_bytes, invalid};
use super::{Capability, FileAccess, Tool, ToolContext, ToolError, ToolOutput, path};
use crate::fs::{FsError, Root, WriteOptions};
use crate::provider::ToolSpec;

/// Files larger than this are not edited (they are read whole into memory).
pub const EDIT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

const NAME: &str = "edit_file";

/// Exact search and replace of a text that occurs exactly once; the file is replaced
/// atomically, never `.git`, and in `.crewbox/` only as [`FileAccess`] allows.
#[derive(Debug, Default, Clone, Copy)]
pub struct EditFile {
    /// What beyond ordinary files it may change.
    pub access: FileAccess,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    old: String,
    new: String,
}

#[async_trait]
impl Tool for EditFile {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capability(&self) -> Capability {
        Capability::Write
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: "Replace one exact piece of text in a file. `old` must occur exactly once in the file \
                          (whitespace and line breaks included, without read_file's line-number prefixes); \
                          if it occurs zero or several times nothing is changed and the error says how many \
                          times it matched: add surrounding lines to make it unique."
                .into(),
            parameters: support::object_schema(
                json!({
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "old": {"type": "string", "description": "The exact text to replace (non-empty, unique in the file)."},
                    "new": {"type": "string", "description": "The text to put in its place."}
                }),
                &["path", "old", "new"],
            ),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = support::parse(NAME, args)?;
        if args.old.is_empty() {
            return Err(invalid(NAME, "`old` must not be empty"));
        }
        let root = ctx.root.clone();
        let access = self.access;
        blocking(move || {
            let root = path::open_root(&root)?;
            edit(&root, access, &args.path, &args.old, &args.new).map(ToolOutput::text)
        })
        .await
    }
}

fn edit(
    root: &Root,
    access: FileAccess,
    input: &str,
    old: &str,
    new: &str,
) -> Result<String, ToolError> {
    let rules = access.rules();
    let shown = path::shown(input);
    let rel = Path::new(input);
    let bytes = match root.read_all(rel, EDIT_MAX_FILE_BYTES, rules) {
        Ok(bytes) => bytes,
        Err(FsError::TooLarge { .. }) => {
            return Err(ToolError::Failed(format!(
                "`{shown}` is over edit_file's limit of {}; use run_command for files this large",
                human_bytes(EDIT_MAX_FILE_BYTES as usize)
            )));
        }
        Err(e) => return Err(path::error(input, e)),
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "`{shown}` is not UTF-8 text; edit_file only edits text files"
        ))
    })?;
    let at = match occurrences(&text, old) {
        (0, _) => {
            return Err(ToolError::Failed(format!(
                "`old` was not found in `{shown}`; nothing changed. Read the file again and copy the text exactly, \
                 whitespace included"
            )));
        }
        (1, Some(at)) => at,
        (n, _) => {
            return Err(ToolError::Failed(format!(
                "`old` matches {n} times in `{shown}`; nothing changed. Include more surrounding lines so it \
                 matches exactly once"
            )));
        }
    };
    let mut edited = String::with_capacity(text.len() - old.len() + new.len());
    edited.push_str(&text[..at]);
    edited.push_str(new);
    edited.push_str(&text[at + old.len()..]);
    root.write(rel, edited.as_bytes(), WriteOptions::new(rules))
        .map_err(|e| path::error(input, e))?;
    let line = text[..at].matches('\n').count() + 1;
    Ok(format!(
        "edited `{shown}`: replaced 1 occurrence starting at line {line}"
    ))
}

/// How many times `needle` occurs in `hay`, overlapping ones included (`aa` is in `aaa`
/// twice: replacing "the" one would be ambiguous), and where the first one starts.
fn occurrences(hay: &str, needle: &str) -> (usize, Option<usize>) {
    let mut count = 0;
    let mut first = None;
    let mut from = 0;
    while let Some(pos) = hay[from..].find(needle) {
        let at = from + pos;
        first.get_or_insert(at);
        count += 1;
        // Step one character past the start of this match to find overlapping ones.
        from = at + hay[at..].chars().next().map_or(1, char::len_utf8);
    }
    (count, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_overlapping_occurrences() {
        assert_eq!(occurrences("aaa", "aa"), (2, Some(0)));
        assert_eq!(occurrences("xé yé", "é"), (2, Some(1)));
        assert_eq!(occurrences("abc", "d"), (0, None));
    }

    #[test]
    fn replaces_unique_match_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.rs");
        std::fs::write(&file, "fn a() {}\nfn b() {}\nfn b() {}\n").unwrap();
        let root = Root::open(dir.path()).unwrap();
        let edit = |_: &Path, shown: &str, old: &str, new: &str| {
            edit(&root, FileAccess::default(), shown, old, new)
        };
        let out = edit(&file, "f.rs", "fn a()", "fn alpha()").unwrap();
        assert_eq!(
            out,
            "edited `f.rs`: replaced 1 occurrence starting at line 1"
        );
        let err = edit(&file, "f.rs", "fn b()", "x").unwrap_err().to_string();
        assert!(err.contains("`old` matches 2 times in `f.rs`"), "{err}");
        let err = edit(&file, "f.rs", "fn c()", "x").unwrap_err().to_string();
        assert!(err.contains("`old` was not found in `f.rs`"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "fn alpha() {}\nfn b() {}\nfn b() {}\n"
        );
        let out = edit(&file, "f.rs", "fn b() {}\nfn b()", "fn b() {}\nfn beta()").unwrap();
        assert!(out.ends_with("line 2"), "{out}");
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            "fn alpha() {}\nfn b() {}\nfn beta() {}\n"
        );
    }
}

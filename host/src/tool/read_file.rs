//! `read_file {path, offset?, limit?}` (read): a text file's lines, numbered.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::support::{
    self, blocking, human_bytes, invalid, looks_binary, read_line_bounded, truncate_at_char,
};
use super::{Capability, FileAccess, Tool, ToolContext, ToolError, ToolOutput, path};
use crate::provider::ToolSpec;

/// At most this much text is returned by one call.
pub const READ_CAP_BYTES: usize = 256 * 1024;

const NAME: &str = "read_file";

/// Reads a text file, each line prefixed by its number.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadFile;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

#[async_trait]
impl Tool for ReadFile {
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
                "Read a text file in the workspace. Each line is returned as `<line number><TAB><text>`; \
                 the number and tab are not part of the file (leave them out of edit_file's `old`). \
                 At most {} are returned per call; a note at the end says how to continue.",
                human_bytes(READ_CAP_BYTES)
            ),
            parameters: support::object_schema(
                json!({
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1, "description": "1-based line to start at (default 1)."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to return (default: all, up to the size cap)."}
                }),
                &["path"],
            ),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = support::parse(NAME, args)?;
        if args.offset == Some(0) {
            return Err(invalid(
                NAME,
                "`offset` is a 1-based line number; the first line is 1",
            ));
        }
        if args.limit == Some(0) {
            return Err(invalid(NAME, "`limit` must be at least 1"));
        }
        let root = ctx.root.clone();
        blocking(move || {
            let root = path::open_root(&root)?;
            let (file, _) = root
                .open_file(Path::new(&args.path), FileAccess::default().rules())
                .map_err(|e| path::error(&args.path, e))?;
            read_lines(
                file,
                &path::shown(&args.path),
                args.offset.unwrap_or(1),
                args.limit,
                READ_CAP_BYTES,
            )
            .map(ToolOutput::text)
        })
        .await
    }
}

/// Reads lines `offset..offset+limit` of `file` (an opened regular file), numbered, at
/// most `cap` bytes of output.
fn read_lines(
    file: File,
    shown: &str,
    offset: u64,
    limit: Option<u64>,
    cap: usize,
) -> Result<String, ToolError> {
    let fail = |e: std::io::Error| ToolError::Failed(format!("cannot read `{shown}`: {e}"));
    let mut reader = BufReader::new(file);
    if looks_binary(reader.fill_buf().map_err(fail)?) {
        return Err(ToolError::Failed(format!(
            "`{shown}` looks like a binary file (it contains NUL bytes); not shown"
        )));
    }

    let last_wanted = limit.map_or(u64::MAX, |l| offset.saturating_add(l - 1));
    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut last_shown = None;
    loop {
        line.clear();
        // Lines before `offset` are skipped without keeping them; others are kept up to
        // just over the cap, which is all that could ever be shown.
        let keep = if number + 1 < offset { 0 } else { cap + 1 };
        if read_line_bounded(&mut reader, &mut line, keep).map_err(fail)? == 0 {
            break;
        }
        number += 1;
        if number < offset {
            continue;
        }
        if number > last_wanted {
            let last = last_shown.unwrap_or(offset);
            let _ = write!(
                out,
                "[showed lines {offset}-{last}; the file goes on: read again with offset={}]",
                last + 1
            );
            return Ok(out);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        let entry = format!("{number:>6}\t{text}\n");
        if out.len() + entry.len() > cap {
            if last_shown.is_none() {
                // A single line longer than the cap: show its start rather than nothing.
                out.push_str(truncate_at_char(&entry, cap));
                let _ = write!(
                    out,
                    "\n[line {number} is longer than {}; cut. Continue with offset={}]",
                    human_bytes(cap),
                    number + 1
                );
            } else {
                let last = last_shown.unwrap_or(offset);
                let _ = write!(
                    out,
                    "[output capped at {}: showed lines {offset}-{last}; read again with offset={}]",
                    human_bytes(cap),
                    last + 1
                );
            }
            return Ok(out);
        }
        out.push_str(&entry);
        last_shown = Some(number);
    }
    match last_shown {
        Some(_) => Ok(out),
        None if number == 0 => Ok("(empty file)".to_owned()),
        None => Err(ToolError::Failed(format!(
            "`{shown}` has {number} lines; offset {offset} is past the end"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        std::fs::write(&path, content).unwrap();
        (dir, path)
    }

    fn read_lines(
        file: &Path,
        shown: &str,
        offset: u64,
        limit: Option<u64>,
        cap: usize,
    ) -> Result<String, ToolError> {
        super::read_lines(File::open(file).unwrap(), shown, offset, limit, cap)
    }

    #[test]
    fn numbers_lines_and_pages() {
        let (_d, f) = file(b"one\ntwo\r\nthree\nfour");
        assert_eq!(
            read_lines(&f, "f", 1, None, 1000).unwrap(),
            "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n"
        );
        assert_eq!(
            read_lines(&f, "f", 2, Some(2), 1000).unwrap(),
            "     2\ttwo\n     3\tthree\n[showed lines 2-3; the file goes on: read again with offset=4]"
        );
        assert_eq!(
            read_lines(&f, "f", 4, Some(5), 1000).unwrap(),
            "     4\tfour\n"
        );
        let err = read_lines(&f, "f", 9, None, 1000).unwrap_err().to_string();
        assert_eq!(err, "`f` has 4 lines; offset 9 is past the end");
    }

    #[test]
    fn caps_output() {
        let content: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let (_d, f) = file(content.as_bytes());
        let out = read_lines(&f, "f", 1, None, 100).unwrap();
        assert!(out.len() < 200, "{out}");
        assert!(
            out.contains(
                "[output capped at 100 bytes: showed lines 1-7; read again with offset=8]"
            ),
            "{out}"
        );
        let (_d2, long) = file(&[b'x'; 500]);
        let out = read_lines(&long, "f", 1, None, 100).unwrap();
        assert!(out.contains("line 1 is longer than 100 bytes"), "{out}");
    }

    #[test]
    fn skips_long_lines_before_offset() {
        let mut content = vec![b'x'; 5000];
        content.extend_from_slice(b"\nok\n");
        let (_d, f) = file(&content);
        assert_eq!(read_lines(&f, "f", 2, None, 100).unwrap(), "     2\tok\n");
    }

    #[test]
    fn refuses_binary_and_reports_empty() {
        let (_d, f) = file(b"\x7fELF\0\0\x01");
        assert!(
            read_lines(&f, "f", 1, None, 1000)
                .unwrap_err()
                .to_string()
                .contains("binary")
        );
        let (_e, empty) = file(b"");
        assert_eq!(
            read_lines(&empty, "f", 1, None, 1000).unwrap(),
            "(empty file)"
        );
    }
}

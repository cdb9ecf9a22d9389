//! `crewbox handoff check FILE [--json]`: is this agent reply (or JSON file) a valid
//! handoff v2? Exit 0 when valid, 1 when not, 2 when the file cannot be read.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::cli::Exit;
use crate::handoff::{self, Handoff, Limits};

/// Arguments of `crewbox handoff`.
#[derive(Debug, Args)]
pub struct HandoffArgs {
    /// What to do with a handoff.
    #[command(subcommand)]
    pub command: HandoffCommand,
}

/// Subcommands of `crewbox handoff`.
#[derive(Debug, Subcommand)]
pub enum HandoffCommand {
    /// Check that a reply or JSON file holds a valid handoff v2.
    Check(HandoffCheckArgs),
}

/// Arguments of `crewbox handoff check`.
#[derive(Debug, Args)]
pub struct HandoffCheckArgs {
    /// A full agent reply (the last fenced JSON block is used) or a bare JSON object.
    pub file: PathBuf,
    /// Print one JSON object `{valid, handoff?, error?}` instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Dispatches a `crewbox handoff` subcommand.
pub fn dispatch(args: &HandoffArgs) -> anyhow::Result<Exit> {
    match &args.command {
        HandoffCommand::Check(check) => run(check),
    }
}

/// Runs `crewbox handoff check`, printing to stdout.
pub fn run(args: &HandoffCheckArgs) -> anyhow::Result<Exit> {
    let mut out = crate::text::stdout();
    match run_to(args, &mut out) {
        // A closed pipe (`| head`) is not a failure of the check.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Exit::Ok),
        other => Ok(other?),
    }
}

/// The `--json` report.
#[derive(Debug, Serialize)]
struct Report<'a> {
    valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    handoff: Option<&'a Handoff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn run_to(args: &HandoffCheckArgs, out: &mut impl Write) -> io::Result<Exit> {
    let text = match read_bounded(&args.file) {
        Ok(text) => text,
        Err(e) => {
            let error = format!("cannot read {}: {e}", args.file.display());
            if args.json {
                let report = Report {
                    valid: false,
                    handoff: None,
                    error: Some(error),
                };
                writeln!(out, "{}", serde_json::to_string(&report)?)?;
            } else {
                errln!("crewbox: {error}");
            }
            return Ok(Exit::Usage);
        }
    };
    let result = handoff::parse(&text);
    if args.json {
        let report = match &result {
            Ok(h) => Report {
                valid: true,
                handoff: Some(h),
                error: None,
            },
            Err(e) => Report {
                valid: false,
                handoff: None,
                error: Some(e.to_string()),
            },
        };
        writeln!(out, "{}", serde_json::to_string(&report)?)?;
    } else {
        match &result {
            Ok(h) => writeln!(
                out,
                "valid handoff: {}, {} finding(s), {} artifact(s)",
                h.status,
                h.findings.len(),
                h.artifacts.len()
            )?,
            Err(e) => writeln!(out, "invalid handoff: {e}")?,
        }
    }
    Ok(if result.is_ok() {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

/// Reads at most one byte past the input limit, so a huge file is rejected by the
/// parser's size check without being loaded whole.
fn read_bounded(path: &std::path::Path) -> io::Result<String> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(Limits::MAX_INPUT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(contents: Option<&[u8]>, json: bool) -> (Exit, String) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("reply.md");
        if let Some(c) = contents {
            std::fs::write(&file, c).unwrap();
        }
        let mut out = Vec::new();
        let exit = run_to(&HandoffCheckArgs { file, json }, &mut out).unwrap();
        (exit, String::from_utf8(out).unwrap())
    }

    const VALID: &[u8] =
        b"Done.\n```json\n{\"status\":\"success\",\"summary\":\"s\",\"findings\":[\"f\"]}\n```\n";

    #[test]
    fn valid_reply_exits_ok() {
        let (exit, out) = check(Some(VALID), false);
        assert_eq!(exit, Exit::Ok);
        assert_eq!(out, "valid handoff: success, 1 finding(s), 0 artifact(s)\n");
    }

    #[test]
    fn valid_reply_as_json_includes_the_canonical_handoff() {
        let (exit, out) = check(Some(VALID), true);
        assert_eq!(exit, Exit::Ok);
        assert_eq!(
            out,
            "{\"valid\":true,\"handoff\":{\"status\":\"success\",\"summary\":\"s\",\"findings\":[\"f\"]}}\n"
        );
    }

    #[test]
    fn invalid_reply_exits_check_failed_with_the_reason() {
        let (exit, out) = check(
            Some(b"{\"status\":\"success\",\"summary\":\"s\",\"findings\":[]}"),
            true,
        );
        assert_eq!(exit, Exit::CheckFailed);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["valid"], false);
        assert_eq!(
            v["error"],
            "findings: 0 entries, expected between 1 and 100"
        );
        assert!(v.get("handoff").is_none());
    }

    #[test]
    fn missing_or_binary_file_is_a_usage_error() {
        let (exit, out) = check(None, true);
        assert_eq!(exit, Exit::Usage);
        assert!(
            out.contains("\"valid\":false") && out.contains("cannot read"),
            "{out}"
        );
        let (exit, _) = check(Some(&[0xff, 0xfe, b'{']), false);
        assert_eq!(exit, Exit::Usage);
    }

    #[test]
    fn oversized_file_is_rejected_by_the_parser_limit() {
        let big = vec![b' '; Limits::MAX_INPUT_BYTES + 10];
        let (exit, out) = check(Some(&big), false);
        assert_eq!(exit, Exit::CheckFailed);
        assert!(out.contains("more than the 1048576-byte limit"), "{out}");
    }
}

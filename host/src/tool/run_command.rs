//! `run_command {command, timeout_s?}` (exec): runs `sh -c COMMAND` in the workspace root,
//! inside the agent's process sandbox (`crate::sandbox`).
//!
//! - The sandbox decides what the command sees and may write, its environment (an
//!   allowlist: provider keys never reach it), its network and its limits.
//! - When the command ends (or times out, or the call is dropped) everything it started
//!   is killed, so background jobs (`server &`) never outlive the call and a timeout
//!   takes every child down, not just `sh`.
//! - stdin is empty; stdout and stderr are read together in arrival order into one
//!   buffer capped at [`OUTPUT_CAP_BYTES`], keeping the head and the tail.
//! - A non-zero exit is a normal result (the model reads the exit code); a command that
//!   cannot be started, or a sandbox that cannot be set up, is a `ToolError`.

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::support::{self, human_bytes, invalid};
use super::{Capability, Tool, ToolContext, ToolError, ToolOutput};
use crate::provider::ToolSpec;
use crate::sandbox::{AgentSandbox, Program};

/// Timeout when the model gives none.
pub const DEFAULT_TIMEOUT_S: u64 = 120;
/// The longest timeout a model may ask for.
pub const MAX_TIMEOUT_S: u64 = 600;
/// Output kept per call: the first and last halves of this when there is more.
pub const OUTPUT_CAP_BYTES: usize = 64 * 1024;
/// How long to keep reading after the process group is gone (a detached daemon that
/// left its own group may still hold the pipes open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

const NAME: &str = "run_command";

/// Runs a shell command in the workspace.
#[derive(Debug, Default, Clone, Copy)]
pub struct RunCommand;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    command: String,
    timeout_s: Option<u64>,
}

#[async_trait]
impl Tool for RunCommand {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capability(&self) -> Capability {
        Capability::Exec
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: format!(
                "Run a shell command (`sh -c`) in the workspace root, with no stdin, in a sandbox: it can \
                 write only the workspace, $HOME and /tmp (both private to you), `.git` and `.crewbox/` are read-only, the \
                 network is off unless granted, and the environment holds only basic variables. Returns \
                 the exit code, then stdout and stderr interleaved (at most {}, keeping the start and the \
                 end). When the command ends or times out, every process it started is killed: do not \
                 leave servers running in the background.",
                human_bytes(OUTPUT_CAP_BYTES)
            ),
            parameters: support::object_schema(
                json!({
                    "command": {"type": "string", "description": "The command line, e.g. `cargo test 2>&1 | tail -20`."},
                    "timeout_s": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_S, "description": format!("Seconds before the command is killed (default {DEFAULT_TIMEOUT_S}).")}
                }),
                &["command"],
            ),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let args: Args = support::parse(NAME, args)?;
        let timeout_s = args.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
        if !(1..=MAX_TIMEOUT_S).contains(&timeout_s) {
            return Err(invalid(
                NAME,
                format!("`timeout_s` must be between 1 and {MAX_TIMEOUT_S}, got {timeout_s}"),
            ));
        }
        if args.command.trim().is_empty() {
            return Err(invalid(NAME, "`command` must not be empty"));
        }
        let sandbox = ctx.sandbox.as_deref().ok_or_else(|| {
            ToolError::Failed(
                "run_command is refused: this agent has no process sandbox to run commands in"
                    .into(),
            )
        })?;
        // The sandbox shows a missing `.crewbox` as an empty read-only directory, and
        // the mount point it needs is a real, empty directory in the workspace: it goes
        // again once the command is done (only while empty, so nothing is lost).
        let crewbox = ctx.root.join(".crewbox");
        let had_crewbox = tokio::fs::symlink_metadata(&crewbox).await.is_ok();
        let ran = run(sandbox, &args.command, Duration::from_secs(timeout_s)).await;
        if !had_crewbox {
            let _ = tokio::fs::remove_dir(&crewbox).await;
        }
        Ok(ToolOutput::text(ran?.render()))
    }
}

/// How a command ended.
#[derive(Debug)]
enum Ending {
    Exited(ExitStatus),
    TimedOut(Duration),
}

/// The result of one command.
#[derive(Debug)]
struct Ran {
    ending: Ending,
    output: String,
    /// A process outside the group kept the pipes open; reading stopped early.
    unfinished_output: bool,
}

impl Ran {
    fn render(&self) -> String {
        let status = match &self.ending {
            Ending::Exited(status) => match (status.code(), status.signal()) {
                (Some(code), _) => format!("[exit code {code}]"),
                (None, Some(signal)) => format!("[killed by signal {signal}]"),
                (None, None) => format!("[ended: {status}]"),
            },
            Ending::TimedOut(after) => format!(
                "[timed out after {} s: the command and every process it started were killed]",
                after.as_secs()
            ),
        };
        let mut out = status;
        out.push('\n');
        if self.output.is_empty() {
            out.push_str("(no output)");
        } else {
            out.push_str(&self.output);
        }
        if self.unfinished_output {
            out.push_str("\n[a detached process still holds the output open; stopped reading]");
        }
        out
    }
}

async fn run(sandbox: &AgentSandbox, command: &str, timeout: Duration) -> Result<Ran, ToolError> {
    let mut child = sandbox
        .command(Program::Shell(command.to_owned()))
        .spawn()
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    let buffer = Mutex::new(HeadTail::new(OUTPUT_CAP_BYTES));
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let mut pump =
        std::pin::pin!(async { tokio::join!(pump(stdout, &buffer), pump(stderr, &buffer)) });
    let mut pumped = false;

    let waited = tokio::time::timeout(timeout, async {
        loop {
            tokio::select! {
                _ = &mut pump, if !pumped => pumped = true,
                status = child.wait() => break status,
            }
        }
    })
    .await;
    // On timeout this runs before the process is reaped, so its group id cannot have
    // been reused. After a normal exit the id could only be reused once the kernel
    // cycles through every pid, which does not happen in the microseconds in between.
    // (A sandboxed command's whole tree is already gone by then: its pid namespace ends
    // with it.) If this future is dropped instead, dropping `child` does the same.
    child.kill_tree();
    let ending = match waited {
        Ok(status) => Ending::Exited(
            status.map_err(|e| ToolError::Failed(format!("waiting for the command: {e}")))?,
        ),
        Err(_) => {
            let _ = child.wait().await;
            Ending::TimedOut(timeout)
        }
    };
    let unfinished_output = !pumped && tokio::time::timeout(DRAIN_GRACE, &mut pump).await.is_err();
    let output = std::mem::replace(
        &mut *buffer.lock().unwrap_or_else(|e| e.into_inner()),
        HeadTail::new(0),
    )
    .render();
    if let Ending::Exited(status) = &ending
        && let Some(failure) = child.setup_failure(status, &output)
    {
        return Err(ToolError::Failed(
            sandbox.sandbox().describe_failure(failure).to_string(),
        ));
    }
    Ok(Ran {
        ending,
        output,
        unfinished_output,
    })
}

async fn pump<R: AsyncRead + Unpin>(reader: Option<R>, buffer: &Mutex<HeadTail>) {
    let Some(mut reader) = reader else { return };
    let mut chunk = vec![0u8; 8192];
    while let Ok(n @ 1..) = reader.read(&mut chunk).await {
        buffer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(&chunk[..n]);
    }
}

/// Keeps the first and last `cap / 2` bytes of a stream and counts what was dropped.
#[derive(Debug)]
struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    half: usize,
    total: usize,
}

impl HeadTail {
    fn new(cap: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            half: cap / 2,
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let room = self.half.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        bytes = rest;
        if bytes.len() >= self.half {
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.half..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.half);
        self.tail.drain(..excess);
    }

    fn render(self) -> String {
        let omitted = self.total - self.head.len() - self.tail.len();
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if omitted > 0 {
            out.push_str(&format!(
                "\n[... {omitted} bytes omitted; {} in all ...]\n",
                human_bytes(self.total)
            ));
        }
        out.push_str(&String::from_utf8_lossy(&Vec::from(self.tail)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_keeps_both_ends() {
        let mut small = HeadTail::new(10);
        small.push(b"abc");
        small.push(b"defghij");
        assert_eq!(small.render(), "abcdefghij");

        let mut big = HeadTail::new(10);
        big.push(b"01234");
        big.push(b"56789");
        big.push(b"abcdefgh");
        big.push(b"XYZ");
        assert_eq!(
            big.render(),
            "01234\n[... 11 bytes omitted; 21 bytes in all ...]\nghXYZ"
        );

        let mut one = HeadTail::new(4);
        one.push(b"abcdefghijkl");
        assert_eq!(
            one.render(),
            "ab\n[... 8 bytes omitted; 12 bytes in all ...]\nkl"
        );
    }

    #[tokio::test]
    async fn reports_exit_code_and_output() {
        let dir = tempfile::tempdir().unwrap();
        // The library's own test binary is no sandbox helper: this runs unconfined.
        let off = crate::sandbox::Sandbox::new(crate::sandbox::SandboxOptions {
            config: crate::sandbox::SandboxConfig {
                mode: crate::sandbox::SandboxMode::Off,
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
        let agent = off.agent(crate::sandbox::AgentScope {
            id: "t".into(),
            workspace: Some(dir.path().to_owned()),
            writable: true,
            network: false,
        });
        let ran = run(
            &agent,
            "echo out; echo err >&2; exit 3",
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        let text = ran.render();
        assert!(text.starts_with("[exit code 3]\n"), "{text}");
        assert!(text.contains("out\n") && text.contains("err\n"), "{text}");
    }
}

//! `run_command {command, timeout_s?}` (exec): runs `sh -c COMMAND` in the workspace root.
//!
//! - The command runs in its own process group. When it ends (or times out) the whole
//!   group is killed with SIGKILL, so background jobs (`server &`) never outlive the call
//!   and a timeout takes every child down, not just `sh`.
//! - stdin is `/dev/null`; stdout and stderr are read together in arrival order into one
//!   buffer capped at [`OUTPUT_CAP_BYTES`], keeping the head and the tail.
//! - The environment is the host's minus every variable whose name contains `KEY`,
//!   `TOKEN`, `SECRET`, `PASSWORD` or `CREDENTIAL` (any case), so provider API keys never
//!   reach agent commands; `GIT_TERMINAL_PROMPT=0`, `PAGER=cat` and `GIT_PAGER=cat` are
//!   set so nothing waits for a terminal.
//! - A non-zero exit is a normal result (the model reads the exit code); only a command
//!   that cannot be started is a `ToolError`.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::support::{self, human_bytes, invalid};
use super::{Capability, Tool, ToolContext, ToolError, ToolOutput};
use crate::provider::ToolSpec;

/// Timeout when the model gives none.
pub const DEFAULT_TIMEOUT_S: u64 = 120;
/// The longest timeout a model may ask for.
pub const MAX_TIMEOUT_S: u64 = 600;
/// Output kept per call: the first and last halves of this when there is more.
pub const OUTPUT_CAP_BYTES: usize = 64 * 1024;
/// Name fragments (upper case) that mark a variable as a secret to withhold.
pub const SECRET_NAME_PARTS: [&str; 5] = ["KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL"];
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
                "Run a shell command (`sh -c`) in the workspace root, with no stdin. Returns the exit code, then \
                 stdout and stderr interleaved (at most {}, keeping the start and the end). When the command \
                 ends or times out, every process it started is killed: do not leave servers running in the \
                 background. Environment variables whose names contain KEY, TOKEN, SECRET, PASSWORD or \
                 CREDENTIAL are not passed on.",
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
        let ran = run(
            &ctx.root,
            &args.command,
            Duration::from_secs(timeout_s),
            scrub_env(std::env::vars_os()),
        )
        .await?;
        Ok(ToolOutput::text(ran.render()))
    }
}

/// Whether a variable of this name is withheld from commands (see the module doc).
pub fn is_secret_var(name: &OsStr) -> bool {
    let upper = name.to_string_lossy().to_uppercase();
    SECRET_NAME_PARTS.iter().any(|part| upper.contains(part))
}

/// The environment a command gets from `vars`: secrets removed, non-interactive defaults added.
pub fn scrub_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<_> = vars
        .into_iter()
        .filter(|(name, _)| !is_secret_var(name))
        .filter(|(name, _)| {
            !matches!(
                name.to_str(),
                Some("GIT_TERMINAL_PROMPT" | "PAGER" | "GIT_PAGER")
            )
        })
        .collect();
    for (name, value) in [
        ("GIT_TERMINAL_PROMPT", "0"),
        ("PAGER", "cat"),
        ("GIT_PAGER", "cat"),
    ] {
        env.push((name.into(), value.into()));
    }
    env
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

async fn run(
    root: &std::path::Path,
    command: &str,
    timeout: Duration,
    env: Vec<(OsString, OsString)>,
) -> Result<Ran, ToolError> {
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(root)
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            ToolError::Failed(format!("cannot start `sh` in `{}`: {e}", root.display()))
        })?;
    let pgid = child
        .id()
        .ok_or_else(|| ToolError::Failed("the command exited before it could be tracked".into()))?;
    // If this future is dropped (the agent is cancelled), take the whole group down too.
    let mut guard = GroupGuard(Some(pgid));

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
    // On timeout this runs before `sh` is reaped, so the group id cannot have been reused.
    // After a normal exit the id could only be reused once the kernel cycles through
    // every pid, which does not happen in the microseconds in between.
    guard.kill();
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

/// Kills the process group it holds once: explicitly or when dropped.
struct GroupGuard(Option<u32>);

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            kill_group(pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

fn kill_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    // SAFETY: killpg only sends a signal; it touches no memory of ours. ESRCH (the group
    // is already gone) is expected and ignored.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
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
    fn secret_names() {
        for name in [
            "OPENAI_API_KEY",
            "github_token",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "GOOGLE_CREDENTIALS",
        ] {
            assert!(is_secret_var(OsStr::new(name)), "{name}");
        }
        for name in ["PATH", "HOME", "CARGO_HOME", "LANG"] {
            assert!(!is_secret_var(OsStr::new(name)), "{name}");
        }
        let env = scrub_env([
            ("PATH".into(), "/bin".into()),
            ("FOO_API_KEY".into(), "sk-123".into()),
            ("PAGER".into(), "less".into()),
        ]);
        let names: Vec<_> = env.iter().map(|(n, _)| n.to_str().unwrap()).collect();
        assert_eq!(names, ["PATH", "GIT_TERMINAL_PROMPT", "PAGER", "GIT_PAGER"]);
    }

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
        let ran = run(
            dir.path(),
            "echo out; echo err >&2; exit 3",
            Duration::from_secs(10),
            scrub_env(std::env::vars_os()),
        )
        .await
        .unwrap();
        let text = ran.render();
        assert!(text.starts_with("[exit code 3]\n"), "{text}");
        assert!(text.contains("out\n") && text.contains("err\n"), "{text}");
    }
}

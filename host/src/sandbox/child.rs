//! A started process (sandboxed or not) and the guarantee that its whole tree dies.

use std::process::ExitStatus;

use super::policy::{SETUP_FAILED, Stage};

/// A running process started by [`super::Spawn::spawn`]. Dropping it kills its whole
/// process group (and, for a sandboxed process, with it the sandbox's pid namespace).
#[derive(Debug)]
pub struct SandboxedChild {
    /// The process; its stdout and stderr are piped, stdin piped when asked for.
    pub child: tokio::process::Child,
    group: Option<libc::pid_t>,
    nonce: Option<String>,
}

/// Why a sandboxed process did not start, as the helper reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupFailure {
    /// Which step failed (when the helper named one).
    pub stage: Option<Stage>,
    /// The helper's message.
    pub message: String,
}

impl SandboxedChild {
    pub(super) fn new(child: tokio::process::Child, nonce: Option<String>) -> Self {
        let group = child.id().and_then(|p| libc::pid_t::try_from(p).ok());
        Self {
            child,
            group,
            nonce,
        }
    }

    /// Kills the process and everything it started, now. Idempotent.
    pub fn kill_tree(&mut self) {
        if let Some(pgid) = self.group.take() {
            // SAFETY: killpg only sends a signal. The group was created for this child
            // (process_group(0)) and its leader is not reaped yet when this runs before
            // `wait`, so the id cannot have been reused; ESRCH is ignored.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
        let _ = self.child.start_kill();
    }

    /// The helper's own failure report, if the process ended because the sandbox could
    /// not be set up (`output` is what it wrote to stderr, or stdout and stderr merged).
    pub fn setup_failure(&self, status: &ExitStatus, output: &str) -> Option<SetupFailure> {
        let nonce = self.nonce.as_deref()?;
        if !matches!(status.code(), Some(SETUP_FAILED | 127)) {
            return None;
        }
        let line = output.lines().find_map(|l| l.strip_prefix(nonce))?.trim();
        let (stage, message) = match line.split_once(": ") {
            Some((stage, message)) if Stage::parse(stage).is_some() => {
                (Stage::parse(stage), message.to_owned())
            }
            _ => (None, line.to_owned()),
        };
        Some(SetupFailure { stage, message })
    }

    /// Removes the helper's report line from `output` (so it is not shown twice).
    pub fn strip_report(&self, output: &str) -> String {
        match self.nonce.as_deref() {
            Some(nonce) => output
                .lines()
                .filter(|l| !l.starts_with(nonce))
                .collect::<Vec<_>>()
                .join("\n"),
            None => output.to_owned(),
        }
    }
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        self.kill_tree();
    }
}

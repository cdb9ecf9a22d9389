//! A started process (sandboxed or not) and the guarantee that its whole tree dies.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use tokio::net::unix::pipe;

use super::policy::{SETUP_FAILED, Stage};

/// A running process started by [`super::Spawn::spawn`]. Dropping it kills the process
/// and everything it started (for a sandboxed process: its whole pid namespace).
pub struct SandboxedChild {
    /// Its stdin, when it was asked for.
    pub stdin: Option<pipe::Sender>,
    /// Its stdout.
    pub stdout: Option<pipe::Receiver>,
    /// Its stderr.
    pub stderr: Option<pipe::Receiver>,
    inner: Inner,
    nonce: Option<String>,
    status: Option<ExitStatus>,
}

impl std::fmt::Debug for SandboxedChild {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxedChild")
            .field("sandboxed", &matches!(self.inner, Inner::Served { .. }))
            .field("status", &self.status)
            .finish()
    }
}

enum Inner {
    /// Started directly (the sandbox is off), leading its own process group.
    Direct {
        child: tokio::process::Child,
        group: Option<libc::pid_t>,
    },
    /// Started by the sandbox server.
    Served {
        served: super::client::Served,
        /// Where its init process writes the command's raw wait status (4 bytes);
        /// `None` once read to its end.
        status: Option<pipe::Receiver>,
        /// What arrived of it so far (kept across a cancelled wait).
        got: ([u8; 4], usize),
    },
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
    pub(super) fn direct(mut child: tokio::process::Child) -> io::Result<Self> {
        let group = child.id().and_then(|p| libc::pid_t::try_from(p).ok());
        let stdin = child
            .stdin
            .take()
            .map(|s| pipe::Sender::from_owned_fd(s.into_owned_fd()?))
            .transpose()?;
        let stdout = child
            .stdout
            .take()
            .map(|s| pipe::Receiver::from_owned_fd(s.into_owned_fd()?))
            .transpose()?;
        let stderr = child
            .stderr
            .take()
            .map(|s| pipe::Receiver::from_owned_fd(s.into_owned_fd()?))
            .transpose()?;
        Ok(Self {
            stdin,
            stdout,
            stderr,
            inner: Inner::Direct { child, group },
            nonce: None,
            status: None,
        })
    }

    pub(super) fn served(
        served: super::client::Served,
        status: pipe::Receiver,
        stdin: Option<pipe::Sender>,
        stdout: pipe::Receiver,
        stderr: pipe::Receiver,
        nonce: String,
    ) -> Self {
        Self {
            stdin,
            stdout: Some(stdout),
            stderr: Some(stderr),
            inner: Inner::Served {
                served,
                status: Some(status),
                got: ([0; 4], 0),
            },
            nonce: Some(nonce),
            status: None,
        }
    }

    /// Waits for the process to end (for a sandboxed one: for its whole tree).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = match &mut self.inner {
            Inner::Direct { child, .. } => child.wait().await?,
            Inner::Served {
                served,
                status,
                got,
            } => {
                // The command's status, from its init process; cancel-safe: each read
                // either returns bytes, kept in `got`, or takes none.
                while let Some(pipe) = status.as_mut() {
                    use tokio::io::AsyncReadExt;
                    let (bytes, n) = got;
                    match pipe.read(&mut bytes[*n..]).await {
                        Ok(read) if read > 0 && *n + read < 4 => *n += read,
                        Ok(read) if read > 0 => {
                            *n = 4;
                            *status = None;
                        }
                        // End of file (or a broken pipe): no status came.
                        _ => *status = None,
                    }
                }
                if got.1 == 4 {
                    ExitStatus::from_raw(i32::from_le_bytes(got.0))
                } else {
                    // The init process ended without one: how it ended is the status
                    // (the sandbox could not be set up, or it was killed).
                    let raw = (&mut served.exited).await.map_err(|_| {
                        io::Error::other("the sandbox server stopped while the command ran")
                    })?;
                    ExitStatus::from_raw(raw)
                }
            }
        };
        self.status = Some(status);
        Ok(status)
    }

    /// Kills the process and everything it started, now. Idempotent.
    pub fn kill_tree(&mut self) {
        match &mut self.inner {
            Inner::Direct { child, group } => {
                if let Some(pgid) = group.take() {
                    // SAFETY: killpg only sends a signal. The group was created for this
                    // child (its own session, led by it); until its leader is reaped the id cannot
                    // be reused, and right after, only once the kernel cycles through
                    // every pid. ESRCH is ignored.
                    unsafe {
                        libc::killpg(pgid, libc::SIGKILL);
                    }
                }
                let _ = child.start_kill();
            }
            // The server kills the helper, whose death takes its pid namespace with it.
            Inner::Served { served, .. } if self.status.is_none() => served.server.kill(served.id),
            Inner::Served { .. } => {}
        }
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
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        self.kill_tree();
    }
}

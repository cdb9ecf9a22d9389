//! crewbox's side of the sandbox server (see `server`): starting it, sending it
//! policies with stdio, and routing its replies to the waiting processes.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;

use super::server::{
    self, HEADER, MAX_REQUEST, REP_EXITED, REQ_KILL, REQ_SPAWN, REQ_SPAWN_NETWORK,
};

/// State shared with the reply reader.
struct Shared {
    sock: AsyncFd<OwnedFd>,
    /// Request id → where its init process's end goes.
    pending: Mutex<HashMap<u64, oneshot::Sender<i32>>>,
    next_id: AtomicU64,
    dead: AtomicBool,
}

/// A running sandbox server. Dropping it closes the socket, which ends the server and
/// every process it started.
pub(super) struct Server {
    shared: Arc<Shared>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// A process sent to the server. Its init process writes the command's status to the
/// status pipe sent along; `exited` tells how the init process itself ended (what
/// counts when no status came: the sandbox could not be set up, or it was killed).
pub(super) struct Served {
    /// Its id with the server (what `kill` names).
    pub id: u64,
    /// Resolves with the init process's raw wait status (an error: the server died).
    pub exited: oneshot::Receiver<i32>,
    /// To send the kill.
    pub server: Arc<dyn Killer>,
}

/// Kills a served process (by request id).
pub(super) trait Killer: Send + Sync {
    /// Asks the server to SIGKILL the process of request `id`.
    fn kill(&self, id: u64);
}

impl Killer for Shared {
    fn kill(&self, id: u64) {
        // A datagram-sized message on a local socket: it does not block in practice,
        // and when it cannot be sent the server is gone and so is the process.
        let _ = server::send_with_fds(
            self.sock.get_ref().as_raw_fd(),
            &server::header(REQ_KILL, id),
            &[],
        );
    }
}

impl Server {
    /// Starts the server from `helper`. It is started by a thread of its own that then
    /// waits for it: the kernel's parent-death signal follows the starting *thread*, so
    /// that thread must live exactly as long as the server.
    pub fn start(helper: &Path) -> io::Result<Self> {
        let (ours, theirs) = super::sys::seqpacket_pair()?;
        let (tx, rx) = std::sync::mpsc::channel();
        let helper = helper.to_owned();
        std::thread::Builder::new()
            .name("crewbox-sandbox-server".into())
            .spawn(move || {
                use std::os::unix::process::CommandExt;
                let child = crate::child::command(
                    &helper,
                    crate::child::Role::SandboxHelper,
                    [std::process::id().to_string()],
                    crate::child::Limits::default(),
                )
                .arg0("crewbox-sandbox")
                .current_dir("/")
                .stdin(std::process::Stdio::from(theirs))
                .stdout(std::process::Stdio::null())
                .spawn();
                match child {
                    Ok(mut child) => {
                        let _ = tx.send(Ok(()));
                        let _ = child.wait();
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                }
            })?;
        rx.recv()
            .map_err(|_| io::Error::other("the sandbox server thread ended"))??;
        // Non-blocking for the reactor.
        // SAFETY: fcntl on a descriptor we own.
        unsafe {
            let fd = ours.as_raw_fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        // SAFETY: an OwnedFd keeps its one descriptor open for as long as it lives, and
        // the AsyncFd owns it.
        let sock =
            unsafe { AsyncFd::register(ours) }.map_err(|e| io::Error::other(e.to_string()))?;
        let shared = Arc::new(Shared {
            sock,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            dead: AtomicBool::new(false),
        });
        let reader = tokio::spawn(read_replies(shared.clone()));
        Ok(Self { shared, reader })
    }

    /// Whether the server (or the runtime its reader ran on) is gone.
    pub fn is_dead(&self) -> bool {
        self.shared.dead.load(Ordering::SeqCst) || self.reader.is_finished()
    }

    /// Starts `policy` (already encoded) with these descriptors: stdin, stdout, stderr
    /// and the write end of the status pipe. Returns once the request is sent: nothing
    /// waits for the process to be forked (a failure shows as its end).
    pub async fn spawn(
        &self,
        policy: &[u8],
        network: bool,
        fds: [OwnedFd; 4],
    ) -> io::Result<Served> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = Vec::with_capacity(HEADER + policy.len());
        let tag = if network {
            REQ_SPAWN_NETWORK
        } else {
            REQ_SPAWN
        };
        message.extend_from_slice(&server::header(tag, id));
        message.extend_from_slice(policy);
        if message.len() > MAX_REQUEST {
            return Err(io::Error::other(format!(
                "the sandbox policy is too large ({} bytes; at most {MAX_REQUEST}): is the \
                 environment that big?",
                message.len()
            )));
        }
        let (exited_tx, exited_rx) = oneshot::channel();
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, exited_tx);
        let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        let sent = loop {
            let mut guard = self.shared.sock.writable().await?;
            match guard.try_io(|sock| server::send_with_fds(sock.as_raw_fd(), &message, &raw)) {
                Ok(result) => break result,
                Err(_would_block) => continue,
            }
        };
        // The server holds its own copies now; ours must go so end-of-file can happen.
        drop(fds);
        if let Err(e) = sent {
            self.forget(id);
            return Err(e);
        }
        let killer: Arc<dyn Killer> = self.shared.clone();
        Ok(Served {
            id,
            exited: exited_rx,
            server: killer,
        })
    }

    fn forget(&self, id: u64) {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
}

async fn read_replies(shared: Arc<Shared>) {
    let mut buf = [0u8; 64];
    loop {
        let Ok(mut guard) = shared.sock.readable().await else {
            break;
        };
        let n = match guard.try_io(|sock| {
            // SAFETY: reading into a local buffer of the given size.
            let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        }) {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => n,
            Err(_would_block) => continue,
        };
        let Some((tag, id, value)) = server::parse_reply(&buf[..n]) else {
            continue;
        };
        if tag == REP_EXITED {
            let waiter = shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            if let Some(tx) = waiter {
                let _ = tx.send(value);
            }
        }
    }
    // The server is gone: every waiter hears so (its sender is dropped).
    shared.dead.store(true, Ordering::SeqCst);
    shared
        .pending
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
}

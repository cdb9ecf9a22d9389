//! The sandbox server: one helper process per crewbox process, forking one sandboxed
//! process per request.
//!
//! Executing the big `crewbox` binary costs milliseconds (its loader applies some
//! 200,000 relocations); forking an already running, small, single-threaded copy of it
//! costs tens of microseconds. So crewbox starts itself once as this server, and sends
//! it each policy with the three stdio descriptors over a `SOCK_SEQPACKET` socket (the
//! server's stdin). The server hands each request to an init process in fresh
//! namespaces (see [`super::helper`]); without network it takes one of the [`WARM`]
//! init processes it cloned ahead of need (creating user, mount, pid, IPC and network
//! namespaces costs a millisecond or more, mostly the network one), and clones a
//! replacement once nothing else waits. The command's status goes from its init
//! process straight to crewbox on a pipe crewbox sent along; the server reports only
//! how each init process ended (what crewbox reads when no status came).
//!
//! Lifetimes are chained so that nothing survives crewbox: the server dies with the
//! crewbox thread that started it (a thread that lives exactly as long as the server,
//! see `client`), or when its socket closes; each init process dies with the server;
//! each sandbox's processes die with their init.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::policy::Policy;
use super::sys;

/// Host → server: start the policy in the payload (four fds ride along: stdin,
/// stdout, stderr and the status pipe's write end), in a network namespace of its own.
pub const REQ_SPAWN: u8 = 1;
/// Like [`REQ_SPAWN`], sharing the host's network.
pub const REQ_SPAWN_NETWORK: u8 = 3;
/// Host → server: kill the process of this request and everything it started.
pub const REQ_KILL: u8 = 2;
/// Server → host: the init process of this request ended, with its raw wait status
/// (when it could not even be started: [`super::policy::SETUP_FAILED`] as exit code).
pub const REP_EXITED: u8 = 2;
/// Init processes kept ready for requests without network: one for the next command,
/// one for a second agent's at the same moment.
pub const WARM: usize = 2;
/// Request header: tag and request id.
pub const HEADER: usize = 9;
/// Largest request (header and policy).
pub const MAX_REQUEST: usize = 192 * 1024;

/// Encodes a header.
pub fn header(tag: u8, id: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[0] = tag;
    h[1..].copy_from_slice(&id.to_le_bytes());
    h
}

/// A reply: tag, request id, value.
pub fn reply(tag: u8, id: u64, value: i32) -> [u8; HEADER + 4] {
    let mut r = [0u8; HEADER + 4];
    r[..HEADER].copy_from_slice(&header(tag, id));
    r[HEADER..].copy_from_slice(&value.to_le_bytes());
    r
}

/// Decodes a reply.
pub fn parse_reply(bytes: &[u8]) -> Option<(u8, u64, i32)> {
    if bytes.len() != HEADER + 4 {
        return None;
    }
    let id = u64::from_le_bytes(bytes[1..HEADER].try_into().ok()?);
    let value = i32::from_le_bytes(bytes[HEADER..].try_into().ok()?);
    Some((bytes[0], id, value))
}

/// Sends `bytes` on `sock` with `fds` attached (SCM_RIGHTS).
pub fn send_with_fds(sock: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: an all-zero msghdr is valid; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer has room for one header with `fds` (CMSG_SPACE).
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast(), fds.len());
        }
    }
    // SAFETY: `msg` points at live buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else if n as usize != bytes.len() {
        Err(io::Error::other("short send on the sandbox socket"))
    } else {
        Ok(())
    }
}

/// Receives one message and the descriptors attached to it. `Ok(None)`: the peer is gone.
pub(super) fn recv_with_fds(
    sock: RawFd,
    buf: &mut [u8],
) -> io::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((4 * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: an all-zero msghdr is valid; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` points at live buffers; received fds are close-on-exec.
    let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        return Ok(None);
    }
    let mut fds = Vec::new();
    // SAFETY: walking the control messages the kernel wrote into `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(*data.add(i)));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if msg.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::other(
            "a truncated request on the sandbox socket",
        ));
    }
    Ok(Some((n as usize, fds)))
}

fn send_reply(sock: RawFd, tag: u8, id: u64, value: i32) {
    // The host may be gone; then the server ends at its next read.
    let _ = send_with_fds(sock, &reply(tag, id, value), &[]);
}

/// An init process cloned ahead of need, waiting for its request on `sock`.
struct Warm {
    pid: libc::pid_t,
    sock: OwnedFd,
}

/// What every init process is given by the server.
#[derive(Clone, Copy)]
struct Env {
    /// The socket to crewbox (fd 0), which no init process keeps.
    host: RawFd,
    /// The server's "alive" pipe.
    alive: (RawFd, RawFd),
    /// The server's uid and gid, mapped to themselves inside.
    ids: (libc::uid_t, libc::gid_t),
}

/// Clones one init process into fresh namespaces (no network) to wait for a request.
/// `None` when that fails: requests then start cold, and report why.
fn warm_up(env: Env) -> Option<Warm> {
    let (ours, theirs) = sys::seqpacket_pair().ok()?;
    match sys::clone_into(super::helper::namespace_flags(false)) {
        Ok(sys::Forked::Child) => {
            drop(ours);
            // It may wait long: it keeps nothing of the server's but what it needs, and
            // not the host's socket (the server's end of file must not wait for it).
            if let Ok(null) = std::fs::File::open("/dev/null") {
                let _ = sys::move_fd(null.into(), env.host);
            }
            sys::close_except(&[0, 1, 2, theirs.as_raw_fd(), env.alive.0, env.alive.1]);
            super::helper::warm_main(theirs, env.alive, env.ids)
        }
        Ok(sys::Forked::Parent(pid)) => Some(Warm { pid, sock: ours }),
        Err(_) => None,
    }
}

/// Runs the server on the socket at fd 0 until the host goes. `host` is crewbox's pid.
pub fn serve(host: u32) -> i32 {
    let _ = sys::set_parent_death_signal(libc::SIGKILL);
    if u32::try_from(sys::parent_pid()).ok() != Some(host) {
        return 1;
    }
    // SAFETY: fd 0 is the socket crewbox gave as stdin; it is owned here from now on.
    let sock = unsafe { OwnedFd::from_raw_fd(0) };
    sys::close_from(3);
    let sigchld = match sys::child_signal_fd() {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("crewbox sandbox server: cannot watch child processes: {e}");
            return 1;
        }
    };
    // Its write end stays open here for the server's life: an init process reads end of
    // file from it exactly when the server is gone.
    let (alive_r, alive_w) = match sys::pipe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("crewbox sandbox server: {e}");
            return 1;
        }
    };
    let env = Env {
        host: sock.as_raw_fd(),
        alive: (alive_r.as_raw_fd(), alive_w.as_raw_fd()),
        ids: sys::ids(),
    };
    // Init process pid → request id.
    let mut running: HashMap<libc::pid_t, u64> = HashMap::new();
    let mut warm: Vec<Warm> = Vec::new();
    // Whether cloning one failed: then not again until a request starts cold.
    let mut warm_failed = false;
    let mut buf = vec![0u8; MAX_REQUEST];
    loop {
        let mut polls = [
            libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sigchld.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // A missing warm init process is cloned only when nothing else waits.
        let refill = warm.len() < WARM && !warm_failed;
        let timeout = if refill { 0 } else { -1 };
        // SAFETY: `polls` is a valid array of pollfds.
        let ready = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, timeout) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if ready == 0 {
            match warm_up(env) {
                Some(w) => warm.push(w),
                None => warm_failed = true,
            }
            continue;
        }
        if polls[1].revents != 0 {
            sys::drain_signal_fd(&sigchld);
            while let Some((pid, status)) = sys::reap_any() {
                if let Some(id) = running.remove(&pid) {
                    send_reply(sock.as_raw_fd(), REP_EXITED, id, status);
                } else {
                    warm.retain(|w| w.pid != pid);
                }
            }
        }
        if polls[0].revents == 0 {
            continue;
        }
        let (n, fds) = match recv_with_fds(sock.as_raw_fd(), &mut buf) {
            Ok(Some(got)) => got,
            Ok(None) | Err(_) => break,
        };
        if n < HEADER {
            continue;
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&buf[1..HEADER]);
        let id = u64::from_le_bytes(id);
        match buf[0] {
            tag @ (REQ_SPAWN | REQ_SPAWN_NETWORK) if fds.len() == 4 => {
                let request = &buf[HEADER..n];
                let network = tag == REQ_SPAWN_NETWORK;
                let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
                let mut handed = None;
                while !network && let Some(w) = warm.pop() {
                    if send_with_fds(w.sock.as_raw_fd(), request, &raw).is_ok() {
                        handed = Some(w.pid);
                        break;
                    }
                    // Gone or stuck: it is reaped when it ends.
                    // SAFETY: kill only sends a signal; the pid is not reaped yet.
                    unsafe { libc::kill(w.pid, libc::SIGKILL) };
                }
                if let Some(pid) = handed {
                    running.insert(pid, id);
                    continue;
                }
                warm_failed = false;
                match sys::clone_into(super::helper::namespace_flags(network)) {
                    Ok(sys::Forked::Child) => {
                        drop(sock);
                        let mut fds = fds;
                        let status = fds.pop().unwrap_or_else(|| std::process::exit(1));
                        super::helper::init_main(
                            request,
                            super::helper::InitFds { stdio: fds, status },
                            network,
                            env.alive,
                            env.ids,
                        )
                    }
                    Ok(sys::Forked::Parent(pid)) => {
                        running.insert(pid, id);
                    }
                    Err(e) => {
                        // Reported as the helper would, so the host names the feature.
                        let nonce = Policy::from_request(request)
                            .map(|p| p.nonce)
                            .unwrap_or_default();
                        let line =
                            format!("{nonce} {}\n", super::helper::namespaces_unavailable(&e));
                        // SAFETY: writing a local buffer to the request's stderr.
                        unsafe {
                            libc::write(fds[2].as_raw_fd(), line.as_ptr().cast(), line.len())
                        };
                        send_reply(
                            sock.as_raw_fd(),
                            REP_EXITED,
                            id,
                            super::policy::SETUP_FAILED << 8,
                        );
                    }
                }
            }
            REQ_KILL => {
                // Not reaped yet (that happens only here), so the pid cannot be reused.
                if let Some((&pid, _)) = running.iter().find(|(_, r)| **r == id) {
                    // SAFETY: kill only sends a signal.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            _ => {}
        }
    }
    // The host is gone: so is everything started for it.
    for pid in running.keys().copied().chain(warm.iter().map(|w| w.pid)) {
        // SAFETY: kill only sends a signal.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    0
}

impl Policy {
    /// Decodes a policy sent to the server.
    pub fn from_request(mut bytes: &[u8]) -> io::Result<Self> {
        Policy::decode(&mut bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_round_trip_and_garbage_is_ignored() {
        let r = reply(REP_EXITED, 0x0102_0304_0506_0708, -125);
        assert_eq!(
            parse_reply(&r),
            Some((REP_EXITED, 0x0102_0304_0506_0708, -125))
        );
        assert_eq!(parse_reply(&r[..12]), None);
        assert_eq!(header(REQ_KILL, 7)[..2], [REQ_KILL, 7]);
    }

    #[test]
    fn descriptors_travel_with_a_message() {
        use std::io::{Read, Write};
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0);
        // SAFETY: both were just created.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let (r, w) = sys::pipe().unwrap();
        send_with_fds(a.as_raw_fd(), b"hello", &[w.as_raw_fd()]).unwrap();
        drop(w);
        let mut buf = [0u8; 16];
        let (n, got) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap().unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(got.len(), 1);
        let mut w = std::fs::File::from(got.into_iter().next().unwrap());
        w.write_all(b"through").unwrap();
        drop(w);
        let mut text = String::new();
        let mut r = r;
        r.read_to_string(&mut text).unwrap();
        assert_eq!(text, "through");
        drop(a);
        assert!(
            recv_with_fds(b.as_raw_fd(), &mut buf).unwrap().is_none(),
            "end of file"
        );
    }
}

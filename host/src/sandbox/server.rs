//! The sandbox server: one helper process per crewbox process, forking one sandboxed
//! process per request.
//!
//! Executing the big `crewbox` binary costs milliseconds (its loader applies some
//! 200,000 relocations); forking an already running, small, single-threaded copy of it
//! costs tens of microseconds. So crewbox starts itself once as this server, and sends
//! it each policy with the three stdio descriptors over a `SOCK_SEQPACKET` socket (the
//! server's stdin). The server clones an init process straight into new namespaces
//! (see [`super::helper`]), and reports its pid and, later, the command's wait status.
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

/// Host → server: start the policy in the payload (the three fds ride along), in a
/// network namespace of its own.
pub const REQ_SPAWN: u8 = 1;
/// Like [`REQ_SPAWN`], sharing the host's network.
pub const REQ_SPAWN_NETWORK: u8 = 3;
/// Host → server: kill the process of this request and everything it started.
pub const REQ_KILL: u8 = 2;
/// Server → host: started, with its pid.
pub const REP_STARTED: u8 = 1;
/// Server → host: ended, with its raw wait status.
pub const REP_EXITED: u8 = 2;
/// Server → host: could not fork, with the errno.
pub const REP_FAILED: u8 = 3;
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
fn recv_with_fds(sock: RawFd, buf: &mut [u8]) -> io::Result<Option<(usize, Vec<OwnedFd>)>> {
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

/// One started request.
struct Running {
    id: u64,
    /// Where its init process writes the command's status; `None` once read.
    status: Option<std::fs::File>,
    /// Whether the host has its status already.
    reported: bool,
}

/// Reads the 4-byte status an init process wrote, if it did.
fn read_status(pipe: &mut std::fs::File) -> Option<i32> {
    use std::io::Read;
    let mut raw = [0u8; 4];
    pipe.read_exact(&mut raw)
        .ok()
        .map(|()| i32::from_le_bytes(raw))
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
    let (uid, gid) = sys::ids();
    let mut running: HashMap<libc::pid_t, Running> = HashMap::new();
    let mut buf = vec![0u8; MAX_REQUEST];
    loop {
        let mut polls = vec![
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
        let watched: Vec<libc::pid_t> = running
            .iter()
            .filter_map(|(pid, r)| {
                r.status.as_ref().map(|f| {
                    polls.push(libc::pollfd {
                        fd: f.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    });
                    *pid
                })
            })
            .collect();
        // SAFETY: `polls` is a valid array of pollfds; no timeout.
        if unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, -1) } < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        // A command's status is reported as soon as its init writes it: the init's own
        // exit (tearing down the namespaces) need not be waited for. By then everything
        // the command started is being killed with the namespace.
        for (poll, pid) in polls[2..].iter().zip(&watched) {
            if poll.revents == 0 {
                continue;
            }
            if let Some(r) = running.get_mut(pid)
                && let Some(mut pipe) = r.status.take()
                && let Some(status) = read_status(&mut pipe)
            {
                send_reply(sock.as_raw_fd(), REP_EXITED, r.id, status);
                r.reported = true;
            }
        }
        if polls[1].revents != 0 {
            sys::drain_signal_fd(&sigchld);
            while let Some((pid, status)) = sys::reap_any() {
                let Some(mut r) = running.remove(&pid) else {
                    continue;
                };
                let status = r.status.as_mut().and_then(read_status).unwrap_or(status);
                if !r.reported {
                    send_reply(sock.as_raw_fd(), REP_EXITED, r.id, status);
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
            tag @ (REQ_SPAWN | REQ_SPAWN_NETWORK) if fds.len() == 3 => {
                let (status_r, status_w) = match sys::pipe() {
                    Ok(p) => p,
                    Err(e) => {
                        send_reply(
                            sock.as_raw_fd(),
                            REP_FAILED,
                            id,
                            e.raw_os_error().unwrap_or(0),
                        );
                        continue;
                    }
                };
                let flags = super::helper::namespace_flags(tag == REQ_SPAWN_NETWORK);
                match sys::clone_into(flags) {
                    Ok(sys::Forked::Child) => {
                        drop(sock);
                        super::helper::init_main(
                            &buf[HEADER..n],
                            super::helper::InitFds {
                                stdio: fds,
                                status: status_w.into(),
                                alive: (alive_r.as_raw_fd(), alive_w.as_raw_fd()),
                            },
                            uid,
                            gid,
                        )
                    }
                    Ok(sys::Forked::Parent(pid)) => {
                        drop(fds);
                        drop(status_w);
                        running.insert(
                            pid,
                            Running {
                                id,
                                status: Some(status_r),
                                reported: false,
                            },
                        );
                        send_reply(sock.as_raw_fd(), REP_STARTED, id, pid);
                    }
                    Err(e) => {
                        // Reported as the helper would, so the host names the feature.
                        let nonce = Policy::from_request(&buf[HEADER..n])
                            .map(|p| p.nonce)
                            .unwrap_or_default();
                        let line =
                            format!("{nonce} {}\n", super::helper::namespaces_unavailable(&e));
                        if let Some(err) = fds.get(2) {
                            // SAFETY: writing a local buffer to the request's stderr.
                            unsafe {
                                libc::write(err.as_raw_fd(), line.as_ptr().cast(), line.len())
                            };
                        }
                        drop(fds);
                        send_reply(sock.as_raw_fd(), REP_STARTED, id, 0);
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
                if let Some((&pid, _)) = running.iter().find(|(_, r)| r.id == id) {
                    // SAFETY: kill only sends a signal.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            _ => {}
        }
    }
    // The host is gone: so is everything started for it.
    for &pid in running.keys() {
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

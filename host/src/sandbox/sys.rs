//! Thin wrappers over the Linux system calls the sandbox helper makes. Each returns an
//! `io::Result`; what a failure means is decided by the caller, which knows the step.
//!
//! Only the helper process calls these: it is single-threaded (a fresh exec of this
//! binary), so forking and allocating afterwards is safe.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))
}

/// Asks the kernel to send `signal` to this process when its parent thread exits.
pub fn set_parent_death_signal(signal: libc::c_int) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes an integer argument.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) })
}

/// The parent's pid (0 when the parent lives outside our pid namespace).
pub fn parent_pid() -> libc::pid_t {
    // SAFETY: getppid cannot fail.
    unsafe { libc::getppid() }
}

/// Which side of a fork this is.
pub enum Forked {
    /// In the new child.
    Child,
    /// In the parent, with the child's pid.
    Parent(libc::pid_t),
}

/// `fork(2)`; see the module doc for why it is safe here.
pub fn fork() -> io::Result<Forked> {
    // SAFETY: the helper is single-threaded, so the child's copy of memory is consistent.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid)),
    }
}

/// Waits for `pid` (-1: any child); returns the pid and its raw wait status.
pub fn wait(pid: libc::pid_t) -> io::Result<(libc::pid_t, libc::c_int)> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out pointer.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc >= 0 {
            return Ok((rc, status));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// A pipe whose ends close on exec.
pub fn pipe() -> io::Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors were just created and are owned by nothing else.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// Whether the write end of the pipe `read_end` reads from is still open somewhere (a
/// non-blocking poll sees no end of file). Used to learn that a parent is still alive.
pub fn fd_pipe_writer_alive(read_end: RawFd) -> bool {
    let mut poll = libc::pollfd {
        fd: read_end,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    let rc = unsafe { libc::poll(&mut poll, 1, 0) };
    rc == 0
}

/// Closes one descriptor by number.
pub fn close_fd(fd: RawFd) {
    // SAFETY: closing a descriptor number this process no longer uses.
    unsafe { libc::close(fd) };
}

/// Points stdin, stdout and stderr at `/dev/null` (a process that must not hold a
/// command's pipes open).
pub fn close_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        use std::os::fd::AsRawFd;
        for fd in 0..3 {
            // SAFETY: dup2 onto the stdio numbers; `null` is closed when dropped.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    } else {
        for fd in 0..3 {
            close_fd(fd);
        }
    }
}

/// `clone(2)` with `flags` (namespaces) and fork semantics: the child continues here on
/// a copy of the stack. Only for single-threaded processes.
pub fn clone_into(flags: libc::c_int) -> io::Result<Forked> {
    // SAFETY: without CLONE_VM and with a null stack this is fork with namespace flags;
    // the caller is single-threaded, so the child's copy of memory is consistent.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    match rc {
        -1 => Err(io::Error::last_os_error()),
        0 => Ok(Forked::Child),
        pid => Ok(Forked::Parent(pid as libc::pid_t)),
    }
}

/// Closes every descriptor from `first` up (nothing of the host's may reach the command).
pub fn close_from(first: libc::c_int) {
    close_except(&(0..first).collect::<Vec<_>>());
}

/// Closes every descriptor but those in `keep` (an init process waiting for its
/// request holds nothing else of the server's). `close_range`, or where the kernel
/// lacks it (before Linux 5.9) one `close` per descriptor `/proc/self/fd` lists.
pub fn close_except(keep: &[RawFd]) {
    let mut keep: Vec<libc::c_uint> = keep
        .iter()
        .filter_map(|&fd| libc::c_uint::try_from(fd).ok())
        .collect();
    keep.sort_unstable();
    keep.dedup();
    // The ranges between the kept descriptors, the last one open-ended.
    let mut ranges = Vec::with_capacity(keep.len() + 1);
    let mut first: libc::c_uint = 0;
    for &fd in &keep {
        if fd > first {
            ranges.push((first, fd - 1));
        }
        first = fd + 1;
    }
    ranges.push((first, libc::c_uint::MAX));
    // SAFETY: close_range only closes descriptors.
    if ranges
        .iter()
        .all(|&(from, to)| unsafe { libc::close_range(from, to, 0) } == 0)
    {
        return;
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        let fds: Vec<libc::c_uint> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|fd| keep.binary_search(fd).is_err())
            .collect();
        for fd in fds {
            // SAFETY: closing a descriptor number; the read_dir one is already gone.
            unsafe { libc::close(fd as libc::c_int) };
        }
    }
}

/// A connected pair of `SOCK_SEQPACKET` Unix sockets (close-on-exec).
pub fn seqpacket_pair() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: both descriptors were just created and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `mount(2)` with optional source, type and data.
pub fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(cstr).transpose()?;
    let target = cstr(target)?;
    let text = |s: &str| {
        CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))
    };
    let fstype = fstype.map(text).transpose()?;
    let data = data.map(text).transpose()?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    check(unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    })
}

/// Makes the mount at `path` read-only (and everything beneath it when `recursive`),
/// keeping its other flags as they are.
pub fn make_read_only(path: &Path, recursive: bool) -> io::Result<()> {
    let path = cstr(path)?;
    let attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: `path` is NUL-terminated and `attr` is a valid mount_attr of the given size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    };
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Makes `root` (a mount point) the root directory and detaches the old root.
pub fn pivot_root(root: &Path) -> io::Result<()> {
    std::env::set_current_dir(root)?;
    let dot = c".";
    // SAFETY: both arguments are the NUL-terminated string ".". Stacking the old root
    // under the new one ("." twice) needs no directory for it.
    let rc = unsafe { libc::syscall(libc::SYS_pivot_root, dot.as_ptr(), dot.as_ptr()) };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: "." is NUL-terminated; MNT_DETACH lazily unmounts the old root stacked there.
    check(unsafe { libc::umount2(dot.as_ptr(), libc::MNT_DETACH) })?;
    std::env::set_current_dir("/")
}

/// Brings the loopback interface of the current network namespace up.
pub fn loopback_up() -> io::Result<()> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: socket takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just created and is owned here.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero ifreq is valid; the name is set below.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq for SIOCGIFFLAGS/SIOCSIFFLAGS on this socket.
    unsafe {
        check(libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req))?;
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        check(libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req))
    }
}

/// `setrlimit(2)`.
pub fn set_limit(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `limit` is a valid rlimit.
    check(unsafe { libc::setrlimit(resource, &limit) })
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const CAP_VERSION_3: u32 = 0x2008_0522;

/// Drops every capability for good: ambient, bounding, effective, permitted and
/// inheritable sets are emptied, so not even an exec as uid 0 gets any back.
pub fn drop_capabilities() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    check(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    })?;
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments only; EINVAL marks the end of known caps.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } == -1 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINVAL) {
                break;
            }
            return Err(err);
        }
    }
    let header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: a version-3 header and two data structs, as capset(2) expects.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) };
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The effective uid and gid.
pub fn ids() -> (libc::uid_t, libc::gid_t) {
    // SAFETY: geteuid/getegid cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// The Landlock ABI version of the running kernel (0: none or disabled).
pub fn landlock_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute and the VERSION flag the call only returns a number.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(v).unwrap_or(0).max(0)
}

/// Blocks SIGCHLD and returns a signalfd that becomes readable when a child ends.
pub fn child_signal_fd() -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: an empty sigset is filled in by sigemptyset/sigaddset; no pointers kept.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(std::os::fd::OwnedFd::from_raw_fd(fd))
    }
}

/// Reads whatever is pending on a (non-blocking) signalfd.
pub fn drain_signal_fd(fd: &std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 128 * 8];
    // SAFETY: reading into a local buffer of the given size.
    while unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
}

/// Reaps one ended child without blocking: its pid and raw wait status.
pub fn reap_any() -> Option<(libc::pid_t, libc::c_int)> {
    let mut status = 0;
    // SAFETY: `status` is a valid out pointer.
    let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
    (pid > 0).then_some((pid, status))
}

/// Unblocks every signal (a forked child of the server inherits SIGCHLD blocked).
pub fn unblock_signals() {
    // SAFETY: an empty set, set as the mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
    }
}

/// Starts a new session led by the calling process: it loses its controlling terminal,
/// so nothing it starts can open `/dev/tty` or push input into the user's terminal
/// (`TIOCSTI`).
pub fn new_session() -> io::Result<()> {
    // SAFETY: setsid takes no arguments and only changes this process's session.
    check(unsafe { libc::setsid() })
}

/// Moves `fd` to descriptor number `to` (closing what was there).
pub fn move_fd(fd: std::os::fd::OwnedFd, to: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    if fd.as_raw_fd() == to {
        std::mem::forget(fd);
        return Ok(());
    }
    // SAFETY: dup2 onto a plain descriptor number; `fd` is closed when dropped.
    check(unsafe { libc::dup2(fd.as_raw_fd(), to) })
}

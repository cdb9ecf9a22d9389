//! Facts about other processes.

/// Whether a process with this pid exists (it may belong to another user).
#[cfg(unix)]
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 sends nothing; it only checks that the pid exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Whether a process with this pid exists; without a portable check, assume it does so
/// nothing is ever removed on the pid's account alone.
#[cfg(not(unix))]
pub fn pid_alive(_pid: u32) -> bool {
    true
}

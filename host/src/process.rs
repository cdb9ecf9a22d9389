//! Facts about other processes.

/// Whether a process with this pid exists (it may belong to another user).
#[cfg(unix)]
pub fn pid_alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    // Signal 0 sends nothing; it only checks that the pid exists (EPERM: it does, as
    // another user's).
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    }
}

/// Whether a process with this pid exists; without a portable check, assume it does so
/// nothing is ever removed on the pid's account alone.
#[cfg(not(unix))]
pub fn pid_alive(_pid: u32) -> bool {
    true
}

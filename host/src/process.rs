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

/// Kills this process with SIGKILL (the `CREWBOX_FAULT_AFTER_WRITES` test hook): no
/// destructor, flush or exit handler runs, exactly as under `kill -9`.
#[cfg(unix)]
pub(crate) fn kill_self() -> ! {
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    std::process::abort()
}

/// Ends this process at once (the test hook), where SIGKILL does not exist.
#[cfg(not(unix))]
pub(crate) fn kill_self() -> ! {
    std::process::abort()
}

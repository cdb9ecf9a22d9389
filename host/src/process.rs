//! Facts about other processes.

/// Whether a process with this pid exists and has not ended (it may belong to another
/// user). A zombie — a process that ended and its parent has not reaped yet, such as a
/// `crewbox` killed with SIGKILL under a shell or supervisor that has not waited for it
/// — is not alive: it drives nothing, holds no file, and would otherwise keep its run
/// from being resumed until its parent reaps it.
#[cfg(unix)]
pub fn pid_alive(pid: u32) -> bool {
    let Some(raw) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    // Signal 0 sends nothing; it only checks that the pid exists (EPERM: it does, as
    // another user's).
    let exists = match rustix::process::test_kill_process(raw) {
        Ok(()) => true,
        Err(e) => e == rustix::io::Errno::PERM,
    };
    exists && !ended(pid)
}

/// Who process `pid` is, beyond its number, which the kernel hands out again once it
/// ended (and from 1 after a reboot): the boot it runs in and its start time in that
/// boot, as `/proc` tells them. `None` where it cannot tell.
#[cfg(unix)]
pub fn identity(pid: u32) -> Option<String> {
    static BOOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let boot = BOOT
        .get_or_init(|| {
            std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()
                .map(|b| b.trim().to_owned())
        })
        .as_deref()?;
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let close = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(stat.get(close + 2..)?).ok()?;
    // The fields after the command name start at field 3 (the state); the start time
    // is field 22.
    let start = rest.split(' ').nth(22 - 3)?;
    Some(format!("{boot}:{start}"))
}

/// Without `/proc`, nothing more than the number is known.
#[cfg(not(unix))]
pub fn identity(_pid: u32) -> Option<String> {
    None
}

/// Whether process `pid`, recorded as `recorded` ([`identity`]) when it took on some
/// work, still runs: it is alive and, where both identities are known, the same
/// process — not another one that got its number after it died (after a reboot, a
/// stored pid is often some other process's).
pub fn still_running(pid: u32, recorded: Option<&str>) -> bool {
    pid_alive(pid)
        && match (recorded, identity(pid)) {
            (Some(then), Some(now)) => then == now,
            _ => true,
        }
}

/// Whether `/proc` says process `pid` has ended (state `Z` or `X`); `false` when it
/// cannot tell.
#[cfg(unix)]
fn ended(pid: u32) -> bool {
    let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) S …`: the command name may hold anything, `)` too; the state follows
    // the last `)`.
    let Some(close) = stat.iter().rposition(|b| *b == b')') else {
        return false;
    };
    matches!(stat.get(close + 2), Some(b'Z' | b'X'))
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Ended, not reaped: a zombie until `wait`.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !ended(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "never became a zombie"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!pid_alive(pid));
        child.wait().unwrap();
        assert!(!pid_alive(pid));
        assert!(pid_alive(std::process::id()));
    }

    #[test]
    fn a_process_is_told_from_another_with_its_number() {
        let me = std::process::id();
        let mine = identity(me).unwrap();
        assert!(still_running(me, Some(&mine)));
        assert!(still_running(me, None));
        // Recorded for a process that started at another time, or in another boot.
        assert!(!still_running(me, Some("another-boot:1")));
        let (boot, start) = mine.rsplit_once(':').unwrap();
        let later = format!("{boot}:{}", start.parse::<u64>().unwrap() + 1);
        assert!(!still_running(me, Some(&later)));
    }
}

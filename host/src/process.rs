//! Facts about other processes.

/// Whether a process with this pid exists and has not ended (it may belong to another
/// user). A zombie — a process that ended and its parent has not reaped yet, such as a
/// `crewbox` killed with SIGKILL under a shell or supervisor that has not waited for it
/// — is not alive: it drives nothing, holds no file, and would otherwise keep its run
/// from being resumed until its parent reaps it.
#[cfg(unix)]
pub fn pid_alive(pid: u32) -> bool {
    still_running(pid, None)
}

/// Whether process `pid`, recorded as `recorded` ([`identity`]) when it took on some
/// work, still runs: it is alive (see [`pid_alive`]) and, where both identities are
/// known, the same process — not another one that got its number after it died (after
/// a reboot, a stored pid is often some other process's).
#[cfg(unix)]
pub fn still_running(pid: u32, recorded: Option<&str>) -> bool {
    let Some(raw) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    // Signal 0 sends nothing; it only checks that the pid exists (EPERM: it does, as
    // another user's).
    match rustix::process::test_kill_process(raw) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::PERM => {}
        Err(_) => return false,
    }
    // Without `/proc` to say more, the number is all there is.
    let Some(stat) = Stat::read(pid) else {
        return true;
    };
    !stat.ended()
        && match (recorded, stat.identity()) {
            (Some(then), Some(now)) => then == now,
            _ => true,
        }
}

/// Who process `pid` is, beyond its number, which the kernel hands out again once it
/// ended (and from 1 after a reboot): the boot it runs in and its start time in that
/// boot, as `/proc` tells them. `None` where it cannot tell.
#[cfg(unix)]
pub fn identity(pid: u32) -> Option<String> {
    Stat::read(pid)?.identity()
}

/// Without `/proc`, nothing more than the number is known.
#[cfg(not(unix))]
pub fn identity(_pid: u32) -> Option<String> {
    None
}

/// What `/proc/<pid>/stat` says of a process, read once.
#[cfg(unix)]
struct Stat {
    /// Its state (`R`, `S`, `Z`, …).
    state: u8,
    /// Its start time in clock ticks since boot (field 22).
    start: String,
}

#[cfg(unix)]
impl Stat {
    fn read(pid: u32) -> Option<Self> {
        let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) S …`: the command name may hold anything, `)` too; the fields
        // after the last `)` start at field 3 (the state).
        let close = stat.iter().rposition(|b| *b == b')')?;
        let rest = std::str::from_utf8(stat.get(close + 2..)?).ok()?;
        let mut fields = rest.split(' ');
        let state = *fields.next()?.as_bytes().first()?;
        let start = fields.nth(22 - 4)?.to_owned();
        Some(Self { state, start })
    }

    /// It ended (a zombie, or dead).
    fn ended(&self) -> bool {
        matches!(self.state, b'Z' | b'X')
    }

    /// The boot and its start time ([`identity`]).
    fn identity(&self) -> Option<String> {
        static BOOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let boot = BOOT
            .get_or_init(|| {
                std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                    .ok()
                    .map(|b| b.trim().to_owned())
            })
            .as_deref()?;
        Some(format!("{boot}:{}", self.start))
    }
}

/// Whether a process with this pid exists; without a portable check, assume it does so
/// nothing is ever removed on the pid's account alone.
#[cfg(not(unix))]
pub fn pid_alive(_pid: u32) -> bool {
    true
}

/// As [`pid_alive`]: without `/proc`, nothing more than the number is known.
#[cfg(not(unix))]
pub fn still_running(pid: u32, _recorded: Option<&str>) -> bool {
    pid_alive(pid)
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
        while !Stat::read(pid).is_some_and(|s| s.ended()) {
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

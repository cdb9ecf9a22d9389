//! Finding processes on the host by a marker in their command line, so a test can tell
//! whether something an agent started is still alive (pids inside a sandbox are the
//! sandbox's own and mean nothing out here).

use std::time::{Duration, Instant};

/// A marker no other process carries.
pub fn marker(what: &str) -> String {
    format!("crewbox-mark-{what}-{:012x}", fastrand::u64(..) >> 16)
}

/// A shell snippet starting `sh` in the background, in a session of its own (out of
/// the command's process group, as a daemon would), with `marker` as its `$0`: it
/// touches `ready_file`, then sleeps `secs` (`; :` keeps shells from exec'ing `sleep`).
pub fn background(marker: &str, ready_file: &str, secs: u32) -> String {
    format!(
        "setsid sh -c 'touch {ready_file}; sleep {secs}; :' {marker} & while [ ! -e {ready_file} ]; do sleep 0.01; done"
    )
}

/// Live (not zombie) processes whose command line contains `marker`.
pub fn marked(marker: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('Z')))
                .unwrap_or(true);
            !zombie
                && cmdline
                    .split(|&b| b == 0)
                    .any(|arg| arg == marker.as_bytes())
        })
        .collect()
}

/// How many processes the host has.
pub fn count() -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
                .count()
        })
        .unwrap_or(0)
}

/// Polls until `ok()` holds or `within` passes.
pub fn wait_for(within: Duration, ok: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ok()
}

/// Whether every process carrying `marker` is gone within 5 s.
pub fn gone(marker: &str) -> bool {
    wait_for(Duration::from_secs(5), || marked(marker).is_empty())
}

/// Kills whatever carries `marker` (cleanup after a failed assertion).
pub fn kill(marker: &str) {
    for pid in marked(marker) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

/// A live process that is not crewbox (`sleep 60`), killed when dropped: what a dead
/// driver's pid may belong to once the kernel hands it out again.
pub struct StandIn(std::process::Child);

impl StandIn {
    /// Starts one and runs `sql` (`{pid}`: its pid) on the store of repository `dir`,
    /// giving it what the dead driver held.
    pub fn taking_over(dir: &std::path::Path, sql: &str) -> Self {
        let child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let store = super::repo::state_dir(dir).join("crewbox.db");
        rusqlite::Connection::open(store)
            .unwrap()
            .execute_batch(&sql.replace("{pid}", &child.id().to_string()))
            .unwrap();
        Self(child)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

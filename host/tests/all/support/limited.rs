//! Memory-heavy tests run in a child process under `RLIMIT_AS`, so a regression that
//! makes the host allocate without bound fails the test instead of taking the machine.
//!
//! ```ignore
//! #[test]
//! fn a_memory_heavy_test() {
//!     if !limited::in_child("module::a_memory_heavy_test", 4 << 30) { return; }
//!     // … the body, run only in the child …
//! }
//! ```

use std::os::unix::process::CommandExt;

/// Names the test a child process was started for.
const CHILD_FLAG: &str = "CREWBOX_TEST_LIMITED_CHILD";

/// In the parent: re-runs exactly `test` (its full path, e.g. `plugin_limits::x`) in a
/// child whose address space is capped at `address_space` bytes, asserts that it passed,
/// and returns `false`. In that child: returns `true`, and the caller runs the body.
pub fn in_child(test: &str, address_space: u64) -> bool {
    if std::env::var(CHILD_FLAG).as_deref() == Ok(test) {
        return true;
    }
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env(CHILD_FLAG, test);
    // SAFETY: only async-signal-safe calls (setrlimit) run between fork and exec.
    unsafe {
        child.pre_exec(move || {
            let limit = rustix::process::Rlimit {
                current: Some(address_space),
                maximum: Some(address_space),
            };
            rustix::process::setrlimit(rustix::process::Resource::As, limit)
                .map_err(std::io::Error::from)
        });
    }
    let out = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{test} failed under a {} MiB address-space limit ({}):\n{stdout}\n{stderr}",
        address_space >> 20,
        out.status
    );
    assert!(
        stdout.contains("1 passed"),
        "{test} did not run in the child:\n{stdout}\n{stderr}"
    );
    false
}

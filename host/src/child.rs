//! Children that run this very program in a limited role: the sandbox helper
//! (`sandbox/`) and the plugin compiler (`plugin/compile.rs`). One place finds our own
//! executable, marks the role on the command line (what `main` checks first), clears
//! the environment, sets resource limits and starts the child; what each role does with
//! the child's stdio stays with its owner.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which limited child this process is, named by its first argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The sandbox server (`sandbox::helper::run_if_helper`).
    SandboxHelper,
    /// The plugin compiler (`plugin::compiler_main`).
    PluginCompiler,
}

impl Role {
    /// The first argument that starts this program in this role.
    pub(crate) const fn arg(self) -> &'static str {
        match self {
            Self::SandboxHelper => "__crewbox-sandbox",
            Self::PluginCompiler => "__crewbox-compile-plugin",
        }
    }

    /// Whether `main` checks for this role (set by [`Role::enter`]).
    fn entry(self) -> &'static AtomicBool {
        static HELPER: AtomicBool = AtomicBool::new(false);
        static COMPILER: AtomicBool = AtomicBool::new(false);
        match self {
            Self::SandboxHelper => &HELPER,
            Self::PluginCompiler => &COMPILER,
        }
    }

    /// Records that this program's `main` checks for this role, so our own executable
    /// may be started in it; then, when this process was started in this role, returns
    /// the arguments after the marker.
    pub(crate) fn enter(self) -> Option<impl Iterator<Item = OsString>> {
        self.entry().store(true, Ordering::Relaxed);
        let mut args = std::env::args_os().skip(1);
        (args.next().as_deref() == Some(std::ffi::OsStr::new(self.arg()))).then_some(args)
    }

    /// Whether [`Role::enter`] was called in this process: a program embedding the
    /// library would otherwise be re-run with arguments it does not understand.
    pub(crate) fn entry_installed(self) -> bool {
        self.entry().load(Ordering::Relaxed)
    }
}

/// This program. `/proc/self/exe` is the running binary even if the file was replaced
/// by an upgrade meanwhile, so the child always matches this process; without `/proc`,
/// the path it was started from.
pub(crate) fn own_exe() -> std::io::Result<PathBuf> {
    let proc_exe = Path::new("/proc/self/exe");
    if proc_exe.exists() {
        return Ok(proc_exe.to_owned());
    }
    std::env::current_exe()
}

/// Resource limits set in the child before it runs (soft and hard alike).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// `RLIMIT_DATA`, bytes.
    pub(crate) data_bytes: Option<u64>,
    /// `RLIMIT_CPU`, seconds.
    pub(crate) cpu_secs: Option<u64>,
    /// `RLIMIT_CORE` 0: no core dump.
    pub(crate) no_core: bool,
}

/// `program` (normally [`own_exe`]) in `role`: the marker first, then `args`, with none
/// of this process's environment (keys) and under `limits`. The caller sets stdio,
/// the working directory and `argv[0]`, and spawns.
pub(crate) fn command<I, S>(program: &Path, role: Role, args: I, limits: Limits) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let mut command = Command::new(program);
    command.arg(role.arg()).args(args).env_clear();
    if limits != Limits::default() {
        set_limits(&mut command, limits);
    }
    command
}

#[cfg(unix)]
fn set_limits(command: &mut Command, limits: Limits) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls (setrlimit) run between fork and exec.
    unsafe {
        command.pre_exec(move || {
            use rustix::process::{Resource, Rlimit, setrlimit};
            let cap = |n: u64| Rlimit {
                current: Some(n),
                maximum: Some(n),
            };
            if let Some(n) = limits.data_bytes {
                setrlimit(Resource::Data, cap(n))?;
            }
            if let Some(n) = limits.cpu_secs {
                setrlimit(Resource::Cpu, cap(n))?;
            }
            if limits.no_core {
                setrlimit(Resource::Core, cap(0))?;
            }
            Ok(())
        });
    }
}

#[cfg(not(unix))]
fn set_limits(_command: &mut Command, _limits: Limits) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_exe_names_an_existing_file() {
        assert!(own_exe().unwrap().exists());
    }
}

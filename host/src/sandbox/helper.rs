//! The helper: this same binary, started again with [`HELPER_ARG`], turns a [`Policy`]
//! into a sandboxed process. `main` calls [`run_if_helper`] before anything else, so the
//! helper is a fresh single-threaded process (no async runtime, no locks held by other
//! threads) and may fork and allocate freely.
//!
//! Three processes, each with one job:
//! 1. the **helper** (its parent is the crewbox thread that started it) asks to be
//!    killed when that thread goes, reads the policy from stdin, creates the user,
//!    mount, pid, IPC and (without network) network namespaces, maps its own uid/gid,
//!    forks the init process, waits for it and ends the way the command ended;
//! 2. the **init** process (pid 1 of the new pid namespace; also killed with its
//!    parent) builds the view on a fresh root and pivots into it, mounts `/proc`,
//!    bounds the number of processes, brings up a private loopback, forks the command
//!    and reaps. When it exits, the kernel kills every process left in the namespace;
//!    nothing started inside can outlive the command, its agent or crewbox;
//! 3. the **command** sets resource limits, restricts itself with Landlock, drops every
//!    capability and execs.
//!
//! A failure at any step is reported as one line `<nonce> <stage>: <message>` on
//! stderr and exit code [`SETUP_FAILED`]; the host recognises the line by the nonce,
//! which the command never sees.

use std::ffi::OsStr;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub use super::policy::{HELPER_ARG, SETUP_FAILED, Stage};
use super::policy::{Mount, Policy, Program};
use super::{rules, sys};

/// The kernel's smallest `pid_max`.
const PID_MAX_MIN: u64 = 301;

static ENTRY_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Runs the helper and exits when this process was started as one; otherwise records
/// that this binary can serve as its own helper and returns. Call it first in `main`.
pub fn run_if_helper() {
    ENTRY_INSTALLED.store(true, Ordering::Relaxed);
    if std::env::args_os().nth(1).as_deref() == Some(OsStr::new(HELPER_ARG)) {
        std::process::exit(helper_main());
    }
}

/// Whether [`run_if_helper`] was called in this process (so `/proc/self/exe` is a helper).
pub fn entry_installed() -> bool {
    ENTRY_INSTALLED.load(Ordering::Relaxed)
}

/// A step that failed, with what a person needs to know.
#[derive(Debug)]
pub struct SetupError {
    stage: Stage,
    message: String,
    code: i32,
}

impl SetupError {
    /// A failure at `stage`.
    pub(crate) fn at_stage(stage: Stage, message: impl Into<String>) -> Self {
        Self {
            stage,
            message: message.into(),
            code: SETUP_FAILED,
        }
    }
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.stage.as_str(), self.message)
    }
}

/// Attaches a stage and a description to an I/O error.
trait Context<T> {
    fn at(self, stage: Stage, what: impl FnOnce() -> String) -> Result<T, SetupError>;
}

impl<T> Context<T> for io::Result<T> {
    fn at(self, stage: Stage, what: impl FnOnce() -> String) -> Result<T, SetupError> {
        self.map_err(|e| SetupError::at_stage(stage, format!("{}: {e}", what())))
    }
}

/// How the command ended, to be reproduced by the helper.
enum Ending {
    Code(i32),
    Signal(i32),
}

fn ending(status: libc::c_int) -> Ending {
    if libc::WIFSIGNALED(status) {
        Ending::Signal(libc::WTERMSIG(status))
    } else {
        Ending::Code(libc::WEXITSTATUS(status))
    }
}

fn report(nonce: &str, err: &SetupError) {
    let line = err.to_string().replace('\n', " ");
    let _ = writeln!(io::stderr(), "{nonce} {line}");
}

fn helper_main() -> i32 {
    // First, so that a crewbox dying from here on takes this process with it.
    let _ = sys::set_parent_death_signal(libc::SIGKILL);
    // Unbuffered: whatever follows the policy is the command's stdin.
    // SAFETY: fd 0 is this process's stdin; ManuallyDrop keeps it open.
    let mut stdin = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
    let policy = match Policy::decode(&mut *stdin) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(io::stderr(), "crewbox sandbox helper: {e}");
            return SETUP_FAILED;
        }
    };
    if u32::try_from(sys::parent_pid()).ok() != Some(policy.parent_pid) {
        // crewbox went away before the death signal was armed.
        return SETUP_FAILED;
    }
    sys::close_from_3();
    match outer(&policy) {
        Ok(Ending::Code(code)) => code,
        Ok(Ending::Signal(signal)) => sys::die_by_signal(signal),
        Err(e) => {
            report(&policy.nonce, &e);
            e.code
        }
    }
}

fn namespaces_unavailable(e: io::Error) -> SetupError {
    SetupError::at_stage(
        Stage::Namespaces,
        format!(
            "cannot create user namespaces ({e}); they may be disabled \
             (sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, \
             kernel.apparmor_restrict_unprivileged_userns) or refused inside this container"
        ),
    )
}

fn outer(policy: &Policy) -> Result<Ending, SetupError> {
    let (uid, gid) = sys::ids();
    let mut flags =
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    if !policy.network {
        flags |= libc::CLONE_NEWNET;
    }
    sys::unshare(flags).map_err(namespaces_unavailable)?;
    // The same ids inside as outside: files keep their owners, and the kernel still
    // counts this user's processes against its limits.
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(e).at(Stage::Namespaces, || "writing /proc/self/setgroups".into());
        }
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))
        .at(Stage::Namespaces, || "writing the uid map".into())?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
        .at(Stage::Namespaces, || "writing the gid map".into())?;
    let (alive_r, alive_w) = sys::pipe().at(Stage::Namespaces, || "pipe".into())?;
    let (mut status_r, status_w) = sys::pipe().at(Stage::Namespaces, || "pipe".into())?;
    match sys::fork().at(Stage::Namespaces, || "forking the init process".into())? {
        sys::Forked::Child => {
            drop(alive_w);
            drop(status_r);
            init(policy, &alive_r, status_w, uid)
        }
        sys::Forked::Parent(pid) => {
            drop(alive_r);
            drop(status_w);
            let (_, status) = sys::wait(pid).at(Stage::Namespaces, || "waiting".into())?;
            let mut raw = [0u8; 4];
            Ok(match status_r.read_exact(&mut raw) {
                Ok(()) => ending(i32::from_le_bytes(raw)),
                // Init ended without a command status: it failed (and said why) or was killed.
                Err(_) => ending(status),
            })
        }
    }
}

/// How the number of processes is bounded (reported by the probe).
#[derive(Clone, Copy, Debug)]
enum ProcessLimit {
    /// The pid namespace's own `pid_max`.
    PidNamespace,
    /// `RLIMIT_NPROC`, counted per user namespace (not for root).
    Rlimit,
    /// Unbounded by the user's choice (`max_processes = 0`).
    Unbounded,
}

impl ProcessLimit {
    fn as_str(self) -> &'static str {
        match self {
            ProcessLimit::PidNamespace => "pid-namespace",
            ProcessLimit::Rlimit => "rlimit",
            ProcessLimit::Unbounded => "none",
        }
    }
}

/// What the init process set up, for the probe.
#[derive(Clone, Copy, Debug)]
struct Facts {
    process_limit: ProcessLimit,
}

fn init(policy: &Policy, alive: &File, mut status: File, uid: libc::uid_t) -> ! {
    let run = || -> Result<(Facts, libc::pid_t), SetupError> {
        sys::set_parent_death_signal(libc::SIGKILL)
            .at(Stage::Namespaces, || "arming the death signal".into())?;
        if !sys::pipe_writer_alive(alive) {
            std::process::exit(SETUP_FAILED);
        }
        build_view(policy)?;
        let facts = Facts {
            process_limit: bound_processes(policy, uid)?,
        };
        if !policy.network {
            sys::loopback_up().at(Stage::Network, || "bringing up the private loopback".into())?;
        }
        match sys::fork().at(Stage::Exec, || "forking the command".into())? {
            sys::Forked::Child => command(policy, facts),
            sys::Forked::Parent(pid) => Ok((facts, pid)),
        }
    };
    let (_, child) = match run() {
        Ok(r) => r,
        Err(e) => {
            report(&policy.nonce, &e);
            std::process::exit(e.code);
        }
    };
    loop {
        match sys::wait(-1) {
            Ok((pid, raw)) if pid == child => {
                let _ = status.write_all(&raw.to_le_bytes());
                // Exiting as pid 1 makes the kernel kill whatever is left in here.
                std::process::exit(0);
            }
            Ok(_) => continue,
            Err(_) => std::process::exit(SETUP_FAILED),
        }
    }
}

fn inside(root: &Path, path: &Path) -> std::path::PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

fn build_view(policy: &Policy) -> Result<(), SetupError> {
    let m = Stage::Mounts;
    sys::mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
    .at(m, || "making mounts private".into())?;
    let root = &policy.root_dir;
    sys::mount(
        Some(Path::new("tmpfs")),
        root,
        Some("tmpfs"),
        libc::MS_NOSUID | libc::MS_NODEV,
        Some("mode=0755,size=4m"),
    )
    .at(m, || format!("mounting the new root on {}", root.display()))?;
    let mut read_only_later = Vec::new();
    for mount in &policy.mounts {
        let target = inside(root, mount.path());
        let shown = mount.path().display();
        match mount {
            Mount::Bind { source, write, .. } => {
                let meta = std::fs::metadata(source)
                    .at(m, || format!("{} (shown at {shown})", source.display()))?;
                if meta.is_dir() {
                    std::fs::create_dir_all(&target).at(m, || format!("creating {shown}"))?;
                } else if std::fs::symlink_metadata(&target).is_err() {
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent).at(m, || format!("creating {shown}"))?;
                    }
                    File::create(&target).at(m, || format!("creating {shown}"))?;
                }
                sys::mount(
                    Some(source),
                    &target,
                    None,
                    libc::MS_BIND | libc::MS_REC,
                    None,
                )
                .at(m, || format!("binding {} at {shown}", source.display()))?;
                if !write {
                    sys::make_read_only(&target, true)
                        .at(m, || format!("making {shown} read-only"))?;
                }
            }
            Mount::Tmpfs { write, .. } => {
                std::fs::create_dir_all(&target).at(m, || format!("creating {shown}"))?;
                sys::mount(
                    Some(Path::new("tmpfs")),
                    &target,
                    Some("tmpfs"),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    Some("mode=0755"),
                )
                .at(m, || format!("mounting an empty directory at {shown}"))?;
                if !write {
                    read_only_later.push(target);
                }
            }
            Mount::Proc { .. } => {
                std::fs::create_dir_all(&target).at(m, || format!("creating {shown}"))?;
                sys::mount(
                    Some(Path::new("proc")),
                    &target,
                    Some("proc"),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    None,
                )
                .at(m, || {
                    "mounting /proc for the sandbox's pid namespace (refused when the host's \
                     /proc is partly hidden, as in some containers)"
                        .into()
                })?;
            }
            Mount::Symlink { target: to, .. } => {
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).at(m, || format!("creating {shown}"))?;
                }
                if std::fs::symlink_metadata(&target).is_err() {
                    std::os::unix::fs::symlink(to, &target).at(m, || format!("linking {shown}"))?;
                }
            }
        }
    }
    // Last, so that mount points beneath them could still be created.
    for target in read_only_later.iter().rev() {
        sys::make_read_only(target, false)
            .at(m, || format!("making {} read-only", target.display()))?;
    }
    sys::pivot_root(root).at(m, || "switching to the new root".into())?;
    sys::make_read_only(Path::new("/"), false).at(m, || "making / read-only".into())
}

/// Bounds the processes of the namespace by its `pid_max` (Linux ≥ 6.14; at least the
/// kernel's minimum of 301). Where that is missing, `RLIMIT_NPROC` (set later, counted
/// per user namespace) bounds every user but root, so root is refused rather than left
/// unbounded.
fn bound_processes(policy: &Policy, uid: libc::uid_t) -> Result<ProcessLimit, SetupError> {
    let max = u64::from(policy.limits.max_processes);
    if max == 0 {
        return Ok(ProcessLimit::Unbounded);
    }
    let pid_max = (max + 1).max(PID_MAX_MIN);
    match std::fs::write("/proc/sys/kernel/pid_max", pid_max.to_string()) {
        Ok(()) => Ok(ProcessLimit::PidNamespace),
        Err(_) if uid != 0 => Ok(ProcessLimit::Rlimit),
        Err(e) => Err(SetupError::at_stage(
            Stage::Limits,
            format!(
                "cannot bound the number of processes: this kernel has no per-namespace \
                 pid_max (Linux 6.14+; writing it failed: {e}) and RLIMIT_NPROC does not \
                 bind root; run crewbox as an unprivileged user, or set \
                 sandbox.max_processes = 0 to run without a process limit"
            ),
        )),
    }
}

fn apply_limits(policy: &Policy) -> Result<(), SetupError> {
    let l = &policy.limits;
    let at = |what: &'static str| move || format!("setting {what}");
    if l.max_processes > 0 {
        let n = u64::from(l.max_processes);
        sys::set_limit(libc::RLIMIT_NPROC, n, n).at(Stage::Limits, at("RLIMIT_NPROC"))?;
    }
    if l.max_file_size > 0 {
        sys::set_limit(libc::RLIMIT_FSIZE, l.max_file_size, l.max_file_size)
            .at(Stage::Limits, at("RLIMIT_FSIZE"))?;
    }
    if l.cpu_time_s > 0 {
        // SIGXCPU at the soft limit, SIGKILL a little later.
        sys::set_limit(libc::RLIMIT_CPU, l.cpu_time_s, l.cpu_time_s + 5)
            .at(Stage::Limits, at("RLIMIT_CPU"))?;
    }
    sys::set_limit(libc::RLIMIT_CORE, 0, 0).at(Stage::Limits, at("RLIMIT_CORE"))
}

fn command(policy: &Policy, facts: Facts) -> ! {
    let err = match exec(policy, facts) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    report(&policy.nonce, &err);
    std::process::exit(err.code)
}

fn exec(policy: &Policy, facts: Facts) -> Result<std::convert::Infallible, SetupError> {
    apply_limits(policy)?;
    std::env::set_current_dir(&policy.cwd).at(Stage::Exec, || {
        format!("entering the working directory {}", policy.cwd.display())
    })?;
    let landlock_abi = rules::restrict(policy)?;
    sys::drop_capabilities().at(Stage::Landlock, || "dropping capabilities".into())?;
    let (program, args): (&str, Vec<&str>) = match &policy.program {
        Program::Shell(line) => ("/bin/sh", vec!["-c", line.as_str()]),
        Program::Argv(argv) => match argv.split_first() {
            Some((program, args)) => (program.as_str(), args.iter().map(String::as_str).collect()),
            None => return Err(SetupError::at_stage(Stage::Exec, "no program to run")),
        },
        Program::Probe => {
            let facts = serde_json::json!({
                "user_namespaces": true,
                "network_isolation": !policy.network,
                "process_limit": facts.process_limit.as_str(),
                "landlock_abi": landlock_abi,
            });
            println!("{facts}");
            std::process::exit(0);
        }
    };
    let err = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(policy.env.iter().map(|(k, v)| (k, v)))
        .exec();
    if err.kind() == io::ErrorKind::NotFound {
        let mut e = SetupError::at_stage(
            Stage::Exec,
            format!(
                "cannot run `{program}`: not found in the sandbox ({err}); only the system \
                 directories, toolchains, the workspace and the paths in `[sandbox] read` (or a \
                 command provider's `read`) are visible"
            ),
        );
        e.code = 127;
        return Err(e);
    }
    Err(SetupError::at_stage(
        Stage::Exec,
        format!("cannot run `{program}`: {err}"),
    ))
}

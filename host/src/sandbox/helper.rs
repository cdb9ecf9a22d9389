//! The helper: this same binary, started once with [`HELPER_ARG`] as the sandbox server
//! (see `server`), turns each `Policy` into a sandboxed process. `main` calls
//! [`run_if_helper`] before anything else, so the server is a fresh single-threaded
//! process (no async runtime, no locks held by other threads) whose forks may fork and
//! allocate freely.
//!
//! Two processes per command, each with one job:
//! 1. the **init** process, cloned by the server straight into new user, mount, pid,
//!    IPC and (without network) network namespaces, so it is pid 1 there (and killed
//!    when the server goes), maps its own uid/gid and brings up a private loopback
//!    (without network: these are done ahead of the request, see [`warm_main`]), builds
//!    the view on a fresh root and pivots into it, mounts `/proc`, bounds the number of
//!    processes, forks the command, reaps, and writes the command's status straight to
//!    crewbox. When it exits, the kernel kills every process left in the namespace:
//!    nothing started inside can outlive the command, its agent or crewbox;
//! 2. the **command** sets resource limits, restricts itself with Landlock, drops every
//!    capability and execs.
//!
//! A failure at any step is reported as one line `<nonce> <stage>: <message>` on
//! stderr and exit code [`SETUP_FAILED`]; the host recognises the line by the nonce,
//! which the command never sees.

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;

pub use super::policy::{HELPER_ARG, SETUP_FAILED, Stage};
use super::policy::{Mount, Policy, Program};
use super::{rules, sys};

/// The kernel's smallest `pid_max`.
const PID_MAX_MIN: u64 = 301;

/// Runs the sandbox server and exits when this process was started as one; otherwise
/// records that this binary can serve as its own helper and returns. Call it first in
/// `main`.
pub fn run_if_helper() {
    if let Some(mut args) = crate::child::Role::SandboxHelper.enter() {
        let host = args
            .next()
            .and_then(|a| a.to_str()?.parse::<u32>().ok())
            .unwrap_or(0);
        std::process::exit(super::server::serve(host));
    }
}

/// Whether [`run_if_helper`] was called in this process (so `/proc/self/exe` is a helper).
pub fn entry_installed() -> bool {
    crate::child::Role::SandboxHelper.entry_installed()
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

fn report(nonce: &str, err: &SetupError) {
    let line = err.to_string().replace('\n', " ");
    let _ = writeln!(io::stderr(), "{nonce} {line}");
}

/// The descriptors an init process works with.
pub struct InitFds {
    /// stdin, stdout, stderr of the command.
    pub stdio: Vec<OwnedFd>,
    /// Where the command's raw wait status goes (4 bytes) when it ends: the write end
    /// of a pipe crewbox itself reads.
    pub status: OwnedFd,
}

/// The init process of one request, started by the server with `clone` straight into
/// new user, mount, pid, IPC and (without network) network namespaces: pid 1 there.
/// `alive` is the server's "alive" pipe (read end kept, write end closed at once).
/// Never returns; when it exits, the kernel kills whatever is left in its pid namespace.
pub fn init_main(
    request: &[u8],
    fds: InitFds,
    network: bool,
    alive: (RawFd, RawFd),
    (uid, gid): (libc::uid_t, libc::gid_t),
) -> ! {
    enter(alive);
    let ready = prepare(uid, gid, !network);
    run(request, fds, uid, ready)
}

/// An init process cloned by the server *before* its request, into new user, mount,
/// pid, IPC and network namespaces (the costly part of a start, a millisecond or more,
/// paid while nothing waits for it). It maps its ids and brings up its loopback, then
/// waits on `request` for exactly one policy with its four descriptors (stdin, stdout,
/// stderr, status) and goes on as [`init_main`]. End of file there (the server is
/// gone, or has no use for it): it exits.
pub fn warm_main(
    request: OwnedFd,
    alive: (RawFd, RawFd),
    (uid, gid): (libc::uid_t, libc::gid_t),
) -> ! {
    use std::os::fd::AsRawFd;
    enter(alive);
    let ready = prepare(uid, gid, true);
    let mut buf = vec![0u8; super::server::MAX_REQUEST];
    let (n, mut fds) = match super::server::recv_with_fds(request.as_raw_fd(), &mut buf) {
        Ok(Some((n, fds))) if fds.len() == 4 => (n, fds),
        _ => std::process::exit(0),
    };
    drop(request);
    let status = fds
        .pop()
        .unwrap_or_else(|| std::process::exit(SETUP_FAILED));
    run(&buf[..n], InitFds { stdio: fds, status }, uid, ready)
}

/// The first steps of every init process: die with the server, and make sure it did
/// not die before (then this process's copy of the alive pipe's write end would be
/// the last one); signals unblocked; a session of its own, without a controlling
/// terminal, for it and everything it starts: the user's terminal is out of reach (no
/// `/dev/tty`, no `TIOCSTI`), and keys typed there (Ctrl-C) reach crewbox only.
fn enter(alive: (RawFd, RawFd)) {
    let _ = sys::set_parent_death_signal(libc::SIGKILL);
    sys::close_fd(alive.1);
    if !sys::fd_pipe_writer_alive(alive.0) {
        std::process::exit(SETUP_FAILED);
    }
    sys::unblock_signals();
    if sys::new_session().is_err() {
        std::process::exit(SETUP_FAILED);
    }
}

/// What does not depend on the policy: the same ids inside as outside (files keep
/// their owners, and the kernel still counts this user's processes against its
/// limits), and, in a network namespace of its own, the private loopback. A failure is
/// kept until the request's stderr is there to report it on.
fn prepare(uid: libc::uid_t, gid: libc::gid_t, own_network: bool) -> Result<(), SetupError> {
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
    if own_network {
        sys::loopback_up().at(Stage::Network, || "bringing up the private loopback".into())?;
    }
    Ok(())
}

/// The rest of an init process once its request is there: stdio and status at 0–3,
/// nothing else open, the view, the process bound, the command forked and reaped.
fn run(request: &[u8], fds: InitFds, uid: libc::uid_t, ready: Result<(), SetupError>) -> ! {
    let mut moved = fds.stdio.into_iter().zip(0..).collect::<Vec<_>>();
    moved.push((fds.status, 3));
    for (fd, to) in moved {
        if sys::move_fd(fd, to).is_err() {
            std::process::exit(SETUP_FAILED);
        }
    }
    sys::close_from(4);
    let policy = match Policy::from_request(request) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(io::stderr(), "crewbox sandbox helper: {e}");
            std::process::exit(SETUP_FAILED);
        }
    };
    let child = match ready.and_then(|()| start(&policy, uid)) {
        Ok(child) => child,
        Err(e) => {
            report(&policy.nonce, &e);
            std::process::exit(e.code);
        }
    };
    // The command's end of file must not wait for this process.
    sys::close_stdio();
    loop {
        match sys::wait(-1) {
            Ok((pid, raw)) if pid == child => {
                // SAFETY: fd 3 is the status pipe set up above; 4 bytes fit any pipe.
                unsafe { libc::write(3, raw.to_le_bytes().as_ptr().cast(), 4) };
                // Exiting as pid 1 makes the kernel kill whatever is left in here.
                std::process::exit(0);
            }
            Ok(_) => continue,
            Err(_) => std::process::exit(SETUP_FAILED),
        }
    }
}

/// Builds the view, bounds processes and forks the command; returns its pid.
fn start(policy: &Policy, uid: libc::uid_t) -> Result<libc::pid_t, SetupError> {
    build_view(policy)?;
    let facts = Facts {
        process_limit: bound_processes(policy, uid)?,
    };
    match sys::fork().at(Stage::Exec, || "forking the command".into())? {
        sys::Forked::Child => {
            sys::close_fd(3);
            command(policy, facts)
        }
        sys::Forked::Parent(pid) => Ok(pid),
    }
}

/// The namespaces a request's init process is cloned into.
pub fn namespace_flags(network: bool) -> libc::c_int {
    let flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    if network {
        flags
    } else {
        flags | libc::CLONE_NEWNET
    }
}

/// The message for a failed `clone` into new namespaces.
pub fn namespaces_unavailable(e: &io::Error) -> String {
    format!(
        "{}: cannot create user namespaces ({e}); they may be disabled \
         (sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, \
         kernel.apparmor_restrict_unprivileged_userns) or refused inside this container",
        Stage::Namespaces.as_str()
    )
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
            Mount::Tmpfs { write, size, .. } => {
                std::fs::create_dir_all(&target).at(m, || format!("creating {shown}"))?;
                let options = match size {
                    Some(bytes) => format!("mode=0755,size={}", (*bytes).max(4096)),
                    None => "mode=0755".to_owned(),
                };
                sys::mount(
                    Some(Path::new("tmpfs")),
                    &target,
                    Some("tmpfs"),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    Some(&options),
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
    if l.memory > 0 {
        sys::set_limit(libc::RLIMIT_AS, l.memory, l.memory).at(Stage::Limits, at("RLIMIT_AS"))?;
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

//! Starting one process for an agent: the policy is built here and sent to the sandbox
//! server with the process's stdio; with the sandbox off the program is started directly.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::Serialize;

use super::child::SandboxedChild;
use super::env::{self, EnvPolicy};
use super::policy::{Policy, Program};
use super::{AgentSandbox, Mode, On, SandboxError, io_err, view};

/// The agent's private directories: `home` backs `$HOME`, `tmp` backs `/tmp`.
/// Removed when the last user lets go.
#[derive(Debug)]
pub(super) struct AgentDirs {
    root: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
}

impl AgentDirs {
    fn create(agents: &Path, id: &str) -> Result<Self, SandboxError> {
        use std::os::unix::fs::DirBuilderExt;
        let safe: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let root = agents.join(format!("{}-{safe}", std::process::id()));
        let (home, tmp) = (root.join("home"), root.join("tmp"));
        for dir in [&root, &home, &tmp] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io_err("creating", dir))?;
        }
        Ok(Self { root, home, tmp })
    }
}

impl Drop for AgentDirs {
    fn drop(&mut self) {
        let root = std::mem::take(&mut self.root);
        // Off the async runtime when there is one: the tree may be large.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(move || remove_tree(&root))),
            Err(_) => remove_tree(&root),
        }
    }
}

/// Removes `root` even when a command left read-only directories in it.
fn remove_tree(root: &Path) {
    if std::fs::remove_dir_all(root).is_ok() || !root.exists() {
        return;
    }
    fn writable(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    writable(&e.path());
                }
            }
        }
    }
    writable(root);
    if let Err(e) = std::fs::remove_dir_all(root) {
        tracing::warn!(path = %root.display(), error = %e, "could not remove an agent's sandbox directory");
    }
}

/// Removes the directories of agents whose crewbox process is gone.
pub(super) fn prune_agent_dirs(agents: &Path) {
    let Ok(entries) = std::fs::read_dir(agents) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        if pid.is_some_and(|p| p != std::process::id() && !crate::process::pid_alive(p)) {
            remove_tree(&e.path());
        }
    }
}

/// One process to start for an agent; see [`AgentSandbox::command`].
pub struct Spawn<'a> {
    agent: &'a AgentSandbox,
    program: Program,
    env: EnvPolicy,
    network: bool,
    stdin: bool,
    read: Vec<PathBuf>,
    files: Vec<(PathBuf, PathBuf)>,
    memory_cap: bool,
    set: Vec<(String, String)>,
}

impl<'a> Spawn<'a> {
    pub(super) fn new(agent: &'a AgentSandbox, program: Program) -> Self {
        let config = &agent.sandbox.shared.config;
        Self {
            network: agent.scope.network,
            env: EnvPolicy {
                pass: config.pass_env.clone(),
                allow_named_keys: false,
            },
            agent,
            program,
            stdin: false,
            read: Vec::new(),
            files: Vec::new(),
            memory_cap: true,
            set: Vec::new(),
        }
    }

    /// Also shows these paths read-only (those that exist).
    pub fn read_also(mut self, paths: &[PathBuf]) -> Self {
        self.read
            .extend(paths.iter().filter_map(|p| p.canonicalize().ok()));
        self
    }

    /// Also shows these single files read-only (and executable): (where the process
    /// opens it, the host file). The `command` provider's program and its interpreters.
    pub fn program_files(mut self, files: &[(PathBuf, PathBuf)]) -> Self {
        self.files.extend_from_slice(files);
        self
    }

    /// Shares the host's network whatever the agent's grant (the `command` provider
    /// must reach its API).
    pub fn with_network(mut self) -> Self {
        self.network = true;
        self
    }

    /// Lifts the memory cap (`[sandbox] memory_mb`) for this process: the `command`
    /// provider's CLI is the user's own program, often a runtime that reserves far more
    /// address space than it uses. Its `/dev/shm` stays bounded.
    pub fn without_memory_cap(mut self) -> Self {
        self.memory_cap = false;
        self
    }

    /// Replaces which host variables are passed.
    pub fn env(mut self, policy: EnvPolicy) -> Self {
        self.env = policy;
        self
    }

    /// Keeps stdin open for the caller (otherwise the process reads end of file).
    pub fn piped_stdin(mut self) -> Self {
        self.stdin = true;
        self
    }

    /// Sets `name` to `value` for the process (a value the user wrote in their own
    /// config, such as an MCP server's `env`), over what the policy passes.
    pub fn set_env(mut self, name: &str, value: &str) -> Self {
        self.set.push((name.to_owned(), value.to_owned()));
        self
    }

    fn environment(&self) -> Vec<(String, String)> {
        let mut built = env::build(
            std::env::vars_os(),
            &self.env,
            &self.agent.sandbox.shared.secrets,
        );
        for (name, value) in &self.set {
            env::set(&mut built, name, value);
        }
        built
    }

    /// Starts the process: stdout and stderr piped, its own process group.
    pub async fn spawn(self) -> Result<SandboxedChild, SandboxError> {
        match &self.agent.sandbox.shared.mode {
            Mode::Missing => Err(SandboxError::NotConfigured),
            Mode::Off => self.spawn_direct(),
            Mode::On(on) => self.spawn_sandboxed(on).await,
        }
    }

    fn spawn_direct(self) -> Result<SandboxedChild, SandboxError> {
        let (program, args): (&str, Vec<&str>) = match &self.program {
            Program::Shell(line) => ("sh", vec!["-c", line.as_str()]),
            Program::Argv(argv) => match argv.split_first() {
                Some((p, a)) => (p.as_str(), a.iter().map(String::as_str).collect()),
                None => return Err(SandboxError::Exec("no program to run".into())),
            },
            Program::Probe => return Err(SandboxError::Exec("the sandbox is off".into())),
        };
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(self.environment())
            .stdin(if self.stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Unconfined, but still without the user's terminal: a session of its own (which
        // also makes it the leader of its own process group, killed as one).
        // SAFETY: setsid is async-signal-safe and touches nothing of the parent's memory.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        if let Some(ws) = &self.agent.scope.workspace {
            cmd.current_dir(ws);
        }
        let child = cmd.spawn().map_err(|e| {
            SandboxError::Exec(format!(
                "cannot start `{program}`{}: {e}",
                self.agent
                    .scope
                    .workspace
                    .as_ref()
                    .map(|w| format!(" in {}", w.display()))
                    .unwrap_or_default()
            ))
        })?;
        SandboxedChild::direct(child).map_err(|e| SandboxError::Exec(format!("`{program}`: {e}")))
    }

    fn dirs(&self, on: &On) -> Result<std::sync::Arc<AgentDirs>, SandboxError> {
        let mut dirs = self.agent.dirs.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = &*dirs {
            return Ok(d.clone());
        }
        let made = std::sync::Arc::new(AgentDirs::create(
            &on.base.join("agents"),
            &self.agent.scope.id,
        )?);
        *dirs = Some(made.clone());
        Ok(made)
    }

    fn policy(&self, on: &On, dirs: &AgentDirs) -> Policy {
        let workspace = self.agent.scope.workspace.as_deref().map(|ws| {
            super::layout::workspace(
                ws,
                self.agent.scope.writable,
                self.agent.sandbox.shared.config.crewbox_writable,
            )
        });
        let plan = view::plan(
            &on.layout,
            &view::AgentView {
                workspace: workspace.as_ref(),
                private_home: &dirs.home,
                private_tmp: &dirs.tmp,
                network: self.network,
                extra_read: &self.read,
                extra_files: &self.files,
                shm_size: self.agent.sandbox.shared.config.limits.shm_size,
                extra_write: self.agent.scope.writable,
            },
        );
        let mut env = self.environment();
        env::set(&mut env, "HOME", &on.layout.home.to_string_lossy());
        env::set(&mut env, "TMPDIR", "/tmp");
        Policy {
            nonce: format!("crewbox-sandbox-{:032x}", fastrand::u128(..)),
            program: self.program.clone(),
            cwd: workspace
                .as_ref()
                .map(|w| w.root.clone())
                .unwrap_or_else(|| "/tmp".into()),
            env,
            network: self.network,
            root_dir: on.base.join("mnt"),
            mounts: plan.mounts,
            writable: plan.writable,
            writable_files: plan.writable_files,
            limits: {
                let mut limits = self.agent.sandbox.shared.config.limits;
                if !self.memory_cap {
                    limits.memory = 0;
                }
                limits
            },
        }
    }

    async fn spawn_sandboxed(self, on: &On) -> Result<SandboxedChild, SandboxError> {
        use tokio::net::unix::pipe;
        let dirs = self.dirs(on)?;
        let policy = self.policy(on, &dirs);
        let server = on.server()?;
        let helper_err = |source: std::io::Error| SandboxError::Helper {
            helper: on.helper.clone(),
            source,
        };
        let pipe = || super::sys::pipe().map_err(helper_err);
        let (stdin_read, stdin_write) = if self.stdin {
            let (r, w) = pipe()?;
            (r, Some(w))
        } else {
            let null = std::fs::File::open("/dev/null")
                .map_err(io_err("opening", Path::new("/dev/null")))?;
            (null, None)
        };
        let (out_read, out_write) = pipe()?;
        let (err_read, err_write) = pipe()?;
        let (status_read, status_write) = pipe()?;
        let encoded = policy.encode().map_err(helper_err)?;
        let served = server
            .spawn(
                &encoded,
                policy.network,
                [
                    stdin_read.into(),
                    out_write.into(),
                    err_write.into(),
                    status_write.into(),
                ],
            )
            .await
            .map_err(helper_err)?;
        let stdin = stdin_write
            .map(pipe::Sender::from_file)
            .transpose()
            .map_err(helper_err)?;
        Ok(SandboxedChild::served(
            served,
            pipe::Receiver::from_file(status_read).map_err(helper_err)?,
            stdin,
            pipe::Receiver::from_file(out_read).map_err(helper_err)?,
            pipe::Receiver::from_file(err_read).map_err(helper_err)?,
            policy.nonce,
        ))
    }
}

/// What the sandbox can use on this machine (`crewbox health`).
#[derive(Clone, Debug, Serialize)]
pub struct ProbeReport {
    /// `on`, `off` or `missing`.
    pub mode: &'static str,
    /// Whether agent commands can run as configured.
    pub ready: bool,
    /// The kernel's Landlock ABI (0: none).
    pub landlock_abi: i32,
    /// Whether user namespaces work for this user (None: not probed).
    pub user_namespaces: Option<bool>,
    /// Whether commands get their own network namespace.
    pub network_isolation: Option<bool>,
    /// How the number of processes is bounded: `pid-namespace`, `rlimit`, or none.
    pub process_limit: Option<String>,
    /// Why it is not ready.
    pub error: Option<String>,
}

impl ProbeReport {
    /// A sandbox that could not even be built.
    pub fn failed(error: String) -> Self {
        Self {
            mode: "on",
            ready: false,
            landlock_abi: 0,
            user_namespaces: None,
            network_isolation: None,
            process_limit: None,
            error: Some(error),
        }
    }

    /// One line for `crewbox health`.
    pub fn render_text(&self) -> String {
        let yes_no = |v: Option<bool>| match v {
            Some(true) => "yes",
            Some(false) => "no",
            None => "?",
        };
        let mut out = match (self.mode, self.ready) {
            ("off", _) => "OFF (sandbox = \"off\"): agent commands run unconfined".to_owned(),
            ("missing", _) => "not configured".to_owned(),
            (_, true) => "on, ready".to_owned(),
            (_, false) => "on, NOT READY: agent commands are refused".to_owned(),
        };
        out.push_str(&format!(
            " · Landlock ABI {} · user namespaces {} · network isolation {} · process limit {}",
            self.landlock_abi,
            yes_no(self.user_namespaces),
            yes_no(self.network_isolation),
            self.process_limit.as_deref().unwrap_or("?")
        ));
        if let Some(e) = &self.error {
            out.push_str(&format!("\n  {e}"));
        }
        out
    }
}

impl super::Sandbox {
    /// Starts a probe through the real helper path and reports what worked.
    pub async fn probe(&self) -> ProbeReport {
        #[cfg(target_os = "linux")]
        let landlock_abi = super::sys::landlock_abi();
        #[cfg(not(target_os = "linux"))]
        let landlock_abi = 0;
        let mut report = ProbeReport {
            mode: self.mode_name(),
            ready: self.is_off(),
            landlock_abi,
            user_namespaces: None,
            network_isolation: None,
            process_limit: None,
            error: None,
        };
        if !matches!(self.shared.mode, Mode::On(_)) {
            return report;
        }
        let agent = self.agent(super::AgentScope {
            id: format!("probe-{:016x}", fastrand::u64(..)),
            workspace: None,
            writable: false,
            network: self.config().network,
        });
        let outcome = match agent.command(Program::Probe).spawn().await {
            Ok(child) => {
                let nonce_child = child;
                match tokio::time::timeout(
                    std::time::Duration::from_secs(10),
                    wait_output(nonce_child),
                )
                .await
                {
                    Ok(r) => r,
                    Err(_) => Err("the probe did not finish within 10 s".into()),
                }
            }
            Err(e) => Err(e.to_string()),
        };
        match outcome {
            Ok(facts) => {
                report.ready = true;
                report.user_namespaces = facts["user_namespaces"].as_bool();
                report.network_isolation = facts["network_isolation"].as_bool();
                report.process_limit = facts["process_limit"].as_str().map(str::to_owned);
            }
            Err(message) => {
                report.user_namespaces = Some(!message.starts_with("namespaces:"));
                report.error = Some(message);
            }
        }
        report
    }
}

async fn wait_output(mut child: SandboxedChild) -> Result<serde_json::Value, String> {
    use tokio::io::AsyncReadExt;
    let (mut out, mut err) = (String::new(), String::new());
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("the probe's output was not captured".into());
    };
    let (a, b) = tokio::join!(
        stdout.read_to_string(&mut out),
        stderr.read_to_string(&mut err)
    );
    a.and(b).map_err(|e| e.to_string())?;
    let status = child.wait().await.map_err(|e| e.to_string())?;
    if let Some(f) = child.setup_failure(&status, &err) {
        return Err(match f.stage {
            Some(stage) => format!("{}: {}", stage.as_str(), f.message),
            None => f.message,
        });
    }
    serde_json::from_str(out.trim()).map_err(|_| {
        format!(
            "the probe ended with {status} and no report: {}",
            err.trim()
        )
    })
}

//! The process sandbox on this kernel, with real processes: a scripted agent run by the
//! real `crewbox` binary tries to escape (read crewbox's environment, see other
//! processes, write outside its worktree, reach the host's loopback, outlive its agent
//! or crewbox), and does ordinary work (git, Python tests, cargo).
//!
//! Every security test here fails with `CREWBOX_TEST_SANDBOX=off` (see
//! `support::sandbox`); the fork bomb is then skipped, as it would be unbounded.

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crewbox::unstable::ids::AgentId;
use crewbox::unstable::sandbox::{AgentScope, SandboxConfig};
use crewbox::unstable::tool::{ToolContext, ToolRegistry};
use serde_json::{Value, json};

use crate::support::peers;
use crate::support::procs;
use crate::support::repo::git_repo;
use crate::support::sandbox as sbx;

/// Key values planted in crewbox's environment; none may show anywhere.
struct Keys {
    odd: String,
    openai: String,
    anthropic: String,
}

impl Keys {
    fn new() -> Self {
        let r = || format!("{:016x}", fastrand::u64(..));
        Self {
            odd: format!("odd-auth-value-{}", r()),
            openai: format!("sk-openai-{}", r()),
            anthropic: format!("sk-ant-{}", r()),
        }
    }

    fn values(&self) -> [&str; 3] {
        [&self.odd, &self.openai, &self.anthropic]
    }
}

/// A repository, a home, a state dir and a user config naming provider keys.
struct Fixture {
    dir: tempfile::TempDir,
    keys: Keys,
}

impl Fixture {
    fn new(sandbox_lines: &str) -> Self {
        let dir = git_repo(|_| {});
        // Decoys in the state base (another repository's state) and in this repository's
        // own state directory (another agent's worktree).
        let own = crate::support::repo::state_dir(dir.path());
        for state in [dir.path().join("state"), own] {
            std::fs::create_dir_all(state.join("worktrees/decoy")).unwrap();
            std::fs::write(state.join("decoy.txt"), "another agent's").unwrap();
        }
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        let config = dir.path().join("config/crewbox");
        std::fs::create_dir_all(&config).unwrap();
        // `LLM_AUTH_VALUE` is a key by configuration only, and listed in pass_env: it must
        // still never be passed.
        std::fs::write(
            config.join("config.toml"),
            format!(
                "[providers.odd]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n\
                 api_key_env = \"LLM_AUTH_VALUE\"\n\
                 [providers.oa]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n\
                 api_key_env = \"OPENAI_API_KEY\"\n\
                 [providers.claude]\nkind = \"anthropic\"\nmodel = \"m\"\n\
                 {}",
                sbx::user_config_table(&format!(
                    "pass_env = [\"LLM_AUTH_VALUE\"]\n{sandbox_lines}"
                ))
            ),
        )
        .unwrap();
        Self {
            dir,
            keys: Keys::new(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn repo(&self) -> PathBuf {
        self.path().join("repo")
    }

    fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    /// The state base (`CREWBOX_STATE_DIR`).
    fn state_base(&self) -> PathBuf {
        self.path().join("state")
    }

    /// This repository's state directory under the base.
    fn state(&self) -> PathBuf {
        crate::support::repo::state_dir(self.path())
    }

    /// `crewbox run --mode single --script … --json ARGS` with the keys in its environment.
    fn command(&self, calls: &[(&str, String)], args: &[&str]) -> Command {
        let script = self.path().join("script.toml");
        std::fs::write(&script, script_text(calls)).unwrap();
        let mut all = vec!["run", "go", "--mode", "single", "--json", "--script"];
        all.push(script.to_str().unwrap());
        all.extend(args);
        self.base_command(&all)
    }

    /// `crewbox ARGS` with the keys in its environment and HOME in the temp dir.
    fn base_command(&self, args: &[&str]) -> Command {
        let mut c = crate::support::repo::command(self.path(), args);
        let real_home = PathBuf::from(std::env::var("HOME").unwrap_or_default());
        c.env("HOME", self.home())
            .env("LLM_AUTH_VALUE", &self.keys.odd)
            .env("OPENAI_API_KEY", &self.keys.openai)
            .env("ANTHROPIC_API_KEY", &self.keys.anthropic)
            .env_remove("RUST_LOG");
        // The toolchain stays where it is although HOME moved.
        for (var, dir) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
            let value = std::env::var_os(var).unwrap_or_else(|| real_home.join(dir).into());
            c.env(var, value);
        }
        c
    }

    /// Runs the calls to the end; returns crewbox's output and each call's output.
    fn run(&self, calls: &[(&str, String)], args: &[&str]) -> (Output, HashMap<String, String>) {
        let out = self.command(calls, args).output().unwrap();
        let outputs = self.outputs(&out, calls);
        (out, outputs)
    }

    fn outputs(&self, out: &Output, calls: &[(&str, String)]) -> HashMap<String, String> {
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let run = report["run_id"].as_str().unwrap();
        let events = crate::support::repo::events(self.path(), run);
        let outputs: Vec<String> = events
            .iter()
            .filter(|e| e["kind"] == "tool.call")
            .map(|e| e["data"]["output"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(outputs.len(), calls.len(), "{events:#?}");
        calls
            .iter()
            .map(|(name, _)| name.to_string())
            .zip(outputs)
            .collect()
    }

    /// Asserts no key value is in crewbox's output, its stored events or its store files.
    fn assert_no_keys(&self, out: &Output) {
        let mut places: Vec<(String, Vec<u8>)> = vec![
            ("stdout".into(), out.stdout.clone()),
            ("stderr".into(), out.stderr.clone()),
        ];
        let events = crate::support::repo::bin(self.path(), &["events"]);
        places.push(("events".into(), events.stdout));
        for entry in std::fs::read_dir(self.state()).unwrap().flatten() {
            if entry.file_type().unwrap().is_file() {
                places.push((
                    entry.path().display().to_string(),
                    std::fs::read(entry.path()).unwrap(),
                ));
            }
        }
        for (place, bytes) in &places {
            let text = String::from_utf8_lossy(bytes);
            for key in self.keys.values() {
                assert!(!text.contains(key), "a provider key reached {place}");
            }
        }
    }
}

/// A script whose first reply calls `run_command` once per entry, then says done.
fn script_text(calls: &[(&str, String)]) -> String {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(_, command)| json!({"name": "run_command", "args": {"command": command, "timeout_s": 120}}))
        .collect();
    let script = json!({"reply": [
        {"turn": 1, "text": "trying", "tool_calls": tool_calls},
        {"turn": 2, "text": "done"},
    ]});
    toml::to_string(&script).unwrap()
}

/// A loopback server counting the connections it accepts.
fn loopback_server() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            if conn.is_ok() {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    (port, accepted)
}

fn connect_command(port: u16) -> String {
    format!(
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('CONNECTED')\" 2>&1 | tail -1"
    )
}

/// The escape attempts every run makes, with the paths they aim at.
fn attempts(f: &Fixture, port: u16, mark: &str) -> Vec<(&'static str, String)> {
    let repo = f.repo();
    let (repo, home, base, state) = (
        repo.display(),
        f.home().display().to_string(),
        f.state_base().display().to_string(),
        f.state().display().to_string(),
    );
    let tmp_name = format!("crewbox-escape-{}", mark);
    vec![
        (
            "environ",
            "tr '\\0' '\\n' < /proc/$PPID/environ; tr '\\0' '\\n' < /proc/1/environ; \
             for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
                .into(),
        ),
        ("env", "env".into()),
        ("keys", "echo \"[$LLM_AUTH_VALUE][$OPENAI_API_KEY][$ANTHROPIC_API_KEY]\"".into()),
        (
            "proc",
            "ls /proc | grep -c '^[0-9]'; ps -e -o comm= | tr '\\n' ' '".into(),
        ),
        (
            "checkout",
            format!("echo pwned > {repo}/notes.txt; echo pwned > {repo}/new.txt; ls {repo}"),
        ),
        (
            "git-meta",
            format!(
                "echo pwned > .git; echo pwned > {repo}/.git/hooks/pre-commit; \
                 echo pwned >> {repo}/.git/config; echo end"
            ),
        ),
        (
            "home",
            format!("echo pwned > {home}/escape.txt; mkdir {home}/.ssh; echo end"),
        ),
        (
            "tmp",
            format!("echo pwned > /tmp/{tmp_name}; echo tmp-ok; echo pwned > /var/tmp/{tmp_name}"),
        ),
        (
            "state",
            format!("ls {base}; ls {state}; ls {state}/worktrees"),
        ),
        ("loopback", connect_command(port)),
        (
            "work",
            "echo beta >> notes.txt && git status --short && git diff | tail -1".into(),
        ),
        (
            "python",
            "printf 'import unittest\\nclass T(unittest.TestCase):\\n    def test_ok(self):\\n        self.assertEqual(1 + 1, 2)\\n' > test_ok.py && python3 -m unittest 2>&1 | tail -1".into(),
        ),
        (
            "background",
            format!("{}; echo started", procs::background(mark, &format!("/tmp/{mark}-ready"), 300)),
        ),
    ]
}

/// Checks what the attempts of `attempts` produced; every broken promise is named
/// (all of them, so that a run without the sandbox shows each one failing).
fn assert_contained(
    f: &Fixture,
    out: &Output,
    o: &HashMap<String, String>,
    mark: &str,
    loopback_hits: usize,
) {
    let mut broken: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: &str, shown: &str| {
        if !ok {
            broken.push(format!("{what}:\n{shown}"));
        }
    };
    let environ = &o["environ"];
    check(
        !f.keys.values().iter().any(|k| environ.contains(k)),
        "a key is readable in another process's environment",
        environ,
    );
    // The sandbox's own init (pid 1, holding nothing) is all it sees besides itself.
    check(
        !environ.contains("crewbox run"),
        "crewbox's process is visible",
        environ,
    );
    check(
        environ
            .matches("/proc/1/environ: Permission denied")
            .count()
            == 2,
        "/proc/1 and the parent's environ are readable",
        environ,
    );
    check(
        !o["env"].contains("LLM_AUTH_VALUE") && o["env"].contains("PATH="),
        "the environment is not the allowlist",
        &o["env"],
    );
    check(
        o["keys"].contains("[][][]"),
        "a key variable reached the command",
        &o["keys"],
    );
    let procs_seen: u32 = o["proc"]
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(u32::MAX);
    check(
        procs_seen <= 6,
        "processes beyond its own are visible",
        &o["proc"],
    );
    check(
        std::fs::read_to_string(f.repo().join("notes.txt")).unwrap() == "alpha\n"
            && !f.repo().join("new.txt").exists(),
        "the main checkout was written",
        &o["checkout"],
    );
    check(
        !f.repo().join(".git/hooks/pre-commit").exists()
            && !std::fs::read_to_string(f.repo().join(".git/config"))
                .unwrap()
                .contains("pwned"),
        "the repository's .git was written",
        &o["git-meta"],
    );
    check(
        !f.home().join("escape.txt").exists() && !f.home().join(".ssh").exists(),
        "$HOME was written",
        &o["home"],
    );
    let tmp_name = format!("crewbox-escape-{mark}");
    check(
        o["tmp"].contains("tmp-ok")
            && !Path::new("/tmp").join(&tmp_name).exists()
            && !Path::new("/var/tmp").join(&tmp_name).exists(),
        "the host's /tmp was written",
        &o["tmp"],
    );
    // Only the way to its own worktree exists there: no store, nothing else.
    check(
        !o["state"].contains("crewbox.db")
            && !o["state"].contains("decoy")
            && o["state"].matches("crewbox-wt-").count() == 1,
        "the state dir is visible",
        &o["state"],
    );
    check(
        o["loopback"].contains("Connection refused")
            && !o["loopback"].contains("CONNECTED")
            && loopback_hits == 0,
        "the host's loopback is reachable",
        &o["loopback"],
    );
    // Ordinary work.
    check(
        o["work"].contains(" M notes.txt") && o["work"].contains("+beta"),
        "git status / git diff in the worktree",
        &o["work"],
    );
    check(
        o["python"].contains("OK"),
        "python3 -m unittest",
        &o["python"],
    );
    check(
        o["background"].contains("started"),
        "the background job",
        &o["background"],
    );
    let gone = procs::gone(mark);
    procs::kill(mark);
    check(gone, "a background process outlived its agent", "");
    for dir in ["/tmp", "/var/tmp"] {
        let _ = std::fs::remove_file(Path::new(dir).join(&tmp_name));
    }
    let _ = std::fs::remove_file(format!("/tmp/{mark}-ready"));
    assert!(broken.is_empty(), "{}", broken.join("\n\n"));
    f.assert_no_keys(out);
}

#[test]
fn a_scripted_agent_cannot_escape_and_can_work() {
    let f = Fixture::new("");
    let (port, accepted) = loopback_server();
    let mark = procs::marker("e2e");
    let mut calls = attempts(&f, port, &mark);
    calls.push(("cargo", "cargo --version".into()));
    let (out, o) = f.run(&calls, &[]);
    assert!(o["cargo"].contains("cargo 1."), "{}", o["cargo"]);
    assert_contained(&f, &out, &o, &mark, accepted.load(Ordering::SeqCst));
}

#[test]
fn network_is_granted_by_the_cli_or_the_user_config_only() {
    let (port, accepted) = loopback_server();
    let f = Fixture::new("");
    let (_, o) = f.run(&[("loopback", connect_command(port))], &["--network"]);
    assert!(o["loopback"].contains("CONNECTED"), "{}", o["loopback"]);
    assert_eq!(accepted.load(Ordering::SeqCst), 1);

    let f = Fixture::new("network = true\n");
    let (_, o) = f.run(&[("loopback", connect_command(port))], &[]);
    assert!(o["loopback"].contains("CONNECTED"), "{}", o["loopback"]);

    // A repository's config cannot grant it (nor anything else of the sandbox): not
    // while untrusted, and not once trusted, when the key is ignored with a warning.
    let f = Fixture::new("");
    std::fs::create_dir_all(f.repo().join(".crewbox")).unwrap();
    std::fs::write(
        f.repo().join(".crewbox/config.toml"),
        "[sandbox]\nnetwork = true\n",
    )
    .unwrap();
    let (_, o) = f.run(&[("loopback", connect_command(port))], &[]);
    assert!(!o["loopback"].contains("CONNECTED"), "{}", o["loopback"]);
    let trusted = f.base_command(&["trust"]).output().unwrap();
    assert!(trusted.status.success(), "{trusted:?}");
    let (out, o) = f.run(&[("loopback", connect_command(port))], &[]);
    assert!(!o["loopback"].contains("CONNECTED"), "{}", o["loopback"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("sandbox") && stderr.contains(".crewbox/config.toml"),
        "{stderr}"
    );
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "only the two granted runs"
    );
}

/// `[sandbox.team.backend] network = true` grants the user's own team `backend`; a
/// trusted repository's team of the same name (which shadows the user's) is another
/// team, and its agents' commands get no network.
#[test]
fn a_team_network_grant_never_reaches_a_repository_team_of_its_name() {
    let (port, accepted) = loopback_server();
    let f = Fixture::new("[sandbox.team.backend]\nnetwork = true\n");
    let team = "mode = \"broadcast\"\n[[members]]\nname = \"dev\"\naccess = \"full\"\n";
    let user_team = f.path().join("config/crewbox/teams/backend.toml");
    std::fs::create_dir_all(user_team.parent().unwrap()).unwrap();
    std::fs::write(&user_team, team).unwrap();
    let calls = [("loopback", connect_command(port))];
    let run = |f: &Fixture| {
        let script = f.path().join("script.toml");
        std::fs::write(&script, script_text(&calls)).unwrap();
        let out = f
            .base_command(&["run", "go", "--team", "backend", "--json", "--script"])
            .arg(&script)
            .output()
            .unwrap();
        let outputs = f.outputs(&out, &calls);
        (out, outputs)
    };

    // The user's team has the network they granted it.
    let (_, o) = run(&f);
    assert!(o["loopback"].contains("CONNECTED"), "{}", o["loopback"]);
    assert_eq!(accepted.load(Ordering::SeqCst), 1);

    // A trusted repository brings its own `backend`: it wins by precedence, but the
    // grant stays with the user's team.
    let repo_team = f.repo().join(".crewbox/teams/backend.toml");
    std::fs::create_dir_all(repo_team.parent().unwrap()).unwrap();
    std::fs::write(&repo_team, team).unwrap();
    let trusted = f.base_command(&["trust"]).output().unwrap();
    assert!(trusted.status.success(), "{trusted:?}");
    let (out, o) = run(&f);
    assert!(!o["loopback"].contains("CONNECTED"), "{}", o["loopback"]);
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "only the user's team");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[sandbox.team.backend]") && stderr.contains("no network"),
        "the run says why: {stderr}"
    );
    let show = f
        .base_command(&["team", "show", "backend"])
        .output()
        .unwrap();
    let show = String::from_utf8_lossy(&show.stdout);
    assert!(
        show.contains("warning: `[sandbox.team.backend] network = true`")
            && show.contains(&repo_team.display().to_string()),
        "{show}"
    );
    f.assert_no_keys(&out);
}

/// Starts `crewbox run` with one long command, waits until it runs, then signals crewbox.
fn signal_mid_command(signal: &str) {
    let f = Fixture::new("");
    let (bg, fg) = (procs::marker("bg"), procs::marker("fg"));
    let command = format!(
        "{}; sh -c 'sleep 300; :' {fg}",
        procs::background(&bg, &format!("/tmp/{bg}-ready"), 300)
    );
    let mut child = f
        .command(&[("long", command)], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = procs::wait_for(Duration::from_secs(60), || {
        !procs::marked(&fg).is_empty() && !procs::marked(&bg).is_empty()
    });
    if !running {
        let _ = child.kill();
        panic!("the command never started");
    }
    Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    let _ = child.wait();
    let gone = procs::gone(&bg) && procs::gone(&fg);
    procs::kill(&bg);
    procs::kill(&fg);
    assert!(gone, "an agent's command outlived crewbox after {signal}");
}

#[test]
fn sigterm_of_crewbox_leaves_no_orphan() {
    signal_mid_command("-TERM");
}

#[test]
fn sigkill_of_crewbox_leaves_no_orphan() {
    signal_mid_command("-KILL");
}

#[test]
fn an_unprivileged_user_is_contained_too() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        peers::cannot_run(
            "the unprivileged-user test",
            "not root, so it cannot switch to `nobody`",
        );
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        peers::cannot_run(
            "the unprivileged-user test",
            "setpriv is not installed, so it cannot switch to `nobody`",
        );
        return;
    }
    let f = Fixture::new("");
    // Everything the run touches belongs to nobody; the binary and the system are readable.
    std::fs::set_permissions(
        f.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let chown = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(f.path())
        .status()
        .unwrap();
    assert!(chown.success());
    let (port, accepted) = loopback_server();
    let mark = procs::marker("nobody");
    let calls = attempts(&f, port, &mark);
    let inner = f.command(&calls, &[]);
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(inner.get_current_dir().unwrap())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        // Its own plugin cache: the shared one belongs to root.
        .env("XDG_CACHE_HOME", f.path().join("cache"));
    for (k, v) in inner.get_envs() {
        if let (Some(v), false) = (v, k == "XDG_CACHE_HOME") {
            c.env(k, v);
        }
    }
    let out = c.output().unwrap();
    // Read back as root: git refuses a repository owned by someone else.
    let chown = Command::new("chown")
        .args(["-R", "0:0"])
        .arg(f.path())
        .status()
        .unwrap();
    assert!(chown.success());
    let o = f.outputs(&out, &calls);
    assert_contained(&f, &out, &o, &mark, accepted.load(Ordering::SeqCst));
}

/// A tool-level fixture: an agent sandbox with these settings over a temp workspace.
struct Direct {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ctx: ToolContext,
}

fn direct(config: SandboxConfig) -> Direct {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let agent = sbx::sandbox_with(&dir.path().join("state"), config, &[]).agent(AgentScope {
        id: "direct".into(),
        workspace: Some(root.clone()),
        writable: true,
        network: false,
    });
    Direct {
        _dir: dir,
        ctx: ToolContext {
            agent_id: AgentId::new(),
            root: root.clone(),
            spawner: None,
            sandbox: Some(agent),
        },
        root,
    }
}

impl Direct {
    async fn run(&self, command: &str, timeout_s: u64) -> String {
        ToolRegistry::builtin()
            .call(
                "run_command",
                &self.ctx,
                json!({"command": command, "timeout_s": timeout_s}),
                &crewbox::unstable::agent::permissions::CapSet::full(),
            )
            .await
            .unwrap_or_else(|e| panic!("run_command failed: {e}"))
            .content
    }
}

/// The server starts commands from init processes it cloned ahead of need; each
/// still gets namespaces of its own, none left from an earlier command: its shell is
/// pid 2 (after its init), its loopback has carried nothing yet and is up, and it sees
/// no System V segment although every command before it left one; its ids are mapped
/// to themselves. (Namespace inode numbers are recycled once a namespace is gone, so
/// only the host's, which live on, are compared.)
#[tokio::test]
async fn every_command_gets_fresh_namespaces_even_when_started_ahead() {
    if sbx::unavailable_for("the namespace test") {
        return;
    }
    let d = direct(SandboxConfig::default());
    let show = "echo pid=$$; for n in net mnt pid user ipc; do readlink /proc/self/ns/$n; done; \
                echo uid=$(id -u); echo lo=$(awk '$1 == \"lo:\" { print $2 }' /proc/net/dev); \
                echo shm=$(ipcs -m | grep -c '^0x'); ipcmk -M 4096 > /dev/null; \
                perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(Listen => 1, \
                LocalAddr => \"127.0.0.1:0\") or die \"bind: $!\"; IO::Socket::INET->new(\
                PeerAddr => \"127.0.0.1:\" . $s->sockport) or die \"connect: $!\"; \
                print \"loopback up\\n\"'";
    let host: Vec<String> = ["net", "mnt", "pid", "user", "ipc"]
        .iter()
        .map(|n| {
            std::fs::read_link(format!("/proc/self/ns/{n}"))
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let uid = std::process::Command::new("id").arg("-u").output().unwrap();
    let uid = String::from_utf8_lossy(&uid.stdout).trim().to_owned();
    for round in 0..4 {
        // A pause lets the server clone the next init process ahead of the command.
        tokio::time::sleep(Duration::from_millis(if round % 2 == 0 { 200 } else { 0 })).await;
        let out = d.run(show, 30).await;
        let value = |key: &str| {
            out.lines()
                .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("round {round}: no {key}: {out}"))
                .to_owned()
        };
        assert_eq!(
            value("pid"),
            "2",
            "round {round}: a fresh pid namespace: {out}"
        );
        assert_eq!(
            value("lo"),
            "0",
            "round {round}: a fresh network namespace: {out}"
        );
        assert_eq!(
            value("shm"),
            "0",
            "round {round}: a fresh IPC namespace: {out}"
        );
        assert_eq!(
            value("uid"),
            uid,
            "round {round}: ids mapped to themselves: {out}"
        );
        assert!(out.contains("loopback up"), "round {round}: {out}");
        let ns: Vec<&str> = out.lines().filter(|l| l.contains(":[")).collect();
        assert_eq!(ns.len(), 5, "round {round}: {out}");
        for (ns, host) in ns.iter().zip(&host) {
            assert_ne!(
                ns.trim(),
                host,
                "round {round}: a namespace of the host: {out}"
            );
        }
    }
}

fn limited(max_processes: u32) -> SandboxConfig {
    let mut config = SandboxConfig::default();
    config.limits.max_processes = max_processes;
    config
}

#[tokio::test]
async fn the_number_of_processes_is_bounded() {
    // 600 sleeping shells are harmless unbounded, and show whether the bound holds. The
    // bound is exact for other users (RLIMIT_NPROC per user namespace); for root it is
    // the namespace's pid_max, at least the kernel's minimum of 301.
    let d = direct(limited(64));
    let mark = procs::marker("many");
    let peak = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (peak, stop, mark) = (peak.clone(), stop.clone(), mark.clone());
        std::thread::spawn(move || {
            while stop.load(Ordering::SeqCst) == 0 {
                peak.fetch_max(procs::marked(&mark).len(), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let out = d
        .run(
            &format!(
                "i=0; while [ $i -lt 600 ]; do sh -c 'echo up; sleep 8; :' {mark} & i=$((i+1)); done; sleep 4; echo spawned"
            ),
            30,
        )
        .await;
    stop.store(1, Ordering::SeqCst);
    sampler.join().unwrap();
    procs::kill(&mark);
    let peak = peak.load(Ordering::SeqCst);
    // Each shell that started says so (`echo` is a builtin: no fork); one whose own
    // fork was refused ends at once, too soon for the sampler to see it.
    assert!(peak > 0 || out.contains("up"), "nothing started: {out}");
    assert!(peak < 310, "{peak} processes ran at once: {out}");
    assert!(
        out.contains("fork") || out.contains("Resource temporarily unavailable"),
        "{out}"
    );
}

#[tokio::test]
async fn a_fork_bomb_is_bounded_and_ends_with_its_timeout() {
    // A fork bomb without the sandbox would not be bounded.
    if sbx::unavailable_for("the fork-bomb test") {
        return;
    }
    let d = direct(limited(64));
    let before = procs::count();
    let started = std::time::Instant::now();
    let out = d.run("bomb() { bomb | bomb & }; bomb; sleep 30", 2).await;
    // Either the bomb's own shell could not fork any more and gave up, or the timeout
    // ended it; both leave nothing behind.
    assert!(
        out.starts_with("[timed out after 2 s") || out.contains("Cannot fork"),
        "{out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // Everything is gone again (the host may start a few processes meanwhile).
    assert!(
        procs::wait_for(Duration::from_secs(10), || procs::count() < before + 50),
        "{} processes before, {} after",
        before,
        procs::count()
    );
}

#[tokio::test]
async fn files_and_cpu_time_are_bounded() {
    let mut config = SandboxConfig::default();
    config.limits.max_file_size = 1 << 20;
    config.limits.cpu_time_s = 1;
    let d = direct(config);
    let out = d
        .run(
            "head -c 3000000 /dev/zero > big; echo rc=$?; wc -c < big",
            30,
        )
        .await;
    assert!(out.contains("1048576"), "{out}");
    assert!(std::fs::metadata(d.root.join("big")).unwrap().len() <= 1 << 20);
    let started = std::time::Instant::now();
    let out = d.run("while :; do :; done", 60).await;
    assert!(
        out.contains("killed by signal") || out.contains("exit code 1"),
        "{out}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn memory_and_dev_shm_are_bounded() {
    // The user's cap; /dev/shm keeps its default of 64 MiB.
    let f = Fixture::new("memory_mb = 256\n");
    let calls = [
        (
            "alloc",
            "python3 -c 'b = bytearray(600 << 20); b[-1] = 1; print(\"ALLOCATED\")' 2>&1; echo rc=$?"
                .to_owned(),
        ),
        (
            "small",
            "python3 -c 'b = bytearray(32 << 20); print(\"SMALL-OK\")' 2>&1".to_owned(),
        ),
        (
            "shm",
            "head -c 209715200 /dev/zero > /dev/shm/fill 2>&1; echo rc=$?; \
             wc -c < /dev/shm/fill; df -m /dev/shm | tail -1"
                .to_owned(),
        ),
    ];
    let (_out, o) = f.run(&calls, &[]);
    assert!(!o["alloc"].contains("ALLOCATED"), "{}", o["alloc"]);
    assert!(o["alloc"].contains("MemoryError"), "{}", o["alloc"]);
    assert!(o["small"].contains("SMALL-OK"), "{}", o["small"]);
    let shm = &o["shm"];
    assert!(!shm.contains("rc=0"), "200 MiB fit into /dev/shm: {shm}");
    let written: u64 = shm
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{shm}"));
    assert!(written <= 64 << 20, "{written} bytes in /dev/shm: {shm}");
}

#[test]
fn a_memory_cap_out_of_range_is_an_error_naming_the_key() {
    let f = Fixture::new("memory_mb = 8\n");
    let out = f.base_command(&["config"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("memory_mb") && err.contains("config.toml"),
        "{err}"
    );
}

#[tokio::test]
async fn writes_stay_in_the_workspace_and_private_dirs() {
    let d = direct(SandboxConfig::default());
    let name = procs::marker("write");
    let home = PathBuf::from(std::env::var("HOME").unwrap());
    let outside = d.root.parent().unwrap().join("outside.txt");
    let escapes = [
        outside.clone(),
        Path::new("/usr").join(&name),
        Path::new("/tmp").join(&name),
        home.join(&name),
        Path::new("/dev/shm").join(&name),
    ];
    let out = d
        .run(
            &format!(
                "echo in > inside.txt && echo h > $HOME/{name} && echo t > /tmp/{name} && \
                 echo s > /dev/shm/{name} && cat $HOME/{name} /tmp/{name}; \
                 echo out > {}; echo x > /usr/{name}",
                outside.display()
            ),
            30,
        )
        .await;
    let escaped: Vec<_> = escapes.iter().filter(|p| p.exists()).cloned().collect();
    for p in &escaped {
        let _ = std::fs::remove_file(p);
    }
    assert_eq!(
        std::fs::read_to_string(d.root.join("inside.txt")).unwrap(),
        "in\n"
    );
    assert!(out.contains("h\nt\n"), "{out}");
    assert!(escaped.is_empty(), "written outside: {escaped:?}\n{out}");
    // The private dirs persist between one agent's commands.
    let out = d.run(&format!("cat $HOME/{name} /tmp/{name}"), 30).await;
    assert!(out.contains("h\nt\n"), "{out}");
}

#[test]
fn health_reports_what_the_sandbox_can_use() {
    let dir = git_repo(|_| {});
    let out = crate::support::repo::bin(dir.path(), &["health", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &report["sandbox"];
    assert_eq!(s["mode"], "on", "{s}");
    assert_eq!(s["ready"], true, "{s}");
    assert!(s["landlock_abi"].as_i64().unwrap() >= 3, "{s}");
    assert_eq!(s["user_namespaces"], true);
    assert_eq!(s["network_isolation"], true);
    assert!(s["process_limit"].is_string(), "{s}");
    let text = crate::support::repo::bin(dir.path(), &["health"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("sandbox: on, ready · Landlock ABI"), "{text}");
}

#[test]
fn with_the_sandbox_off_every_run_says_so() {
    let dir = git_repo(|_| {});
    std::fs::create_dir_all(dir.path().join("config/crewbox")).unwrap();
    std::fs::write(
        dir.path().join("config/crewbox/config.toml"),
        "sandbox = \"off\"\n",
    )
    .unwrap();
    let (out, _) = crate::support::repo::crewbox(
        dir.path(),
        "[[reply]]\ntext = \"done\"\n",
        &["run", "go", "--mode", "single"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: the process sandbox is off (sandbox = \"off\" in"),
        "{stderr}"
    );
    let health = crate::support::repo::bin(dir.path(), &["health"]);
    assert!(String::from_utf8_lossy(&health.stdout).contains("sandbox: OFF"));
}

#[test]
fn command_provider_gets_exactly_its_pass_env_and_the_network() {
    let f = Fixture::new("");
    let (port, accepted) = loopback_server();
    let bin = f.path().join("agent-cli");
    std::fs::create_dir_all(&bin).unwrap();
    let cli = bin.join("cli.sh");
    std::fs::write(
        &cli,
        format!(
            "#!/bin/sh\ncat > /dev/null\n[ \"$OPENAI_API_KEY\" = \"{}\" ] && echo oa=match\n\
             echo \"odd=[$LLM_AUTH_VALUE] cwd=$PWD\"\n{}\n",
            f.keys.openai,
            connect_command(port)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cli, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = f.path().join("config/crewbox/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "[providers.cli]\nkind = \"command\"\ncommand = [\"{}\"]\npass_env = [\"OPENAI_API_KEY\"]\nread = [\"{}\"]\n",
        cli.display(),
        bin.display()
    ));
    std::fs::write(&config, text).unwrap();
    let out = f
        .base_command(&[
            "run",
            "go",
            "--mode",
            "single",
            "--provider",
            "cli",
            "--json",
        ])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let result = report["agents"][0]["result"].as_str().unwrap_or_default();
    assert!(
        result.contains("oa=match"),
        "the named variable is passed: {report:#}"
    );
    assert!(result.contains("odd=[]"), "{result}");
    assert!(
        result.contains("cwd=") && result.contains("crewbox-wt-"),
        "runs in its worktree: {result}"
    );
    assert!(
        result.contains("CONNECTED"),
        "the CLI reaches its API: {result}"
    );
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

/// Runs `crewbox ARGS` where the kernel refuses new user namespaces: inside a user
/// namespace whose own limit of nested ones is 0 (a real refusal by this kernel, for
/// this process tree only). `None` when even that cannot be arranged.
fn without_user_namespaces(f: &Fixture, inner: Command) -> Option<Output> {
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "true"])
        .output()
        .ok()?;
    if !probe.status.success() {
        return None;
    }
    let mut c = Command::new("unshare");
    c.args(["--user", "--map-root-user", "sh", "-c"])
        .arg("echo 0 > /proc/sys/user/max_user_namespaces && exec \"$@\"")
        .arg("sh")
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(inner.get_current_dir().unwrap_or(f.path()));
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    Some(c.output().unwrap())
}

#[test]
fn without_kernel_support_commands_are_refused_never_run_unconfined() {
    let f = Fixture::new("");
    let marker = f.path().join("ran.txt");
    let calls = [("touch", format!("touch {}; echo ran", marker.display()))];
    let Some(out) = without_user_namespaces(&f, f.command(&calls, &[])) else {
        peers::cannot_run(
            "the no-kernel-support test",
            "it cannot create a user namespace to take user namespaces away in",
        );
        return;
    };
    let o = f.outputs(&out, &calls);
    assert!(!marker.exists(), "the command ran: {}", o["touch"]);
    let shown = &o["touch"];
    assert!(
        shown.contains("process sandbox is not available")
            && shown.contains("user namespaces")
            && shown.contains("sandbox = \"off\""),
        "{shown}"
    );
    let health = without_user_namespaces(&f, f.base_command(&["health", "--json"])).unwrap();
    let report: Value = serde_json::from_slice(&health.stdout).unwrap();
    assert_eq!(report["sandbox"]["ready"], false, "{report:#}");
    assert_eq!(report["sandbox"]["user_namespaces"], false, "{report:#}");
}

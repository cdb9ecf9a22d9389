//! A real `nats-server` with JetStream for one test: its own loopback port and store
//! directory, killed when dropped. Installed by `scripts/test-deps.sh` (Debian's
//! package); missing, the test skips loudly (or fails under `CREWBOX_REQUIRE_PEERS=1`).

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running server.
pub struct NatsServer {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl NatsServer {
    /// Starts a server, or reports the peer missing and returns None.
    pub fn start() -> Option<Self> {
        Self::start_with("", &[])
    }

    /// Starts a server whose config file also holds `extra` (e.g. an `authorization`
    /// block), with `env` set for the `$VAR`s it names, or reports the peer missing and
    /// returns None.
    pub fn start_with(extra: &str, env: &[(&str, &str)]) -> Option<Self> {
        let Some(bin) = super::peers::venv_tool("nats-server").or_else(|| {
            ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
                .iter()
                .map(std::path::PathBuf::from)
                .find(|p| p.is_file())
        }) else {
            super::peers::missing("nats-server", "not on PATH (Debian package nats-server)");
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let conf = dir.path().join("server.conf");
            std::fs::write(
                &conf,
                format!(
                    "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: {:?} }}\n{extra}\n",
                    dir.path().join("js")
                ),
            )
            .unwrap();
            let mut child = Command::new(&bin)
                .arg("-c")
                .arg(&conf)
                .envs(env.iter().copied())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start nats-server");
            let up = super::procs::wait_for(Duration::from_secs(10), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            });
            if up {
                return Some(Self {
                    child,
                    port,
                    _dir: dir,
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("nats-server did not start");
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bare repository at `dir/remote.git` made `origin` of `dir/repo`, with its branch
/// pushed (as a user who shares a repository has).
pub fn bare_origin(dir: &Path) -> String {
    let remote = dir.join("remote.git");
    let git = |args: &[&str], at: &Path| {
        let out = Command::new("git")
            .arg("-C")
            .arg(at)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(
        &["init", "--quiet", "--bare", remote.to_str().unwrap()],
        dir,
    );
    let url = remote.to_str().unwrap().to_owned();
    git(&["remote", "add", "origin", &url], &dir.join("repo"));
    git(
        &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
        &dir.join("repo"),
    );
    url
}

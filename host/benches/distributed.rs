//! Scale-out against the local executor, in the same run: 1,000 single-turn scripted
//! agents (20 `broadcast` runs of a 50-member team, all at once) executed in this
//! process, then through a real nats-server by two `crewbox worker` processes on this
//! machine. Last line: one JSON object.
//!
//! - `local_agents_per_s` / `nats_agents_per_s`: agents finished per second of wall time;
//!   `throughput_ratio` = nats / local (on one machine the workers add transport, a
//!   checkout per agent and a second store, and gain no cores: the figure is the cost of
//!   distribution, which more machines pay back).
//! - `*_dispatch_p50_ms` / `*_dispatch_p99_ms`: from an agent's row being recorded
//!   (queued) to its start (`running`) — the spawn queue's slots locally; publish, pull
//!   and checkout on a worker.
//!
//! Needs `nats-server` (Debian package; scripts/test-deps.sh installs it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crewbox::unstable::config::ExecutorKind;
use crewbox::unstable::store::Store;
use crewbox::{Mode, ModeChoice, Repository, RunRequest, RunStatus};
use tokio_util::sync::CancellationToken;

const MEMBERS: usize = 50;
const RUNS: usize = 20;
const WORKERS: usize = 2;
const SLOTS: usize = 4;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn nats_server() -> PathBuf {
    ["/usr/sbin/nats-server", "/usr/bin/nats-server"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("nats-server is not installed (scripts/test-deps.sh installs it)")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_until(what: &str, ok: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ok() {
        assert!(Instant::now() < deadline, "{what} did not happen");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn percentile(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let i = ((xs.len() as f64 - 1.0) * p).round() as usize;
    (xs[i] * 10.0).round() / 10.0
}

/// Runs every request at once; wall ms and each agent's queued→running ms.
async fn measure(engine: &crewbox::Engine, req: &RunRequest, store: &Store) -> (f64, Vec<f64>) {
    let start = Instant::now();
    let runs = futures::future::join_all((0..RUNS).map(|_| engine.run(req.clone()))).await;
    let wall = start.elapsed().as_secs_f64() * 1e3;
    let mut latencies = Vec::with_capacity(RUNS * MEMBERS);
    for r in runs {
        let r = r.unwrap();
        assert_eq!(r.status, RunStatus::Completed, "{}", r.render_text());
        assert_eq!(r.agents.len(), MEMBERS);
        for a in store.agents(&r.run_id).await.unwrap() {
            latencies.push((a.started_at.unwrap() - a.created_at) as f64);
        }
    }
    (wall, latencies)
}

struct Guard(Vec<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        for c in &mut self.0 {
            // SAFETY: signalling a child this process started.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".crewbox/teams")).unwrap();
    let mut team = "mode = \"broadcast\"\n".to_owned();
    for i in 0..MEMBERS {
        team.push_str(&format!("\n[[members]]\nname = \"m{i}\"\n"));
    }
    std::fs::write(repo.join(".crewbox/teams/wide.toml"), team).unwrap();
    std::fs::write(repo.join("notes.txt"), "alpha\n").unwrap();
    git(&repo, &["init", "--quiet"]);
    git(&repo, &["add", "notes.txt"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@localhost",
            "commit",
            "--quiet",
            "-m",
            "init",
        ],
    );
    let remote = dir.path().join("remote.git");
    git(
        dir.path(),
        &["init", "--quiet", "--bare", remote.to_str().unwrap()],
    );
    git(
        &repo,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    git(
        &repo,
        &["push", "--quiet", "origin", "HEAD:refs/heads/main"],
    );
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "[[reply]]\nrepeat = true\ntext = \"done\"\n").unwrap();

    let port = free_port();
    let mut children = Guard(Vec::new());
    children.0.push(
        Command::new(nats_server())
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path().join("nats"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_until("nats-server start", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let config = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "max_concurrent = {}\n[nats]\nurl = \"nats://127.0.0.1:{port}\"\npool = \"bench\"\n\
             allow_remotes = [\"{}\"]\n",
            WORKERS * SLOTS,
            remote.display()
        ),
    )
    .unwrap();
    for (var, sub) in [("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache")] {
        // SAFETY: set before the runtime starts any thread that reads the environment.
        unsafe { std::env::set_var(var, dir.path().join(sub)) };
    }
    for w in 0..WORKERS {
        let log = dir.path().join(format!("w{w}.log"));
        children.0.push(
            Command::new(env!("CARGO_BIN_EXE_crewbox"))
                .args([
                    "worker",
                    "--slots",
                    &SLOTS.to_string(),
                    "--name",
                    &format!("w{w}"),
                ])
                .arg("--script")
                .arg(&script)
                .env("CREWBOX_STATE_DIR", dir.path().join(format!("w{w}")))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap(),
        );
        wait_until("a worker start", || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.contains("serving pool"))
        });
    }

    let req = RunRequest {
        prompt: "do the work".into(),
        team: Some("wide".into()),
        mode: Some(ModeChoice::Mode(Mode::Broadcast)),
        script: Some(script.clone()),
        ..RunRequest::default()
    };
    let state = dir.path().join("state");
    let local = Repository::open(Some(&repo), Some(&state)).unwrap();
    let engine = local.engine(CancellationToken::new()).await.unwrap();
    let (local_ms, mut local_lat) = measure(&engine, &req, engine.store()).await;
    drop(engine);
    let nats = Repository::open(Some(&repo), Some(&state))
        .unwrap()
        .with_executor(ExecutorKind::Nats);
    let engine = nats.engine(CancellationToken::new()).await.unwrap();
    let (nats_ms, mut nats_lat) = measure(&engine, &req, engine.store()).await;
    let agents = (RUNS * MEMBERS) as f64;
    let local_rate = agents / (local_ms / 1e3);
    let nats_rate = agents / (nats_ms / 1e3);
    println!(
        "{}",
        serde_json::json!({
            "agents": RUNS * MEMBERS,
            "workers": WORKERS,
            "slots_per_worker": SLOTS,
            "local_ms": local_ms.round(),
            "nats_ms": nats_ms.round(),
            "local_agents_per_s": local_rate.round(),
            "nats_agents_per_s": nats_rate.round(),
            "throughput_ratio": (nats_rate / local_rate * 1000.0).round() / 1000.0,
            "local_dispatch_p50_ms": percentile(&mut local_lat, 0.5),
            "local_dispatch_p99_ms": percentile(&mut local_lat, 0.99),
            "nats_dispatch_p50_ms": percentile(&mut nats_lat, 0.5),
            "nats_dispatch_p99_ms": percentile(&mut nats_lat, 0.99),
        })
    );
}

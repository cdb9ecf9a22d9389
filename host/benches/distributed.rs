//! Scale-out against the local executor, in the same run: 1,000 single-turn scripted
//! agents (20 `broadcast` runs of a 50-member team, all at once) executed in this
//! process, then through a real nats-server by 1, 2 and 4 `crewbox worker` processes on
//! this machine (`CREWBOX_BENCH_WORKERS=1,2,4`), each count against a local run with as
//! many slots. Where the machine has a core for the coordinator and one per worker, each
//! worker is pinned to its own core with `taskset` (`pinned` says whether it was), so the
//! figure says what more machines buy; where it has not, the workers share the cores
//! with the coordinator and the nats-server, and the figures are the cost of
//! distribution on one machine. Last line: one JSON object (figures per worker count,
//! with the targets beside them).
//!
//! - `local_agents_per_s` / `nats_agents_per_s`: agents finished per second of wall time;
//!   `throughput_ratio` = nats / local (on one machine the workers add transport, a
//!   checkout per agent and a second store, and gain no cores: the figure is the cost of
//!   distribution, which more machines pay back).
//! - `*_dispatch_p50_ms` / `*_dispatch_p99_ms`: from an agent's row being recorded
//!   (queued) to its start (`running`) while a slot is free for it — 10 runs, one after
//!   the other, of a team with one member per slot: the spawn queue locally; publish,
//!   pull and the start on a worker. (The agents bench's spawn latency, with a free
//!   slot, is the same figure for the manager.)
//! - `*_queued_p50_ms`: the same span in the 1,000-agent batch above, where most of it
//!   is waiting for a slot (1,000 agents on 4 slots per worker).
//! - `*_exec_p50_ms`: from its start to its end as the agent reported them (on the
//!   worker for NATS): what a slot spends on one agent.
//! - `local_cpu_ms_per_agent` / `nats_cpu_ms_per_agent`: CPU time (user and system,
//!   from `/proc`) spent per agent of the 1,000-agent batch: locally by this process;
//!   over NATS by the coordinator (this process), the workers together and the
//!   nats-server. On one machine the ratio is bounded by these: the two sides share
//!   the same cores.
//! - `worker_store_agents` / `worker_store_kb`: the agent rows and the size (database
//!   and WAL) of the workers' own stores at the end of the round. A worker forgets the
//!   agents of answered tasks in batches of 64 or within a second, so the rows stay
//!   near that however many agents a worker ran.
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
const SLOTS: usize = 4;

/// Runs `command`, which must succeed (`what` names it in the panic).
fn ok(command: &mut Command, what: &str) {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn git(dir: &Path, args: &[&str]) {
    ok(
        Command::new("git").arg("-C").arg(dir).args(args),
        &format!("git {args:?}"),
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

/// What one measured batch of runs took.
struct Measured {
    /// Wall ms of all runs.
    wall: f64,
    /// Each agent's queued → running ms.
    dispatch: Vec<f64>,
    /// Each agent's running → finished ms (on the worker, as it reported).
    exec: Vec<f64>,
}

/// Each agent's queued → running ms over `rounds` runs of `req`, one after the other.
async fn dispatch_latency(
    engine: &crewbox::Engine,
    req: &RunRequest,
    store: &Store,
    rounds: usize,
) -> Vec<f64> {
    let mut out = Vec::new();
    for _ in 0..rounds {
        let r = engine.run(req.clone()).await.unwrap();
        assert_eq!(r.status, RunStatus::Completed, "{}", r.render_text());
        for a in store.agents(&r.run_id).await.unwrap() {
            out.push((a.started_at.unwrap() - a.created_at) as f64);
        }
    }
    out
}

/// Runs every request at once.
async fn measure(engine: &crewbox::Engine, req: &RunRequest, store: &Store) -> Measured {
    let start = Instant::now();
    let runs = futures::future::join_all((0..RUNS).map(|_| engine.run(req.clone()))).await;
    let wall = start.elapsed().as_secs_f64() * 1e3;
    let (mut dispatch, mut exec) = (Vec::new(), Vec::new());
    for r in runs {
        let r = r.unwrap();
        assert_eq!(r.status, RunStatus::Completed, "{}", r.render_text());
        assert_eq!(r.agents.len(), MEMBERS);
        for a in store.agents(&r.run_id).await.unwrap() {
            let started = a.started_at.unwrap();
            dispatch.push((started - a.created_at) as f64);
            exec.push((a.finished_at.unwrap() - started) as f64);
        }
    }
    Measured {
        wall,
        dispatch,
        exec,
    }
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
    for (var, sub) in [("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache")] {
        // SAFETY: set before the runtime starts any thread that reads the environment.
        unsafe { std::env::set_var(var, dir.path().join(sub)) };
    }
    let counts: Vec<usize> = std::env::var("CREWBOX_BENCH_WORKERS")
        .unwrap_or_else(|_| "1,2,4".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("CREWBOX_BENCH_WORKERS: numbers, comma-separated")
        })
        .collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let taskset = ["/usr/bin/taskset", "/bin/taskset"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    let req = RunRequest {
        prompt: "do the work".into(),
        team: Some("wide".into()),
        mode: Some(ModeChoice::Mode(Mode::Broadcast)),
        script: Some(script.clone()),
        ..RunRequest::default()
    };
    let agents = (RUNS * MEMBERS) as f64;
    let mut rounds = Vec::new();
    for &workers in &counts {
        write_config(dir.path(), port, workers * SLOTS, &remote);
        // One member per slot: each starts as soon as it is dispatched.
        let mut probe = "mode = \"broadcast\"\n".to_owned();
        for i in 0..workers * SLOTS {
            probe.push_str(&format!("\n[[members]]\nname = \"p{i}\"\n"));
        }
        std::fs::write(
            repo.join(format!(".crewbox/teams/probe{workers}.toml")),
            probe,
        )
        .unwrap();
        let probe = RunRequest {
            team: Some(format!("probe{workers}")),
            ..req.clone()
        };
        // The coordinator (this process) on core 0, worker w on core w + 1, when there
        // are that many cores.
        let pinned = taskset.is_some() && cores > workers;
        let mut procs = Guard(Vec::new());
        for w in 0..workers {
            // `CREWBOX_BENCH_LOGS=DIR` keeps the workers' logs there (with `RUST_LOG`).
            let logs = std::env::var_os("CREWBOX_BENCH_LOGS")
                .map_or_else(|| dir.path().to_path_buf(), PathBuf::from);
            let log = logs.join(format!("n{workers}-w{w}.log"));
            let mut c = match (&taskset, pinned) {
                (Some(ts), true) => {
                    let mut c = Command::new(ts);
                    c.args(["-c", &(w + 1).to_string()])
                        .arg(env!("CARGO_BIN_EXE_crewbox"));
                    c
                }
                _ => Command::new(env!("CARGO_BIN_EXE_crewbox")),
            };
            c.args([
                "worker",
                "--slots",
                &SLOTS.to_string(),
                "--name",
                &format!("n{workers}-w{w}"),
            ])
            .arg("--script")
            .arg(&script)
            .env(
                "CREWBOX_STATE_DIR",
                dir.path().join(format!("n{workers}-w{w}")),
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
            procs.0.push(c.spawn().unwrap());
            wait_until("a worker start", || {
                std::fs::read_to_string(&log).is_ok_and(|l| l.contains("serving pool"))
            });
        }
        let state = dir.path().join(format!("state-{workers}"));
        let opened = Repository::open(Some(&repo), Some(&state)).unwrap();
        let engine = opened.engine(CancellationToken::new()).await.unwrap();
        let before = cpu_ms(std::process::id());
        let mut local = measure(&engine, &req, engine.store()).await;
        let local_cpu = cpu_ms(std::process::id()) - before;
        let mut local_dispatch = dispatch_latency(&engine, &probe, engine.store(), 10).await;
        drop(engine);
        let opened = Repository::open(Some(&repo), Some(&state))
            .unwrap()
            .with_executor(ExecutorKind::Nats);
        let engine = opened.engine(CancellationToken::new()).await.unwrap();
        if let (Some(ts), true) = (&taskset, pinned) {
            pin_self(ts, "0");
        }
        let pids = CpuOf {
            coordinator: vec![std::process::id()],
            workers: procs.0.iter().map(Child::id).collect(),
            nats_server: vec![children.0[0].id()],
        };
        let before = pids.read();
        let mut nats = measure(&engine, &req, engine.store()).await;
        let nats_cpu = pids.read().since(&before, agents);
        let mut nats_dispatch = dispatch_latency(&engine, &probe, engine.store(), 10).await;
        if let (Some(ts), true) = (&taskset, pinned) {
            pin_self(ts, &format!("0-{}", cores - 1));
        }
        drop(engine);
        // What the workers' own stores hold after the round, before they stop.
        let (kept_agents, kept_kb) = (0..workers)
            .map(|w| own_stores(&dir.path().join(format!("n{workers}-w{w}"))))
            .fold((0, 0), |(a, k), (a2, k2)| (a + a2, k + k2));
        drop(procs);
        let local_rate = agents / (local.wall / 1e3);
        let nats_rate = agents / (nats.wall / 1e3);
        let round = serde_json::json!({
            "workers": workers,
            "pinned": pinned,
            "local_ms": local.wall.round(),
            "nats_ms": nats.wall.round(),
            "local_agents_per_s": local_rate.round(),
            "nats_agents_per_s": nats_rate.round(),
            "throughput_ratio": (nats_rate / local_rate * 1000.0).round() / 1000.0,
            "local_dispatch_p50_ms": percentile(&mut local_dispatch, 0.5),
            "local_dispatch_p99_ms": percentile(&mut local_dispatch, 0.99),
            "local_queued_p50_ms": percentile(&mut local.dispatch, 0.5),
            "local_exec_p50_ms": percentile(&mut local.exec, 0.5),
            "nats_dispatch_p50_ms": percentile(&mut nats_dispatch, 0.5),
            "nats_dispatch_p99_ms": percentile(&mut nats_dispatch, 0.99),
            "nats_queued_p50_ms": percentile(&mut nats.dispatch, 0.5),
            "nats_exec_p50_ms": percentile(&mut nats.exec, 0.5),
            "local_cpu_ms_per_agent": (local_cpu / agents * 1000.0).round() / 1000.0,
            "nats_cpu_ms_per_agent": nats_cpu,
            "worker_store_agents": kept_agents,
            "worker_store_kb": kept_kb,
        });
        eprintln!("{round}");
        rounds.push(round);
    }
    let nats_of = |n: usize| {
        rounds
            .iter()
            .find(|r| r["workers"] == n)
            .and_then(|r| r["nats_agents_per_s"].as_f64())
    };
    let scaling = match (nats_of(1), counts.iter().max().and_then(|&n| nats_of(n))) {
        (Some(one), Some(most)) if one > 0.0 => (most / one * 100.0).round() / 100.0,
        _ => 0.0,
    };
    println!(
        "{}",
        serde_json::json!({
            "agents": RUNS * MEMBERS,
            "slots_per_worker": SLOTS,
            "cores": cores,
            "rounds": rounds,
            "nats_scaling_most_vs_one_worker": scaling,
            "targets": {
                "throughput_ratio": ">= 0.5 (2 workers)",
                "nats_dispatch_p50_ms": "<= 50",
                "nats_dispatch_p99_ms": "<= 250",
            },
        })
    );
}

/// The agent rows and the size in KB (database and WAL) of the own stores of the
/// worker whose state base is `base`.
fn own_stores(base: &Path) -> (i64, u64) {
    let (mut agents, mut bytes) = (0, 0);
    for dir in std::fs::read_dir(base.join("worker")).unwrap().flatten() {
        let dir = dir.path();
        if !dir
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("run-")
        {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap().flatten() {
            bytes += f.metadata().map_or(0, |m| m.len());
        }
        let db = rusqlite::Connection::open(dir.join("crewbox.db")).unwrap();
        agents += db
            .query_row("SELECT COUNT(*) FROM agents", [], |r| r.get::<_, i64>(0))
            .unwrap();
    }
    (agents, bytes / 1024)
}

/// The CPU time (user and system, all threads) process `pid` has spent, in ms.
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name (in parentheses, which may hold spaces): the state is
    // field 3, utime and stime fields 14 and 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf reads a constant.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks * 1000.0 / per_s
}

/// The processes of a NATS round, by part.
struct CpuOf {
    coordinator: Vec<u32>,
    workers: Vec<u32>,
    nats_server: Vec<u32>,
}

/// CPU ms of each part of a [`CpuOf`].
struct CpuSpent([f64; 3]);

impl CpuOf {
    fn read(&self) -> CpuSpent {
        let sum = |pids: &[u32]| pids.iter().map(|&p| cpu_ms(p)).sum();
        CpuSpent([
            sum(&self.coordinator),
            sum(&self.workers),
            sum(&self.nats_server),
        ])
    }
}

impl CpuSpent {
    /// Per agent since `before`, as JSON.
    fn since(&self, before: &CpuSpent, agents: f64) -> serde_json::Value {
        let per = |i: usize| ((self.0[i] - before.0[i]) / agents * 1000.0).round() / 1000.0;
        serde_json::json!({
            "coordinator": per(0),
            "workers": per(1),
            "nats_server": per(2),
            "all": ((0..3).map(|i| self.0[i] - before.0[i]).sum::<f64>() / agents * 1000.0)
                .round() / 1000.0,
        })
    }
}

/// Sets the CPU affinity of every thread of this process.
///
/// `taskset -a` sets one thread after the other, and fails when one of them ended
/// meanwhile (a blocking-pool thread that idled out): then it is run again.
fn pin_self(taskset: &Path, cpus: &str) {
    let pid = std::process::id().to_string();
    for attempt in 1..=5 {
        let out = Command::new(taskset)
            .args(["-a", "-p", "-c", cpus, &pid])
            .output()
            .unwrap();
        if out.status.success() {
            return;
        }
        assert!(
            attempt < 5,
            "taskset: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The user's config for a round: as many slots locally as the round's workers have.
fn write_config(base: &Path, port: u16, slots: usize, remote: &Path) {
    let config = base.join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "max_concurrent = {slots}\n[nats]\nurl = \"nats://127.0.0.1:{port}\"\npool = \"bench\"\n\
             allow_remotes = [\"{}\"]\n",
            remote.display()
        ),
    )
    .unwrap();
}

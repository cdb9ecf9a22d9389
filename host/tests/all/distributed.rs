//! Scale-out end to end with a real nats-server (JetStream on loopback), a bare git
//! remote in a temp dir, `crewbox worker` processes and a coordinator: swarms and
//! orchestrate teams complete across workers; `kill -9` of a worker mid-task has the
//! task finish once on another; `kill -9` of the coordinator is finished by `resume`;
//! no secret reaches the server; hostile tasks are refused. Counts are taken from the
//! coordinator's store (agent rows, recorded results) and from the workers' own tallies
//! of tasks they ran, so a lost result or a second run of an agent fails.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::store::agent_record;
use crate::support::nats::{NatsServer, bare_origin};
use crate::support::procs::wait_for;
use crate::support::repo::{command, git_repo, state_dir};

use crewbox::Event;
use crewbox::unstable::agent::AgentState;
use crewbox::unstable::ids::RunId;
use crewbox::unstable::store::{AgentRecord, AgentWorker, StepState, Store};

const POOL: &str = "t";
const CANARY: &str = "sk-canary-5d1f7a0c9e";
const CANARY_2: &str = "canary-password-83bd";

/// A repository with a bare `origin`, a server, and the user config every process
/// (coordinator and workers) reads: `executor = "nats"`, a 2 s ack wait.
struct Cluster {
    dir: tempfile::TempDir,
    nats: NatsServer,
    remote: String,
    /// Set for workers (a worker's own user config, its NATS password).
    worker_env: Vec<(String, String)>,
    /// Set for the coordinator.
    coordinator_env: Vec<(String, String)>,
}

fn cluster(setup: impl FnOnce(&Path)) -> Option<Cluster> {
    cluster_on(NatsServer::start()?, "", setup)
}

/// A cluster on `nats`, with `nats_extra` added to the `[nats]` section of the user
/// config.
fn cluster_on(nats: NatsServer, nats_extra: &str, setup: impl FnOnce(&Path)) -> Option<Cluster> {
    let dir = git_repo(setup);
    let remote = bare_origin(dir.path());
    let config = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "executor = \"nats\"\n\
             [providers.canary]\nkind = \"openai\"\nmodel = \"m\"\n\
             base_url = \"http://127.0.0.1:9\"\napi_key_env = \"CANARY_KEY\"\n\
             [nats]\nurl = \"{}\"\npool = \"{POOL}\"\nack_wait_s = 2\n{nats_extra}",
            nats.url()
        ),
    )
    .unwrap();
    Some(Cluster {
        dir,
        nats,
        remote,
        worker_env: Vec::new(),
        coordinator_env: Vec::new(),
    })
}

impl Cluster {
    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn script(&self, text: &str) -> PathBuf {
        let p = self.path().join("script.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A worker with its own state directory (as on its own machine), its stderr in
    /// `<name>.log`, with the canary keys in its environment.
    fn worker(&self, name: &str) -> Worker {
        let log = self.path().join(format!("{name}.log"));
        let script = self.path().join("script.toml");
        let mut c = command(
            self.path(),
            &[
                "worker",
                "--pool",
                POOL,
                "--slots",
                "2",
                "--name",
                name,
                "--allow-remote",
                &self.remote,
                "--script",
                script.to_str().unwrap(),
            ],
        );
        c.env("CREWBOX_STATE_DIR", self.path().join(format!("w-{name}")))
            .env("ANTHROPIC_API_KEY", CANARY)
            .env("CANARY_KEY", CANARY_2)
            .envs(self.worker_env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let child = c.spawn().unwrap();
        let ready = wait_for(Duration::from_secs(30), || {
            std::fs::read_to_string(&log).is_ok_and(|l| l.contains("serving pool"))
        });
        assert!(
            ready,
            "worker {name} did not start: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Worker { child, log }
    }

    /// `crewbox ARGS --script script.toml --json` as the coordinator.
    fn coordinator(&self, args: &[&str]) -> std::process::Command {
        let script = self.path().join("script.toml");
        let mut all = args.to_vec();
        if args[0] != "resume" {
            all.extend(["--script", script.to_str().unwrap()]);
        }
        all.push("--json");
        let mut c = command(self.path(), &all);
        c.env("ANTHROPIC_API_KEY", CANARY)
            .env("CANARY_KEY", CANARY_2)
            .envs(self.coordinator_env.iter().map(|(k, v)| (k, v)));
        c
    }

    fn run(&self, args: &[&str]) -> serde_json::Value {
        let out = self.coordinator(args).output().unwrap();
        report(&out)
    }

    fn store(&self) -> Db {
        Db::open(self.path())
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn report(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

struct Worker {
    child: Child,
    log: PathBuf,
}

/// What a worker said it did when it stopped.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tally {
    ran: u64,
    skipped: u64,
    refused: u64,
}

impl Worker {
    /// SIGTERM, then its tally.
    fn stop(mut self) -> Tally {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        let log = std::fs::read_to_string(&self.log).unwrap();
        assert!(status.success(), "worker failed: {log}");
        let line = log
            .lines()
            .find(|l| l.starts_with("crewbox worker stopped:"))
            .unwrap_or_else(|| panic!("no tally: {log}"));
        let n = |what: &str| -> u64 {
            let before = line.split(what).next().unwrap();
            before
                .rsplit(|c: char| !c.is_ascii_digit())
                .find(|s| !s.is_empty())
                .unwrap()
                .parse()
                .unwrap()
        };
        Tally {
            ran: n(" run"),
            skipped: n(" already done"),
            refused: n(" refused"),
        }
    }

    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// A worker the test did not stop (it panicked first) is killed and reaped, so no
/// `crewbox worker` outlives its test.
impl Drop for Worker {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A coordinator started in the background: killed and reaped if the test panics before
/// it reads its output, so none outlives its test.
struct Running(Option<Child>);

impl Running {
    fn output(mut self) -> std::process::Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }

    /// Its output once it ended, or a failure naming `what` when it is still running
    /// after `most` (it is killed).
    fn output_within(mut self, most: Duration, what: &str) -> std::process::Output {
        let child = std::cell::RefCell::new(self.0.as_mut().unwrap());
        let ended = wait_for(most, || {
            child.borrow_mut().try_wait().ok().flatten().is_some()
        });
        if !ended {
            let _ = child.into_inner().kill();
            let out = self.0.take().unwrap().wait_with_output().unwrap();
            panic!(
                "{what}: the coordinator still waited after {most:?}; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        self.output()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

struct Db {
    rt: tokio::runtime::Runtime,
    store: Store,
}

impl Db {
    fn open(dir: &Path) -> Self {
        let rt = runtime();
        let store = Store::open(&state_dir(dir)).unwrap();
        Self { rt, store }
    }

    fn agents(&self, run: &RunId) -> Vec<AgentRecord> {
        self.rt.block_on(self.store.agents(run)).unwrap()
    }

    fn workers(&self, run: &RunId) -> Vec<AgentWorker> {
        self.rt.block_on(self.store.agent_workers(run)).unwrap()
    }

    fn unfinished(&self) -> Vec<RunId> {
        self.rt
            .block_on(self.store.unfinished_runs())
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    }
}

/// Every message the server routes (subject, headers and payload as text), collected
/// by a subscriber to `>` in a thread of its own.
struct Wiretap {
    seen: Arc<Mutex<Vec<String>>>,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Wiretap {
    fn start(url: String) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn({
            let seen = seen.clone();
            move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async move {
                    use futures::StreamExt;
                    let client = async_nats::connect(url).await.unwrap();
                    let mut sub = client.subscribe(">").await.unwrap();
                    client.flush().await.unwrap();
                    ready_tx.send(()).unwrap();
                    loop {
                        tokio::select! {
                            m = sub.next() => {
                                let Some(m) = m else { break };
                                let text = format!(
                                    "{} {:?} {}",
                                    m.subject,
                                    m.headers,
                                    String::from_utf8_lossy(&m.payload)
                                );
                                seen.lock().unwrap().push(text);
                            }
                            _ = &mut stopped => break,
                        }
                    }
                });
            }
        });
        ready_rx.recv().unwrap();
        Self { seen, stop, thread }
    }

    fn finish(self) -> Vec<String> {
        let _ = self.stop.send(());
        self.thread.join().unwrap();
        Arc::try_unwrap(self.seen).unwrap().into_inner().unwrap()
    }
}

/// Three swarm members, each slower than the 2 s ack wait (so a missing heartbeat would
/// hand a task to a second worker), each writing `notes.txt`.
const SWARM: &str = r#"
[[reply]]
agent = "executor"
turn = 1
repeat = true
delay_ms = 2500
[[reply.tool_calls]]
name = "write_file"
args = { path = "notes.txt", content = "beta\n" }

[[reply]]
agent = "executor"
turn = 2
repeat = true
text = "Wrote beta into notes.txt"
"#;

fn run_id(report: &serde_json::Value) -> RunId {
    RunId::from_string(report["run_id"].as_str().unwrap())
}

fn branch_exists(dir: &Path, branch: &str) -> bool {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir.join("repo"))
        .args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ])
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn a_swarm_runs_across_two_workers_each_agent_once_and_no_secret_reaches_the_server() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script(SWARM);
    let tap = Wiretap::start(c.nats.url());
    // The store a worker killed with -9 left behind (its lock free): the next one
    // deletes it when it starts.
    let dead = c.path().join("w-wa/worker/run-1-dead");
    std::fs::create_dir_all(&dead).unwrap();
    std::fs::write(dead.join("worker.lock"), "").unwrap();
    std::fs::write(dead.join("crewbox.db"), "left behind").unwrap();
    let (a, b) = (c.worker("wa"), c.worker("wb"));
    assert!(!dead.exists(), "a dead worker's store was left");
    let report = c.run(&[
        "run",
        "write beta",
        "--mode",
        "swarm",
        "--swarm-size",
        "3",
        "--strategy",
        "vote",
    ]);
    assert_eq!(report["status"], "completed", "{report}");
    let run = run_id(&report);
    let db = c.store();
    assert_eq!(report["groups"][0]["count"], 3, "{report}");
    let agents = db.agents(&run);
    assert_eq!(agents.len(), 3, "{agents:?}");
    assert!(
        agents.iter().all(|a| a.state == AgentState::Completed),
        "{agents:?}"
    );
    // Every member's branch was pushed by its worker and fetched here.
    let branches = report["branches"].as_array().unwrap();
    assert_eq!(branches.len(), 3, "{report}");
    for b in branches {
        assert!(
            branch_exists(c.path(), b.as_str().unwrap()),
            "{b} not fetched"
        );
    }
    let workers = db.workers(&run);
    assert_eq!(
        workers.len(),
        3,
        "one recorded result per agent: {workers:?}"
    );
    let names: BTreeSet<&str> = workers.iter().map(|w| w.worker.as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from(["wa", "wb"]),
        "two slots each: both served"
    );
    // Events came back into this store as a local run writes them.
    let events = crate::support::repo::events(c.path(), run.as_str());
    for a in &agents {
        let of = |kind: &str| {
            events
                .iter()
                .filter(|e| e["agent_id"] == a.id.as_str() && e["kind"] == kind)
                .count()
        };
        assert!(
            of("model.reply") >= 2 && of("tool.call") == 1,
            "{}: {events:?}",
            a.id
        );
    }
    // Each worker's own store forgot every agent it answered for: a long-lived worker
    // does not grow with every task it ever ran.
    for w in ["wa", "wb"] {
        let left = || own_store_rows(&c.path().join(format!("w-{w}")));
        assert!(
            wait_for(Duration::from_secs(10), || left() == 0),
            "worker {w} kept {} rows of agents it answered for",
            left()
        );
    }
    let (ta, tb) = (a.stop(), b.stop());
    assert_eq!(ta.ran + tb.ran, 3, "no task ran twice: {ta:?} {tb:?}");
    let wire = tap.finish();
    assert!(
        wire.iter().any(|m| m.starts_with("crewbox.task.t.")),
        "the tap saw the tasks"
    );
    for m in &wire {
        assert!(
            !m.contains(CANARY) && !m.contains(CANARY_2),
            "a secret went over NATS: {m}"
        );
    }
}

/// The rows about agents in the own store of the worker whose state base is `base`
/// (agents, their events, steps, conversations, model exchanges and audit records).
fn own_store_rows(base: &Path) -> i64 {
    let dirs: Vec<PathBuf> = std::fs::read_dir(base.join("worker"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("run-"))
        .collect();
    assert_eq!(dirs.len(), 1, "one own store per worker: {dirs:?}");
    let db = rusqlite::Connection::open(dirs[0].join("crewbox.db")).unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    let ran = count("SELECT COUNT(*) FROM runs");
    assert!(ran >= 1, "the worker ran nothing");
    [
        "SELECT COUNT(*) FROM agents",
        "SELECT COUNT(*) FROM events WHERE agent_id IS NOT NULL",
        "SELECT COUNT(*) FROM steps WHERE agent_id IS NOT NULL",
        "SELECT COUNT(*) FROM agent_conversations",
        "SELECT COUNT(*) FROM model_exchanges",
        "SELECT COUNT(*) FROM audit WHERE agent_id IS NOT NULL",
    ]
    .iter()
    .map(|sql| count(sql))
    .sum()
}

/// The orchestrate round of the crash-recovery tests: alice and bob each `ms` long.
fn orchestrate_script(ms: u64) -> String {
    crate::recovery::orchestrate_script(ms, ms, 0)
}

fn team_cluster() -> Option<Cluster> {
    cluster(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/duo.toml"), crate::recovery::TEAM).unwrap();
    })
}

const TEAM_ARGS: [&str; 6] = [
    "run",
    "build a queue",
    "--team",
    "duo",
    "--mode",
    "orchestrate",
];

/// Distinct tasks recorded for the run's agents.
fn task_keys(workers: &[AgentWorker]) -> BTreeSet<String> {
    workers.iter().map(|w| w.task_key.clone()).collect()
}

#[test]
fn an_orchestrate_team_runs_its_members_on_workers() {
    let Some(c) = team_cluster() else { return };
    c.script(&orchestrate_script(0));
    let (a, b) = (c.worker("wa"), c.worker("wb"));
    let report = c.run(&TEAM_ARGS);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "SYNTHESIS: a queue with push/pop, tested");
    let run = run_id(&report);
    let db = c.store();
    let agents = db.agents(&run);
    let workers = db.workers(&run);
    let events = db
        .rt
        .block_on(db.store.events(Some(&run), 0, 10_000))
        .unwrap();
    for name in ["alice", "bob"] {
        let rows: Vec<_> = agents.iter().filter(|a| a.name == name).collect();
        assert_eq!(rows.len(), 1, "{name}: {agents:?}");
        assert!(
            workers.iter().any(|w| w.agent_id == rows[0].id.as_str()),
            "{name} ran on a worker: {workers:?}"
        );
        // The agent's first events reached the coordinator: its worktree first, and its
        // `running` state (a forwarder that starts late misses both).
        let mine: Vec<_> = events
            .iter()
            .filter(|e| e.agent_id.as_ref() == Some(&rows[0].id))
            .map(|e| &e.event)
            .collect();
        assert!(
            matches!(mine.first(), Some(Event::AgentWorktree { .. }))
                && mine.iter().any(|e| matches!(
                    e,
                    Event::AgentState {
                        state: AgentState::Running,
                        ..
                    }
                )),
            "{name}'s events on the coordinator: {mine:?}"
        );
    }
    let (ta, tb) = (a.stop(), b.stop());
    assert_eq!(
        ta.ran + tb.ran,
        task_keys(&workers).len() as u64,
        "{ta:?} {tb:?}"
    );
    // `tree` shows where each agent ran.
    let out = crate::support::repo::bin(c.path(), &["tree", run.as_str()]);
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("@ wa") || tree.contains("@ wb"), "{tree}");
}

#[test]
fn a_worker_killed_mid_task_has_it_finished_once_by_another() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script("[[reply]]\nagent = \"agent\"\ndelay_ms = 3000\ntext = \"SLOW DONE\"\n");
    let first = c.worker("wa");
    let mut coordinator = c.coordinator(&["run", "slow", "--mode", "single"]);
    let coordinator = coordinator
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let db = c.store();
    let running = wait_for(Duration::from_secs(30), || {
        db.unfinished().first().is_some_and(|run| {
            db.agents(run)
                .iter()
                .any(|a| a.state == AgentState::Running)
        })
    });
    assert!(running, "the agent never ran on the first worker");
    first.kill9();
    let second = c.worker("wb");
    let out = coordinator.wait_with_output().unwrap();
    let report = report(&out);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "SLOW DONE");
    let run = run_id(&report);
    let agents = db.agents(&run);
    assert_eq!(agents.len(), 1, "{agents:?}");
    let workers = db.workers(&run);
    assert_eq!(workers.len(), 1, "{workers:?}");
    assert_eq!(workers[0].worker, "wb");
    assert_eq!(
        second.stop(),
        Tally {
            ran: 1,
            skipped: 0,
            refused: 0
        }
    );
}

#[test]
fn a_coordinator_killed_mid_run_is_finished_by_resume_with_the_results_it_missed() {
    killed_coordinator_resumed(false);
}

/// The same, resumed only once the workers have answered both members and acked their
/// tasks: no task on the server says any more whom it ran as, and the results name the
/// agents the resume replaced (probe 13: they were refused, the tasks published again,
/// the run failed, and `retry` ran the members a second time).
#[test]
fn results_stored_while_the_coordinator_was_down_are_taken_by_its_resume() {
    killed_coordinator_resumed(true);
}

/// Kills the coordinator of an orchestrate run while both members run on workers, then
/// resumes it (once the workers answered both, with `answered_first`): the run
/// completes with each member's result, and each task ran once.
fn killed_coordinator_resumed(answered_first: bool) {
    let Some(mut c) = team_cluster() else { return };
    let debug = ("RUST_LOG".to_owned(), "crewbox=debug".to_owned());
    c.worker_env.push(debug.clone());
    c.coordinator_env.push(debug);
    c.script(&orchestrate_script(2000));
    let (a, b) = (c.worker("wa"), c.worker("wb"));
    let coordinator_log = c.path().join("coordinator.log");
    let mut coordinator = c
        .coordinator(&TEAM_ARGS)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&coordinator_log).unwrap())
        .spawn()
        .unwrap();
    let db = c.store();
    let seen = Mutex::new(String::new());
    let reached = wait_for(Duration::from_secs(30), || {
        db.unfinished().first().is_some_and(|run| {
            let agents = db.agents(run);
            let now = format!(
                "{:?}",
                agents
                    .iter()
                    .map(|a| (a.name.as_str(), a.state))
                    .collect::<Vec<_>>()
            );
            let mut seen = seen.lock().unwrap();
            if !seen.ends_with(&now) {
                seen.push_str(&format!("\n{:?} {now}", std::time::SystemTime::now()));
            }
            ["alice", "bob"].iter().all(|n| {
                agents
                    .iter()
                    .any(|a| a.name == *n && a.state == AgentState::Running)
            })
        })
    });
    let log = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    assert!(
        reached,
        "the members never ran at once (coordinator: {:?}); the run's agents as seen:{}\n\
         coordinator: {}\nwa: {}\nwb: {}",
        coordinator.try_wait(),
        seen.lock().unwrap(),
        log(&coordinator_log),
        log(&a.log),
        log(&b.log)
    );
    coordinator.kill().unwrap();
    coordinator.wait().unwrap();
    let run = db.unfinished()[0].clone();
    let steps = db.rt.block_on(db.store.steps(&run)).unwrap();
    assert!(
        !steps
            .iter()
            .any(|s| s.key.starts_with("worker/") && s.state == StepState::Done),
        "killed before a member's result was stored: {steps:?}"
    );
    if answered_first {
        let url = c.nats.url();
        assert!(
            wait_for(Duration::from_secs(60), || queued_tasks(&url).is_empty()),
            "the workers never answered the members: {}\n{}",
            log(&a.log),
            log(&b.log)
        );
    }
    let out = c.coordinator(&["resume", run.as_str()]).output().unwrap();
    let report = report(&out);
    assert_eq!(
        report["status"],
        "completed",
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["result"], "SYNTHESIS: a queue with push/pop, tested");
    let agents = db.agents(&run);
    let workers = db.workers(&run);
    let events = db
        .rt
        .block_on(db.store.events(Some(&run), 0, 10_000))
        .unwrap();
    for name in ["alice", "bob"] {
        let done: Vec<_> = agents
            .iter()
            .filter(|a| a.name == name && a.state == AgentState::Completed)
            .collect();
        assert_eq!(done.len(), 1, "{name}: {agents:?}");
        // What its worker did under the agent the resume replaced is recorded about
        // the agent that completed (probe 16: about the interrupted one, so the
        // completed one had no model reply, branch or start of its own).
        assert!(
            events
                .iter()
                .any(|e| e.agent_id.as_ref() == Some(&done[0].id)
                    && matches!(e.event, crewbox::Event::ModelReply { .. })),
            "{name}: no model reply about {}: {events:#?}",
            done[0].id
        );
    }
    let (ta, tb) = (a.stop(), b.stop());
    // Each task ran once: the results that arrived while the coordinator was down were
    // taken by the resumed run's new agents, not run again.
    assert_eq!(
        ta.ran + tb.ran,
        task_keys(&workers).len() as u64,
        "{ta:?} {tb:?} {workers:?}"
    );
}

/// Exactly once over NATS under `kill -9` anywhere: the coordinator of an orchestrate
/// run is killed right after its Nth durable write (`CREWBOX_FAULT_AFTER_WRITES`), for
/// every N up to the run's last write, and resumed — so some kills
/// fall between a member's result being committed and its step being recorded, and
/// between a task's publication and its agent's row. After each resume: the run
/// completed with the synthesis, each member completed once, no dead letter is left,
/// the audit chain verifies; at the end the workers ran each task of all those runs
/// once.
#[test]
fn a_coordinator_killed_after_any_write_is_resumed_with_each_task_run_once() {
    use std::os::unix::process::ExitStatusExt as _;
    let Some(c) = team_cluster() else { return };
    c.script(&orchestrate_script(0));
    let (a, b) = (c.worker("wa"), c.worker("wb"));
    let db = c.store();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut keys: BTreeSet<String> = BTreeSet::new();
    let mut kills = 0;
    let mut recovered = 0;
    let mut n = 1;
    loop {
        let out = c
            .coordinator(&TEAM_ARGS)
            .env("CREWBOX_FAULT_AFTER_WRITES", n.to_string())
            .output()
            .unwrap();
        let at = format!("killed after write {n}");
        let runs = db.rt.block_on(db.store.recent_runs(1000)).unwrap();
        let new: Vec<_> = runs
            .iter()
            .filter(|r| !seen.contains(r.id.as_str()))
            .collect();
        assert!(new.len() <= 1, "{at}: {new:?}");
        let Some(run) = new.first().map(|r| r.id.clone()) else {
            // Killed before the run was recorded: nothing to resume.
            assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{at}");
            n += 1;
            continue;
        };
        seen.insert(run.to_string());
        let report = if out.status.signal() == Some(libc::SIGKILL) {
            kills += 1;
            if db.unfinished().contains(&run) {
                let out = c.coordinator(&["resume", run.as_str()]).output().unwrap();
                report(&out)
            } else {
                // Killed after the run's end was committed.
                serde_json::json!({"status": "completed", "result": "SYNTHESIS: a queue with push/pop, tested"})
            }
        } else {
            report(&out)
        };
        assert_eq!(report["status"], "completed", "{at}: {report}");
        assert_eq!(
            report["result"], "SYNTHESIS: a queue with push/pop, tested",
            "{at}: {report}"
        );
        let agents = db.agents(&run);
        for name in ["alice", "bob"] {
            let done = agents
                .iter()
                .filter(|a| a.name == name && a.state == AgentState::Completed)
                .count();
            assert_eq!(done, 1, "{at}: {name}: {agents:?}");
        }
        let dead = crate::support::repo::bin(c.path(), &["dead", "--run", run.as_str(), "--json"]);
        let dead: serde_json::Value = serde_json::from_slice(&dead.stdout).unwrap();
        assert_eq!(dead, serde_json::json!([]), "{at}: dead letters left");
        keys.extend(task_keys(&db.workers(&run)));
        // A member whose result was stored before its step was: finished from the
        // store, not taken or run again.
        let member_ids: BTreeSet<String> = agents
            .iter()
            .filter(|a| a.name == "alice" || a.name == "bob")
            .map(|a| a.id.to_string())
            .collect();
        recovered += crate::support::repo::events(c.path(), run.as_str())
            .iter()
            .filter(|e| {
                e["kind"] == "agent.recovered"
                    && e["agent_id"]
                        .as_str()
                        .is_some_and(|a| member_ids.contains(a))
            })
            .count();
        if out.status.signal() != Some(libc::SIGKILL) {
            // Past the run's last write: it ran to its end.
            break;
        }
        n += 1;
        assert!(n < 400, "the run never ended without a kill");
    }
    assert!(kills >= 20, "too few kill points: {kills}");
    assert!(
        recovered >= 1,
        "no kill fell between a member's stored result and its step"
    );
    let verified = crate::support::repo::bin(c.path(), &["audit", "verify", "--json"]);
    assert_eq!(
        verified.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
    let (ta, tb) = (a.stop(), b.stop());
    assert_eq!(
        ta.ran + tb.ran,
        keys.len() as u64,
        "each task once: {ta:?} {tb:?}, {} tasks over {} runs",
        keys.len(),
        seen.len()
    );
}

/// Publishes raw messages as a hostile or confused coordinator would, and reads the
/// result the worker stored for a task key.
fn publish_raw(url: &str, msgs: Vec<(String, Vec<u8>)>) {
    let rt = runtime();
    rt.block_on(async move {
        let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
        for (subject, payload) in msgs {
            js.publish(subject, payload.into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
    });
}

fn stored_result(url: &str, run: &str, key: &str) -> Option<serde_json::Value> {
    let rt = runtime();
    rt.block_on(async move {
        let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
        let stream = js.get_stream("CREWBOX_RESULTS").await.ok()?;
        let m = stream
            .get_last_raw_message_by_subject(&format!("crewbox.out.{run}.result.{key}"))
            .await
            .ok()?;
        serde_json::from_slice(&m.payload).ok()
    })
}

/// The repository's HEAD commit.
fn head(c: &Cluster) -> String {
    String::from_utf8(
        std::process::Command::new("git")
            .arg("-C")
            .arg(c.path().join("repo"))
            .args(["rev-parse", "HEAD"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .to_owned()
}

fn raw_task(c: &Cluster, key: &str, pool: &str, remote: &str) -> Vec<u8> {
    let base = head(c);
    serde_json::to_vec(&serde_json::json!({
        "v": crewbox::unstable::remote::WIRE_VERSION, "key": key, "pool": pool, "run_id": "r-hostile", "agent_id": format!("a-{key}"),
        "parent": null, "name": "agent", "role": "agent", "task": "t", "system_prompt": "s",
        "caps": ["read"], "depth": 0,
        "quotas": serde_json::to_value(crewbox::unstable::config::Quotas::default()).unwrap(),
        "provider": "scripted", "model": null, "network": false, "remote": remote,
        "base": base, "base_ref": format!("refs/crewbox/base/{base}"),
        "placement": "reader", "validators": [], "max_fix_rounds": 0, "history": null, "join": null
    }))
    .unwrap()
}

/// The `agent.worktree` event a worker forwarded for task `key` of run `run` (in a
/// message of events or with the result): where the agent worked.
fn forwarded_worktree(url: &str, run: &str, key: &str) -> Option<PathBuf> {
    use async_nats::jetstream::consumer;
    let rt = runtime();
    rt.block_on(async move {
        let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
        let stream = js.get_stream("CREWBOX_RESULTS").await.ok()?;
        let reader = stream
            .create_consumer(consumer::pull::Config {
                // Events and the result (one filter: nats-server 2.9 takes no more).
                filter_subject: format!("crewbox.out.{run}.*.{key}"),
                deliver_policy: consumer::DeliverPolicy::All,
                ack_policy: consumer::AckPolicy::None,
                ..Default::default()
            })
            .await
            .ok()?;
        let mut messages = reader.fetch().max_messages(100).messages().await.ok()?;
        use futures::StreamExt;
        while let Some(Ok(m)) = messages.next().await {
            let msg: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
            for e in msg["events"].as_array().into_iter().flatten() {
                if e["kind"] == "agent.worktree" {
                    return e["data"]["path"].as_str().map(PathBuf::from);
                }
            }
        }
        None
    })
}

/// Readers at one base read one checkout of it on a worker (no checkout each), and a
/// task that may write gets a checkout of its own even when it is sent as a reader: a
/// file it writes never reaches what the readers read.
#[test]
fn readers_on_a_worker_share_a_checkout_of_their_base_and_a_writer_never_does() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script(
        r#"
[[reply]]
agent = "writer"
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "planted.txt", content = "for the readers" }

[[reply]]
agent = "writer"
text = "wrote"

[[reply]]
repeat = true
text = "read"
"#,
    );
    let w = c.worker("wa");
    let url = c.nats.url();
    let base = head(&c);
    // What a coordinator pushes before it publishes tasks at a base.
    let pushed = std::process::Command::new("git")
        .arg("-C")
        .arg(c.path().join("repo"))
        .args(["push", "--quiet", &c.remote])
        .arg(format!("HEAD:refs/crewbox/base/{base}"))
        .status()
        .unwrap();
    assert!(pushed.success());
    let task = |key: &str, name: &str, caps: &[&str]| {
        let mut t: serde_json::Value =
            serde_json::from_slice(&raw_task(&c, key, POOL, &c.remote)).unwrap();
        t["name"] = name.into();
        t["caps"] = serde_json::json!(caps);
        t["base"] = base.clone().into();
        (
            format!("crewbox.task.{POOL}.r-hostile.{key}"),
            serde_json::to_vec(&t).unwrap(),
        )
    };
    let done = |key: &str| {
        wait_for(Duration::from_secs(30), || {
            stored_result(&url, "r-hostile", key).is_some()
        });
        stored_result(&url, "r-hostile", key).unwrap()
    };
    publish_raw(
        &url,
        vec![
            task("r1", "reader", &["read"]),
            task("r2", "reader", &["read"]),
        ],
    );
    for key in ["r1", "r2"] {
        assert_eq!(done(key)["state"], "completed", "{}", done(key));
    }
    // Then a task sent as a reader that may write, at the same base: were it given the
    // readers' checkout (kept for the next readers), its file would stay there.
    publish_raw(&url, vec![task("w", "writer", &["read", "write"])]);
    assert_eq!(done("w")["state"], "completed", "{}", done("w"));
    let at = |key: &str| {
        forwarded_worktree(&url, "r-hostile", key)
            .unwrap_or_else(|| panic!("no worktree event for {key}"))
    };
    let (reader1, reader2, writer) = (at("r1"), at("r2"), at("w"));
    assert_eq!(
        reader1, reader2,
        "the readers of one base share its checkout"
    );
    assert_ne!(
        writer, reader1,
        "a task that may write never reads the shared checkout"
    );
    assert!(
        reader1.join("notes.txt").is_file() && !reader1.join("planted.txt").exists(),
        "the shared checkout is the base's tree, without the writer's file"
    );
    assert_eq!(w.stop().ran, 3);
}

#[test]
fn a_worker_refuses_hostile_tasks_other_pools_and_remotes_it_does_not_serve() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script("[[reply]]\nagent = \"agent\"\ntext = \"ok\"\n");
    let w = c.worker("wa");
    let url = c.nats.url();
    let subject = |key: &str| format!("crewbox.task.{POOL}.r-hostile.{key}");
    let elsewhere = c.path().join("elsewhere.git").display().to_string();
    // Allowed (beneath the allowed one) but not there.
    let missing = format!("{}/missing", c.remote);
    // A string prefix of the allowed one that leaves it: `..`, or a sibling's name.
    let dotdot = format!("{}/../elsewhere.git", c.remote);
    let sibling = format!("{}-private", c.remote);
    publish_raw(
        &url,
        vec![
            (subject("junk"), b"{\"v\": 1, \"api_key\": \"x\"".to_vec()),
            (subject("future"), b"{\"v\": 99}".to_vec()),
            (subject("pool"), raw_task(&c, "pool", "other", &c.remote)),
            (subject("remote"), raw_task(&c, "remote", POOL, &elsewhere)),
            (subject("gone"), raw_task(&c, "gone", POOL, &missing)),
            (subject("dotdot"), raw_task(&c, "dotdot", POOL, &dotdot)),
            (subject("sibling"), raw_task(&c, "sibling", POOL, &sibling)),
        ],
    );
    let got = |key: &str| {
        let found = std::cell::RefCell::new(None);
        wait_for(Duration::from_secs(30), || {
            *found.borrow_mut() = stored_result(&url, "r-hostile", key);
            found.borrow().is_some()
        });
        found
            .into_inner()
            .unwrap_or_else(|| panic!("no result for {key}"))
    };
    let pool = got("pool");
    assert_eq!(pool["state"], "error");
    assert!(
        pool["error"]
            .as_str()
            .unwrap()
            .contains("task for pool `other` reached a worker of pool `t`"),
        "{pool}"
    );
    let remote = got("remote");
    assert!(
        remote["error"]
            .as_str()
            .unwrap()
            .contains(&format!("does not serve remote {elsewhere}")),
        "{remote}"
    );
    for key in ["dotdot", "sibling"] {
        let r = got(key);
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("does not serve remote"),
            "{key}: {r}"
        );
    }
    let gone = got("gone");
    let why = gone["error"].as_str().unwrap();
    assert!(
        why.contains("git clone") && why.contains(&missing),
        "{gone}"
    );
    let tally = w.stop();
    let expected = Tally {
        ran: 1,
        skipped: 0,
        refused: 6,
    };
    assert_eq!(
        tally, expected,
        "malformed ones are refused too; the unreachable one ran"
    );
}

#[test]
fn a_result_or_event_delivered_twice_is_recorded_once() {
    use crewbox::unstable::store::{AgentStats, ExchangeWrite, RemoteResult, RunRecord};
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let store = Store::open(dir.path()).unwrap();
        let run = RunRecord::started(crewbox::Mode::Single, "p", serde_json::json!({}));
        store.insert_run(&run).await.unwrap();
        let agent = agent_record(&run.id);
        store.insert_agent(&agent).await.unwrap();
        let running = || Event::AgentState {
            state: AgentState::Running,
            error: None,
            exceeded: None,
            reason: None,
        };
        let validated = || Event::AgentValidation {
            status: crewbox::event::ValidationStatus::Passed,
            fix_rounds: 0,
        };
        for _ in 0..2 {
            store
                .queue_remote_event(&run.id, Some(&agent.id), 5, "e1/1".into(), running())
                .unwrap()
                .committed()
                .await
                .unwrap();
            // A decision (audited): recorded once in the chain too.
            store
                .queue_remote_event(&run.id, Some(&agent.id), 6, "e1/2".into(), validated())
                .unwrap()
                .committed()
                .await
                .unwrap();
        }
        let result = RemoteResult {
            run_id: run.id.clone(),
            agent_id: agent.id.clone(),
            task_key: "k".into(),
            worker: "w1".into(),
            state: AgentState::Completed,
            stats: AgentStats {
                turns: 1,
                ..AgentStats::default()
            },
            result: Some("first".into()),
            error: None,
            reason: None,
            children: Vec::new(),
            conversation: None,
            // A model call of the agent, recorded with the result: once, too.
            exchanges: vec![ExchangeWrite {
                run_id: run.id.clone(),
                agent_id: agent.id.clone(),
                agent_name: agent.name.clone(),
                turn: 1,
                request: r#"{"hash":"h"}"#.into(),
                reply: r#"{"text":"first"}"#.into(),
                at: 5,
            }],
        };
        store.record_remote_result(result.clone()).await.unwrap();
        let again = RemoteResult {
            worker: "w2".into(),
            result: Some("second".into()),
            ..result
        };
        store.record_remote_result(again).await.unwrap();
        let events = store.events(Some(&run.id), 0, 100).await.unwrap();
        assert_eq!(events.len(), 2, "{events:?}");
        let audited: Vec<String> = store
            .audit_records(Some(&run.id))
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.kind)
            .filter(|k| k == "agent.validation")
            .collect();
        assert_eq!(audited.len(), 1, "{audited:?}");
        let rows = store.agents(&run.id).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].state, AgentState::Completed);
        assert_eq!(rows[0].result.as_deref(), Some("first"));
        assert_eq!(
            rows[0].started_at,
            Some(5),
            "running from the forwarded event"
        );
        let workers = store.agent_workers(&run.id).await.unwrap();
        assert_eq!(workers.len(), 1);
        assert_eq!(workers[0].worker, "w1");
        let calls = store
            .exchanges::<serde_json::Value, serde_json::Value>(&run.id)
            .await
            .unwrap();
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(calls[0].reply["text"], "first");
    });
}

/// A sub-agent a worker's agent spawned there is audited as spawned on the coordinator
/// (with the worker's name), once however often its result arrives.
#[test]
fn a_sub_agent_spawned_on_a_worker_is_audited_once() {
    use crewbox::unstable::store::{AgentStats, RemoteResult, RunRecord};
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let store = Store::open(dir.path()).unwrap();
        let run = RunRecord::started(crewbox::Mode::Single, "p", serde_json::json!({}));
        // As the engine records a run: with its `run.started` event (and audit record).
        let started = Event::RunStarted {
            mode: crewbox::Mode::Single,
            provider: "scripted".into(),
        };
        store.start_run(&run, started).await.unwrap();
        let record = |parent: Option<crewbox::unstable::ids::AgentId>, name: &str| AgentRecord {
            parent,
            name: name.into(),
            ..agent_record(&run.id)
        };
        let agent = record(None, "agent");
        store.insert_agent(&agent).await.unwrap();
        let child = AgentRecord {
            depth: 1,
            state: AgentState::Completed,
            ..record(Some(agent.id.clone()), "helper")
        };
        let result = RemoteResult {
            run_id: run.id.clone(),
            agent_id: agent.id.clone(),
            task_key: "k".into(),
            worker: "w1".into(),
            state: AgentState::Completed,
            stats: AgentStats::default(),
            result: Some("done".into()),
            error: None,
            reason: None,
            children: vec![child.clone()],
            conversation: None,
            exchanges: Vec::new(),
        };
        store.record_remote_result(result.clone()).await.unwrap();
        store.record_remote_result(result).await.unwrap();
        let spawns: Vec<_> = store
            .audit_records(Some(&run.id))
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.kind == "spawn" && r.agent_id.as_deref() == Some(child.id.as_str()))
            .collect();
        assert_eq!(spawns.len(), 1, "{spawns:?}");
        assert_eq!(spawns[0].data["parent"], agent.id.as_str(), "{spawns:?}");
        assert_eq!(spawns[0].data["worker"], "w1", "{spawns:?}");
        assert_eq!(spawns[0].data["name"], "helper", "{spawns:?}");
        let verdict = store.audit_verify().await.unwrap();
        assert!(
            matches!(verdict, crewbox::types::AuditVerdict::Intact { .. }),
            "{verdict:?}"
        );
    });
}

#[test]
fn a_remote_agents_failure_class_is_stored_for_dead_letters() {
    use crewbox::unstable::agent::runner::FailReason;
    use crewbox::unstable::store::{AgentStats, RemoteResult, RunRecord};
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let store = Store::open(dir.path()).unwrap();
        let run = RunRecord::started(crewbox::Mode::Single, "p", serde_json::json!({}));
        store.insert_run(&run).await.unwrap();
        let record = |parent: Option<crewbox::unstable::ids::AgentId>| AgentRecord {
            parent,
            ..agent_record(&run.id)
        };
        // A spawned agent (it has a parent) is a dead letter without a step of its own.
        let parent = record(None);
        store.insert_agent(&parent).await.unwrap();
        let agent = record(Some(parent.id.clone()));
        store.insert_agent(&agent).await.unwrap();
        store
            .record_remote_result(RemoteResult {
                run_id: run.id.clone(),
                agent_id: agent.id.clone(),
                task_key: "k".into(),
                worker: "w1".into(),
                state: AgentState::Error,
                stats: AgentStats::default(),
                result: None,
                error: Some("connection to the model server failed".into()),
                reason: Some(FailReason::Unavailable),
                children: Vec::new(),
                conversation: None,
                exchanges: Vec::new(),
            })
            .await
            .unwrap();
        let letter = store
            .dead_letter(&agent.id)
            .await
            .unwrap()
            .expect("a dead letter");
        let shown = serde_json::to_value(&letter).unwrap();
        assert_eq!(shown["reason"], "model-unavailable", "{shown:#}");
        assert_eq!(shown["class"], "transient", "{shown:#}");
    });
}

#[test]
fn an_empty_or_malformed_allowed_remote_stops_the_worker() {
    let dir = git_repo(|_| {});
    for (arg, needle) in [("", "empty"), ("relative/path", "absolute path")] {
        let out = command(
            dir.path(),
            &[
                "worker",
                "--nats",
                "nats://127.0.0.1:9",
                "--allow-remote",
                arg,
            ],
        )
        .output()
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{arg:?}: {err}");
        assert!(
            err.contains("--allow-remote") && err.contains(needle),
            "{arg:?}: {err}"
        );
    }
}

/// One agent writing `notes.txt`, quickly.
const QUICK: &str = r#"
[[reply]]
turn = 1
[[reply.tool_calls]]
name = "write_file"
args = { path = "notes.txt", content = "beta\n" }

[[reply]]
turn = 2
text = "Wrote beta into notes.txt"
"#;

#[test]
fn the_coordinators_git_steps_run_no_program_the_repository_names() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script(QUICK);
    let repo = c.path().join("repo");
    let evil = c.path().join("evil-hooks");
    std::fs::create_dir_all(&evil).unwrap();
    let canary = |name: &str| c.path().join(format!("ran-{name}"));
    let program = |name: &str| {
        let p = evil.join(name);
        std::fs::write(
            &p,
            format!("#!/bin/sh\ntouch '{}'\n", canary(name).display()),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let hooks = [
        "pre-push",
        "reference-transaction",
        "post-checkout",
        "post-merge",
    ];
    for hook in hooks {
        program(hook);
    }
    // What an untrusted project's .git/config (or an include it names) could say.
    let settings = [
        ("core.hooksPath", evil.to_str().unwrap().to_owned()),
        ("core.fsmonitor", program("fsmonitor")),
        (
            "remote.origin.receivepack",
            format!(
                "touch '{}'; git-receive-pack",
                canary("receivepack").display()
            ),
        ),
        (
            "remote.origin.uploadpack",
            format!(
                "touch '{}'; git-upload-pack",
                canary("uploadpack").display()
            ),
        ),
        ("credential.helper", program("credential")),
        ("push.gpgSign", "true".to_owned()),
        ("gpg.program", program("gpg")),
    ];
    for (key, value) in &settings {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["config", key, value])
            .status()
            .unwrap()
            .success();
        assert!(ok, "git config {key}");
    }
    let _w = c.worker("wa");
    let report = c.run(&["run", "write beta", "--mode", "single"]);
    assert_eq!(report["status"], "completed", "{report}");
    let branch = report["agents"][0]["branch"]["branch"]
        .as_str()
        .unwrap_or_else(|| panic!("the agent has a branch: {report}"));
    assert!(
        branch_exists(c.path(), branch),
        "the branch was pushed by the worker and fetched here: {report}"
    );
    let names = hooks.iter().chain(&[
        "fsmonitor",
        "receivepack",
        "uploadpack",
        "credential",
        "gpg",
    ]);
    let ran: Vec<&&str> = names.filter(|n| canary(n).exists()).collect();
    assert!(ran.is_empty(), "programs the repository named ran: {ran:?}");
}

/// Every message on the task stream: (subject, payload), in order.
fn queued_tasks(url: &str) -> Vec<(String, Vec<u8>)> {
    let rt = runtime();
    rt.block_on(async move {
        let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
        let stream = js.get_stream("CREWBOX_TASKS").await.unwrap();
        let mut out = Vec::new();
        for seq in 1..=20 {
            if let Ok(m) = stream.get_raw_message(seq).await {
                out.push((m.subject.to_string(), m.payload.to_vec()));
            }
        }
        out
    })
}

/// A `crewbox run --mode single PROMPT` coordinator, started in the background.
fn single_run(c: &Cluster, prompt: &str) -> Running {
    single_run_with(c, prompt, &[])
}

/// [`single_run`] with more arguments.
fn single_run_with(c: &Cluster, prompt: &str, extra: &[&str]) -> Running {
    let mut args = vec!["run", "--mode", "single", prompt];
    args.extend_from_slice(extra);
    Running(Some(
        c.coordinator(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ))
}

/// The agent of an unfinished run whose task mentions `prompt`.
fn unfinished_agent(db: &Db, prompt: &str) -> AgentRecord {
    db.unfinished()
        .into_iter()
        .flat_map(|r| db.agents(&r))
        .find(|a| a.task.contains(prompt))
        .unwrap()
}

/// The key of the queued task of `agent` (the last token of its subject).
fn queued_task_key(url: &str, agent: &AgentRecord) -> String {
    queued_tasks(url)
        .into_iter()
        .find_map(|(subject, payload)| {
            let task: serde_json::Value = serde_json::from_slice(&payload).ok()?;
            (task["agent_id"] == agent.id.as_str())
                .then(|| subject.rsplit('.').next().unwrap().to_owned())
        })
        .unwrap()
}

/// A result as a worker would send it, saying `text`, with `children`.
fn forged_result(key: &str, agent: &str, text: &str, children: Vec<AgentRecord>) -> Vec<u8> {
    forged_result_with(key, agent, text, children, Vec::new())
}

/// A model call of agent `agent_id` named `name`, answered with `text`.
fn forged_exchange(
    agent_id: &str,
    name: &str,
    text: &str,
) -> crewbox::unstable::remote::ForwardedExchange {
    let x = serde_json::json!({
        "agent_id": agent_id, "agent": name, "turn": 1, "at": 1,
        "request": {"hash": "00", "messages": [], "tools": "00", "params": "00"},
        "reply": {"text": text, "tool_calls": [], "usage": {"input": 1, "output": 1},
                  "stop": "end-turn", "reasoning": ""},
    });
    serde_json::from_str(&x.to_string()).unwrap()
}

/// [`forged_result`] carrying model calls.
fn forged_result_with(
    key: &str,
    agent: &str,
    text: &str,
    children: Vec<AgentRecord>,
    exchanges: Vec<crewbox::unstable::remote::ForwardedExchange>,
) -> Vec<u8> {
    use crewbox::event::ValidationStatus;
    use crewbox::unstable::remote::{TaskResult, WIRE_VERSION};
    use crewbox::unstable::store::AgentStats;
    TaskResult {
        v: WIRE_VERSION,
        key: key.into(),
        exec: "forged".into(),
        agent_id: agent.into(),
        worker: "intruder".into(),
        state: AgentState::Completed,
        stats: AgentStats::default(),
        result: text.into(),
        error: None,
        exceeded: None,
        reason: None,
        history: Vec::new(),
        changed: Vec::new(),
        diff: String::new(),
        branch: None,
        validation: ValidationStatus::Passed,
        rounds: Vec::new(),
        children,
        events: Vec::new(),
        exchanges,
    }
    .to_bytes()
    .unwrap()
}

/// The first event of a sub-agent of run `run` said to be started by `parent`.
fn forged_start(
    key: &str,
    run: &crewbox::unstable::ids::RunId,
    parent: &crewbox::unstable::ids::AgentId,
) -> Vec<u8> {
    let kid = AgentRecord {
        parent: Some(parent.clone()),
        name: "FORGED-kid".into(),
        depth: 1,
        state: AgentState::Running,
        ..agent_record(run)
    };
    serde_json::to_vec(&serde_json::json!({
        "v": crewbox::unstable::remote::WIRE_VERSION, "key": key, "exec": "forged",
        "events": [{"seq": 1, "agent_id": kid.id.as_str(), "at": 1, "kind": "agent.state",
                    "data": {"state": "running"},
                    "started": {"worker": "intruder", "agent": kid}}],
    }))
    .unwrap()
}

fn forged_event(key: &str, agent: &str, kind: &str, data: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "v": crewbox::unstable::remote::WIRE_VERSION, "key": key, "exec": "forged",
        "events": [{"seq": 1, "agent_id": agent, "at": 1, "kind": kind, "data": data}],
    }))
    .unwrap()
}

/// Two runs in flight on one worker; a publisher who can reach the results stream
/// forges results and events on the first run's subjects about the second run's agent,
/// with a sub-agent whose name carries escape sequences, and a run's own `run.finished`.
/// Each run's agent keeps the result its worker sent; nothing forged is stored.
#[test]
fn results_and_events_are_taken_only_for_the_task_and_agent_the_coordinator_sent() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script(
        "[[reply]]\nagent = \"agent\"\nrepeat = true\ndelay_ms = 10000\ntext = \"the real answer\"\n",
    );
    let w = c.worker("wa");
    // The first agent reads only: what a sub-agent of it may hold is narrow.
    let (first, second) = (
        single_run_with(&c, "first task", &["--read-only"]),
        single_run(&c, "second task"),
    );
    let db = c.store();
    let running = || {
        let runs = db.unfinished();
        runs.len() == 2
            && runs
                .iter()
                .all(|r| db.agents(r).iter().any(|a| a.state == AgentState::Running))
    };
    assert!(
        wait_for(Duration::from_secs(30), running),
        "both agents never ran"
    );
    let (a, b) = (
        unfinished_agent(&db, "first task"),
        unfinished_agent(&db, "second task"),
    );
    let key_of = |agent: &AgentRecord| queued_task_key(&c.nats.url(), agent);
    let key_a = key_of(&a);
    let (run_a, b_id) = (a.run_id.as_str(), b.id.as_str());
    let fake_child = AgentRecord {
        id: crewbox::unstable::ids::AgentId::new(),
        run_id: a.run_id.clone(),
        parent: Some(b.id.clone()),
        name: "\u{1b}]0;owned\u{7}\u{1b}[2J".into(),
        state: AgentState::Completed,
        ..b.clone()
    };
    let result_at = |key: &str| format!("crewbox.out.{run_a}.result.{key}");
    let event_at = |key: &str| format!("crewbox.out.{run_a}.event.{key}");
    let finished = serde_json::json!({"status": "completed", "result": "FORGED"});
    let huge = serde_json::json!({"turn": 1, "text": "FORGED-11", "tool_calls": [],
                                  "usage": {"input": u64::MAX, "output": u64::MAX}});
    let kid_of_a = AgentRecord {
        id: crewbox::unstable::ids::AgentId::new(),
        parent: Some(a.id.clone()),
        name: "FORGED-kid".into(),
        depth: a.depth + 1,
        caps: a.caps.clone(),
        state: AgentState::Completed,
        ..a.clone()
    };
    let wider_child = AgentRecord {
        caps: ["read", "write", "exec", "spawn", "mcp"]
            .iter()
            .filter(|c| !a.caps.iter().any(|h| h == *c))
            .map(|c| (*c).to_owned())
            .chain(a.caps.iter().cloned())
            .collect(),
        ..kid_of_a.clone()
    };
    assert!(wider_child.caps.len() > a.caps.len(), "{a:?}");
    let deeper_child = AgentRecord {
        depth: 9,
        ..kid_of_a.clone()
    };
    let absurd_child = AgentRecord {
        created_at: -5,
        stats: crewbox::unstable::store::AgentStats {
            tokens_in: u64::MAX,
            cost: Some(-1e300),
            ..Default::default()
        },
        ..kid_of_a
    };
    publish_raw(
        &c.nats.url(),
        vec![
            // The first run's task, the second run's agent and a child of it.
            (
                result_at(&key_a),
                forged_result(&key_a, b_id, "FORGED-1", vec![fake_child]),
            ),
            // A task this coordinator never sent.
            (
                result_at("k-never-sent"),
                forged_result("k-never-sent", b_id, "FORGED-2", Vec::new()),
            ),
            // A subject that says one task and a body that says another.
            (
                result_at(&key_a),
                forged_result("k-other", a.id.as_str(), "FORGED-3", Vec::new()),
            ),
            // The right task and agent, carrying a model call of another run's agent,
            // or one of its own agent under another name: refused whole.
            (
                result_at(&key_a),
                forged_result_with(
                    &key_a,
                    a.id.as_str(),
                    "FORGED-5",
                    Vec::new(),
                    vec![forged_exchange(b_id, &b.name, "FORGED-5")],
                ),
            ),
            (
                result_at(&key_a),
                forged_result_with(
                    &key_a,
                    a.id.as_str(),
                    "FORGED-6",
                    Vec::new(),
                    vec![forged_exchange(a.id.as_str(), "impostor", "FORGED-6")],
                ),
            ),
            // Its own agent's call, whose reply is not a reply.
            (
                result_at(&key_a),
                forged_result_with(&key_a, a.id.as_str(), "FORGED-7", Vec::new(), {
                    let mut x = forged_exchange(a.id.as_str(), &a.name, "FORGED-7");
                    x.reply =
                        serde_json::value::to_raw_value(&serde_json::json!({"text": 1})).unwrap();
                    vec![x]
                }),
            ),
            // A sub-agent said to start under the second run's agent, and one of the
            // second run said to start under the task's own agent.
            (event_at(&key_a), forged_start(&key_a, &a.run_id, &b.id)),
            (event_at(&key_a), forged_start(&key_a, &b.run_id, &a.id)),
            // Model replies of its own agent claiming 2^64 tokens (probe 13: the sum
            // overflowed and the run's consumer panicked; the agent stayed queued).
            (
                event_at(&key_a),
                forged_event(&key_a, a.id.as_str(), "model.reply", huge.clone()),
            ),
            (
                event_at(&key_a),
                forged_event(&key_a, a.id.as_str(), "model.reply", huge),
            ),
            // Its own agent, listing a sub-agent with capabilities its parent lacks and
            // at another depth (probe 13: recorded and audited as a spawn), or with
            // figures no agent has.
            (
                result_at(&key_a),
                forged_result(&key_a, a.id.as_str(), "FORGED-8", vec![wider_child]),
            ),
            (
                result_at(&key_a),
                forged_result(&key_a, a.id.as_str(), "FORGED-9", vec![deeper_child]),
            ),
            (
                result_at(&key_a),
                forged_result(&key_a, a.id.as_str(), "FORGED-10", vec![absurd_child]),
            ),
            // A run's own fact, and an agent of another run.
            (
                event_at(&key_a),
                forged_event(&key_a, a.id.as_str(), "run.finished", finished),
            ),
            (
                event_at(&key_a),
                forged_event(
                    &key_a,
                    b_id,
                    "agent.state",
                    serde_json::json!({"state": "failed", "error": "FORGED-4"}),
                ),
            ),
        ],
    );
    for child in [first, second] {
        let out = child.output();
        let report = report(&out);
        assert_eq!(report["status"], "completed", "{report}");
        assert_eq!(report["result"], "the real answer", "{report}");
    }
    for agent in [&a, &b] {
        let agents = db.agents(&agent.run_id);
        assert_eq!(
            agents.len(),
            1,
            "no agent added to run {}: {agents:?}",
            agent.run_id
        );
        assert_eq!(
            agents[0].result.as_deref(),
            Some("the real answer"),
            "{agents:?}"
        );
        let events = db
            .rt
            .block_on(db.store.events(Some(&agent.run_id), 0, 1000))
            .unwrap();
        let text = format!("{events:?}");
        assert!(
            !text.contains("FORGED"),
            "a forged event was stored: {text}"
        );
        // Only the real model call, of the run's own agent.
        let calls = db
            .rt
            .block_on(
                db.store
                    .exchanges::<serde_json::Value, serde_json::Value>(&agent.run_id),
            )
            .unwrap();
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(calls[0].agent, agent.name, "{calls:?}");
        assert_eq!(calls[0].reply["text"], "the real answer", "{calls:?}");
        for e in &events {
            assert!(
                e.agent_id.is_none() || e.agent_id.as_ref() == Some(&agent.id),
                "run {} holds an event about another agent: {e:?}",
                agent.run_id
            );
        }
    }
    assert_eq!(w.stop().ran, 2);
}

/// A result carries its agent's last events, recorded before it; one of them about an
/// agent of another run is not stored, and the rest of the result still is. (Here the
/// sender is a forger that answers before any worker, as a hostile worker could.)
#[test]
fn events_that_come_with_a_result_are_stored_only_about_the_tasks_agents() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script("[[reply]]\nrepeat = true\ntext = \"unused\"\n");
    let (first, second) = (single_run(&c, "first task"), single_run(&c, "second task"));
    let db = c.store();
    // No worker: both tasks wait on the server.
    let queued = || {
        let runs = db.unfinished();
        runs.len() == 2 && runs.iter().all(|r| db.agents(r).len() == 1)
    };
    assert!(
        wait_for(Duration::from_secs(30), queued),
        "both agents were never queued"
    );
    assert!(
        wait_for(Duration::from_secs(30), || queued_tasks(&c.nats.url())
            .len()
            == 2),
        "both tasks were never published"
    );
    let (a, b) = (
        unfinished_agent(&db, "first task"),
        unfinished_agent(&db, "second task"),
    );
    let key_of = |agent: &AgentRecord| queued_task_key(&c.nats.url(), agent);
    let event = |seq: u64, agent: &str, text: &str| {
        serde_json::json!({
            "seq": seq, "agent_id": agent, "at": 1, "kind": "agent.state",
            "data": {"state": "running", "error": text},
        })
    };
    let with_events = |agent: &AgentRecord, events: serde_json::Value| {
        let key = key_of(agent);
        let mut r: serde_json::Value = serde_json::from_slice(&forged_result(
            &key,
            agent.id.as_str(),
            "answered",
            Vec::new(),
        ))
        .unwrap();
        r["events"] = events;
        (
            format!("crewbox.out.{}.result.{key}", agent.run_id),
            serde_json::to_vec(&r).unwrap(),
        )
    };
    publish_raw(
        &c.nats.url(),
        vec![
            with_events(
                &a,
                serde_json::json!([
                    event(1, a.id.as_str(), "A-OWN"),
                    event(2, b.id.as_str(), "ABOUT-B")
                ]),
            ),
            with_events(&b, serde_json::json!([event(1, b.id.as_str(), "B-OWN")])),
        ],
    );
    for child in [first, second] {
        let report = report(&child.output());
        assert_eq!(report["status"], "completed", "{report}");
        assert_eq!(report["result"], "answered", "{report}");
    }
    let texts = |agent: &AgentRecord| {
        let events = db
            .rt
            .block_on(db.store.events(Some(&agent.run_id), 0, 1000))
            .unwrap();
        format!("{events:?}")
    };
    let (in_a, in_b) = (texts(&a), texts(&b));
    assert!(
        in_a.contains("A-OWN"),
        "the result's own event was stored: {in_a}"
    );
    assert!(in_b.contains("B-OWN"), "{in_b}");
    assert!(
        !in_a.contains("ABOUT-B") && !in_b.contains("ABOUT-B"),
        "an event about another run's agent was stored: {in_a} {in_b}"
    );
}

/// A task names its validators by name: one given as a path (a file on the worker's
/// disk, or the untrusted clone's own plugin file) is refused without a byte of the
/// file in any error, and a name is not looked up in an untrusted clone.
#[test]
fn a_worker_loads_validators_by_name_from_its_own_plugins_only() {
    let Some(c) = cluster(|work| {
        std::fs::create_dir_all(work.join(".crewbox/plugins")).unwrap();
        std::fs::write(work.join(".crewbox/plugins/evil.wasm"), b"EVIL-BYTES").unwrap();
    }) else {
        return;
    };
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(c.path().join("repo"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["add", "-A"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@localhost",
        "commit",
        "-qm",
        "plugins",
    ]);
    git(&["push", "-q", "origin", "HEAD:refs/heads/main"]);
    git(&[
        "push",
        "-q",
        "origin",
        &format!("HEAD:refs/crewbox/base/{}", head(&c)),
    ]);
    let secret = c.path().join("secret.wasm");
    std::fs::write(&secret, b"root:x:0:0 SECRET-FILE").unwrap();
    c.script("[[reply]]\nagent = \"agent\"\nrepeat = true\ntext = \"ok\"\n");
    let w = c.worker("wa");
    let task = |key: &str, validator: &str| {
        let mut t: serde_json::Value =
            serde_json::from_slice(&raw_task(&c, key, POOL, &c.remote)).unwrap();
        t["validators"] = serde_json::json!([{ "name": validator, "criteria": [] }]);
        (
            format!("crewbox.task.{POOL}.r-hostile.{key}"),
            serde_json::to_vec(&t).unwrap(),
        )
    };
    let url = c.nats.url();
    publish_raw(
        &url,
        vec![
            task("abs", secret.to_str().unwrap()),
            task("etc", "/etc/passwd"),
            task("clone", ".crewbox/plugins/evil.wasm"),
            task("named", "evil"),
        ],
    );
    let found = std::cell::RefCell::new(None);
    wait_for(Duration::from_secs(60), || {
        *found.borrow_mut() = stored_result(&url, "r-hostile", "named");
        found.borrow().is_some()
    });
    let named = found
        .into_inner()
        .expect("no result for the task naming `evil`");
    let why = named["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("no validator named `evil`"),
        "the untrusted clone's plugin was looked up: {named}"
    );
    let log = std::fs::read_to_string(c.path().join("wa.log")).unwrap();
    for key in ["abs", "etc", "clone"] {
        assert!(
            stored_result(&url, "r-hostile", key).is_none(),
            "task {key} ran: {:?}",
            stored_result(&url, "r-hostile", key)
        );
    }
    assert!(
        log.matches("is a path, not a plugin name").count() >= 3,
        "{log}"
    );
    let tally = w.stop();
    assert_eq!(tally.refused, 3, "{tally:?}");
    let everything = format!("{log}{named}");
    for leak in ["root:", "SECRET-FILE", "EVIL-BYTES", "0x72, 0x6f"] {
        assert!(!everything.contains(leak), "`{leak}` leaked: {everything}");
    }
}

/// The per-role NATS users of the README: the coordinator and the worker complete a run
/// with just their permissions, and neither an observer nor a worker can publish what
/// only the other role may (the server refuses it; nothing reaches the streams).
#[test]
fn with_the_readmes_nats_users_only_workers_publish_results_and_only_coordinators_tasks() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let block = readme
        .split("<!-- nats-permissions -->\n```text\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README's NATS users block");
    let passwords = [
        ("CREWBOX_COORDINATOR_PASSWORD", "pw-coordinator-1"),
        ("CREWBOX_WORKER_PASSWORD", "pw-worker-2"),
        ("CREWBOX_OBSERVER_PASSWORD", "pw-observer-3"),
    ];
    let Some(nats) = NatsServer::start_with(block, &passwords) else {
        return;
    };
    let role = |user: &str| format!("user = \"{user}\"\npassword_env = \"NATS_PASSWORD\"\n");
    let Some(mut c) = cluster_on(nats, &role("crewbox-coordinator"), |_| {}) else {
        return;
    };
    // The worker's machine: its own user config, its own NATS user.
    let wconfig = c.path().join("wconfig");
    std::fs::create_dir_all(wconfig.join("crewbox")).unwrap();
    let coordinator_config =
        std::fs::read_to_string(c.path().join("config/crewbox/config.toml")).unwrap();
    std::fs::write(
        wconfig.join("crewbox/config.toml"),
        coordinator_config.replace("crewbox-coordinator", "crewbox-worker"),
    )
    .unwrap();
    c.worker_env = vec![
        ("XDG_CONFIG_HOME".into(), wconfig.display().to_string()),
        ("NATS_PASSWORD".into(), "pw-worker-2".into()),
    ];
    c.coordinator_env = vec![("NATS_PASSWORD".into(), "pw-coordinator-1".into())];
    c.script("[[reply]]\nagent = \"agent\"\nrepeat = true\ntext = \"done under roles\"\n");
    let w = c.worker("wa");
    let report = c.run(&["run", "--mode", "single", "under roles"]);
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "done under roles");
    let run = report["run_id"].as_str().unwrap().to_owned();
    // Publishes as `user`; Ok when the server stored the message.
    let publish = |user: &str, password: &str, subject: String| -> Result<(), String> {
        let (url, user, password) = (c.nats.url(), user.to_owned(), password.to_owned());
        runtime().block_on(async move {
            let client = async_nats::ConnectOptions::with_user_and_password(user, password)
                .connect(url)
                .await
                .map_err(|e| e.to_string())?;
            let js = async_nats::jetstream::new(client);
            let ack = tokio::time::timeout(Duration::from_secs(2), async {
                js.publish(subject, b"{}".to_vec().into())
                    .await
                    .map_err(|e| e.to_string())?
                    .await
                    .map_err(|e| e.to_string())
            })
            .await
            .map_err(|_| "no acknowledgement".to_owned())?;
            ack.map(|_| ())
        })
    };
    let result_at = format!("crewbox.out.{run}.result.k-forged");
    let task_at = format!("crewbox.task.{POOL}.{run}.k-forged");
    assert!(publish("observer", "pw-observer-3", result_at.clone()).is_err());
    assert!(publish("observer", "pw-observer-3", task_at.clone()).is_err());
    assert!(
        publish("crewbox-worker", "pw-worker-2", task_at.clone()).is_err(),
        "a worker published a task"
    );
    assert!(
        publish("crewbox-coordinator", "pw-coordinator-1", result_at.clone()).is_err(),
        "a coordinator published a result"
    );
    // The permitted role does get through, so the refusals above are the permissions.
    publish(
        "crewbox-worker",
        "pw-worker-2",
        format!("crewbox.out.{run}.event.k-probe"),
    )
    .expect("a worker publishes events");
    // Orders reach a worker under these users too (and its answer gets back).
    steer_a_remote_agent(&c);
    assert_eq!(w.stop().ran, 2);
}

/// The decisions a worker makes about a coordinator's agent (its validators' verdicts,
/// the validation that followed) go into the coordinator's audit chain with its events,
/// each once, as they would for an agent run here; the chain stays whole. (A worker's
/// own store forgets them once answered: the coordinator's is the record.)
#[test]
fn a_remote_agents_verdicts_are_in_the_coordinators_audit_chain_once() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script(QUICK);
    let w = c.worker("wa");
    let report = c.run(&[
        "run",
        "write beta",
        "--mode",
        "single",
        "--validator",
        "no-secrets",
    ]);
    assert_eq!(report["status"], "completed", "{report}");
    let run = run_id(&report);
    let agents = c.store().agents(&run);
    assert_eq!(agents.len(), 1, "{agents:?}");
    let agent = agents[0].id.as_str();
    let out = cli_ok(&c, &["audit", run.as_str(), "--json"]);
    let records: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let of_agent = |kind: &str| {
        records
            .iter()
            .filter(|r| r["agent_id"] == agent && r["kind"] == kind)
            .count()
    };
    assert_eq!(of_agent("spawn"), 1, "{records:#?}");
    assert_eq!(of_agent("validator.verdict"), 1, "{records:#?}");
    assert_eq!(of_agent("agent.validation"), 1, "{records:#?}");
    let verdict = records
        .iter()
        .find(|r| r["kind"] == "validator.verdict")
        .unwrap();
    assert_eq!(verdict["data"]["validator"], "no-secrets", "{verdict}");
    let verify = command(c.path(), &["audit", "verify", "--json"])
        .output()
        .unwrap();
    let verdict: serde_json::Value = serde_json::from_slice(&verify.stdout).unwrap();
    assert_eq!(verdict["status"], "intact", "{verdict}");
    assert_eq!(w.stop().ran, 1);
}

/// A remote agent that failed is a dead letter here with its conversation, as a local
/// one is: `crewbox retry` sends it to a worker again, continued from there.
#[test]
fn a_remote_agent_that_failed_is_retried_from_its_conversation() {
    let providers = "\n[providers.down]\nkind = \"scripted\"\nscript = \"down.toml\"\n\
                     [providers.ok]\nkind = \"scripted\"\nscript = \"ok.toml\"\n";
    let Some(nats) = NatsServer::start() else {
        return;
    };
    let c = cluster_on(nats, providers, |_| {}).unwrap();
    let config = c.path().join("config/crewbox");
    // Down after its first turn (a read), on the worker.
    std::fs::write(
        config.join("down.toml"),
        r#"
[[reply]]
turn = 1
text = "Reading the notes first."
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }

[[reply]]
turn = 2
repeat = true
error = "connection"
"#,
    )
    .unwrap();
    // Tells a continued conversation (it holds the read) from a fresh start.
    std::fs::write(
        config.join("ok.toml"),
        r#"
[[reply]]
conversation = "call read_file"
text = "OK continued from the conversation"
repeat = true

[[reply]]
text = "OK from a fresh start"
repeat = true
"#,
    )
    .unwrap();
    c.script("[[reply]]\nrepeat = true\ntext = \"unused\"\n");
    let w = c.worker("wa");
    let run_args = [
        "run",
        "read the notes",
        "--mode",
        "single",
        "--provider",
        "down",
        "--json",
    ];
    let out = command(c.path(), &run_args).output().unwrap();
    let failed = report(&out);
    assert_eq!(failed["status"], "failed", "{failed}");
    let run = run_id(&failed);
    let out = command(c.path(), &["dead", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let letters: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(letters.len(), 1, "{letters:#?}");
    assert_eq!(letters[0]["run_id"], run.as_str(), "{letters:#?}");
    assert_eq!(letters[0]["reason"], "model-unavailable", "{letters:#?}");
    assert_eq!(letters[0]["conversation"], true, "{letters:#?}");
    let agent = letters[0]["agent_id"].as_str().unwrap().to_owned();
    let out = command(c.path(), &["retry", &agent, "--provider", "ok", "--json"])
        .output()
        .unwrap();
    let retried = report(&out);
    assert_eq!(retried["status"], "completed", "{retried}");
    assert_eq!(retried["run_id"], run.as_str(), "{retried}");
    assert!(
        retried["result"]
            .as_str()
            .is_some_and(|r| r.contains("OK continued from the conversation")),
        "{retried}"
    );
    assert_eq!(
        w.stop().ran,
        2,
        "the failed attempt and its retry, both on the worker"
    );
}

/// The running agent whose task mentions `prompt`, once the coordinator knows it runs
/// (its worker forwarded its start).
fn running_agent(c: &Cluster, prompt: &str) -> AgentRecord {
    let db = c.store();
    let found = || {
        db.unfinished()
            .into_iter()
            .flat_map(|r| db.agents(&r))
            .find(|a| a.task.contains(prompt) && a.state == AgentState::Running)
    };
    let started = wait_for(Duration::from_secs(30), || found().is_some());
    assert!(started, "the agent never started on a worker");
    found().unwrap()
}

/// A first turn slow enough to steer the agent in (4 s: the order is taken within a
/// second on a loaded machine), then a reply that tells whether the steer reached its
/// model.
const STEER_ME: &str = r#"
[[reply]]
conversation = "steer me"
turn = 1
delay_ms = 4000
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }

[[reply]]
conversation = "(?s)steer me.*STEER-5c1"
text = "steered: took the order"

[[reply]]
conversation = "steer me"
text = "never steered"
"#;

/// An agent that would run thirty turns of 1.5 s each.
const STOP_ME: &str = r#"
[[reply]]
conversation = "stop me"
repeat = true
delay_ms = 1500
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }
"#;

/// Runs `crewbox ARGS` in the cluster's repository, which must succeed.
fn cli_ok(c: &Cluster, args: &[&str]) -> std::process::Output {
    let out = command(c.path(), args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `crewbox steer` from another process reaches the agent running on a worker before
/// its next model call.
fn steer_a_remote_agent(c: &Cluster) {
    c.script(STEER_ME);
    let run = single_run(c, "steer me");
    let agent = running_agent(c, "steer me");
    cli_ok(c, &["steer", agent.id.as_str(), "STEER-5c1"]);
    assert_steered(&report(&run.output()), "");
}

/// `report` is of a run whose agent completed having read the steer of [`STEER_ME`];
/// `context` goes with a failure.
fn assert_steered(report: &serde_json::Value, context: &str) {
    assert_eq!(report["status"], "completed", "{report}\n{context}");
    assert!(
        report["result"]
            .as_str()
            .is_some_and(|r| r.contains("steered: took the order")),
        "{report}\n{context}"
    );
}

/// A steer a worker took, then killed before its agent read it, reaches the execution
/// that runs the task next (probe 16: lost without a trace, the agent ended "never
/// steered" and no `agent.steer-undelivered` was recorded).
#[test]
fn a_steer_taken_by_a_worker_killed_before_delivering_it_reaches_the_next() {
    let Some(mut c) = cluster(|r| std::fs::write(r.join("notes.txt"), "hello\n").unwrap()) else {
        return;
    };
    c.worker_env
        .push(("RUST_LOG".to_owned(), "crewbox=info".to_owned()));
    c.script(STEER_ME);
    let first = c.worker("wa");
    let run = single_run(&c, "steer me");
    let agent = running_agent(&c, "steer me");
    cli_ok(&c, &["steer", agent.id.as_str(), "STEER-5c1"]);
    let log = first.log.clone();
    let taken = wait_for(Duration::from_secs(30), || {
        std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("order from the coordinator") && l.contains("taken=true"))
    });
    assert!(
        taken,
        "{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // Killed in its first model call (4 s): the steer waits in its memory, unread.
    first.kill9();
    let second = c.worker("wb");
    assert_steered(
        &report(&run.output()),
        &std::fs::read_to_string(&second.log).unwrap_or_default(),
    );
    assert_eq!(second.stop().ran, 1);
}

/// `crewbox steer` and `crewbox stop` reach an agent running on a worker, from any
/// process on the coordinator's machine: the steer before its next model call, the stop
/// at once (the worker does not run it to its end).
#[test]
fn a_remote_agent_is_steered_and_stopped_through_its_worker() {
    let Some(c) = cluster(|_| {}) else { return };
    let w = c.worker("wa");
    steer_a_remote_agent(&c);

    c.script(STOP_ME);
    let (stopped, _) = stop_a_running_agent(&c, "stop me", "stop me");
    let row = c
        .store()
        .agents(&run_id(&stopped))
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(row.state, AgentState::Stopped, "{stopped}");

    // Stopping the whole run stops its agent on the worker too.
    stop_a_run_then_its_worker(&c, w, "stop me", "stop me", 3);
}

/// Starts a run with `prompt` and stops the agent whose task mentions `task` once it
/// runs on a worker, which must stop it at once (its script has thirty turns of 1.5 s
/// left): the run's report and the agent.
fn stop_a_running_agent(c: &Cluster, prompt: &str, task: &str) -> (serde_json::Value, AgentRecord) {
    let run = single_run(c, prompt);
    let agent = running_agent(c, task);
    let asked = std::time::Instant::now();
    cli_ok(c, &["stop", agent.id.as_str()]);
    let stopped = report(&run.output());
    assert!(asked.elapsed() < Duration::from_secs(15), "{stopped}");
    (stopped, agent)
}

/// Starts a run with `prompt` and stops the whole run once the agent whose task
/// mentions `task` runs on worker `w`: the worker, which finishes its tasks before it
/// exits, has nothing left to finish (it ran `ran` tasks in all).
fn stop_a_run_then_its_worker(c: &Cluster, w: Worker, prompt: &str, task: &str, ran: u64) {
    let run = single_run(c, prompt);
    let agent = running_agent(c, task);
    cli_ok(c, &["stop", agent.run_id.as_str()]);
    let _ = run.output();
    std::thread::sleep(Duration::from_secs(2));
    let asked = std::time::Instant::now();
    assert_eq!(w.stop().ran, ran);
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "the worker ran the stopped run's agent `{task}` on"
    );
}

/// Sends a raw order as a request; whether a worker answered it within a second.
fn order_taken(url: &str, subject: String, order: serde_json::Value) -> bool {
    runtime().block_on(async move {
        let client = async_nats::connect(url).await.unwrap();
        let payload = serde_json::to_vec(&order).unwrap();
        let sent = client.request(subject, payload.into());
        matches!(
            tokio::time::timeout(Duration::from_secs(1), sent).await,
            Ok(Ok(_))
        )
    })
}

/// An order reaches only the agent of the task it names, on that task's subject: one
/// naming another agent, or sent on another run's subject, or that does not read, is
/// not taken, and the agent runs on unsteered.
#[test]
fn an_order_for_another_agent_or_on_another_subject_is_not_taken() {
    let Some(c) = cluster(|_| {}) else { return };
    let w = c.worker("wa");
    c.script(STEER_ME);
    let run = single_run(&c, "steer me");
    let agent = running_agent(&c, "steer me");
    let key = queued_task_key(&c.nats.url(), &agent);
    let order = |agent_id: &str| {
        serde_json::json!({
            "v": crewbox::unstable::remote::WIRE_VERSION, "key": key, "run_id": agent.run_id.as_str(), "agent_id": agent_id,
            "order": "steer", "message": "STEER-5c1",
        })
    };
    let subject = format!("crewbox.ctl.{POOL}.{}.{key}", agent.run_id);
    let url = &c.nats.url();
    assert!(!order_taken(url, subject.clone(), order("a-someone-else")));
    let elsewhere = format!("crewbox.ctl.{POOL}.r-other.{key}");
    assert!(!order_taken(url, elsewhere, order(agent.id.as_str())));
    let mut unreadable = order(agent.id.as_str());
    unreadable["message"] = serde_json::Value::Null;
    assert!(!order_taken(url, subject.clone(), unreadable));
    let finished = report(&run.output());
    assert_eq!(finished["result"], "never steered", "{finished}");
    // The same order, well addressed, is taken (so the refusals above are the checks).
    c.script(STEER_ME);
    let run = single_run(&c, "steer me");
    let agent = running_agent(&c, "steer me");
    let key = queued_task_key(&c.nats.url(), &agent);
    let subject = format!("crewbox.ctl.{POOL}.{}.{key}", agent.run_id);
    let order = serde_json::json!({
        "v": crewbox::unstable::remote::WIRE_VERSION, "key": key, "run_id": agent.run_id.as_str(), "agent_id": agent.id.as_str(),
        "order": "steer", "message": "STEER-5c1",
    });
    assert!(order_taken(url, subject, order));
    let finished = report(&run.output());
    assert_eq!(finished["result"], "steered: took the order", "{finished}");
    assert_eq!(w.stop().ran, 2);
}

/// With both sides exporting traces, a remote agent's spans are in its run's trace: the
/// worker's `task` span is a child of the coordinator's `run` span (the task carries its
/// `traceparent`), and the agent's span a child of the `task` span.
#[cfg(feature = "otlp")]
#[test]
fn a_remote_agents_spans_join_its_runs_trace() {
    use crate::telemetry::receiver::Receiver;
    let Some(mut c) = cluster(|_| {}) else { return };
    let Some(rx) = Receiver::start(c.path()) else {
        return;
    };
    let export = ("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), rx.endpoint());
    c.worker_env = vec![export.clone()];
    c.coordinator_env = vec![export];
    c.script("[[reply]]\nrepeat = true\ntext = \"traced\"\n");
    let w = c.worker("wa");
    let report = c.run(&["run", "--mode", "single", "trace me"]);
    assert_eq!(report["status"], "completed", "{report}");
    let agent_id = report["agents"][0]["id"].as_str().unwrap().to_owned();
    // A worker sends its last spans as it exits.
    assert_eq!(w.stop().ran, 1);
    let spans = rx.spans();
    let one = |name: &str| {
        let found: Vec<&serde_json::Value> = spans.iter().filter(|s| s["name"] == name).collect();
        assert_eq!(found.len(), 1, "one `{name}` span: {spans:#?}");
        found[0]
    };
    let (run, task, agent) = (one("run"), one("task"), one("agent"));
    assert_eq!(
        agent["attributes"]["agent_id"],
        agent_id.as_str(),
        "{agent}"
    );
    assert_eq!(task["attributes"]["worker"], "wa", "{task}");
    for s in [task, agent] {
        assert_eq!(s["trace_id"], run["trace_id"], "one trace: {s}");
    }
    assert_eq!(task["parent_span_id"], run["span_id"], "{task}");
    assert_eq!(agent["parent_span_id"], task["span_id"], "{agent}");
}

/// The model calls of an agent that ran on a worker, and of the sub-agent it started
/// there, are recorded in the coordinator's store with its result: `crewbox replay`
/// re-runs the run from them alone and matches, and its cassette lists each call once.
#[test]
fn a_remote_runs_model_calls_are_recorded_so_it_replays() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script(&crate::support::script::delegates(0));
    let w = c.worker("wa");
    let report_ = c.run(&["run", "go", "--mode", "single"]);
    assert_eq!(report_["status"], "completed", "{report_}");
    let run = run_id(&report_);
    assert_eq!(
        w.stop().ran,
        1,
        "the parent's task; its sub-agent ran inside it"
    );
    let agents = c.store().agents(&run);
    assert_eq!(agents.len(), 2, "{agents:?}");
    let cassette = c.path().join("run.cassette.json");
    cli_ok(
        &c,
        &[
            "export",
            run.as_str(),
            "--cassette",
            cassette.to_str().unwrap(),
        ],
    );
    let tape: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cassette).unwrap()).unwrap();
    let calls: Vec<(String, u64)> = tape["exchanges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["agent"].as_str().unwrap().to_owned(),
                x["turn"].as_u64().unwrap(),
            )
        })
        .collect();
    let kid = agents.iter().find(|a| a.parent.is_some()).unwrap();
    let mut expected = vec![
        ("agent".to_owned(), 1),
        ("agent".to_owned(), 2),
        (kid.name.clone(), 1),
        (kid.name.clone(), 2),
    ];
    let mut sorted = calls.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected, "each call once: {calls:?}");
    // Replayed from the recording alone (no worker runs now; a replay runs locally).
    let out = command(c.path(), &["replay", run.as_str(), "--json"])
        .output()
        .unwrap();
    let replay = report(&out);
    assert_eq!(replay["outcome"], "matched", "{replay:#}");
    assert_eq!(replay["recorded_calls"], 4, "{replay:#}");
    assert_eq!(replay["answered_calls"], 4, "{replay:#}");
}

/// A parent that starts a slow sub-agent: one to steer (its second turn tells whether
/// the steer reached its model), one to stop (thirty turns of 1.5 s).
const KIDS: &str = r#"
[[reply]]
agent = "agent"
conversation = "steer my kid"
turn = 1
text = "delegating"
[[reply.tool_calls]]
name = "spawn_agent"
args = { role = "kid", task = "slow kid to steer" }

[[reply]]
agent = "agent"
conversation = "stop my kid"
turn = 1
text = "delegating"
[[reply.tool_calls]]
name = "spawn_agent"
args = { role = "kid", task = "slow kid to stop" }

[[reply]]
agent = "agent"
turn = 2
repeat = true
text = "parent done"

[[reply]]
system = "You are a sub-agent"
conversation = "slow kid to steer"
turn = 1
delay_ms = 4000
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }

[[reply]]
system = "You are a sub-agent"
conversation = "(?s)slow kid to steer.*STEER-k1d"
text = "KID steered"

[[reply]]
system = "You are a sub-agent"
conversation = "slow kid to steer"
text = "KID never steered"

[[reply]]
system = "You are a sub-agent"
conversation = "slow kid to stop"
repeat = true
delay_ms = 1500
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }
"#;

/// A sub-agent that an agent on a worker started is known here while it runs (recorded
/// and audited once, with its worker): `crewbox steer` and `crewbox stop` reach it
/// through that worker, as they reach the task's own agent; stopping its run stops it
/// on the worker too.
#[test]
fn a_sub_agent_started_on_a_worker_is_steered_and_stopped_from_here() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script(KIDS);
    let w = c.worker("wa");
    let run = single_run(&c, "steer my kid");
    let kid = running_agent(&c, "slow kid to steer");
    assert!(kid.parent.is_some(), "{kid:?}");
    cli_ok(&c, &["steer", kid.id.as_str(), "STEER-k1d"]);
    let steered = report(&run.output());
    assert_eq!(steered["status"], "completed", "{steered}");
    let db = c.store();
    let rows = db.agents(&run_id(&steered));
    assert_eq!(rows.len(), 2, "{rows:?}");
    let row = rows.iter().find(|a| a.id == kid.id).unwrap();
    assert_eq!(row.state, AgentState::Completed, "{row:?}");
    assert!(
        row.result
            .as_deref()
            .is_some_and(|r| r.contains("KID steered")),
        "{row:?}"
    );
    let out = cli_ok(
        &c,
        &["audit", steered["run_id"].as_str().unwrap(), "--json"],
    );
    let records: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let spawns: Vec<_> = records
        .iter()
        .filter(|r| r["kind"] == "spawn" && r["agent_id"] == kid.id.as_str())
        .collect();
    assert_eq!(spawns.len(), 1, "{records:#?}");
    assert_eq!(spawns[0]["data"]["worker"], "wa", "{spawns:?}");
    // `status` and `tree` say where it ran: its parent's worker, in its parent's task.
    let workers = db.workers(&run_id(&steered));
    assert_eq!(workers.len(), 2, "{workers:?}");
    let parent = workers
        .iter()
        .find(|w| Some(w.agent_id.as_str()) == kid.parent.as_ref().map(|p| p.as_str()))
        .unwrap();
    let of_kid = workers
        .iter()
        .find(|w| w.agent_id == kid.id.as_str())
        .unwrap();
    assert_eq!(
        (of_kid.worker.as_str(), &of_kid.task_key),
        ("wa", &parent.task_key)
    );
    let tree = cli_ok(&c, &["tree", steered["run_id"].as_str().unwrap()]);
    let tree = String::from_utf8_lossy(&tree.stdout);
    assert!(
        tree.lines()
            .any(|l| l.contains(kid.id.as_str()) && l.ends_with("@ wa")),
        "{tree}"
    );

    let (stopped, kid) = stop_a_running_agent(&c, "stop my kid", "slow kid to stop");
    assert_eq!(
        stopped["status"], "completed",
        "the parent went on: {stopped}"
    );
    let row = db
        .agents(&run_id(&stopped))
        .into_iter()
        .find(|a| a.id == kid.id)
        .unwrap();
    assert_eq!(row.state, AgentState::Stopped, "{row:?}");

    // Stopping the whole run stops the sub-agent on the worker too.
    stop_a_run_then_its_worker(&c, w, "stop my kid", "slow kid to stop", 3);
}

/// Starts a single run whose agent's task runs on a worker for 3 s, and says (as a
/// hostile worker would) that it started a sub-agent, once that sub-agent is recorded:
/// the worker, the run, its agent and its task's key.
fn a_forged_kid_started(c: &Cluster) -> (Worker, Running, AgentRecord, String) {
    c.script("[[reply]]\nagent = \"agent\"\nrepeat = true\ndelay_ms = 3000\ntext = \"done\"\n");
    let w = c.worker("wa");
    let run = single_run(c, "a task");
    let agent = running_agent(c, "a task");
    let key = queued_task_key(&c.nats.url(), &agent);
    forge_a_kid(c, &agent, &key);
    let db = c.store();
    assert!(
        wait_for(Duration::from_secs(10), || {
            db.agents(&agent.run_id)
                .iter()
                .any(|a| a.name == "FORGED-kid")
        }),
        "the started sub-agent was not recorded"
    );
    (w, run, agent, key)
}

/// Publishes the first event of a sub-agent `agent` is said to have started for task
/// `key`.
fn forge_a_kid(c: &Cluster, agent: &AgentRecord, key: &str) {
    publish_raw(
        &c.nats.url(),
        vec![(
            format!("crewbox.out.{}.event.{key}", agent.run_id),
            forged_start(key, &agent.run_id, &agent.id),
        )],
    );
}

/// A sub-agent recorded while it ran, which its parent's result then does not list
/// (here one a worker said started; a result over the size bound lists fewer), does not
/// stay running here once the task is over: it ends as an error saying why.
#[test]
fn a_started_sub_agent_its_result_does_not_list_ends_as_an_error() {
    let Some(c) = cluster(|_| {}) else { return };
    let (w, run, agent, _) = a_forged_kid_started(&c);
    let db = c.store();
    let kid = || {
        db.agents(&agent.run_id)
            .into_iter()
            .find(|a| a.name == "FORGED-kid")
    };
    let done = report(&run.output());
    assert_eq!(done["status"], "completed", "{done}");
    let kid = kid().unwrap();
    assert_eq!(kid.state, AgentState::Error, "{kid:?}");
    assert!(
        kid.error
            .as_deref()
            .is_some_and(|e| e.contains("did not say how it ended")),
        "{kid:?}"
    );
    assert_eq!(w.stop().ran, 1);
}

/// The same across a coordinator killed after the sub-agent was recorded: `resume` ends
/// it (its process is gone); one said to start while no coordinator ran is taken by the
/// resumed run (the task runs under its first agent's id), the worker's result comes to
/// that run, and no row of the run is left running.
#[test]
fn a_started_sub_agent_does_not_stay_running_across_a_coordinator_restart() {
    let Some(c) = cluster(|_| {}) else { return };
    let (w, run, agent, key) = a_forged_kid_started(&c);
    drop(run); // SIGKILL: `Running` kills and reaps its coordinator
    // Another one says it started while no coordinator listens, under the agent id its
    // task names (the resumed step's agent is a new one): the resumed run's consumer
    // takes it.
    forge_a_kid(&c, &agent, &key);
    let db = c.store();
    let out = c
        .coordinator(&["resume", agent.run_id.as_str()])
        .output()
        .unwrap();
    let done = report(&out);
    assert_eq!(done["status"], "completed", "{done}");
    let left: Vec<_> = db
        .agents(&agent.run_id)
        .into_iter()
        .filter(|a| !a.state.is_terminal())
        .collect();
    assert!(left.is_empty(), "left unfinished: {left:?}");
    let kids: Vec<_> = db
        .agents(&agent.run_id)
        .into_iter()
        .filter(|a| a.name == "FORGED-kid")
        .collect();
    assert!(
        kids.len() == 2 && kids.iter().all(|k| k.state == AgentState::Error),
        "{kids:?}"
    );
    // The task ran once: the resumed run took the result its worker sent.
    assert_eq!(w.stop().ran, 1);
}

/// After a coordinator is killed mid-task and the run resumed, the resumed step's agent
/// (a new one, waiting for the same task) is steered through the worker that still runs
/// the task under the first agent's id.
#[test]
fn a_remote_agent_resumed_mid_task_is_steered_through_its_worker() {
    let Some(c) = cluster(|_| {}) else { return };
    let w = c.worker("wa");
    c.script(&STEER_ME.replace("delay_ms = 4000", "delay_ms = 8000"));
    let run = single_run(&c, "steer me");
    let first = running_agent(&c, "steer me");
    drop(run); // SIGKILL: `Running` kills and reaps its coordinator
    let resumed = Running(Some(
        c.coordinator(&["resume", first.run_id.as_str()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let db = c.store();
    let successor = || {
        db.agents(&first.run_id)
            .into_iter()
            .find(|a| a.id != first.id && !a.state.is_terminal())
    };
    assert!(
        wait_for(Duration::from_secs(20), || successor().is_some()),
        "the resumed run started no agent for the step"
    );
    cli_ok(
        &c,
        &["steer", successor().unwrap().id.as_str(), "STEER-5c1"],
    );
    let steered = report(&resumed.output());
    assert_eq!(steered["status"], "completed", "{steered}");
    assert_eq!(steered["result"], "steered: took the order", "{steered}");
    assert_eq!(w.stop().ran, 1);
}

/// Within one run, a task's messages speak for that task's agent only. On one swarm
/// agent's subjects a forger sends a result naming a sibling agent, a result listing a
/// sibling as its sub-agent, an audited verdict about a sibling, and a sub-agent said
/// to start at its parent's own depth. Each is refused: every agent
/// keeps the result its worker sent, the run gains no agent, and nothing forged is
/// stored or audited. Shown failing without the checks (the sibling's row took the
/// forged result and its real one was lost; the verdict was audited).
#[test]
fn a_tasks_messages_speak_only_for_its_own_agent_within_a_run() {
    let Some(c) = cluster(|_| {}) else { return };
    c.script("[[reply]]\nrepeat = true\ndelay_ms = 8000\ntext = \"the real answer\"\n");
    let (wa, wb) = (c.worker("wa"), c.worker("wb"));
    let run = Running(Some(
        c.coordinator(&["run", "--mode", "swarm", "--swarm-size", "3", "forge me"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let db = c.store();
    let running = || {
        db.unfinished().first().is_some_and(|r| {
            let agents = db.agents(r);
            agents.len() == 3 && agents.iter().all(|a| a.state == AgentState::Running)
        })
    };
    assert!(
        wait_for(Duration::from_secs(30), running),
        "the swarm never ran"
    );
    let run_id = db.unfinished()[0].clone();
    let agents = db.agents(&run_id);
    let (a, b, sibling) = (&agents[0], &agents[1], &agents[2]);
    let key_a = queued_task_key(&c.nats.url(), a);
    let r = run_id.as_str();
    let result_at = format!("crewbox.out.{r}.result.{key_a}");
    let event_at = format!("crewbox.out.{r}.event.{key_a}");
    let as_child = AgentRecord {
        parent: Some(a.id.clone()),
        state: AgentState::Completed,
        result: Some("FORGED-CHILD".into()),
        ..sibling.clone()
    };
    // At its parent's own depth: out of the tree it claims to be in (the swarm's
    // agents hold every capability, so none can be added).
    let kid = AgentRecord {
        parent: Some(a.id.clone()),
        name: "FORGED-kid".into(),
        depth: a.depth,
        caps: a.caps.clone(),
        state: AgentState::Running,
        ..agent_record(&run_id)
    };
    let start = serde_json::to_vec(&serde_json::json!({
        "v": crewbox::unstable::remote::WIRE_VERSION, "key": key_a, "exec": "forged",
        "events": [{"seq": 1, "agent_id": kid.id.as_str(), "at": 1, "kind": "agent.state",
                    "data": {"state": "running"},
                    "started": {"worker": "intruder", "agent": kid}}],
    }))
    .unwrap();
    let verdict = serde_json::json!({
        "round": 0, "validator": "security-review", "outcome": "error",
        "message": "FORGED VERDICT",
    });
    publish_raw(
        &c.nats.url(),
        vec![
            (
                result_at.clone(),
                forged_result(&key_a, b.id.as_str(), "FORGED-AS-B", Vec::new()),
            ),
            (
                result_at,
                forged_result(&key_a, a.id.as_str(), "FORGED-A", vec![as_child]),
            ),
            (
                event_at.clone(),
                forged_event(&key_a, b.id.as_str(), "validator.verdict", verdict),
            ),
            (event_at, start),
        ],
    );
    let out = run.output();
    let report = report(&out);
    assert_eq!(report["status"], "completed", "{report}");
    let agents = db.agents(&run_id);
    assert_eq!(agents.len(), 3, "no agent added: {agents:?}");
    for agent in &agents {
        assert_eq!(
            agent.result.as_deref(),
            Some("the real answer"),
            "{agents:?}"
        );
    }
    let events = db
        .rt
        .block_on(db.store.events(Some(&run_id), 0, 10_000))
        .unwrap();
    let text = format!("{events:?}");
    assert!(
        !text.contains("FORGED"),
        "a forged event was stored: {text}"
    );
    let audit = String::from_utf8_lossy(&cli_ok(&c, &["audit", r, "--json"]).stdout).into_owned();
    assert!(!audit.contains("FORGED"), "{audit}");
    assert_eq!(wa.stop().ran + wb.stop().ran, 3);
}

/// Takes deliveries of the pool's tasks as a worker that never answers: each is
/// answered with `kind` (a nak brings the next delivery at once, as five workers
/// killed one after another would, without their ack waits) until a delivery numbered
/// `last` was taken. Returns the last delivery number seen.
fn take_deliveries(url: &str, last: i64, kind: async_nats::jetstream::AckKind) -> i64 {
    use futures::StreamExt;
    let rt = runtime();
    rt.block_on(async move {
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client.clone());
        let stream = js.get_stream("CREWBOX_TASKS").await.unwrap();
        let consumer: async_nats::jetstream::consumer::PullConsumer = stream
            .get_consumer(&format!("crewbox-pool-{POOL}"))
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut seen = 0;
        while seen < last && std::time::Instant::now() < deadline {
            let mut batch = consumer
                .fetch()
                .max_messages(1)
                .expires(Duration::from_millis(500))
                .messages()
                .await
                .unwrap();
            while let Some(Ok(m)) = batch.next().await {
                seen = m.info().unwrap().delivered;
                m.ack_with(kind).await.unwrap();
            }
        }
        // Acks are not awaited by the server: sent before the connection goes.
        client.flush().await.unwrap();
        seen
    })
}

/// A cluster whose pool consumer exists (a worker started and stopped, as the first
/// worker of a pool makes it), with no worker running.
fn cluster_with_pool(reply: &str) -> Option<Cluster> {
    let c = cluster(|_| {})?;
    c.script(&format!("[[reply]]\nrepeat = true\ntext = \"{reply}\"\n"));
    c.worker("first").stop();
    Some(c)
}

#[test]
fn a_task_every_worker_dropped_fails_its_agent_instead_of_hanging_and_retries() {
    let Some(c) = cluster_with_pool("DONE AT LAST") else {
        return;
    };
    let run = single_run(&c, "crash them all");
    // Five workers took it and died before answering: JetStream stopped at five
    // deliveries before, and the task stayed in the work queue, never delivered again.
    assert_eq!(
        take_deliveries(
            c.nats.url().as_str(),
            5,
            async_nats::jetstream::AckKind::Nak(None)
        ),
        5
    );
    let w = c.worker("healthy");
    let out = run.output_within(Duration::from_secs(40), "a task past its deliveries");
    let failed = report(&out);
    assert_eq!(failed["status"], "failed", "{failed}");
    let run_id = run_id(&failed);
    let agents = c.store().agents(&run_id);
    assert_eq!(agents.len(), 1, "{agents:?}");
    let error = agents[0].error.clone().unwrap_or_default();
    assert!(error.contains("given up on its delivery 6"), "{error}");
    // A dead letter: retried, it runs (under a key of its own: the failure stored for
    // the first agent does not answer it, nor does the server take its task as a
    // duplicate of the first).
    let out = command(c.path(), &["dead", "--json"]).output().unwrap();
    let letters: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(letters.len(), 1, "{letters:#?}");
    assert_eq!(
        letters[0]["agent_id"],
        agents[0].id.as_str(),
        "{letters:#?}"
    );
    let out = command(c.path(), &["retry", agents[0].id.as_str(), "--json"])
        .env("RUST_LOG", "crewbox=warn")
        .output()
        .unwrap();
    let retried = report(&out);
    assert_eq!(retried["status"], "completed", "{retried}");
    assert_eq!(retried["result"], "DONE AT LAST", "{retried}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("left the server"), "{stderr}");
    assert_eq!(
        w.stop(),
        Tally {
            ran: 1,
            skipped: 0,
            refused: 1
        },
        "the sixth delivery answered, the retry ran"
    );
}

#[test]
fn a_task_acked_without_a_result_is_published_again_and_runs_once() {
    let Some(c) = cluster_with_pool("RAN AFTER ALL") else {
        return;
    };
    let run = Running(Some(
        c.coordinator(&["run", "--mode", "single", "eat my task"])
            .env("RUST_LOG", "crewbox=warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    // A broken or hostile puller acks the task without answering: it leaves the work
    // queue, and no result ever comes.
    assert_eq!(
        take_deliveries(
            c.nats.url().as_str(),
            1,
            async_nats::jetstream::AckKind::Ack
        ),
        1
    );
    let w = c.worker("healthy");
    let out = run.output_within(Duration::from_secs(40), "a task acked without a result");
    let done = report(&out);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"], "RAN AFTER ALL", "{done}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("publishing it again"), "{stderr}");
    assert_eq!(c.store().agents(&run_id(&done)).len(), 1);
    assert_eq!(w.stop().ran, 1);
}

/// Tokens a worker's execution spent before it was killed (its `model.reply` events
/// reached the coordinator) count in the agent's totals with those of the execution
/// that finished the task: the result counted only its own. Shown failing without
/// the fix.
#[test]
fn tokens_of_an_execution_killed_mid_task_count_in_the_agents_totals() {
    let Some(c) = cluster(|r| std::fs::write(r.join("notes.txt"), "hello\n").unwrap()) else {
        return;
    };
    // A quick first turn (a read), then a slow second one: the first worker is killed
    // during the second, after its first reply was forwarded.
    c.script(
        r#"
[[reply]]
turn = 1
repeat = true
text = "Reading the notes first."
[[reply.tool_calls]]
name = "read_file"
args = { path = "notes.txt" }

[[reply]]
turn = 2
repeat = true
delay_ms = 3000
text = "NOTES READ"
"#,
    );
    let first = c.worker("wa");
    let run = single_run(&c, "read the notes");
    let db = c.store();
    let replied = wait_for(Duration::from_secs(30), || {
        db.unfinished().first().is_some_and(|r| {
            db.rt
                .block_on(db.store.events(Some(r), 0, 1000))
                .unwrap()
                .iter()
                .any(|e| matches!(e.event, Event::ModelReply { .. }))
        })
    });
    assert!(replied, "the first execution's reply never arrived");
    first.kill9();
    let second = c.worker("wb");
    let report = report(&run.output());
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "NOTES READ", "{report}");
    let run = run_id(&report);
    let agents = db.agents(&run);
    assert_eq!(agents.len(), 1, "{agents:?}");
    let (mut input, mut output, mut replies) = (0, 0, 0);
    for e in db
        .rt
        .block_on(db.store.events(Some(&run), 0, 1000))
        .unwrap()
    {
        if let Event::ModelReply { usage, .. } = e.event {
            input += usage.input;
            output += usage.output;
            replies += 1;
        }
    }
    assert_eq!(
        replies, 3,
        "one reply of the killed execution, two of the second"
    );
    assert_eq!(agents[0].stats.tokens_in, input, "{agents:?}");
    assert_eq!(agents[0].stats.tokens_out, output, "{agents:?}");
    assert_eq!(second.stop().ran, 1);
}

/// The pool's consumer as `(max_deliver, ack_wait)` says it is on the server.
fn pool_consumer_config(url: &str) -> (i64, Duration) {
    runtime().block_on(async move {
        let client = async_nats::connect(url).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let mut consumer: async_nats::jetstream::consumer::PullConsumer = js
            .get_stream("CREWBOX_TASKS")
            .await
            .unwrap()
            .get_consumer(&format!("crewbox-pool-{POOL}"))
            .await
            .unwrap();
        let info = consumer.info().await.unwrap();
        (info.config.max_deliver, info.config.ack_wait)
    })
}

/// The pool's consumer as an earlier crewbox made it (5 deliveries), with an ack wait
/// (1 s) shorter than the workers' own `ack_wait_s` (30): the server redelivers after
/// the consumer's, so workers that kept their tasks alive at their own pace had a
/// running task redelivered — to the other worker, which ran it a second time — and a
/// task past 5 deliveries was never answered. Now its deliveries are raised and the
/// workers beat at its pace. Shown failing without the fix (a second run, or a
/// redelivery of the running task; `max_deliver` 5).
#[test]
fn a_pool_consumer_made_elsewhere_is_raised_and_kept_alive_at_its_own_pace() {
    use async_nats::jetstream::consumer;
    let Some(mut c) = cluster(|_| {}) else { return };
    c.script("[[reply]]\nagent = \"agent\"\ndelay_ms = 3500\ntext = \"SLOW DONE\"\n");
    c.worker("first").stop();
    let url = c.nats.url();
    runtime().block_on({
        let url = url.clone();
        async move {
            let client = async_nats::connect(url).await.unwrap();
            let js = async_nats::jetstream::new(client);
            let tasks = js.get_stream("CREWBOX_TASKS").await.unwrap();
            let name = format!("crewbox-pool-{POOL}");
            tasks.delete_consumer(&name).await.unwrap();
            tasks
                .create_consumer(consumer::pull::Config {
                    durable_name: Some(name),
                    filter_subject: format!("crewbox.task.{POOL}.>"),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: Duration::from_secs(1),
                    max_deliver: 5,
                    max_ack_pending: 10_000,
                    ..Default::default()
                })
                .await
                .unwrap();
        }
    });
    // The workers' machine says 30 s.
    let wconfig = c.path().join("wconfig");
    std::fs::create_dir_all(wconfig.join("crewbox")).unwrap();
    let config = std::fs::read_to_string(c.path().join("config/crewbox/config.toml")).unwrap();
    std::fs::write(
        wconfig.join("crewbox/config.toml"),
        config.replace("ack_wait_s = 2", "ack_wait_s = 30"),
    )
    .unwrap();
    c.worker_env = vec![("XDG_CONFIG_HOME".into(), wconfig.display().to_string())];
    let wa = c.worker("wa");
    assert_eq!(
        pool_consumer_config(url.as_str()),
        (10, Duration::from_secs(1)),
        "the deliveries raised, the ack wait left as it was"
    );
    let run = single_run(&c, "slow");
    running_agent(&c, "slow");
    let wb = c.worker("wb");
    let report = report(&run.output());
    assert_eq!(report["status"], "completed", "{report}");
    assert_eq!(report["result"], "SLOW DONE", "{report}");
    let logs = [&wa.log, &wb.log].map(|l| std::fs::read_to_string(l).unwrap());
    assert!(
        logs.iter()
            .all(|l| !l.contains("redelivered while running")),
        "{logs:#?}"
    );
    let ran = wa.stop().ran + wb.stop().ran;
    assert_eq!(ran, 1, "{logs:#?}");
}

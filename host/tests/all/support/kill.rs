//! Killing a real `crewbox` process at a chosen step and resuming its run: the child
//! runs in the background, the test watches the run's journal in the store until the
//! kill point is reached, sends SIGKILL and runs `crewbox resume`.

use crate::support::repo::{bin, command};

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crewbox::unstable::agent::AgentState;
use crewbox::unstable::ids::RunId;
use crewbox::unstable::store::{AgentRecord, StepRecord, StepState, Store};

/// How long a kill point may take to be reached.
pub const REACH_TIMEOUT: Duration = Duration::from_secs(10);

/// The slow replies' delay: long enough to kill the process while one is pending.
pub const SLOW_MS: u64 = 3000;

/// Reads the store the child process writes, from the test.
pub struct Db {
    rt: tokio::runtime::Runtime,
    store: Store,
}

impl Db {
    /// Creates the store before the child starts, so polling never races its creation.
    pub fn create(dir: &Path) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let store = Store::open(&crate::support::repo::state_dir(dir)).unwrap();
        Self { rt, store }
    }

    pub fn unfinished(&self) -> Vec<RunId> {
        self.rt
            .block_on(self.store.unfinished_runs())
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    }

    pub fn steps(&self, run: &RunId) -> Vec<StepRecord> {
        self.rt.block_on(self.store.steps(run)).unwrap()
    }

    pub fn agents(&self, run: &RunId) -> Vec<AgentRecord> {
        self.rt.block_on(self.store.agents(run)).unwrap()
    }

    /// The finished runs whose `run.finished` events are not exactly one.
    pub fn ended_without_one_end_event(&self) -> Vec<(RunId, usize)> {
        self.rt.block_on(async {
            let mut out = Vec::new();
            for run in self.store.recent_runs(100).await.unwrap() {
                if run.status == crewbox::RunStatus::Running {
                    continue;
                }
                let ends = self
                    .store
                    .events_of_kinds(&run.id, &["run.finished"])
                    .await
                    .unwrap()
                    .len();
                if ends != 1 {
                    out.push((run.id, ends));
                }
            }
            out
        })
    }
}

pub fn step<'a>(steps: &'a [StepRecord], key: &str) -> Option<&'a StepRecord> {
    steps.iter().find(|s| s.key == key)
}

pub fn is(steps: &[StepRecord], key: &str, state: StepState) -> bool {
    step(steps, key).is_some_and(|s| s.state == state)
}

/// The agent rows named `name`, in creation order.
pub fn named<'a>(agents: &'a [AgentRecord], name: &str) -> Vec<&'a AgentRecord> {
    agents.iter().filter(|a| a.name == name).collect()
}

pub fn states(agents: &[&AgentRecord]) -> Vec<AgentState> {
    agents.iter().map(|a| a.state).collect()
}

/// Starts `crewbox run ... --script <script> --json` in the background.
pub fn spawn_run(dir: &Path, script: &str, args: &[&str]) -> Child {
    let script_path = dir.join("script.toml");
    std::fs::write(&script_path, script).unwrap();
    let mut all = args.to_vec();
    all.extend(["--script", script_path.to_str().unwrap(), "--json"]);
    spawn(dir, &all)
}

/// Starts `crewbox ARGS` in the background, stderr to a file `wait_for` shows.
pub fn spawn(dir: &Path, args: &[&str]) -> Child {
    let stderr = std::fs::File::create(dir.join("run.stderr")).unwrap();
    command(dir, args)
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr))
        .spawn()
        .unwrap()
}

/// Polls the journal until `reached` holds for the (only) unfinished run; returns it.
/// The child is killed on timeout; it must not exit on its own before.
pub fn wait_for(
    dir: &Path,
    db: &Db,
    child: &mut Child,
    what: &str,
    reached: impl Fn(&[StepRecord], &[AgentRecord]) -> bool,
) -> RunId {
    let deadline = Instant::now() + REACH_TIMEOUT;
    let mut seen = String::from("no run yet");
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "crewbox exited ({status}) before {what}; last seen: {seen}\nstderr: {}",
                std::fs::read_to_string(dir.join("run.stderr")).unwrap_or_default()
            );
        }
        if let Some(run) = db.unfinished().into_iter().next() {
            let steps = db.steps(&run);
            let agents = db.agents(&run);
            if reached(&steps, &agents) {
                return run;
            }
            seen = format!(
                "steps {:?}, agents {:?}",
                steps
                    .iter()
                    .map(|s| (s.key.as_str(), s.state))
                    .collect::<Vec<_>>(),
                agents
                    .iter()
                    .map(|a| (a.name.as_str(), a.state))
                    .collect::<Vec<_>>()
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} was not reached within {REACH_TIMEOUT:?}; last seen: {seen}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILL, then reap it: a zombie still passes the "is its driver alive" check.
pub fn kill9(child: &mut Child) {
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "killed, not finished: {status}");
}

/// `crewbox resume RUN --json`, which must succeed; its report.
pub fn resume(dir: &Path, run: &RunId) -> serde_json::Value {
    let out = bin(dir, &["resume", run.as_str(), "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "resume printed no JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success(),
        "resume failed ({}): {report}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(report["run_id"], run.as_str());
    report
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The interrupted row of an agent the killed process left running.
pub fn assert_interrupted(a: &AgentRecord) {
    assert_eq!(a.state, AgentState::Error, "{a:?}");
    assert!(
        a.error
            .as_deref()
            .is_some_and(|e| e.contains("interrupted")),
        "{a:?}"
    );
}

//! The whole engine on the path `crewbox run` takes — open the repository, build the
//! engine, run a request, read the report back from the store — with the scripted
//! model, so the figures are crewbox's own cost per agent. Last line: one JSON object.
//!
//! Teams are as large as a team may be ([`MAX_MEMBERS`], the cap on every team
//! source: larger teams cannot be written in any team file).
//!
//! - `broadcast_per_agent_ms`: a `broadcast` run of the largest team, wall time divided
//!   by its agents (median of the runs; target ≤ 0.25 ms).
//! - `orchestrate_per_agent_ms`: an `orchestrate` run of the largest team (orchestrator,
//!   every member as a worker, synthesis), wall time per agent (median; target ≤ 0.35 ms).
//! - `broadcast_ms` / `orchestrate_ms`: the median wall times of those runs.
//! - `*_cpu_per_agent_ms`: the process's CPU time (user + system) per agent in those
//!   runs — what the engine costs, whatever else the machine is doing.
//! - Baseline in the same run: `manager_per_agent_ms` (and its CPU figure), the same
//!   number of agents as the broadcast through the agent manager alone (no engine: no
//!   batcher, journal, joins or report).

// A bench that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crewbox::unstable::agent::manager::{Manager, SpawnOptions};
use crewbox::unstable::agent::permissions::{CapSet, Permissions};
use crewbox::unstable::agent::runner::AgentSpec;
use crewbox::unstable::config::Quotas;
use crewbox::unstable::ids::AgentId;
use crewbox::unstable::provider::Provider;
use crewbox::unstable::provider::scripted::ScriptedProvider;
use crewbox::unstable::store::{RunRecord, Store};
use crewbox::unstable::team::limits::MAX_MEMBERS;
use crewbox::unstable::tool::registry::ToolRegistry;
use crewbox::{Mode, ModeChoice, Repository, RunRequest, RunStatus};
use tokio_util::sync::CancellationToken;

const BROADCAST_MEMBERS: usize = MAX_MEMBERS;
const WORKERS: usize = MAX_MEMBERS;
const RUNS: usize = 5;

fn team(mode: &str, members: usize) -> String {
    let mut t = format!("mode = \"{mode}\"\n");
    for i in 0..members {
        t.push_str(&format!("\n[[members]]\nname = \"m{i}\"\n"));
    }
    t
}

/// Orchestrator assigns every worker, workers and members answer, synthesis sums up.
fn script_text() -> String {
    let assignments: String = (0..WORKERS)
        .map(|i| format!("@worker:m{i}\\nDo part {i}.\\n@end\\n"))
        .collect();
    format!(
        "[[reply]]\nagent = \"orchestrator\"\nrepeat = true\ntext = \"{assignments}\"\n\n\
         [[reply]]\nagent = \"synthesis\"\nrepeat = true\ntext = \"all parts done\"\n\n\
         [[reply]]\nrepeat = true\ntext = \"done\"\n"
    )
}

fn git_repo(dir: &Path) {
    std::fs::create_dir_all(dir.join(".crewbox/teams")).unwrap();
    std::fs::write(dir.join("notes.txt"), "alpha\n").unwrap();
    let git = git2::Repository::init(dir).unwrap();
    let mut index = git.index().unwrap();
    index.add_path(Path::new("notes.txt")).unwrap();
    index.write().unwrap();
    let tree = git.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("bench", "bench@localhost").unwrap();
    git.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
        .unwrap();
}

/// CPU time (user + system) this process has used, in milliseconds.
fn cpu_ms() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer; the call cannot fail with these arguments.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    ms(usage.ru_utime) + ms(usage.ru_stime)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Runs `req` `RUNS` times; the median wall time (ms), the agents per run and the CPU
/// time per run (ms).
async fn measure(engine: &crewbox::Engine, req: &RunRequest) -> (f64, usize, f64) {
    let mut walls = Vec::with_capacity(RUNS);
    let mut agents = 0;
    let cpu = cpu_ms();
    for _ in 0..RUNS {
        let start = Instant::now();
        let report = engine.run(req.clone()).await.unwrap();
        walls.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(
            report.status,
            RunStatus::Completed,
            "{}",
            report.render_text()
        );
        agents = report.agents.len();
    }
    (median(walls), agents, (cpu_ms() - cpu) / RUNS as f64)
}

/// The same number of agents through the manager alone: wall and CPU ms per agent.
async fn manager_baseline(state: &Path, workspace: &Path) -> (f64, f64) {
    let store = Store::open(state).unwrap();
    let manager = Manager::new(store.clone(), Arc::new(ToolRegistry::builtin()), 4);
    let provider: Arc<dyn Provider> = Arc::new(
        ScriptedProvider::parse("[[reply]]\nrepeat = true\ntext = \"done\"\n", "bench").unwrap(),
    );
    let mut walls = Vec::with_capacity(RUNS);
    let cpu = cpu_ms();
    for _ in 0..RUNS {
        let run = RunRecord::started(Mode::Broadcast, "bench", serde_json::json!({}));
        store.insert_run(&run).await.unwrap();
        let start = Instant::now();
        let mut handles = Vec::with_capacity(BROADCAST_MEMBERS);
        for i in 0..BROADCAST_MEMBERS {
            let spec = AgentSpec {
                id: AgentId::new(),
                run_id: run.id.clone(),
                parent: None,
                name: format!("m{i}"),
                role: format!("m{i}"),
                task: "say done".into(),
                system_prompt: "bench agent".into(),
                perms: Permissions::root(CapSet::read_only()),
                workspace: workspace.to_path_buf(),
                quotas: Quotas::default(),
                provider: provider.clone(),
                prices: None,
                network: false,
                mcp: Vec::new(),
            };
            handles.push(manager.spawn(spec, SpawnOptions::default()).await.unwrap());
        }
        for h in handles {
            assert!(h.wait().await.state.is_success());
        }
        walls.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let per_agent = |ms: f64| ms / BROADCAST_MEMBERS as f64;
    (
        per_agent(median(walls)),
        per_agent((cpu_ms() - cpu) / RUNS as f64),
    )
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    git_repo(&repo);
    std::fs::write(
        repo.join(".crewbox/teams/wide.toml"),
        team("broadcast", BROADCAST_MEMBERS),
    )
    .unwrap();
    std::fs::write(
        repo.join(".crewbox/teams/crowd.toml"),
        team("orchestrate", WORKERS),
    )
    .unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, script_text()).unwrap();
    // Nothing from this machine's own configuration or caches.
    for (var, sub) in [("XDG_CONFIG_HOME", "config"), ("XDG_CACHE_HOME", "cache")] {
        // SAFETY: set before the runtime starts any other thread that reads the environment.
        unsafe { std::env::set_var(var, dir.path().join(sub)) };
    }

    let setup = Instant::now();
    let repository = Repository::open(Some(&repo), Some(&dir.path().join("state"))).unwrap();
    let engine = repository.engine(CancellationToken::new()).await.unwrap();
    let open_ms = setup.elapsed().as_secs_f64() * 1e3;

    let request = |team: &str, mode: Mode| RunRequest {
        prompt: "do the work".into(),
        team: Some(team.into()),
        mode: Some(ModeChoice::Mode(mode)),
        script: Some(script.clone()),
        ..RunRequest::default()
    };
    let (broadcast_ms, broadcast_agents, broadcast_cpu) =
        measure(&engine, &request("wide", Mode::Broadcast)).await;
    let (orchestrate_ms, orchestrate_agents, orchestrate_cpu) =
        measure(&engine, &request("crowd", Mode::Orchestrate)).await;
    assert_eq!(broadcast_agents, BROADCAST_MEMBERS);
    assert_eq!(orchestrate_agents, WORKERS + 2);
    let (manager_per_agent_ms, manager_cpu_per_agent_ms) =
        manager_baseline(&dir.path().join("baseline"), &repo).await;
    eprintln!(
        "engine open {open_ms:.1} ms; broadcast of {broadcast_agents} agents {broadcast_ms:.1} ms; \
         orchestrate of {orchestrate_agents} agents {orchestrate_ms:.1} ms (medians of {RUNS})"
    );
    let figures = serde_json::json!({
        "broadcast_agents": broadcast_agents,
        "broadcast_ms": round3(broadcast_ms),
        "broadcast_per_agent_ms": round3(broadcast_ms / broadcast_agents as f64),
        "orchestrate_agents": orchestrate_agents,
        "orchestrate_ms": round3(orchestrate_ms),
        "orchestrate_per_agent_ms": round3(orchestrate_ms / orchestrate_agents as f64),
        "broadcast_cpu_per_agent_ms": round3(broadcast_cpu / broadcast_agents as f64),
        "orchestrate_cpu_per_agent_ms": round3(orchestrate_cpu / orchestrate_agents as f64),
        "manager_per_agent_ms": round3(manager_per_agent_ms),
        "manager_cpu_per_agent_ms": round3(manager_cpu_per_agent_ms),
        "load_average": std::fs::read_to_string("/proc/loadavg").ok().and_then(|l| l.split_whitespace().next().map(str::to_owned)),
        "engine_open_ms": round3(open_ms),
        "runs": RUNS,
        "targets": { "broadcast_per_agent_ms": "<= 0.25", "orchestrate_per_agent_ms": "<= 0.35" },
    });
    println!("{figures}");
}

//! The real `crewbox daemon` binary firing scheduled jobs in a temp repository, killed
//! and restarted; and the `schedule` command's usage errors.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Env {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    state: PathBuf,
    config: PathBuf,
}

fn git(repo: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(repo)
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

fn setup() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".crewbox")).unwrap();
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    std::fs::write(
        repo.join(".crewbox/s.toml"),
        "[[reply]]\nrepeat = true\ntext = \"ok\"\n",
    )
    .unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    );
    let env = Env {
        state: dir.path().join("state"),
        config: dir.path().join("config"),
        repo,
        _dir: dir,
    };
    user_config(&env, "");
    env
}

/// Writes the user's config: the scripted provider (providers are the user's own,
/// never a repository's) reading `.crewbox/s.toml`, plus `extra`.
fn user_config(env: &Env, extra: &str) {
    std::fs::create_dir_all(env.config.join("crewbox")).unwrap();
    std::fs::write(
        env.config.join("crewbox/config.toml"),
        format!(
            "{extra}default_provider = \"scripted\"\n[providers.scripted]\nkind = \"scripted\"\nscript = {:?}\n",
            env.repo.join(".crewbox/s.toml")
        ),
    )
    .unwrap();
}

fn command(env: &Env, args: &[&str]) -> Command {
    let homes = crate::support::cli::Homes {
        state: env.state.clone(),
        config: env.config.clone(),
        xdg_state: env.state.with_file_name("xdg-state"),
        home: None,
    };
    crate::support::cli::crewbox(&env.repo, &homes, args)
}

fn crewbox(env: &Env, args: &[&str]) -> Output {
    command(env, args).output().expect("running crewbox")
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn start_daemon(env: &Env) -> Child {
    command(env, &["daemon"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the daemon")
}

/// A daemon whose fire lines are read as it prints them, so a test waits for the fire
/// records it needs instead of sleeping a fixed time.
struct Watched {
    child: Child,
    fires: std::sync::Arc<std::sync::Mutex<Vec<Fire>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Watched {
    fn start(env: &Env) -> Self {
        use std::io::BufRead;
        let mut child = start_daemon(env);
        let stdout = child.stdout.take().unwrap();
        let fires = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = fires.clone();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(f) = Fire::parse(&line) {
                    sink.lock().unwrap().push(f);
                }
            }
        });
        Self {
            child,
            fires,
            reader: Some(reader),
        }
    }

    /// Waits (at most `limit`) until `done` holds for the fires so far; panics with them
    /// when it never does.
    fn wait_for(&self, what: &str, limit: Duration, done: impl Fn(&[Fire]) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            if done(&self.fires.lock().unwrap()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what} within {limit:?}: {:?}",
                self.fires.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Stops it gracefully (SIGTERM: runs in flight finish) and returns how it exited,
    /// its stderr and every fire line it printed.
    fn stop(mut self) -> (std::process::ExitStatus, String, Vec<Fire>) {
        use std::io::Read;
        // SAFETY: signalling our own child by its pid.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(rc, 0);
        let status = self.child.wait().unwrap();
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut stderr).unwrap();
        }
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        let fires = std::mem::take(&mut *self.fires.lock().unwrap());
        (status, stderr, fires)
    }

    /// Kills it (SIGKILL, like a crash) and returns every fire line it printed.
    fn crash(mut self) -> Vec<Fire> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        std::mem::take(&mut *self.fires.lock().unwrap())
    }
}

/// A test that fails before it stops its daemon does not leave it running.
impl Drop for Watched {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[derive(Debug)]
struct Fire {
    job: String,
    /// `-` for a fire that was queued behind a run.
    due: String,
    missed: u32,
    /// `resumed` for a `resume job=… run=…` line (a job's run a daemon left).
    status: String,
    /// The run it starts or resumes (`-`: none).
    run: String,
}

impl Fire {
    fn parse(line: &str) -> Option<Self> {
        let (resume, rest) = match line.strip_prefix("fire ") {
            Some(rest) => (false, rest),
            None => (true, line.strip_prefix("resume job=").map(|_| line)?),
        };
        let field = |key: &str| {
            rest.split(' ')
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_owned)
        };
        if resume {
            return Some(Self {
                job: field("job")?,
                due: "-".into(),
                missed: 0,
                status: "resumed".into(),
                run: field("run")?,
            });
        }
        Some(Self {
            job: field("job")?,
            due: field("due")?,
            missed: field("missed")?.parse().ok()?,
            status: field("status")?,
            run: field("run")?,
        })
    }
}

fn started<'a>(fires: &'a [Fire], job: &str) -> Vec<&'a Fire> {
    fires
        .iter()
        .filter(|f| f.job == job && f.status == "running")
        .collect()
}

fn sleep_until(t: Instant) {
    if let Some(d) = t.checked_duration_since(Instant::now()) {
        std::thread::sleep(d);
    }
}

#[test]
fn daemon_fires_survives_a_crash_and_catches_up_once() {
    let env = setup();
    let t0 = Instant::now();
    let add = |args: &[&str]| {
        let out = crewbox(&env, args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    add(&[
        "schedule",
        "add",
        "--cron",
        "* * * * * *",
        "--prompt",
        "tick job",
        "--name",
        "tick",
        "--mode",
        "single",
    ]);
    // Due while the first daemon is already dead: the second one must run it once.
    add(&[
        "schedule", "add", "--in", "4s", "--prompt", "one shot", "--name", "once", "--mode",
        "single",
    ]);

    let first = Watched::start(&env);
    first.wait_for("two every-second fires", Duration::from_secs(3), |f| {
        started(f, "tick").len() >= 2
    });
    let fires1 = first.crash();
    let ticks1 = started(&fires1, "tick");
    assert!(!ticks1.is_empty(), "the every-second job fired: {fires1:?}");
    assert!(
        started(&fires1, "once").is_empty(),
        "the one-shot is not due yet: {fires1:?}"
    );

    // Down for about 3.5 s: three or more every-second fires are missed.
    sleep_until(t0 + Duration::from_millis(6000));
    let second = Watched::start(&env);
    second.wait_for(
        "the catch-up, the overdue one-shot and a tick after them",
        Duration::from_secs(10),
        |f| {
            let ticks = started(f, "tick");
            !started(f, "once").is_empty()
                && ticks.iter().any(|t| t.missed > 0)
                && ticks.iter().any(|t| t.missed == 0)
        },
    );
    let fires2 = second.crash();
    let ticks2 = started(&fires2, "tick");
    let catch_up: Vec<_> = ticks2.iter().filter(|f| f.missed > 0).collect();
    assert_eq!(
        catch_up.len(),
        1,
        "one catch-up run for all missed fires: {fires2:?}"
    );
    assert!(catch_up[0].missed >= 2, "{fires2:?}");
    assert!(
        ticks2.len() <= 5,
        "missed fires were not run one by one: {fires2:?}"
    );
    assert_eq!(
        started(&fires2, "once").len(),
        1,
        "the overdue one-shot ran once: {fires2:?}"
    );

    // A third start must not fire the one-shot again.
    // Two ticks prove the third daemon went past its start-up catch-up.
    let third = Watched::start(&env);
    third.wait_for("two ticks", Duration::from_secs(10), |f| {
        started(f, "tick").len() >= 2
    });
    let fires3 = third.crash();
    assert!(started(&fires3, "once").is_empty(), "{fires3:?}");

    let jobs = json(&crewbox(&env, &["schedule", "list", "--json"]));
    let job = |name: &str| {
        jobs.as_array()
            .unwrap()
            .iter()
            .find(|j| j["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("job {name} listed: {jobs}"))
    };
    let once = job("once");
    assert_eq!(once["run_count"], 1, "{once}");
    assert!(once["next_fire"].is_null(), "the one-shot ended: {once}");
    let tick = job("tick");
    let tick_fires = (ticks1.len() + ticks2.len() + started(&fires3, "tick").len()) as u64;
    assert_eq!(tick["run_count"].as_u64(), Some(tick_fires), "{tick}");
    assert_eq!(tick["kind"], "cron");

    let status = json(&crewbox(&env, &["status", "--json", "--limit", "200"]));
    let runs = status["runs"].as_array().unwrap();
    let count = |prompt: &str| runs.iter().filter(|r| r["prompt"] == prompt).count() as u64;
    assert_eq!(count("one shot"), 1, "{status}");
    // A kill can land between recording a fire and the run's own record.
    let tick_runs = count("tick job");
    assert!(
        tick_runs <= tick_fires && tick_runs + 3 >= tick_fires && tick_runs > 0,
        "{tick_runs} runs for {tick_fires} fires"
    );
    assert!(
        runs.iter()
            .filter(|r| r["prompt"] == "one shot")
            .all(|r| r["status"] == "completed"),
        "{status}"
    );

    let health = json(&crewbox(&env, &["health", "--json"]));
    assert_eq!(health["scheduler"]["enabled"], true);
    assert_eq!(health["scheduler"]["jobs"], 2);
    assert_eq!(
        health["store"]["schema_version"],
        crewbox::unstable::store::SCHEMA_VERSION
    );
    assert_eq!(health["breakers"]["scope"], "process");
    assert!(health["store"]["size_bytes"].as_u64().unwrap() > 0);
    assert!(health["agents"]["running"].is_u64());
    assert!(health["version"].is_string());
}

#[test]
fn schedule_add_refuses_bad_input_with_usage_errors() {
    let env = setup();
    let ok = crewbox(
        &env,
        &[
            "schedule", "add", "--every", "5m", "--prompt", "p", "--name", "dup",
        ],
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let long = "x".repeat(20_001);
    let long_cron = format!("0 0 * * {}", vec!["1"; 300].join(","));
    let cases: [(&[&str], &str); 12] = [
        // `*/7` makes both day fields count: the 30th of February and a Sunday.
        (
            &["schedule", "add", "--cron", "0 0 30 2 */7", "--prompt", "p"],
            "can never fire",
        ),
        // A cron expression the daemon would evaluate every tick, however long.
        (
            &["schedule", "add", "--cron", &long_cron, "--prompt", "p"],
            "at most 512 allowed",
        ),
        // A model name with a line break forged a line of `schedule list`.
        (
            &[
                "schedule",
                "add",
                "--every",
                "5m",
                "--model",
                "m\nFORGED",
                "--prompt",
                "p",
            ],
            "no spaces or control characters",
        ),
        (
            &[
                "schedule", "add", "--every", "5m", "--prompt", "p", "--name", "dup",
            ],
            "exists already",
        ),
        (
            &[
                "schedule",
                "add",
                "--at",
                "2001-01-01T00:00:00Z",
                "--prompt",
                "p",
            ],
            "not in the future",
        ),
        (
            &["schedule", "add", "--cron", "0 25 * * *", "--prompt", "p"],
            "field 2 (hour)",
        ),
        (
            &["schedule", "add", "--every", "10s", "--prompt", "p"],
            "too short",
        ),
        // Schedules that pass every field check but can never fire.
        (
            &["schedule", "add", "--cron", "0 0 30 2 *", "--prompt", "p"],
            "cron `0 0 30 2 *` (UTC) can never fire",
        ),
        (
            &[
                "schedule",
                "add",
                "--cron",
                "0 0 31 4,6 *",
                "--tz",
                "Europe/Berlin",
                "--prompt",
                "p",
            ],
            "can never fire",
        ),
        (
            &[
                "schedule",
                "add",
                "--every",
                "99999999999999d",
                "--prompt",
                "p",
            ],
            "can never fire",
        ),
        (
            &["schedule", "add", "--every", "5m", "--prompt", &long],
            "at most 20000",
        ),
        (&["schedule", "rm", "nope"], "no scheduled job named `nope`"),
    ];
    for (args, needle) in cases {
        let out = crewbox(&env, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let jobs = json(&crewbox(&env, &["schedule", "list", "--json"]));
    assert_eq!(jobs.as_array().unwrap().len(), 1, "{jobs}");
}

#[cfg(unix)]
#[test]
fn daemon_obeys_the_config_switch_run_now_pause_and_stops_cleanly_on_sigterm() {
    let env = setup();
    let add = |args: &[&str]| {
        let out = crewbox(&env, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    add(&[
        "schedule",
        "add",
        "--every",
        "1h",
        "--prompt",
        "hourly job",
        "--name",
        "hourly",
        "--mode",
        "single",
    ]);
    add(&[
        "schedule",
        "add",
        "--cron",
        "* * * * * *",
        "--prompt",
        "paused job",
        "--name",
        "paused",
        "--mode",
        "single",
    ]);
    add(&["schedule", "pause", "paused"]);
    add(&["schedule", "run-now", "hourly"]);

    // `scheduling = false` in the user config: the daemon runs but fires nothing.
    user_config(&env, "scheduling = false\n");
    // Nothing to wait for: a disabled scheduler must stay silent for a while.
    let off = Watched::start(&env);
    std::thread::sleep(Duration::from_millis(1200));
    let fires = off.crash();
    assert!(fires.is_empty(), "disabled scheduling fired: {fires:?}");
    let health = json(&crewbox(&env, &["health", "--json"]));
    assert_eq!(health["scheduler"]["enabled"], false, "{health}");

    user_config(&env, "scheduling = true\n");
    let on = Watched::start(&env);
    on.wait_for("the run-now fire", Duration::from_secs(10), |f| {
        !started(f, "hourly").is_empty()
    });
    let (status, stderr, fires) = on.stop();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stopped"), "{stderr}");
    assert_eq!(
        started(&fires, "hourly").len(),
        1,
        "run-now fired once: {fires:?}"
    );
    assert!(started(&fires, "paused").is_empty(), "{fires:?}");

    let jobs = json(&crewbox(&env, &["schedule", "list", "--json"]));
    let hourly = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == "hourly")
        .cloned()
        .unwrap();
    assert_eq!(hourly["run_count"], 1, "{hourly}");
    // The graceful stop waited for the run, so its end is recorded.
    assert_eq!(hourly["last_status"], "completed", "{hourly}");
    assert!(hourly["last_run"].is_string(), "{hourly}");
    assert!(
        !hourly["next_fire"].is_null(),
        "the hourly grid goes on: {hourly}"
    );
}

/// The steps of the only run in the store, as (key, state, agent) once it has one.
fn steps_of_only_run(state: &Path) -> Option<(String, Vec<(String, String)>)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = crewbox::unstable::store::Store::open_existing(state).ok()?;
        let run = store.unfinished_runs().await.ok()?.into_iter().next()?;
        let steps = store.steps(&run.id).await.ok()?;
        Some((
            run.id.to_string(),
            steps
                .into_iter()
                .map(|s| (s.key, s.state.as_str().to_owned()))
                .collect(),
        ))
    })
}

#[test]
fn the_daemon_finishes_a_run_a_crash_left_unfinished() {
    let env = setup();
    std::fs::create_dir_all(env.repo.join(".crewbox/teams")).unwrap();
    std::fs::write(
        env.repo.join(".crewbox/teams/duo.toml"),
        "mode = \"orchestrate\"\n[[members]]\nname = \"alice\"\n[[members]]\nname = \"bob\"\n",
    )
    .unwrap();
    // Alice answers at once, bob slowly: the run is killed while bob works.
    std::fs::write(
        env.repo.join(".crewbox/s.toml"),
        r#"
[[reply]]
agent = "synthesis"
text = "combined: alice and bob"

[[reply]]
agent = "orchestrator"
text = "@worker:alice\nwrite the docs\n@end\n@worker:bob\nwrite the tests\n@end"

[[reply]]
agent = "alice"
repeat = true
text = "docs written"

[[reply]]
agent = "bob"
repeat = true
delay_ms = 1500
text = "tests written"
"#,
    )
    .unwrap();
    let mut run = command(
        &env,
        &["run", "document and test", "--team", "duo", "--json"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let run_id = loop {
        if let Some((id, steps)) =
            steps_of_only_run(&crate::support::repo::repo_state_dir(&env.state, &env.repo))
        {
            let state = |k: &str| {
                steps
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, s)| s.clone())
            };
            if state("worker/alice").as_deref() == Some("done")
                && state("worker/bob").as_deref() == Some("started")
            {
                break id;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the run never reached its workers"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    run.kill().unwrap();
    run.wait().unwrap();
    let health = json(&crewbox(&env, &["health", "--json"]));
    assert_eq!(health["runs"]["interrupted"], 1, "{health}");

    user_config(&env, "scheduling = false\n");
    let daemon = start_daemon(&env);
    // The resumed run ends within a few seconds; then a graceful stop.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = crewbox(&env, &["status", &run_id, "--json"]);
        if json(&out)["status"] != "running" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon did not resume the run"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling our own child by its pid.
    assert_eq!(
        unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let out = daemon.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "resume run={run_id} status=completed exit_reason=goal-met"
        )),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&crewbox(&env, &["status", &run_id, "--json"]));
    assert_eq!(report["result"], "combined: alice and bob", "{report}");
    let health = json(&crewbox(&env, &["health", "--json"]));
    assert_eq!(health["runs"]["interrupted"], 0, "{health}");
    assert_eq!(health["runs"]["unfinished"], 0, "{health}");
    let named = |n: &str| {
        report["agents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["name"] == n)
            .map(|a| a["state"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        named("alice"),
        ["completed"],
        "alice's stored result was reused"
    );
    assert_eq!(named("bob"), ["error", "completed"], "bob ran again");
    assert_eq!(named("orchestrator").len(), 1, "the stored plan was reused");
    assert!(report["resumed_steps"].as_u64().unwrap() >= 3, "{report}");
}

/// A fire queued behind its job's running run (`--overlap queue`) outlives the daemon
/// that queued it: killed with -9, the next daemon starts it (its line says `due=-`, a
/// fire from the queue). It was kept in memory only, lost to a kill and dropped
/// without a word at SIGTERM. Shown failing without the fix.
#[test]
fn a_queued_fire_outlives_the_daemon_that_queued_it() {
    let env = setup();
    std::fs::write(
        env.repo.join(".crewbox/s.toml"),
        "[[reply]]\nrepeat = true\ndelay_ms = 4000\ntext = \"ok\"\n",
    )
    .unwrap();
    // Due two seconds from now and the second after (that fire is queued behind the
    // first's 4 s run), then not again for a minute: a fire after the restart is the
    // queued one.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let cron = format!("{},{} * * * * *", (now + 2) % 60, (now + 3) % 60);
    let args = [
        "schedule",
        "add",
        "--cron",
        &cron,
        "--overlap",
        "queue",
        "--prompt",
        "slow",
        "--name",
        "q",
        "--mode",
        "single",
    ];
    let add = crewbox(&env, &args);
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );
    let first = Watched::start(&env);
    first.wait_for(
        "a fire queued behind the run",
        Duration::from_secs(10),
        |f| f.iter().any(|f| f.job == "q" && f.status == "queued"),
    );
    let fires = first.crash();
    assert_eq!(started(&fires, "q").len(), 1, "{fires:?}");
    let jobs = json(&crewbox(&env, &["schedule", "list", "--json"]));
    assert_eq!(jobs[0]["queued"], true, "{jobs:#}");
    let second = Watched::start(&env);
    second.wait_for("the queued fire started", Duration::from_secs(10), |f| {
        !started(f, "q").is_empty()
    });
    let (status, stderr, fires) = second.stop();
    assert!(status.success(), "{stderr}");
    assert_eq!(started(&fires, "q")[0].due, "-", "{fires:?}");
}

/// `schedule add ARGS` in `env`, which must succeed.
fn add_job(env: &Env, args: &[&str]) {
    let mut all = vec!["schedule", "add"];
    all.extend_from_slice(args);
    let add = crewbox(env, &all);
    assert!(
        add.status.success(),
        "{}",
        String::from_utf8_lossy(&add.stderr)
    );
}

/// Adds job `a`: every second, one agent on `prompt`.
fn add_every_second(env: &Env, prompt: &str) {
    add_job(
        env,
        &[
            "--cron",
            "* * * * * *",
            "--name",
            "a",
            "--mode",
            "single",
            "--prompt",
            prompt,
        ],
    );
}

/// A run's stored status (`running` until it ends).
fn run_status(env: &Env, run: &str) -> String {
    let report = json(&crewbox(env, &["status", run, "--json"]));
    report["status"].as_str().unwrap_or_default().to_owned()
}

/// The job `name` as `schedule list --json` shows it.
fn job(env: &Env, name: &str) -> serde_json::Value {
    let jobs = json(&crewbox(env, &["schedule", "list", "--json"]));
    jobs.as_array()
        .unwrap()
        .iter()
        .find(|j| j["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no job {name}: {jobs:#}"))
}

/// A job's run that a kill -9 left is the job's when the next daemon resumes it: the
/// job fires nothing until that run ends, then once for the due times missed meanwhile
/// (`--catch-up once`), and the run's end is recorded on the job. Before, the daemon
/// resumed it as a plain orphan beside the scheduler: a new fire ran at once next to
/// it, and its end never reached the job. Shown failing without the fix.
#[test]
fn a_jobs_run_a_crash_left_stays_the_jobs_when_resumed() {
    let env = setup();
    std::fs::write(
        env.repo.join(".crewbox/s.toml"),
        "[[reply]]\nrepeat = true\ndelay_ms = 3000\ntext = \"slow ok\"\n",
    )
    .unwrap();
    add_job(
        &env,
        &[
            "--cron",
            "* * * * * *",
            "--prompt",
            "slow",
            "--name",
            "tick",
            "--mode",
            "single",
        ],
    );
    let first = Watched::start(&env);
    first.wait_for("a first fire", Duration::from_secs(10), |f| {
        !started(f, "tick").is_empty()
    });
    // Killed while that run goes (its agent waits 3 s on the model).
    std::thread::sleep(Duration::from_millis(800));
    let fires = first.crash();
    let left = started(&fires, "tick")[0].run.clone();
    assert_eq!(run_status(&env, &left), "running", "{fires:?}");

    let second = Watched::start(&env);
    second.wait_for(
        "the left run resumed, then a new fire",
        Duration::from_secs(20),
        |f| !started(f, "tick").is_empty(),
    );
    // The next run started only once the resumed one had ended, as one catch-up fire
    // for the due times that passed meanwhile.
    assert_eq!(run_status(&env, &left), "completed");
    let (status, stderr, fires) = second.stop();
    assert!(status.success(), "{stderr}");
    assert_eq!(fires[0].status, "resumed", "{fires:?}");
    assert_eq!(fires[0].run, left, "{fires:?}");
    assert_eq!(fires[1].status, "running", "no fire before it: {fires:?}");
    assert!(fires[1].missed >= 1, "a catch-up: {fires:?}");
    let runs: Vec<_> = started(&fires, "tick")
        .iter()
        .map(|f| f.run.clone())
        .collect();
    assert!(!runs.contains(&left), "{fires:?}");
    // Its end was recorded on the job before the next fire replaced it.
    assert!(
        !stderr.contains("resuming run"),
        "the job's run is not also resumed as an orphan: {stderr}"
    );
    let tick = job(&env, "tick");
    assert_eq!(tick["active_run"], serde_json::Value::Null, "{tick:#}");
    assert_eq!(tick["last_status"], "completed", "{tick:#}");
}

/// A fire recorded just before a kill that came before its run was created (the
/// daemon records the fire, with its run's id, first) is started by the next daemon,
/// once, under that id: a one-shot job said `running` for ever with no run.
#[test]
fn a_fire_whose_run_was_never_created_is_started_when_the_daemon_comes_back() {
    let env = setup();
    add_job(
        &env,
        &[
            "--in", "1h", "--prompt", "once", "--name", "shot", "--mode", "single",
        ],
    );
    // What the killed daemon left: the fire recorded (the one-shot spent), no run.
    let run = crewbox::unstable::ids::RunId::new().to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = crewbox::unstable::store::Store::open(&crate::support::repo::repo_state_dir(
        &env.state, &env.repo,
    ))
    .unwrap();
    rt.block_on(store.record_schedule_fire(
        "shot",
        Some(chrono::Utc::now()),
        None,
        crewbox::unstable::store::FireStatus::Running,
        Some(&run),
    ))
    .unwrap();
    drop(store);
    assert_eq!(job(&env, "shot")["last_status"], "running");

    let daemon = Watched::start(&env);
    daemon.wait_for("the fire's run", Duration::from_secs(10), |f| {
        !started(f, "shot").is_empty()
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while job(&env, "shot")["last_status"] == "running" {
        assert!(Instant::now() < deadline, "{:#}", job(&env, "shot"));
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, stderr, fires) = daemon.stop();
    assert!(status.success(), "{stderr}");
    let shot = job(&env, "shot");
    assert_eq!(shot["last_status"], "completed", "{shot:#}");
    assert_eq!(shot["last_run"], run.as_str(), "{shot:#}");
    assert_eq!(shot["run_count"], 1, "{shot:#}");
    assert_eq!(started(&fires, "shot").len(), 1, "{fires:?}");
    assert_eq!(started(&fires, "shot")[0].run, run, "{fires:?}");
    assert_eq!(run_status(&env, &run), "completed");
}

/// A job removed and added again under the same name while the first one's run goes
/// is another job: it fires (it is not busy with that run) and the first run's end is
/// not recorded on it. Shown failing without the fix.
#[test]
fn a_job_added_again_under_its_name_is_not_busy_with_the_old_ones_run() {
    let env = setup();
    std::fs::write(
        env.repo.join(".crewbox/s.toml"),
        "[[reply]]\nrepeat = true\ndelay_ms = 4000\ntext = \"slow ok\"\n",
    )
    .unwrap();
    add_every_second(&env, "old prompt");
    let daemon = Watched::start(&env);
    daemon.wait_for("the old job's fire", Duration::from_secs(10), |f| {
        !started(f, "a").is_empty()
    });
    let old = started(&daemon.fires.lock().unwrap(), "a")[0].run.clone();
    assert!(crewbox(&env, &["schedule", "rm", "a"]).status.success());
    add_every_second(&env, "new prompt");
    // The old run takes 4 s; the new job fires within the next seconds.
    daemon.wait_for("the new job's fire", Duration::from_secs(3), |f| {
        started(f, "a").len() >= 2
    });
    assert_eq!(run_status(&env, &old), "running");
    let (status, stderr, fires) = daemon.stop();
    assert!(status.success(), "{stderr}");
    assert_eq!(
        run_status(&env, &old),
        "completed",
        "waited for at the stop"
    );
    let a = job(&env, "a");
    assert_ne!(a["last_run"], old.as_str(), "{a:#} {fires:?}");
    assert_eq!(a["prompt"], "new prompt", "{a:#}");
}

/// A job resumed after a pause does not count the due times of the pause as missed:
/// it ran a catch-up at once (`missed=N`, an unrequested run), and `schedule list`
/// showed a next fire in the past until then. Shown failing without the fix.
#[test]
fn a_resumed_job_does_not_catch_up_the_fires_its_pause_skipped() {
    let env = setup();
    add_job(
        &env,
        &[
            "--cron",
            "* * * * * *",
            "--prompt",
            "tick",
            "--name",
            "tick",
            "--mode",
            "single",
        ],
    );
    let out = crewbox(&env, &["schedule", "pause", "tick"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::thread::sleep(Duration::from_millis(3500));
    let out = crewbox(&env, &["schedule", "resume", "tick"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = job(&env, "tick");
    assert_eq!(listed["paused"], false, "{listed:#}");
    assert_eq!(listed["last_status"], "skipped", "{listed:#}");
    let next = chrono::DateTime::parse_from_rfc3339(listed["next_fire"].as_str().unwrap()).unwrap();
    assert!(
        next > chrono::Utc::now() - chrono::TimeDelta::seconds(1),
        "a next fire in the past: {listed:#}"
    );
    let daemon = Watched::start(&env);
    daemon.wait_for("two fires", Duration::from_secs(10), |f| {
        started(f, "tick").len() >= 2
    });
    let (_, _, fires) = daemon.stop();
    let ticks = started(&fires, "tick");
    assert!(ticks.iter().all(|t| t.missed == 0), "{fires:?}");
}

/// A fire queued behind a job's run belongs to that job: removed and added again under
/// its name (`--every 1h`, nothing due), the new job starts no run (probe 18: it started
/// the removed job's queued fire at once, `due=-`). Shown failing without the fix.
#[test]
fn a_fire_queued_behind_a_removed_jobs_run_is_not_the_new_jobs() {
    let env = setup();
    std::fs::write(
        env.repo.join(".crewbox/s.toml"),
        "[[reply]]\nrepeat = true\ndelay_ms = 4000\ntext = \"slow ok\"\n",
    )
    .unwrap();
    add_job(
        &env,
        &[
            "--cron",
            "* * * * * *",
            "--name",
            "a",
            "--mode",
            "single",
            "--overlap",
            "queue",
            "--prompt",
            "old prompt",
        ],
    );
    let daemon = Watched::start(&env);
    daemon.wait_for(
        "a fire queued behind the run",
        Duration::from_secs(10),
        |f| f.iter().any(|f| f.job == "a" && f.status == "queued"),
    );
    assert!(crewbox(&env, &["schedule", "rm", "a"]).status.success());
    add_job(
        &env,
        &[
            "--every",
            "1h",
            "--name",
            "a",
            "--mode",
            "single",
            "--prompt",
            "new prompt",
        ],
    );
    // The old run ends within 4 s; a few ticks after it, nothing more may start.
    std::thread::sleep(Duration::from_secs(6));
    let (status, stderr, fires) = daemon.stop();
    assert!(status.success(), "{stderr}");
    assert_eq!(started(&fires, "a").len(), 1, "{fires:?}");
    let a = job(&env, "a");
    assert_eq!(a["run_count"], 0, "{a:#} {fires:?}");
}

/// A job removed and added again under its name while a restarted daemon resumes the
/// old job's run fires on its own schedule: it is not held by that run, and its due
/// times are not counted as missed when it ends (probe 18: nothing fired until the old
/// run ended, then one fire with `missed=7`). Shown failing without the fix.
#[test]
fn a_job_added_again_is_not_held_by_the_old_jobs_resumed_run() {
    let env = setup();
    std::fs::write(
        env.repo.join(".crewbox/s.toml"),
        "[[reply]]\nagent = \"executor\"\nwhen = \"old prompt\"\nrepeat = true\ndelay_ms = 6000\ntext = \"slow ok\"\n\n\
         [[reply]]\nrepeat = true\ntext = \"fast ok\"\n",
    )
    .unwrap();
    add_every_second(&env, "old prompt");
    let first = Watched::start(&env);
    first.wait_for("a first fire", Duration::from_secs(10), |f| {
        !started(f, "a").is_empty()
    });
    std::thread::sleep(Duration::from_millis(500));
    let fires = first.crash();
    let left = started(&fires, "a")[0].run.clone();
    let second = Watched::start(&env);
    second.wait_for("the old run resumed", Duration::from_secs(10), |f| {
        f.iter().any(|f| f.status == "resumed")
    });
    assert!(crewbox(&env, &["schedule", "rm", "a"]).status.success());
    add_every_second(&env, "new prompt");
    // The resumed run still has seconds to go; the new job fires meanwhile.
    second.wait_for("the new job's fires", Duration::from_secs(4), |f| {
        started(f, "a").len() >= 2
    });
    assert_eq!(run_status(&env, &left), "running");
    let (status, stderr, fires) = second.stop();
    assert!(status.success(), "{stderr}");
    assert!(
        started(&fires, "a").iter().all(|f| f.missed == 0),
        "{fires:?}"
    );
}

/// A name or zone given on the command line is quoted on one line: a newline in it is
/// written `\n` (probe 18: it started a second line that could pass for crewbox's own).
#[test]
fn a_refused_name_is_quoted_on_one_line() {
    let env = setup();
    for args in [
        &[
            "schedule",
            "add",
            "--every",
            "1h",
            "--prompt",
            "p",
            "--name",
            "x\nfake line: scheduled OK",
        ][..],
        &["schedule", "rm", "x\nfake line: removed"][..],
        &[
            "schedule", "add", "--every", "1h", "--prompt", "p", "--name", "ok", "--tz", "x\nfake",
        ][..],
    ] {
        let out = crewbox(&env, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("x\\nfake"), "{err}");
    }
}

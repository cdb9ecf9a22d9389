//! `crewbox top` in a real terminal: tmux runs the dashboard at 160×48 beside a team
//! run in another process; the test reads the screen with `capture-pane` and types
//! with `send-keys`. It shows the running run, its tree updates as agents finish, and
//! a stop confirmed with `y` reaches the run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::peers;
use crate::support::repo::{bin, command, git_repo};

const DUO: &str = "mode = \"orchestrate\"\n[[members]]\nname = \"alice\"\nrole = \"architect\"\n[[members]]\nname = \"bob\"\nrole = \"tester\"\n";

/// Slow enough to watch: alice ends after a moment, bob would take two minutes.
const SCRIPT: &str = r#"
[[reply]]
agent = "orchestrator"
delay_ms = 1000
text = "@worker:alice\nDesign the API.\n@end\n@worker:bob\nWrite the tests.\n@end\n"

[[reply]]
agent = "alice"
delay_ms = 1500
text = "ALICE: push and pop"

[[reply]]
agent = "bob"
delay_ms = 120000
text = "BOB: tests"

[[reply]]
agent = "synthesis"
repeat = true
text = "SYNTHESIS"
"#;

/// A tmux server of the test's own (its own socket, no user config), killed on drop.
struct Tmux {
    tmux: PathBuf,
    socket: String,
}

impl Tmux {
    fn start(tmux: PathBuf, dir: &Path, shell_command: &str) -> Self {
        let socket = format!("crewbox-top-{}", std::process::id());
        let t = Self { tmux, socket };
        let out = t
            .cmd()
            .args(["new-session", "-d", "-s", "top", "-x", "160", "-y", "48"])
            .arg(shell_command)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(&self.tmux);
        c.args(["-L", &self.socket, "-f", "/dev/null"]);
        c
    }

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-t", "top"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let out = self
            .cmd()
            .args(["send-keys", "-t", "top", keys])
            .output()
            .unwrap();
        assert!(out.status.success());
    }

    /// Polls the screen until `ok` holds; the last screen either way.
    fn wait(&self, what: &str, within: Duration, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the dashboard never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

fn tmux() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("tmux"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        peers::missing("tmux", "not on PATH (Debian package `tmux`)");
    }
    found
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
fn top_follows_a_team_run_and_stops_it_on_confirmation() {
    let Some(tmux) = tmux() else { return };
    let dir = git_repo(|work| {
        std::fs::create_dir_all(work.join(".crewbox/teams")).unwrap();
        std::fs::write(work.join(".crewbox/teams/duo.toml"), DUO).unwrap();
    });
    let script = dir.path().join("script.toml");
    std::fs::write(&script, SCRIPT).unwrap();
    // The dashboard first: it waits for the store the run creates.
    let top = command(dir.path(), &["top", "--interval", "200"]);
    let env: Vec<String> = top
        .get_envs()
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, shell_quote(v?.to_str()?))))
        .collect();
    let line = format!(
        "env {} TERM=xterm-256color {} top --interval 200; echo TOP-EXITED $?; sleep 30",
        env.join(" "),
        shell_quote(env!("CARGO_BIN_EXE_crewbox"))
    );
    let term = Tmux::start(tmux, &dir.path().join("repo"), &line);
    term.wait("its waiting line", Duration::from_secs(30), |s| {
        s.contains("crewbox top") && s.contains("waiting for a first run")
    });
    let run = command(
        dir.path(),
        &[
            "run",
            "build a queue",
            "--team",
            "duo",
            "--mode",
            "orchestrate",
            "--script",
            script.to_str().unwrap(),
            "--json",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let screen = term.wait("the running team run", Duration::from_secs(60), |s| {
        s.contains("running") && s.contains("orchestrate") && s.contains("team duo")
    });
    assert!(screen.contains("Runs (1)"), "{screen}");
    // The tree changes as agents finish: alice completes while bob still works.
    let screen = term.wait(
        "alice finished, bob working",
        Duration::from_secs(60),
        |s| s.contains("alice (architect) completed") && s.contains("bob (tester) running"),
    );
    assert!(
        screen.contains("waiting for workers (1/2 done)"),
        "the phase: {screen}"
    );
    let orchestrator = screen.find("orchestrator (orchestrator)").unwrap();
    let alice = screen.find("└ alice (architect)").expect(&screen);
    assert!(
        orchestrator < alice,
        "workers under the orchestrator: {screen}"
    );
    // Stop the run: `x` on the runs list asks first; `y` confirms.
    term.keys("x");
    term.wait("the question", Duration::from_secs(10), |s| {
        s.contains("Stop run r-") && s.contains("y: yes")
    });
    term.keys("y");
    term.wait("the acknowledgement", Duration::from_secs(10), |s| {
        s.contains("stop requested for r-")
    });
    // The stop reached the run in the other process: it ends, cancelled.
    let out = run.wait_with_output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(report["status"], "cancelled", "{report:#}");
    let screen = term.wait("the run's end", Duration::from_secs(30), |s| {
        s.contains("finished: cancelled")
    });
    assert!(screen.contains("bob (tester) stopped"), "{screen}");
    // `q` leaves the dashboard, with exit 0 and the terminal restored.
    term.keys("q");
    term.wait("the dashboard's exit", Duration::from_secs(10), |s| {
        s.contains("TOP-EXITED 0")
    });
    let status = bin(dir.path(), &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["runs"][0]["status"], "cancelled", "{status:#}");
}

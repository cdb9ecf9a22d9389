//! The user's terminal is out of the sandbox's reach: `crewbox run` started in a real
//! pseudo-terminal (a Python `pty.fork` harness, the pty being its controlling terminal)
//! runs a scripted agent whose `run_command` tries to push a command into that
//! terminal's input with `TIOCSTI` (and `TIOCLINUX`) on `/dev/tty` and on every standard
//! descriptor. Afterwards nothing is waiting in the terminal's input, and the command saw
//! no controlling terminal at all.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::repo::{events, git_repo};
use crate::support::sandbox as sbx;

/// Runs in the pty: starts `crewbox` (stdin and stderr the terminal, stdout a file),
/// then reads whatever is waiting in the terminal's input (raw mode, so injected bytes
/// are readable at once) and writes it to the result file as JSON.
const HARNESS: &str = r#"
import json, os, pty, select, signal, subprocess, sys, time, tty
result, report, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
pid, master = pty.fork()
if pid == 0:
    tty.setraw(0)
    with open(report, "wb") as out:
        rc = subprocess.call(argv, stdout=out)
    pending = b""
    while select.select([0], [], [], 0.5)[0]:
        chunk = os.read(0, 4096)
        if not chunk:
            break
        pending += chunk
    with open(result, "w") as f:
        json.dump({"rc": rc, "pending": pending.decode("latin-1")}, f)
    os._exit(0)
deadline = time.time() + 170
while True:
    done, _ = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.time() > deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        break
    try:
        if select.select([master], [], [], 0.2)[0]:
            os.read(master, 65536)
    except OSError:
        time.sleep(0.05)
"#;

/// Run inside the sandbox: every way at the terminal, each attempt's outcome printed.
const ATTACK: &str = r#"
import fcntl, os, termios
TIOCLINUX = 0x541C
out = []
fds = [0, 1, 2]
try:
    fds.append(os.open("/dev/tty", os.O_RDWR))
    out.append("devtty=opened")
except OSError as e:
    out.append("devtty=refused(%s)" % e.strerror)
for fd in fds:
    try:
        for b in b"echo INJECTED-BY-AGENT\n":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([b]))
        out.append("tiocsti%d=INJECTED" % fd)
    except OSError as e:
        out.append("tiocsti%d=refused" % fd)
    try:
        fcntl.ioctl(fd, TIOCLINUX, bytes([2]) + bytes(8))
        out.append("tioclinux%d=ACCEPTED" % fd)
    except OSError:
        out.append("tioclinux%d=refused" % fd)
stat = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
out.append("tty_nr=%s" % stat[4])
print(" ".join(out))
"#;

/// Kills the harness (and with it the pty session) if the test ends early.
struct Harness(Child);

impl Drop for Harness {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_sandboxed_command_cannot_reach_the_users_terminal() {
    let dir = git_repo(|_| {});
    let config = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.toml"), sbx::user_config_table("")).unwrap();
    let command = format!(
        "python3 -c \"exec(bytes.fromhex('{}').decode())\" 2>&1",
        hex(ATTACK)
    );
    let script = toml::to_string(&json!({"reply": [
        {"turn": 1, "text": "typing", "tool_calls": [
            {"name": "run_command", "args": {"command": command, "timeout_s": 60}},
        ]},
        {"turn": 2, "text": "done"},
    ]}))
    .unwrap();
    let script_path = dir.path().join("script.toml");
    std::fs::write(&script_path, script).unwrap();
    let harness = dir.path().join("harness.py");
    std::fs::write(&harness, HARNESS).unwrap();
    let (result, report) = (
        dir.path().join("result.json"),
        dir.path().join("report.json"),
    );

    let crewbox = crate::support::repo::command(
        dir.path(),
        &[
            "run",
            "go",
            "--mode",
            "single",
            "--json",
            "--script",
            script_path.to_str().unwrap(),
        ],
    );
    // The harness runs crewbox with crewbox's own environment and directory.
    let mut c = Command::new("python3");
    c.arg(&harness)
        .arg(&result)
        .arg(&report)
        .arg(crewbox.get_program())
        .args(crewbox.get_args())
        .current_dir(dir.path().join("repo"));
    for (k, v) in crewbox.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let mut child = Harness(c.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the pty harness did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    let result: Value = serde_json::from_slice(&read(&result)).unwrap();
    let report: Value = serde_json::from_slice(&read(&report)).unwrap_or_else(|e| {
        panic!(
            "crewbox's report is not JSON ({e}): {}",
            String::from_utf8_lossy(&read(&report))
        )
    });
    let run = report["run_id"].as_str().unwrap();
    let outputs: Vec<String> = events(dir.path(), run)
        .into_iter()
        .filter(|e| e["kind"] == "tool.call")
        .map(|e| e["data"]["output"].as_str().unwrap_or_default().to_owned())
        .collect();
    let output = outputs.join("\n");
    assert!(
        output.contains("tty_nr="),
        "the attack did not run: {output}"
    );

    // Nothing was typed into the user's terminal.
    let pending = result["pending"].as_str().unwrap();
    assert!(
        !pending.contains("INJECTED"),
        "a sandboxed command typed into the user's terminal: {pending:?} ({output})"
    );
    assert_eq!(pending, "", "unexpected input in the terminal ({output})");
    // The command had no controlling terminal and no way to one.
    assert!(output.contains("tty_nr=0"), "{output}");
    assert!(output.contains("devtty=refused"), "{output}");
    assert!(!output.contains("INJECTED"), "{output}");
    assert!(!output.contains("ACCEPTED"), "{output}");
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

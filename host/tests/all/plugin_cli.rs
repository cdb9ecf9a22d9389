//! The plugin commands against hostile repositories and components, through the real
//! binary: files in `.crewbox/plugins` that would hang or exhaust the CLI, components
//! that pass the import rules but do not link, a file named like a built-in, and the
//! user's model grant with its budget.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::repo::{command, crewbox, git_repo};
use crate::support::wat::Validator;

/// Runs a command with a deadline and a memory limit (`RLIMIT_DATA`), so a regression
/// that hangs or reads without end fails the test instead of hanging it or the machine.
fn bounded(mut c: Command, deadline: Duration) -> (Output, Duration) {
    // SAFETY: only async-signal-safe calls (setrlimit) run between fork and exec.
    unsafe {
        c.pre_exec(|| {
            let cap = 4 << 30;
            let limit = rustix::process::Rlimit {
                current: Some(cap),
                maximum: Some(cap),
            };
            rustix::process::setrlimit(rustix::process::Resource::Data, limit)
                .map_err(std::io::Error::from)
        });
    }
    let started = Instant::now();
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{c:?} still ran after {deadline:?}:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), started.elapsed())
}

fn trivial() -> &'static [u8] {
    crate::guest_wasm!("trivial-validator.wasm")
}

/// A repository whose `.crewbox/plugins` holds a FIFO, a link to `/dev/zero` and one real
/// validator.
fn hostile_repo() -> tempfile::TempDir {
    git_repo(|work| {
        let plugins = work.join(".crewbox/plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            plugins.join("hang.wasm"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        std::os::unix::fs::symlink("/dev/zero", plugins.join("zero.wasm")).unwrap();
        std::fs::write(plugins.join("fine.wasm"), trivial()).unwrap();
    })
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Regression: a FIFO in `.crewbox/plugins` hung `dispatch explain` and `plugin list`; a
/// link there (or a `dispatcher` setting) to `/dev/zero` got crewbox OOM-killed.
#[test]
fn repository_files_that_would_hang_or_exhaust_the_cli_are_refused_fast() {
    let dir = hostile_repo();
    let quick = Duration::from_secs(30);
    // Only a trusted repository's plugins are looked at.
    let (out, _) = bounded(command(dir.path(), &["trust"]), quick);
    assert!(out.status.success(), "{}", text(&out));

    // Listing reads each plugin bounded and non-blocking: the bad ones are rows with errors.
    let (out, _) = bounded(command(dir.path(), &["plugin", "list", "--json"]), quick);
    assert!(out.status.success(), "{}", text(&out));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).unwrap().clone();
    assert!(
        row("hang")["error"]
            .as_str()
            .unwrap()
            .contains("hang.wasm` is a FIFO, not a regular file"),
        "{rows:?}"
    );
    assert!(
        row("zero")["error"]
            .as_str()
            .unwrap()
            .contains("zero.wasm` leads outside the repository")
    );
    assert_eq!(row("fine")["kind"], "validator");

    // Naming a plugin reads only that one: the built-in dispatcher never touches them.
    let (out, _) = bounded(
        command(dir.path(), &["dispatch", "explain", "fix the bug"]),
        quick,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("mode:   single"), "{}", text(&out));

    // Naming a bad one is a clear, quick error.
    let output = dir.path().join("output.json");
    std::fs::write(&output, r#"{"reply": "done"}"#).unwrap();
    for (args, needle) in [
        (
            vec!["validate", "--plugin", "zero", "--output"],
            "zero.wasm` leads outside the repository",
        ),
        (
            vec!["validate", "--plugin", "hang", "--output"],
            "hang.wasm` is a FIFO, not a regular file",
        ),
    ] {
        let mut args = args;
        args.push(output.to_str().unwrap());
        let (out, _) = bounded(command(dir.path(), &args), quick);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(needle), "{}", text(&out));
    }
    for file in ["hang", "zero"] {
        let path = format!(".crewbox/plugins/{file}.wasm");
        let (out, _) = bounded(command(dir.path(), &["plugin", "check", &path]), quick);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("not a regular file"), "{}", text(&out));
    }

    // A `dispatcher` setting pointing at one fails the run at once, naming the file (a
    // path inside the trusted repository is read beneath it, so the link out is refused
    // before the device is reached).
    let zero = dir.path().join("repo/.crewbox/plugins/zero.wasm");
    let config = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("dispatcher = {:?}\n", zero.to_str().unwrap()),
    )
    .unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "[[reply]]\ntext = \"done\"\n").unwrap();
    let run = ["run", "fix the bug", "--script", script.to_str().unwrap()];
    let (out, _) = bounded(command(dir.path(), &run), quick);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("zero.wasm` leads outside the repository"),
        "{}",
        text(&out)
    );
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Regression: `plugin check` said "loads" for a component that passed the import rules
/// but then failed to link; and any `wasi:*@0.2.x` was accepted, also versions newer
/// than the host implements.
#[test]
fn plugin_check_links_the_component_and_knows_the_wasi_versions() {
    let dir = git_repo(|_| {});
    let cases = [
        (
            "wrong-signature",
            // `log` is allowed, but not with this signature.
            r#"(import "crewbox:plugin/log@0.1.0" (instance (export "log" (func (param "message" string)))))"#,
            "does not link against what crewbox provides",
        ),
        (
            "missing-function",
            r#"(import "wasi:cli/environment@0.2.6" (instance (export "get-secrets" (func (result string)))))"#,
            "does not link against what crewbox provides",
        ),
        (
            "newer-wasi",
            r#"(import "wasi:random/insecure-seed@0.2.13" (instance (export "insecure-seed" (func (result (tuple u64 u64))))))"#,
            "imports `wasi:random/insecure-seed`, which crewbox does not provide to plugins (it provides crewbox:plugin@0.1.0 and WASI 0.2.0 to 0.2.12)",
        ),
    ];
    for (name, import, needle) in cases {
        let v = Validator {
            results: 1,
            detail_bytes: 1,
            passed: true,
            results_pass: true,
            imports: vec![import.into()],
            ..Validator::default()
        };
        let path = write(dir.path(), &format!("{name}.wasm"), &v.component());
        let (out, _) = bounded(
            command(dir.path(), &["plugin", "check", path.to_str().unwrap()]),
            Duration::from_secs(60),
        );
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out));
        assert!(text(&out).contains(needle), "{name}: {}", text(&out));
    }
    // The same component without the bad import loads and links.
    let ok = Validator {
        results: 1,
        detail_bytes: 1,
        ..Validator::default()
    };
    let path = write(dir.path(), "fine.wasm", &ok.component());
    let (out, _) = bounded(
        command(dir.path(), &["plugin", "check", path.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("loads and links"), "{}", text(&out));
}

/// A file validator named like a built-in (`no-secrets`) is told apart from it in
/// reports: its source is shown.
#[test]
fn a_file_named_like_a_builtin_is_told_apart() {
    let dir = git_repo(|_| {});
    std::fs::create_dir_all(dir.path().join("x")).unwrap();
    let fake = write(&dir.path().join("x"), "no-secrets.wasm", trivial());
    let script = "[[reply]]\nrepeat = true\ntext = \"all done\"\n";
    let (_, report) = crewbox(
        dir.path(),
        script,
        &[
            "run",
            "do it",
            "--mode",
            "single",
            "--validator",
            "no-secrets",
            "--validator",
            &format!("{}=contains:done", fake.display()),
        ],
    );
    let verdicts = report["agents"][0]["verdicts"].as_array().unwrap();
    let sources: Vec<(&str, &str)> = verdicts
        .iter()
        .map(|v| {
            (
                v["validator"].as_str().unwrap(),
                v["source"].as_str().unwrap(),
            )
        })
        .collect();
    let file = format!("file:{}", fake.display());
    assert_eq!(
        sources,
        [("no-secrets", "builtin"), ("no-secrets", file.as_str())],
        "{report}"
    );
    let run = report["run_id"].as_str().unwrap();
    let out = command(dir.path(), &["status", run]).output().unwrap();
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.contains(&format!("no-secrets ({file})")),
        "the human report names the file: {status}"
    );
}

/// The model grant of the user's config: `[plugins.grants.NAME]` with `path` and
/// `model = { max_tokens, timeout_s }`. Without it the validator does not load (the
/// error names the key); with it, a validator calling `model.complete` in a loop is
/// stopped by its token budget.
#[test]
fn a_model_grant_comes_from_the_user_config_with_its_budget() {
    let dir = git_repo(|_| {});
    let path = write(
        dir.path(),
        "model-loop.wasm",
        crate::guest_wasm!("model-loop.wasm"),
    );
    // One prompt too large for the budget (never sent), then calls until it is spent.
    let big = format!("{}=prompt=400", path.display());
    let spec = format!("{}=loop", path.display());
    let args = [
        "run",
        "do it",
        "--mode",
        "single",
        "--validator",
        &big,
        "--validator",
        &spec,
    ];
    // Every reply: the agent's, then the validator's model calls (~2 tokens in, 1 out).
    let script = "[[reply]]\nrepeat = true\ntext = \"ok\"\n";
    let script_path = write(dir.path(), "script.toml", script.as_bytes());
    let out = command(dir.path(), &args)
        .args(["--script", script_path.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("needs a model grant in the user's config: `[plugins.grants.model-loop]`"),
        "{stderr}"
    );
    let config = dir.path().join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[plugins.grants.model-loop]\npath = {:?}\nmodel = {{ max_tokens = 40, timeout_s = 30 }}\n",
            path.to_str().unwrap()
        ),
    )
    .unwrap();
    let (out, report) = crewbox(dir.path(), script, &args);
    assert!(out.status.success(), "{report}");
    let results = &report["agents"][0]["verdicts"][0]["verdict"]["results"];
    let big = results[0]["detail"].as_str().unwrap();
    assert!(
        big.starts_with(
            "calls=0 tokens=0 then budget-exhausted:the prompt (~100 tokens) does not fit"
        ),
        "{big}"
    );
    let detail = results[1]["detail"].as_str().unwrap().to_owned();
    let calls: u64 = detail
        .strip_prefix("calls=")
        .and_then(|d| d.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{detail}"));
    let tokens: u64 = detail
        .split(' ')
        .nth(1)
        .and_then(|t| t.strip_prefix("tokens="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{detail}"));
    assert!(calls >= 1 && tokens <= 40, "{detail}");
    assert!(detail.contains("then budget-exhausted"), "{detail}");
}

/// Regression: a `log` message with a newline forged a line of the host's log, and
/// escape sequences in it reached the terminal.
#[test]
fn plugin_log_messages_cannot_forge_log_lines() {
    let dir = git_repo(|_| {});
    let echo = write(
        dir.path(),
        "echo.wasm",
        crate::guest_wasm!("echo-dispatcher.wasm"),
    );
    let prompt = "log:fine\n2030-01-01T00:00:00Z ERROR crewbox: forged\x1b[2J";
    let out = command(
        dir.path(),
        &[
            "dispatch",
            "explain",
            "--plugin",
            echo.to_str().unwrap(),
            prompt,
        ],
    )
    .env("RUST_LOG", "info")
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fine\\n2030-01-01T00:00:00Z ERROR crewbox: forged\\x1b[2J"),
        "{stderr}"
    );
    assert!(
        !stderr.lines().any(|l| l.starts_with("2030-01-01")),
        "{stderr}"
    );
    // The log's own colours are its business; the plugin's sequence must not be there.
    assert!(!stderr.contains("\x1b[2J"), "{stderr:?}");
}

//! Regression: `crewbox dispatch explain` asked the built-in `heuristic` whatever the
//! configuration said, so it explained a decision no run would take. It asks the
//! dispatcher a run here would ask — the user's `dispatcher`, or a trusted
//! repository's — offered the same modes, and says which one it asked.

use serde_json::Value;

use crate::support::repo::{bin, crewbox, git_repo};

const PROMPT: &str = "split this:\n- write the parser\n- write the tests";

fn explain(dir: &std::path::Path) -> Value {
    let out = bin(dir, &["dispatch", "explain", PROMPT, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn dispatch_explain_asks_the_dispatcher_a_run_would_ask() {
    let dir = git_repo(|_| {});
    let d = dir.path();
    let builtin = explain(d);
    assert_eq!(builtin["plugin"], "heuristic");

    // The user's dispatcher (a path relative to their config file).
    let config = d.join("config/crewbox");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("echo.wasm"),
        crate::guest_wasm!("echo-dispatcher.wasm"),
    )
    .unwrap();
    std::fs::write(config.join("config.toml"), "dispatcher = \"echo.wasm\"\n").unwrap();
    let explained = explain(d);
    assert_eq!(
        explained["plugin"],
        config.join("echo.wasm").display().to_string()
    );
    assert_eq!(explained["mode"], "swarm");
    assert_eq!(explained["reason"], "echo-tasks");
    assert_eq!(explained["swarm_size"], 2);
    let text = bin(d, &["dispatch", "explain", PROMPT]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("dispatcher: ")
            && text.contains("echo.wasm")
            && text.contains("mode:   swarm"),
        "{text}"
    );

    // The run decides the same.
    let script = "[[reply]]\nrepeat = true\ntext = \"done\"\n";
    let (out, report) = crewbox(d, script, &["run", PROMPT, "--mode", "auto"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(report["mode"], explained["mode"], "{report}");
    assert_eq!(
        report["decision"]["reason"], explained["reason"],
        "{report}"
    );

    // A trusted repository's dispatcher wins over the user's, as it does for a run.
    std::fs::create_dir_all(d.join("repo/.crewbox")).unwrap();
    std::fs::write(
        d.join("repo/.crewbox/config.toml"),
        "dispatcher = \"heuristic\"\n",
    )
    .unwrap();
    assert_eq!(
        explain(d)["plugin"],
        explained["plugin"],
        "untrusted: ignored"
    );
    assert!(bin(d, &["trust"]).status.success());
    assert_eq!(explain(d)["plugin"], "heuristic");

    // `--plugin` still names another one.
    let echo = config.join("echo.wasm");
    let out = bin(
        d,
        &[
            "dispatch",
            "explain",
            PROMPT,
            "--json",
            "--plugin",
            echo.to_str().unwrap(),
        ],
    );
    let named: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(named["reason"], "echo-tasks");
}

//! Plugins named in a run resolve like `validate --plugin NAME` (built-in, the trusted
//! repository's `.crewbox/plugins/`, the user's plugins), and the compiled-plugin cache
//! is bounded and can be inspected and pruned — all through the real binary.

use std::path::Path;

use crate::support::repo::{bin, command, crewbox, git_repo};

fn trivial() -> &'static [u8] {
    crate::guest_wasm!("trivial-validator.wasm")
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const SCRIPT: &str = "[[reply]]\nrepeat = true\ntext = \"all done\"\n";

/// The verdict of the first validator of the first agent in a `run --json` report.
fn first_verdict(report: &serde_json::Value) -> &serde_json::Value {
    &report["agents"][0]["verdicts"][0]
}

#[test]
fn run_validator_names_resolve_like_validate_plugin() {
    let dir = git_repo(|work| {
        let plugins = work.join(".crewbox/plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::write(plugins.join("in-repo.wasm"), trivial()).unwrap();
    });
    let user = dir.path().join("config/crewbox/plugins");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("mine.wasm"), trivial()).unwrap();
    let args = |name: &str| {
        vec![
            "run".to_owned(),
            "say something".to_owned(),
            "--mode".to_owned(),
            "single".to_owned(),
            "--validator".to_owned(),
            format!("{name}=contains:done"),
        ]
    };
    let run = |name: &str| {
        let a = args(name);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        crewbox(dir.path(), SCRIPT, &a)
    };

    // A user plugin by name, in any repository.
    let (out, report) = run("mine");
    assert!(out.status.success(), "{}\n{report}", text(&out));
    assert_eq!(
        first_verdict(&report)["verdict"]["passed"],
        true,
        "{report}"
    );

    // A repository plugin is not even looked at until the user trusts the repository.
    let script = dir.path().join("script.toml");
    let a = args("in-repo");
    let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
    a.extend(["--script", script.to_str().unwrap()]);
    let out = bin(dir.path(), &a);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("no validator named `in-repo`") && said.contains("crewbox/plugins"),
        "{said}"
    );
    let out = bin(dir.path(), &["trust"]);
    assert!(out.status.success(), "{}", text(&out));
    let (out, report) = run("in-repo");
    assert!(out.status.success(), "{}\n{report}", text(&out));
    assert_eq!(
        first_verdict(&report)["verdict"]["passed"],
        true,
        "{report}"
    );

    // `validate --plugin` agrees on both names.
    let output = dir.path().join("output.json");
    std::fs::write(&output, r#"{"reply": "done"}"#).unwrap();
    for name in ["mine", "in-repo"] {
        let out = bin(
            dir.path(),
            &[
                "validate",
                "--plugin",
                name,
                "--output",
                output.to_str().unwrap(),
                "--criteria",
                "contains:done",
            ],
        );
        assert!(out.status.success(), "{name}: {}", text(&out));
    }
}

fn cache_json(dir: &Path, cache_home: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["plugin", "cache", "--json"];
    args.extend(extra);
    let out = command(dir, &args)
        .env("XDG_CACHE_HOME", cache_home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn plugin_cache_shows_its_size_and_prunes_what_is_stale() {
    let dir = git_repo(|_| {});
    let home = dir.path().join("cache-home");
    let file = dir.path().join("trivial.wasm");
    std::fs::write(&file, trivial()).unwrap();
    // Checking compiles the component into the (empty) cache.
    let out = command(dir.path(), &["plugin", "check", file.to_str().unwrap()])
        .env("XDG_CACHE_HOME", &home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let usage = cache_json(dir.path(), &home, &[]);
    assert_eq!(usage["entries"], 1, "{usage}");
    assert!(usage["bytes"].as_u64().unwrap() > 10_000, "{usage}");
    assert_eq!(
        usage["max_bytes"].as_u64().unwrap(),
        crewbox::unstable::plugin::DEFAULT_CACHE_MAX_BYTES
    );
    // An entry of another crewbox version is never read again: `--prune` removes it,
    // and leaves files that are not the cache's.
    let cache = Path::new(usage["dir"].as_str().unwrap()).to_owned();
    std::fs::write(cache.join("00-0123456789abcdef.cwasm"), [0u8; 100]).unwrap();
    std::fs::write(cache.join("README"), "not ours").unwrap();
    let usage = cache_json(dir.path(), &home, &[]);
    assert_eq!(
        (usage["entries"].as_u64(), usage["stale_entries"].as_u64()),
        (Some(2), Some(1))
    );
    let pruned = cache_json(dir.path(), &home, &["--prune"]);
    assert_eq!(pruned["removed"]["entries"], 1, "{pruned}");
    assert_eq!(pruned["entries"], 1, "{pruned}");
    assert!(cache.join("README").exists());
}

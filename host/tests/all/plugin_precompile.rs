//! `crewbox plugin build` and `plugin check FILE` compile the component into the plugin
//! cache the way a run does (the limited compiler child, the same engine and limits,
//! the same cache key), so the first run after them loads the cached artifact instead
//! of compiling. Observed through the cache itself, never through timing: `plugin
//! cache --json` counts one entry, and after the run it is still the very file the
//! build wrote (same inode: a miss would have stored a new file in its place), marked
//! used by the hit.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

use crate::support::repo::{command, git_repo};

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `crewbox ARGS` in the temp repository with the plugin cache under `cache`.
fn with_cache(dir: &Path, cache: &Path, args: &[&str]) -> Command {
    let mut c = command(dir, args);
    c.env("XDG_CACHE_HOME", cache);
    c
}

/// The one compiled component in the cache, and its inode.
fn the_artifact(cache: &Path) -> (PathBuf, u64) {
    let dir = cache.join("crewbox/plugins");
    let found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(found.len(), 1, "one compiled component: {found:?}");
    let inode = std::fs::metadata(&found[0]).unwrap().ino();
    (found[0].clone(), inode)
}

/// What `crewbox plugin cache --json` says the cache holds.
fn cache_entries(dir: &Path, cache: &Path) -> u64 {
    let out = with_cache(dir, cache, &["plugin", "cache", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let usage: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    usage["entries"].as_u64().unwrap()
}

/// After `plugin build` or `plugin check` put `wasm` in `cache`: the cache holds its
/// artifact, and a scripted `crewbox run` validating with it (`criterion`) loads that
/// artifact, a hit.
fn the_first_run_is_a_hit(dir: &Path, cache: &Path, wasm: &Path, criterion: &str) {
    assert_eq!(cache_entries(dir, cache), 1);
    let (artifact, inode) = the_artifact(cache);
    // Aged, so the hit's mark (it sets the entry's time to now) shows.
    let hour_ago = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .append(true)
        .open(&artifact)
        .unwrap()
        .set_modified(hour_ago)
        .unwrap();

    let script = dir.join("script.toml");
    std::fs::write(&script, "[[reply]]\ntext = \"notes written\"\n").unwrap();
    let spec = format!("{}={criterion}", wasm.display());
    let out = with_cache(
        dir,
        cache,
        &[
            "run",
            "write the notes",
            "--mode",
            "single",
            "--validator",
            &spec,
            "--script",
            script.to_str().unwrap(),
            "--json",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let verdicts = report["agents"][0]["verdicts"].as_array().unwrap();
    assert_eq!(
        verdicts[0]["outcome"], "passed",
        "the run used it: {report}"
    );

    assert_eq!(cache_entries(dir, cache), 1, "nothing new was stored");
    let (after, after_inode) = the_artifact(cache);
    assert_eq!(
        (&after, after_inode),
        (&artifact, inode),
        "the run loaded the artifact the build wrote (a miss stores a new file)"
    );
    let used = std::fs::metadata(&after).unwrap().modified().unwrap();
    assert!(
        used > hour_ago + Duration::from_secs(60),
        "the hit marked it used"
    );
}

/// Regression (the first load of a plugin): a run right after `plugin check`
/// found the component compiled; `check` says so.
#[test]
fn plugin_check_compiles_into_the_cache_so_the_first_run_is_a_hit() {
    let dir = git_repo(|_| {});
    let cache = tempfile::tempdir().unwrap();
    let wasm = dir.path().join("trivial.wasm");
    std::fs::write(&wasm, crate::guest_wasm!("trivial-validator.wasm")).unwrap();
    let check = |said: &str| {
        let out = with_cache(
            dir.path(),
            cache.path(),
            &["plugin", "check", wasm.to_str().unwrap()],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{stderr}");
    };
    check("compiled into the plugin cache: ");
    check("already in the plugin cache");
    the_first_run_is_a_hit(dir.path(), cache.path(), &wasm, "non-empty");
}

/// Regression (the first load of a plugin): `plugin build` only built the
/// `.wasm`, so the first run compiled it (16–20 s for a componentize-py validator).
/// Built here with the JavaScript template (jco, the quickest toolchain).
#[test]
fn plugin_build_compiles_into_the_cache_so_the_first_run_is_a_hit() {
    let Some(jco) = crate::support::peers::node_tool("jco") else {
        return;
    };
    let dir = git_repo(|_| {});
    let cache = tempfile::tempdir().unwrap();
    let mut paths = vec![jco.parent().unwrap().to_owned()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let path_var = std::env::join_paths(paths).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let crewbox = |args: &[&str]| {
        let out = with_cache(dir.path(), cache.path(), args)
            .env("PATH", &path_var)
            .output()
            .unwrap();
        assert!(out.status.success(), "crewbox {args:?}: {}", text(&out));
        out
    };
    let work_arg = work.to_str().unwrap();
    let out = crewbox(&[
        "plugin",
        "new",
        "tpl-cached",
        "--kind",
        "validator",
        "--lang",
        "js",
        "--dir",
        work_arg,
    ]);
    let root = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let root = if root.is_absolute() {
        root
    } else {
        dir.path().join("repo").join(root)
    };
    // Without a cache directory the build says so and still succeeds.
    let out = command(dir.path(), &["plugin", "build", root.to_str().unwrap()])
        .env("PATH", &path_var)
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no plugin cache"),
        "{}",
        text(&out)
    );

    let out = crewbox(&["plugin", "build", root.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("compiled into the plugin cache: "), "{said}");
    let wasm = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let wasm = if wasm.is_absolute() {
        wasm
    } else {
        dir.path().join("repo").join(wasm)
    };
    assert!(wasm.is_file(), "{}", wasm.display());
    the_first_run_is_a_hit(dir.path(), cache.path(), &wasm, "no-todo");
}

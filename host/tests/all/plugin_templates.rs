//! The `crewbox plugin new` validator template in each language, as a plugin author
//! uses it: scaffolded and built by the real binary (`plugin new`, `plugin build`) with
//! the language's own toolchain, checked (`plugin check`), used in `crewbox validate`
//! and in a scripted `crewbox run` with a fix round. One criterion is added to each
//! template that fails on purpose (a Python exception, a JS error, a Rust panic), to
//! show the guest's own message reaches the user.
//!
//! Built components are kept in the target directory, keyed by a hash of the template
//! files and the toolchain's version, so only the first run after a change builds (Rust
//! ~1.5 min, Python ~30 s, JavaScript ~10 s). Python and JavaScript need the peers
//! `scripts/test-deps.sh` installs (componentize-py, jco); Rust always runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

use crewbox::unstable::plugin::PluginKind;
use crewbox::unstable::plugin::scaffold::{self, Lang};

use crate::support::repo::{bin, crewbox, git_repo};

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The failing criterion added to each template: (file, anchor, inserted before it).
fn boom(lang: Lang) -> (&'static str, &'static str, &'static str) {
    match lang {
        Lang::Rust => (
            "src/lib.rs",
            "            } else if let Some(path) = criterion.strip_prefix(\"file:\") {",
            "            } else if criterion == \"boom\" {\n                panic!(\"boom: the guest panicked on purpose\");\n",
        ),
        Lang::Python => (
            "app.py",
            "    elif criterion.startswith(\"file:\"):",
            "    elif criterion == \"boom\":\n        return {}[\"boom: a missing key\"]\n",
        ),
        Lang::Js => (
            "plugin.js",
            "  if (criterion.startsWith(\"file:\")) {",
            "  if (criterion === \"boom\") {\n    return null[\"boom\"];\n  }\n",
        ),
    }
}

/// What the user sees of the failing criterion.
fn boom_says(lang: Lang) -> &'static str {
    match lang {
        Lang::Rust => "boom: the guest panicked on purpose",
        Lang::Python => "KeyError: 'boom: a missing key'",
        // jco answers `err` with the message of an error thrown out of `validate`.
        Lang::Js => "cannot read property 'boom' of null",
    }
}

/// Scaffolds and builds the validator template for `lang` (once per distinct input)
/// with `PATH` led by `tools`, and returns the component's path.
fn built(lang: Lang, tools: Option<&Path>, version: &[u8]) -> PathBuf {
    let name = format!("tpl-{}", lang.as_str());
    let (file, anchor, insert) = boom(lang);
    let mut hash = Sha256::new();
    hash.update(version);
    for (path, body) in scaffold::files(&name, PluginKind::Validator, lang) {
        hash.update(path.to_string_lossy().as_bytes());
        hash.update(body.as_bytes());
    }
    hash.update(insert.as_bytes());
    let key: String = hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out = tmp.join(format!("templates/{name}-{key}.wasm"));
    if out.exists() {
        return out;
    }
    let work = tmp.join(format!("templates/work-{name}-{key}"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let path_var = match tools {
        Some(dir) => {
            let mut paths = vec![dir.to_owned()];
            paths.extend(std::env::split_paths(
                &std::env::var_os("PATH").unwrap_or_default(),
            ));
            std::env::join_paths(paths).unwrap()
        }
        None => std::env::var_os("PATH").unwrap_or_default(),
    };
    // The suite's one way to start crewbox: its own state and config directories, never
    // the user's.
    let homes = crate::support::cli::Homes::hidden_in(&work);
    let crewbox = |args: &[&str], dir: &Path| {
        let out = crate::support::cli::crewbox(dir, &homes, args)
            .env("PATH", &path_var)
            // The template's dependencies build once for every run of the suite.
            .env("CARGO_TARGET_DIR", tmp.join("templates/cargo-target"))
            .output()
            .unwrap();
        assert!(out.status.success(), "crewbox {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let lang_arg = lang.as_str();
    let root = crewbox(
        &[
            "plugin",
            "new",
            &name,
            "--kind",
            "validator",
            "--lang",
            lang_arg,
        ],
        &work,
    );
    let root = work.join(root);
    let source = root.join(file);
    let body = std::fs::read_to_string(&source).unwrap();
    assert_eq!(
        body.matches(anchor).count(),
        1,
        "{anchor} in {}",
        source.display()
    );
    std::fs::write(&source, body.replace(anchor, &format!("{insert}{anchor}"))).unwrap();
    let started = std::time::Instant::now();
    let component = PathBuf::from(crewbox(&["plugin", "build"], &root));
    eprintln!("built the {lang_arg} template in {:?}", started.elapsed());
    let component = root.join(component);
    std::fs::rename(&component, &out).unwrap();
    let _ = std::fs::remove_dir_all(&work);
    out
}

fn version(tool: &Path) -> Vec<u8> {
    Command::new(tool)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", tool.display()))
        .stdout
}

/// Check, validate (a failed verdict, a guest failure that reads) and a run with a fix
/// round, for the component at `wasm`.
fn use_as_an_author_would(lang: Lang, wasm: &Path) {
    let dir = git_repo(|_| {});
    let wasm = wasm.to_str().unwrap();
    let out = bin(dir.path(), &["plugin", "check", wasm]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("loads and links under the rules"),
        "{}",
        text(&out)
    );

    let reply = dir.path().join("reply.json");
    std::fs::write(&reply, r#"{"reply": "TODO: the tests"}"#).unwrap();
    let workspace = dir.path().join("repo");
    let validate = |criteria: &[&str]| {
        let mut args = vec![
            "validate",
            "--plugin",
            wasm,
            "--output",
            reply.to_str().unwrap(),
            "--workspace",
            workspace.to_str().unwrap(),
            "--json",
        ];
        for c in criteria {
            args.extend(["--criteria", c]);
        }
        let out = bin(dir.path(), &args);
        let json: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        json
    };
    let v = validate(&["no-todo", "file:notes.txt", "file:missing.txt"]);
    assert_eq!(v["judged"], true, "{v}");
    assert_eq!(v["passed"], false, "{v}");
    let results = v["results"].as_array().unwrap_or_else(|| panic!("{v}"));
    let passed: Vec<bool> = results.iter().map(|r| r["passed"] == true).collect();
    assert_eq!(passed, [false, true, false], "{v}");

    // A failure inside the guest reads as the guest's own words.
    let v = validate(&["boom"]);
    assert_eq!(v["judged"], false, "{v}");
    let said = format!(
        "{}{}",
        v["fault"].as_str().unwrap_or(""),
        v["error"].as_str().unwrap_or("")
    );
    assert!(said.contains(boom_says(lang)), "{lang:?}: {v}");
    assert!(
        !said.contains("wasm backtrace"),
        "{lang:?}: the reader gets words, not a backtrace: {v}"
    );

    // A run: the first reply says TODO, the fix round's does not.
    let script =
        "[[reply]]\ntext = \"TODO: write the notes\"\n\n[[reply]]\ntext = \"notes written\"\n";
    let spec = format!("{wasm}=no-todo");
    let spec_file = format!("{wasm}=file:notes.txt");
    let (out, report) = crewbox(
        dir.path(),
        script,
        &[
            "run",
            "write the notes",
            "--mode",
            "single",
            "--validator",
            &spec,
            "--validator",
            &spec_file,
        ],
    );
    assert!(out.status.success(), "{}\n{report}", text(&out));
    let verdicts = report["agents"][0]["verdicts"].as_array().unwrap();
    let rounds: Vec<(u64, &str)> = verdicts
        .iter()
        .filter(|v| v["verdict"]["results"][0]["criterion"] == "no-todo")
        .map(|v| (v["round"].as_u64().unwrap(), v["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(rounds, [(0, "failed"), (1, "passed")], "{report}");
}

#[test]
fn the_rust_template_builds_and_runs() {
    let cargo = PathBuf::from(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    let wasm = built(Lang::Rust, None, &version(&cargo));
    use_as_an_author_would(Lang::Rust, &wasm);
}

#[test]
fn the_python_template_builds_and_runs() {
    let Some(tool) = crate::support::peers::tool("componentize-py") else {
        return;
    };
    let wasm = built(Lang::Python, tool.parent(), &version(&tool));
    use_as_an_author_would(Lang::Python, &wasm);
}

#[test]
fn the_javascript_template_builds_and_runs() {
    let Some(tool) = crate::support::peers::node_tool("jco") else {
        return;
    };
    let wasm = built(Lang::Js, tool.parent(), &version(&tool));
    use_as_an_author_would(Lang::Js, &wasm);
}

/// Built the way an author might first try it (the QuickJS backend without its WASI
/// stubs, against the `judge` world), the component is refused with the flags that fix
/// it, for the toolchain read from the component itself.
#[test]
fn a_refused_import_names_the_build_flag_that_drops_it() {
    let Some(jco) = crate::support::peers::node_tool("jco") else {
        return;
    };
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("templates");
    let mut hash = Sha256::new();
    hash.update(version(&jco));
    for (path, body) in scaffold::files("unstubbed", PluginKind::Validator, Lang::Js) {
        hash.update(path.to_string_lossy().as_bytes());
        hash.update(body.as_bytes());
    }
    let key: String = hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let wasm = tmp.join(format!("unstubbed-{key}.wasm"));
    if !wasm.exists() {
        std::fs::create_dir_all(&tmp).unwrap();
        let work = tempfile::tempdir().unwrap();
        let root =
            scaffold::create(work.path(), "unstubbed", PluginKind::Validator, Lang::Js).unwrap();
        let out = Command::new(&jco)
            .args([
                "componentize",
                "plugin.js",
                "-w",
                "wit",
                "-n",
                "judge",
                "--backend",
                "qjs",
            ])
            .args(["--backend-qjs-disable-async", "-o"])
            .arg(&wasm)
            .current_dir(&root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    let dir = git_repo(|_| {});
    // A fresh cache: the first compile (seconds in a debug build) says what it compiles.
    let cache = tempfile::tempdir().unwrap();
    let out = crate::support::repo::command(
        dir.path(),
        &["plugin", "check", wasm.to_str().unwrap(), "--json"],
    )
    .env("XDG_CACHE_HOME", cache.path())
    .output()
    .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("compiling plugin `unstubbed-")
            && said.contains("later runs load it from the cache"),
        "{said}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let violations = report["violations"].as_array().unwrap();
    let hint_for = |prefix: &str| {
        violations
            .iter()
            .find(|v| v["interface"].as_str().unwrap_or("").starts_with(prefix))
            .and_then(|v| v["hint"].as_str())
            .unwrap_or_else(|| panic!("no hint for {prefix}: {report}"))
            .to_owned()
    };
    assert!(
        hint_for("wasi:filesystem").contains("--backend-qjs-stub-wasi"),
        "{report}"
    );
    assert!(
        hint_for("crewbox:plugin/model").contains("`-n validator`"),
        "{report}"
    );
}

//! `crewbox plugin build`: builds the project `crewbox plugin new` made with the
//! language's own toolchain, installing it into the project when it is missing
//! (componentize-py into `.venv/`, jco into `node_modules/`, the `wasm32-wasip2` target
//! with rustup), and leaves the component at `NAME.wasm` in the project.
//!
//! The toolchains' own output goes to stderr as they print it; what this module
//! returns is where the component is.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::scaffold::{Lang, Manifest, ScaffoldError};

/// componentize-py, pinned: the version the templates and the import rules are tested with.
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";
/// jco, pinned in the JavaScript template's `package.json`.
pub const JCO_VERSION: &str = "1.35.0";

/// The flags each toolchain needs to build a component the host accepts.
pub mod flags {
    /// componentize-py: WASI imports (sockets, filesystem…) become trapping stubs.
    pub const PYTHON: &[&str] = &["--stub-wasi"];
    /// jco: the QuickJS backend (1.6 MB, not StarlingMonkey's 12 MB) with WASI stubs
    /// and without the async runtime, whose imports the host does not provide.
    pub const JS: &[&str] = &[
        "--backend",
        "qjs",
        "--backend-qjs-stub-wasi",
        "--backend-qjs-disable-async",
    ];
}

/// A built component.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Built {
    /// Where it is.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Why a build failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The project's manifest is missing or wrong.
    #[error(transparent)]
    Project(#[from] ScaffoldError),
    /// A tool could not be started.
    #[error("cannot run `{command}`: {source}{hint}")]
    Spawn {
        /// The command.
        command: String,
        /// Why.
        source: std::io::Error,
        /// How to get the tool.
        hint: &'static str,
    },
    /// A tool ran and failed.
    #[error("`{command}` failed ({status}); its output is above")]
    Failed {
        /// The command.
        command: String,
        /// How it ended.
        status: std::process::ExitStatus,
    },
    /// The build succeeded but left no component.
    #[error("the build left no component at {}", .0.display())]
    NoComponent(PathBuf),
}

/// Builds the project in `dir`. Blocking (runs the toolchain).
pub fn build(dir: &Path) -> Result<Built, BuildError> {
    let manifest = Manifest::read(dir)?;
    let out = dir.join(format!("{}.wasm", manifest.name));
    match manifest.lang {
        Lang::Rust => build_rust(dir, &out)?,
        Lang::Python => {
            let tool = componentize_py(dir)?;
            let mut c = Command::new(tool);
            c.args(["-d", "wit", "-w", &manifest.world, "componentize"])
                .args(flags::PYTHON)
                .args(["app", "-o"])
                .arg(&out);
            run(c.current_dir(dir), "")?;
        }
        Lang::Js => {
            let tool = jco(dir)?;
            let mut c = Command::new(tool);
            c.args([
                "componentize",
                "plugin.js",
                "-w",
                "wit",
                "-n",
                &manifest.world,
            ])
            .args(flags::JS)
            .arg("-o")
            .arg(&out);
            run(c.current_dir(dir), "")?;
        }
    }
    let bytes = std::fs::metadata(&out)
        .map_err(|_| BuildError::NoComponent(out.clone()))?
        .len();
    Ok(Built { path: out, bytes })
}

fn shown(c: &Command) -> String {
    let mut s = c.get_program().to_string_lossy().into_owned();
    for a in c.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `c` with its output on our stderr. The build tools (cargo, componentize-py,
/// jco) talk to the terminal themselves, colours included: the user runs them on
/// plugin source they chose to build, which executes code of its own anyway.
#[allow(clippy::disallowed_methods)]
fn run(c: &mut Command, hint: &'static str) -> Result<(), BuildError> {
    let command = shown(c);
    let status = c
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .map_err(|source| BuildError::Spawn {
            command: command.clone(),
            source,
            hint,
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(BuildError::Failed { command, status })
    }
}

/// The first line `program --version` prints, if it runs.
fn version_of(program: &Path) -> Option<String> {
    let out = Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `name` on `PATH`, if it is there.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The pinned componentize-py: the project's `.venv`, else one on `PATH` of the pinned
/// version, else installed into `.venv` with pip.
fn componentize_py(dir: &Path) -> Result<PathBuf, BuildError> {
    let pinned = COMPONENTIZE_PY.trim_start_matches("componentize-py==");
    let local = dir.join(".venv/bin/componentize-py");
    if local.is_file() {
        return Ok(local);
    }
    if let Some(p) = on_path("componentize-py")
        && version_of(&p).is_some_and(|v| v.contains(pinned))
    {
        return Ok(p);
    }
    crate::text::errln!("crewbox: installing {COMPONENTIZE_PY} into .venv/");
    let python_hint = " (install Python 3 with its venv module)";
    run(
        Command::new("python3")
            .args(["-m", "venv", ".venv"])
            .current_dir(dir),
        python_hint,
    )?;
    run(
        Command::new(dir.join(".venv/bin/pip"))
            .args([
                "install",
                "--disable-pip-version-check",
                "-q",
                COMPONENTIZE_PY,
            ])
            .current_dir(dir),
        python_hint,
    )?;
    Ok(local)
}

/// The pinned jco: the project's `node_modules`, else one on `PATH` of the pinned
/// version, else installed with `npm install` from the project's `package.json`.
fn jco(dir: &Path) -> Result<PathBuf, BuildError> {
    let local = dir.join("node_modules/.bin/jco");
    if local.is_file() {
        return Ok(local);
    }
    if let Some(p) = on_path("jco")
        && version_of(&p).is_some_and(|v| v.contains(JCO_VERSION))
    {
        return Ok(p);
    }
    crate::text::errln!("crewbox: installing jco {JCO_VERSION} into node_modules/");
    run(
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund"])
            .current_dir(dir),
        " (install Node.js 20 or later with npm)",
    )?;
    Ok(local)
}

const RUST_TARGET: &str = "wasm32-wasip2";

/// Builds with cargo for `wasm32-wasip2` (added with rustup when missing) and copies
/// the component cargo reports to `out`.
fn build_rust(dir: &Path, out: &Path) -> Result<(), BuildError> {
    let hint = " (install Rust with rustup: https://rustup.rs)";
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .map_err(|source| BuildError::Spawn {
            command: "rustc --print sysroot".into(),
            source,
            hint,
        })?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if !sysroot.join("lib/rustlib").join(RUST_TARGET).is_dir() {
        crate::text::errln!("crewbox: adding the {RUST_TARGET} target with rustup");
        run(
            Command::new("rustup").args(["target", "add", RUST_TARGET]),
            hint,
        )?;
    }
    let mut c = Command::new("cargo");
    c.args(["build", "--release", "--target", RUST_TARGET])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let command = shown(&c);
    let output = c.output().map_err(|source| BuildError::Spawn {
        command: command.clone(),
        source,
        hint,
    })?;
    if !output.status.success() {
        return Err(BuildError::Failed {
            command,
            status: output.status,
        });
    }
    // The artifact cargo reports, wherever CARGO_TARGET_DIR puts it.
    let built = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter(|m| {
            m["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "cdylib"))
        })
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .find(|f| f.extension().is_some_and(|e| e == "wasm"))
        .ok_or_else(|| BuildError::NoComponent(out.to_owned()))?;
    std::fs::copy(&built, out).map_err(|source| BuildError::Spawn {
        command: format!("copy {} to {}", built.display(), out.display()),
        source,
        hint: "",
    })?;
    Ok(())
}

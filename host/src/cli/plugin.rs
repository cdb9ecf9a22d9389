//! `crewbox plugin list|inspect|check`: what plugins exist and whether they load.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use serde::Serialize;

use super::Exit;
use crate::plugin::builtin::BUILTINS;
use crate::plugin::{
    Compiler, Grants, PluginKind, PluginRuntime, PluginSource, RuntimeConfig, Violation,
};

/// `crewbox plugin …`.
#[derive(Debug, clap::Args)]
pub struct PluginArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: PluginCommand,
}

/// The `plugin` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum PluginCommand {
    /// Lists built-in and discovered plugins.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Shows a component's kind, imports and exports, and whether it loads.
    Inspect {
        /// The component file.
        file: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Checks a component against the rules and reports every violation (exit 1 if any).
    Check {
        /// The component file.
        file: PathBuf,
        /// The kind it must be (default: the kind its exports say).
        #[arg(long, value_parser = parse_kind)]
        kind: Option<PluginKind>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn parse_kind(s: &str) -> Result<PluginKind, String> {
    PluginKind::parse(s).ok_or_else(|| format!("unknown kind `{s}` (dispatcher, validator, role)"))
}

/// A plugin found on disk or built in, not yet loaded.
pub(crate) struct Found {
    pub(crate) name: String,
    pub(crate) source: PluginSource,
    pub(crate) bytes: Arc<[u8]>,
}

/// `$XDG_CONFIG_HOME/crewbox/plugins`, else `$HOME/.config/crewbox/plugins`.
fn user_plugin_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("crewbox").join("plugins"))
}

/// Built-ins, then repo plugins (`.crewbox/plugins/`), then user plugins. Blocking.
pub(crate) fn discover() -> anyhow::Result<Vec<Found>> {
    let mut found: Vec<Found> = BUILTINS
        .iter()
        .map(|b| Found {
            name: b.name.to_owned(),
            source: PluginSource::Builtin,
            bytes: b.wasm.into(),
        })
        .collect();
    let dirs = [
        (Some(PathBuf::from(".crewbox/plugins")), true),
        (user_plugin_dir(), false),
    ];
    for (dir, repo) in dirs {
        let Some(dir) = dir.filter(|d| d.is_dir()) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
            .collect();
        paths.sort();
        for path in paths {
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            let name = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let source = if repo {
                PluginSource::Repo(path)
            } else {
                PluginSource::User(path)
            };
            found.push(Found {
                name,
                source,
                bytes: bytes.into(),
            });
        }
    }
    Ok(found)
}

/// Resolves `NAME|FILE`: an existing file path, else a built-in or discovered name. Blocking.
pub(crate) fn resolve(spec: &str) -> anyhow::Result<Option<Found>> {
    let path = Path::new(spec);
    if path.is_file() {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let name = path
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        return Ok(Some(Found {
            name,
            source: PluginSource::File(path.to_owned()),
            bytes: bytes.into(),
        }));
    }
    Ok(discover()?.into_iter().find(|f| f.name == spec))
}

/// A runtime with the default on-disk cache, compiling untrusted components in a
/// limited child process (this binary).
pub(crate) fn runtime() -> anyhow::Result<PluginRuntime> {
    Ok(PluginRuntime::new(RuntimeConfig {
        compiler: Compiler::this_program()?,
        ..RuntimeConfig::default()
    })?)
}

#[derive(Serialize)]
struct Listed {
    name: String,
    kind: Option<PluginKind>,
    #[serde(flatten)]
    source: PluginSource,
    imports: Vec<String>,
    grants: Option<Grants>,
    violations: Vec<String>,
}

#[derive(Serialize)]
struct Inspected {
    file: PathBuf,
    kind: Option<PluginKind>,
    imports: Vec<String>,
    exports: Vec<String>,
    size: usize,
    loads: bool,
    violations: Vec<Violation>,
}

/// Runs `crewbox plugin …`.
pub async fn run(args: PluginArgs) -> anyhow::Result<Exit> {
    tokio::task::spawn_blocking(move || run_blocking(args)).await?
}

fn run_blocking(args: PluginArgs) -> anyhow::Result<Exit> {
    let rt = runtime()?;
    match args.command {
        PluginCommand::List { json } => {
            let mut rows = Vec::new();
            for f in discover()? {
                let (kind, imports) = match rt.inspect(&f.bytes) {
                    Ok(info) => (info.kind, info.imports),
                    Err(_) => (None, Vec::new()),
                };
                let grants =
                    kind.map(|k| crate::engine::plugins::grants_for(&f.name, &f.source, k));
                let violations = rt
                    .check(
                        &f.name,
                        &f.bytes,
                        kind,
                        grants.as_ref().unwrap_or(&Grants::none()),
                    )
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                rows.push(Listed {
                    name: f.name,
                    kind,
                    source: f.source,
                    imports,
                    grants,
                    violations,
                });
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                for r in &rows {
                    let kind = r.kind.map_or("?", PluginKind::as_str);
                    let imports: Vec<&str> = r
                        .imports
                        .iter()
                        .map(String::as_str)
                        .filter(|i| i.starts_with("crewbox:"))
                        .collect();
                    println!(
                        "{:<24} {:<10} {:<40} {}",
                        r.name,
                        kind,
                        r.source.to_string(),
                        imports.join(" ")
                    );
                    for v in &r.violations {
                        println!("    ! {v}");
                    }
                }
            }
            Ok(Exit::Ok)
        }
        PluginCommand::Inspect { file, json } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let info = match rt.inspect(&bytes) {
                Ok(info) => info,
                Err(e) => {
                    eprintln!("{e}");
                    return Ok(Exit::CheckFailed);
                }
            };
            let name = file
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let grants = info.kind.map(Grants::defaults_for).unwrap_or_default();
            let violations = rt.check(&name, &bytes, None, &grants);
            let out = Inspected {
                file,
                kind: info.kind,
                imports: info.imports,
                exports: info.exports,
                size: info.size,
                loads: violations.is_empty(),
                violations,
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("kind:    {}", out.kind.map_or("none", PluginKind::as_str));
                println!("size:    {} bytes", out.size);
                println!("exports: {}", out.exports.join(", "));
                println!("imports: {}", out.imports.join(", "));
                println!(
                    "loads:   {}",
                    if out.loads {
                        "yes (default grants)"
                    } else {
                        "no"
                    }
                );
                for v in &out.violations {
                    println!("  ! {v}");
                }
            }
            Ok(Exit::Ok)
        }
        PluginCommand::Check { file, kind, json } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let name = file
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let detected = rt.inspect(&bytes).ok().and_then(|i| i.kind);
            let grants = kind
                .or(detected)
                .map(Grants::defaults_for)
                .unwrap_or_default();
            let violations = rt.check(&name, &bytes, kind, &grants);
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "ok": violations.is_empty(), "violations": violations })
                );
            } else if violations.is_empty() {
                println!("ok: `{name}` loads under the rules");
            } else {
                for v in &violations {
                    println!("{v}");
                }
            }
            Ok(if violations.is_empty() {
                Exit::Ok
            } else {
                Exit::CheckFailed
            })
        }
    }
}

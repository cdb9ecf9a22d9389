//! `crewbox plugin list|inspect|check|new|build|cache`: what plugins exist, whether they
//! load, building one, and the compiled-plugin cache. `build` and `check` compile the
//! component into the cache the way a run would, so its first run loads it from there.

use std::path::{Path, PathBuf};

use crewbox::plugins::{
    CacheState, Compiled, Grants, InspectError, Lang, PluginKind, PluginSource, Plugins,
    Precompile, Violation,
};
use serde::Serialize;

use super::Exit;
use crate::text::escape;

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
    /// Creates a plugin project in `./NAME` (WIT, sources, toolchain settings, README).
    New {
        /// The plugin's name (lowercase letters, digits, `-`).
        name: String,
        /// What it is.
        #[arg(long, value_parser = parse_kind)]
        kind: PluginKind,
        /// Its language.
        #[arg(long, value_parser = parse_lang)]
        lang: Lang,
        /// Where to create it (default: the current directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Builds the plugin project in DIR (default: here), compiles the component into the
    /// plugin cache so its first run loads fast, and prints the component's path.
    Build {
        /// The project (where `crewbox-plugin.toml` is).
        dir: Option<PathBuf>,
    },
    /// Shows the compiled-plugin cache (where, how big, its cap); `--prune` removes
    /// entries of other crewbox versions and the least recently used down to the cap.
    Cache {
        /// Remove stale and least recently used entries now.
        #[arg(long)]
        prune: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn parse_lang(s: &str) -> Result<Lang, String> {
    Lang::parse(s).ok_or_else(|| format!("unknown language `{s}` (rust, python, js)"))
}

fn parse_kind(s: &str) -> Result<PluginKind, String> {
    PluginKind::parse(s).ok_or_else(|| format!("unknown kind `{s}` (dispatcher, validator, role)"))
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
    /// Why it could not be read or compiled, if so.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl From<crewbox::plugins::PluginEntry> for Listed {
    fn from(e: crewbox::plugins::PluginEntry) -> Self {
        Self {
            name: e.name,
            kind: e.kind,
            source: e.source,
            imports: e.imports,
            grants: e.grants,
            violations: e.violations.iter().map(ToString::to_string).collect(),
            error: e.error.map(|e| e.to_string()),
        }
    }
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

/// What a compile ahead of the first run did, in words (`plugin build`, `plugin check`).
fn precompiled_note(done: &Compiled) -> String {
    let ms = done.elapsed.as_millis();
    match done.cache {
        CacheState::Stored => format!("compiled into the plugin cache: {ms} ms"),
        CacheState::Hit => format!("already in the plugin cache (loaded in {ms} ms)"),
        CacheState::NotStored => format!(
            "compiled in {ms} ms, but the plugin cache could not be written: \
             the first run compiles it again"
        ),
        CacheState::NoCache => format!("compiled in {ms} ms; {NO_CACHE}"),
    }
}

/// Why nothing is cached without a cache directory, and what it costs.
const NO_CACHE: &str =
    "no plugin cache (neither XDG_CACHE_HOME nor HOME is set): the first run compiles it";

/// After `plugin build`: what compiling the component at `path` into the plugin cache
/// came to. A refusal (over a compile limit, or not a valid component) fails the build,
/// naming the file and the limit; no cache, or a compiler that could not run, is said
/// and the build still succeeds.
fn precompile_built(path: &Path) -> anyhow::Result<Exit> {
    let shown = || escape(&path.display().to_string()).into_owned();
    match crewbox::plugins::precompile_built(path)? {
        Precompile::NoCache => errln!("crewbox: {NO_CACHE}"),
        Precompile::Compiled(done) => errln!("crewbox: {}", precompiled_note(&done)),
        Precompile::Unreadable(e) => {
            errln!(
                "crewbox: {} cannot be compiled: {}",
                shown(),
                escape(&e.to_string())
            );
            return Ok(Exit::CheckFailed);
        }
        Precompile::Refused(e) => {
            errln!(
                "crewbox: {} is built but cannot be used: {}",
                shown(),
                escape(&e.to_string())
            );
            return Ok(Exit::CheckFailed);
        }
        // The compiler could not run, or the machine was too busy: not the
        // component's fault, and the first run compiles it.
        Precompile::NotCompiled(e) => errln!(
            "crewbox: not compiled into the plugin cache ({}); the first run compiles it",
            escape(&e.to_string())
        ),
    }
    Ok(Exit::Ok)
}

fn run_blocking(args: PluginArgs) -> anyhow::Result<Exit> {
    match &args.command {
        PluginCommand::New {
            name,
            kind,
            lang,
            dir,
        } => {
            let here = dir.clone().unwrap_or_else(|| PathBuf::from("."));
            let root = crewbox::plugins::new_project(&here, name, *kind, *lang)?;
            outln!("{}", root.display());
            return Ok(Exit::Ok);
        }
        PluginCommand::Build { dir } => {
            let here = dir.clone().unwrap_or_else(|| PathBuf::from("."));
            let built = crewbox::plugins::build_project(&here)?;
            errln!("crewbox: built {} bytes", built.bytes);
            let exit = precompile_built(&built.path)?;
            if exit == Exit::Ok {
                outln!("{}", built.path.display());
            }
            return Ok(exit);
        }
        PluginCommand::List { json } => {
            let rows: Vec<Listed> = Plugins::here()?
                .list()
                .into_iter()
                .map(Listed::from)
                .collect();
            if *json {
                outln!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                // Names and paths come from the repository: escaped.
                for r in &rows {
                    let kind = r.kind.map_or("?", PluginKind::as_str);
                    let imports: Vec<String> = r
                        .imports
                        .iter()
                        .filter(|i| i.starts_with("crewbox:"))
                        .map(|i| escape(i).into_owned())
                        .collect();
                    outln!(
                        "{:<24} {:<10} {:<40} {}",
                        escape(&r.name),
                        kind,
                        escape(&r.source.to_string()),
                        imports.join(" ")
                    );
                    for v in &r.violations {
                        outln!("    ! {}", escape(v));
                    }
                    if let Some(e) = &r.error {
                        outln!("    ! {}", escape(e));
                    }
                }
            }
            return Ok(Exit::Ok);
        }
        _ => {}
    }
    // The runtime and the user's grants, as a run has them.
    let plugins = Plugins::here()?;
    match args.command {
        PluginCommand::Inspect { file, json } => {
            let info = match plugins.inspect(&file) {
                Ok(info) => info,
                Err(e) => {
                    errln!("{}", escape(&e.to_string()));
                    return Ok(match e {
                        InspectError::Unreadable(_) => Exit::Usage,
                        InspectError::NotAComponent(_) => Exit::CheckFailed,
                    });
                }
            };
            let out = Inspected {
                file,
                kind: info.kind,
                loads: info.loads(),
                imports: info.imports,
                exports: info.exports,
                size: info.size,
                violations: info.violations,
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                let list = |items: &[String]| {
                    items
                        .iter()
                        .map(|i| escape(i).into_owned())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                outln!("kind:    {}", out.kind.map_or("none", PluginKind::as_str));
                outln!("size:    {} bytes", out.size);
                outln!("exports: {}", list(&out.exports));
                outln!("imports: {}", list(&out.imports));
                outln!(
                    "loads:   {}",
                    if out.loads {
                        "yes (default grants)"
                    } else {
                        "no"
                    }
                );
                for v in &out.violations {
                    outln!("  ! {}", escape(&v.to_string()));
                }
            }
            Ok(Exit::Ok)
        }
        PluginCommand::New { .. } | PluginCommand::Build { .. } | PluginCommand::List { .. } => {
            unreachable!("handled above")
        }
        PluginCommand::Cache { prune, json } => {
            let usage = match plugins.cache_usage(prune) {
                Ok(usage) => usage,
                Err(e) => {
                    errln!("{e}");
                    return Ok(Exit::Usage);
                }
            };
            if json {
                outln!("{}", serde_json::to_string_pretty(&usage)?);
            } else {
                let mb = |b: u64| b as f64 / (1 << 20) as f64;
                outln!("cache:   {}", escape(&usage.dir.display().to_string()));
                outln!(
                    "holds:   {} entries, {:.1} MB ({} of another crewbox version)",
                    usage.entries,
                    mb(usage.bytes),
                    usage.stale_entries
                );
                outln!(
                    "cap:     {:.0} MB (least recently used go first)",
                    mb(usage.max_bytes)
                );
                if let Some(r) = usage.removed {
                    outln!("pruned:  {} entries, {:.1} MB", r.entries, mb(r.bytes));
                }
            }
            Ok(Exit::Ok)
        }
        PluginCommand::Check { file, kind, json } => {
            let checked = match plugins.check(&file, kind) {
                Ok(checked) => checked,
                Err(e) => {
                    errln!("{}", escape(&e.to_string()));
                    return Ok(Exit::Usage);
                }
            };
            // A refusal is among the violations below; only a compile is reported here.
            if let Some(done) = &checked.compiled {
                errln!("crewbox: {}", precompiled_note(done));
            }
            if json {
                outln!(
                    "{}",
                    serde_json::json!({ "ok": checked.passed(), "violations": checked.violations })
                );
            } else if checked.passed() {
                outln!(
                    "ok: `{}` loads and links under the rules",
                    escape(&checked.name)
                );
            } else {
                for v in &checked.violations {
                    outln!("{}", escape(&v.to_string()));
                }
            }
            Ok(if checked.passed() {
                Exit::Ok
            } else {
                Exit::CheckFailed
            })
        }
    }
}

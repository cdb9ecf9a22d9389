//! `crewbox plugin list|inspect|check|new|build|cache`: what plugins exist, whether they
//! load, building one, and the compiled-plugin cache. `build` and `check` compile the
//! component into the cache the way a run would, so its first run loads it from there.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Exit;
use crate::plugin::discover::Found;
use crate::plugin::{
    CacheOutcome, Compiler, Grants, PluginError, PluginKind, PluginRuntime, PluginSource,
    Precompiled, RuntimeConfig, UserGrant, Violation,
};
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
        lang: crate::plugin::scaffold::Lang,
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

fn parse_lang(s: &str) -> Result<crate::plugin::scaffold::Lang, String> {
    crate::plugin::scaffold::Lang::parse(s)
        .ok_or_else(|| format!("unknown language `{s}` (rust, python, js)"))
}

fn parse_kind(s: &str) -> Result<PluginKind, String> {
    PluginKind::parse(s).ok_or_else(|| format!("unknown kind `{s}` (dispatcher, validator, role)"))
}

/// The grants of the user's own config (`[plugins.grants.NAME]`). Blocking.
pub(crate) fn user_grants() -> anyhow::Result<Vec<UserGrant>> {
    Ok(crate::config::Config::load_user()?.plugin_grants)
}

/// The grants `found` gets, as a run would give them.
pub(crate) fn grants(found: &Found, kind: PluginKind, user: &[UserGrant]) -> Grants {
    crate::engine::grants_for(&found.name, &found.source, kind, &found.bytes, user)
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
fn precompiled_note(rt: &PluginRuntime, done: &Precompiled) -> String {
    let ms = done.elapsed.as_millis();
    match done.outcome {
        CacheOutcome::Stored => format!("compiled into the plugin cache: {ms} ms"),
        CacheOutcome::Hit => format!("already in the plugin cache (loaded in {ms} ms)"),
        CacheOutcome::Compiled if rt.has_disk_cache() => format!(
            "compiled in {ms} ms, but the plugin cache could not be written: \
             the first run compiles it again"
        ),
        CacheOutcome::Compiled => format!("compiled in {ms} ms; {NO_CACHE}"),
    }
}

/// Why nothing is cached without a cache directory, and what it costs.
const NO_CACHE: &str =
    "no plugin cache (neither XDG_CACHE_HOME nor HOME is set): the first run compiles it";

/// After `plugin build`: compiles the component at `path` into the plugin cache exactly
/// as a run's first load would, so that load is a cache hit. A refusal (over a compile
/// limit, or not a valid component) fails the build, naming the file and the limit; no
/// cache, or a compiler that could not run, is said and the build still succeeds.
fn precompile_built(path: &Path) -> anyhow::Result<Exit> {
    let rt = runtime()?;
    if !rt.has_disk_cache() {
        errln!("crewbox: {NO_CACHE}");
        return Ok(Exit::Ok);
    }
    let shown = escape(&path.display().to_string()).into_owned();
    let (name, bytes) = match read_file(&rt, path) {
        Ok(read) => read,
        Err(e) => {
            errln!(
                "crewbox: {shown} cannot be compiled: {}",
                escape(&e.to_string())
            );
            return Ok(Exit::CheckFailed);
        }
    };
    match rt.precompile(&name, &bytes) {
        Ok(done) => errln!("crewbox: {}", precompiled_note(&rt, &done)),
        Err(e @ (PluginError::Refused { .. } | PluginError::Compile { .. })) => {
            errln!(
                "crewbox: {shown} is built but cannot be used: {}",
                escape(&e.to_string())
            );
            return Ok(Exit::CheckFailed);
        }
        // The compiler could not run, or the machine was too busy: not the
        // component's fault, and the first run compiles it.
        Err(e) => errln!(
            "crewbox: not compiled into the plugin cache ({}); the first run compiles it",
            escape(&e.to_string())
        ),
    }
    Ok(Exit::Ok)
}

/// Reads a file named on the command line (regular files only, bounded).
fn read_file(rt: &PluginRuntime, file: &Path) -> anyhow::Result<(String, Vec<u8>)> {
    let bytes = crate::plugin::file::read_component(file, rt.compile_limits().max_component_bytes)?;
    let name = file
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    Ok((name, bytes))
}

fn run_blocking(args: PluginArgs) -> anyhow::Result<Exit> {
    use crate::plugin::{build, scaffold};
    match &args.command {
        PluginCommand::New {
            name,
            kind,
            lang,
            dir,
        } => {
            let here = dir.clone().unwrap_or_else(|| PathBuf::from("."));
            let root = scaffold::create(&here, name, *kind, *lang)?;
            outln!("{}", root.display());
            return Ok(Exit::Ok);
        }
        PluginCommand::Build { dir } => {
            let here = dir.clone().unwrap_or_else(|| PathBuf::from("."));
            let built = build::build(&here)?;
            errln!("crewbox: built {} bytes", built.bytes);
            let exit = precompile_built(&built.path)?;
            if exit == Exit::Ok {
                outln!("{}", built.path.display());
            }
            return Ok(exit);
        }
        PluginCommand::List { json } => {
            let rows: Vec<Listed> = crewbox::plugins::Plugins::here()?
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
    let rt = runtime()?;
    let user = user_grants()?;
    match args.command {
        PluginCommand::Inspect { file, json } => {
            let (name, bytes) = match read_file(&rt, &file) {
                Ok(read) => read,
                Err(e) => {
                    errln!("{}", escape(&e.to_string()));
                    return Ok(Exit::Usage);
                }
            };
            let info = match rt.inspect_named(&name, &bytes) {
                Ok(info) => info,
                Err(e) => {
                    errln!("{}", escape(&e.to_string()));
                    return Ok(Exit::CheckFailed);
                }
            };
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
            let Some(usage) = rt.cache_usage(prune) else {
                errln!("no plugin cache: neither XDG_CACHE_HOME nor HOME is set");
                return Ok(Exit::Usage);
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
            let (name, bytes) = match read_file(&rt, &file) {
                Ok(read) => read,
                Err(e) => {
                    errln!("{}", escape(&e.to_string()));
                    return Ok(Exit::Usage);
                }
            };
            let found = Found {
                name: name.clone(),
                source: PluginSource::File(file.clone()),
                bytes: bytes.clone().into(),
            };
            let (violations, precompiled) = rt.check_precompiling(&name, &bytes, kind, |k| {
                k.map(|k| grants(&found, k, &user)).unwrap_or_default()
            });
            // A refusal is among the violations below; only a compile is reported here.
            if let Ok(done) = &precompiled {
                errln!("crewbox: {}", precompiled_note(&rt, done));
            }
            if json {
                outln!(
                    "{}",
                    serde_json::json!({ "ok": violations.is_empty(), "violations": violations })
                );
            } else if violations.is_empty() {
                outln!("ok: `{}` loads and links under the rules", escape(&name));
            } else {
                for v in &violations {
                    outln!("{}", escape(&v.to_string()));
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

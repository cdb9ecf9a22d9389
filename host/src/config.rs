//! Configuration: user `$XDG_CONFIG_HOME/crewbox/config.toml`, then repo
//! `.crewbox/config.toml` (repo wins key by key; providers merge by name). Unknown keys
//! are an error naming the key and the file. Secrets only appear as env var names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::engine::Mode;
use crate::provider::config::ProviderConfig;

/// The provider used when none is named: the built-in scripted model.
pub const DEFAULT_PROVIDER: &str = "scripted";

/// Why configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file exists but cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file is not valid TOML or has unknown keys or bad values.
    #[error("invalid config file {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What toml/serde said (names the key and line).
        message: String,
    },
    /// A value is out of range.
    #[error("invalid config value `{key}` in {origin}: {message}")]
    Value {
        /// The key.
        key: String,
        /// Which file (or `command line`).
        origin: String,
        /// Why.
        message: String,
    },
}

/// Agent quotas. Every field is optional in files; defaults are below.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QuotaFile {
    /// Soft turn limit: at this turn the agent is told to wrap up.
    pub max_turns: Option<u32>,
    /// Extra turns after the soft limit before the hard stop.
    pub grace_turns: Option<u32>,
    /// Total tokens (input + output).
    pub max_tokens: Option<u64>,
    /// Wall time in seconds.
    pub wall_time_s: Option<u64>,
    /// Tool calls.
    pub max_tool_calls: Option<u32>,
    /// Cost budget in the provider's price unit (needs prices in the provider config).
    pub max_cost: Option<f64>,
    /// Seconds a single model call may take before it counts as stalled.
    pub model_timeout_s: Option<u64>,
    /// Context budget in tokens; old tool outputs are compacted when it is near.
    pub context_tokens: Option<u64>,
    /// Turns kept verbatim by compaction.
    pub keep_turns: Option<u32>,
    /// Maximum depth of the agent tree.
    pub max_depth: Option<u32>,
}

/// Resolved agent quotas.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Quotas {
    /// Soft turn limit.
    pub max_turns: u32,
    /// Grace turns after the soft limit.
    pub grace_turns: u32,
    /// Token budget.
    pub max_tokens: u64,
    /// Wall time.
    pub wall_time: Duration,
    /// Tool-call budget.
    pub max_tool_calls: u32,
    /// Optional cost budget.
    pub max_cost: Option<f64>,
    /// Per-call model timeout (a stalled stream counts).
    pub model_timeout: Duration,
    /// Context budget in tokens.
    pub context_tokens: u64,
    /// Turns kept verbatim by compaction.
    pub keep_turns: u32,
    /// Maximum agent tree depth.
    pub max_depth: u32,
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            max_turns: 30,
            grace_turns: 2,
            max_tokens: 500_000,
            wall_time: Duration::from_secs(600),
            max_tool_calls: 100,
            max_cost: None,
            model_timeout: Duration::from_secs(300),
            context_tokens: 120_000,
            keep_turns: 6,
            max_depth: 5,
        }
    }
}

impl Quotas {
    /// Applies the keys set in `f`.
    pub fn apply(&mut self, f: &QuotaFile) {
        macro_rules! set {
            ($($k:ident),*) => { $(if let Some(v) = f.$k { self.$k = v; })* };
        }
        set!(
            max_turns,
            grace_turns,
            max_tokens,
            max_tool_calls,
            context_tokens,
            keep_turns,
            max_depth
        );
        if let Some(s) = f.wall_time_s {
            self.wall_time = Duration::from_secs(s);
        }
        if let Some(s) = f.model_timeout_s {
            self.model_timeout = Duration::from_secs(s);
        }
        if f.max_cost.is_some() {
            self.max_cost = f.max_cost;
        }
    }
}

/// One config file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The provider used when `--provider` is not given.
    pub default_provider: Option<String>,
    /// The mode used when `--mode` is not given.
    pub default_mode: Option<Mode>,
    /// Agents running at once.
    pub max_concurrent: Option<usize>,
    /// Where state lives (overrides `$XDG_STATE_HOME/crewbox/<repo-id>`).
    pub state_dir: Option<PathBuf>,
    /// The dispatcher plugin for `auto` (a built-in name or a `.wasm` path).
    pub dispatcher: Option<String>,
    /// How many dispatch decisions to keep (default 200).
    pub dispatch_history: Option<u32>,
    /// Whether `crewbox daemon` fires scheduled jobs (default true).
    pub scheduling: Option<bool>,
    /// The IANA zone cron jobs are read in when `schedule add` names none (default UTC).
    pub timezone: Option<String>,
    /// Agent quotas.
    #[serde(default)]
    pub quotas: QuotaFile,
    /// Model providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Plugin grants; only the user's own config may set them (they widen access).
    pub plugins: Option<PluginsFile>,
}

/// `[plugins]` of the user's config.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginsFile {
    /// `[plugins.grants.NAME]`: what a plugin file called NAME is granted.
    #[serde(default)]
    pub grants: BTreeMap<String, PluginGrantFile>,
}

/// One `[plugins.grants.NAME]` table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginGrantFile {
    /// The component file the grant is for (relative to the config file).
    pub path: PathBuf,
    /// Pins the file's contents: its sha256, hex.
    pub sha256: Option<String>,
    /// `model = { max_tokens = …, timeout_s = … }`: the `model` import, with its budget
    /// per validator call.
    pub model: Option<ModelGrantFile>,
}

/// The model budget of a grant.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelGrantFile {
    /// Input plus output tokens per call.
    pub max_tokens: u64,
    /// Seconds of waiting on the model per call.
    pub timeout_s: u64,
}

/// The merged configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The provider used when none is named.
    pub default_provider: String,
    /// The mode used when none is named.
    pub default_mode: Mode,
    /// Agents running at once (default 4).
    pub max_concurrent: usize,
    /// State directory override from a file.
    pub state_dir: Option<PathBuf>,
    /// The dispatcher for `auto` (None: the built-in `heuristic`).
    pub dispatcher: Option<String>,
    /// Dispatch decisions kept.
    pub dispatch_history: u32,
    /// Whether the daemon fires scheduled jobs.
    pub scheduling: bool,
    /// The IANA zone cron jobs are read in by default.
    pub timezone: String,
    /// Agent quotas.
    pub quotas: Quotas,
    /// Providers by name (always includes `scripted`).
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Directory relative provider paths (scripts) resolve against, per provider.
    pub provider_dirs: BTreeMap<String, PathBuf>,
    /// Files that were read, lowest precedence first.
    pub sources: Vec<PathBuf>,
    /// Grants to plugin files, from the user's config only.
    pub plugin_grants: Vec<crate::plugin::UserGrant>,
}

impl Default for Config {
    fn default() -> Self {
        let mut providers = BTreeMap::new();
        providers.insert(
            DEFAULT_PROVIDER.to_owned(),
            ProviderConfig::default_scripted(),
        );
        Self {
            default_provider: DEFAULT_PROVIDER.to_owned(),
            default_mode: Mode::Auto,
            max_concurrent: 4,
            state_dir: None,
            dispatcher: None,
            dispatch_history: 200,
            scheduling: true,
            timezone: "UTC".to_owned(),
            quotas: Quotas::default(),
            providers,
            provider_dirs: BTreeMap::new(),
            sources: Vec::new(),
            plugin_grants: Vec::new(),
        }
    }
}

/// The user's config file path (`$XDG_CONFIG_HOME/crewbox/config.toml`, else `~/.config/...`).
pub fn user_config_path() -> Option<PathBuf> {
    xdg_dir("XDG_CONFIG_HOME", ".config").map(|d| d.join("crewbox").join("config.toml"))
}

/// `$VAR` if set and absolute, else `$HOME/<fallback>`.
pub fn xdg_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(fallback)))
}

impl Config {
    /// Loads user then repo config. `repo_root` is where `.crewbox/` is looked for.
    pub fn load(repo_root: &Path) -> Result<Self, ConfigError> {
        let mut files = Vec::new();
        if let Some(user) = user_config_path() {
            files.push(user);
        }
        files.push(repo_root.join(".crewbox").join("config.toml"));
        Self::load_files(&files)
    }

    /// Loads the given files in order (later wins); missing files are skipped.
    pub fn load_files(files: &[PathBuf]) -> Result<Self, ConfigError> {
        let mut cfg = Config::default();
        for path in files {
            let text = match std::fs::read_to_string(path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(ConfigError::Read {
                        path: path.clone(),
                        source,
                    });
                }
            };
            let file: ConfigFile = toml::from_str(&text).map_err(|e| ConfigError::Invalid {
                path: path.clone(),
                message: e.to_string().trim_end().to_owned(),
            })?;
            cfg.merge(file, path)?;
            cfg.sources.push(path.clone());
        }
        Ok(cfg)
    }

    fn merge(&mut self, f: ConfigFile, path: &Path) -> Result<(), ConfigError> {
        let origin = path.display().to_string();
        if let Some(p) = f.default_provider {
            self.default_provider = p;
        }
        if let Some(m) = f.default_mode {
            self.default_mode = m;
        }
        if let Some(n) = f.max_concurrent {
            if n == 0 || n > 256 {
                return Err(ConfigError::Value {
                    key: "max_concurrent".into(),
                    origin,
                    message: format!("{n} is outside 1..=256"),
                });
            }
            self.max_concurrent = n;
        }
        // Relative paths in a file resolve against that file's directory.
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        if let Some(d) = f.state_dir {
            self.state_dir = Some(if d.is_absolute() { d } else { dir.join(d) });
        }
        self.quotas.apply(&f.quotas);
        if let Some(d) = f.dispatcher {
            // A path is relative to the file; a bare name is a built-in.
            self.dispatcher = Some(if d.ends_with(".wasm") && !Path::new(&d).is_absolute() {
                dir.join(&d).display().to_string()
            } else {
                d
            });
        }
        if let Some(b) = f.scheduling {
            self.scheduling = b;
        }
        if let Some(tz) = f.timezone {
            if let Err(e) = crate::schedule::parse_time_zone(&tz) {
                return Err(ConfigError::Value {
                    key: "timezone".into(),
                    origin,
                    message: e.to_string(),
                });
            }
            self.timezone = tz;
        }
        if let Some(n) = f.dispatch_history {
            self.dispatch_history = n.max(1);
        }
        for (name, p) in f.providers {
            self.provider_dirs.insert(name.clone(), dir.clone());
            self.providers.insert(name, p);
        }
        if let Some(plugins) = f.plugins {
            // [plugin helper, issue 13] A grant widens what a plugin may do: only the
            // user's own config may hold one, never a repository's.
            if user_config_path().as_deref() != Some(path) {
                return Err(ConfigError::Value {
                    key: "plugins".into(),
                    origin,
                    message: "plugin grants widen access; only the user's own config may set them"
                        .into(),
                });
            }
            for (name, g) in plugins.grants {
                self.plugin_grants.retain(|u| u.name != name);
                self.plugin_grants.push(crate::plugin::UserGrant {
                    name,
                    path: if g.path.is_absolute() {
                        g.path
                    } else {
                        dir.join(g.path)
                    },
                    sha256: g.sha256,
                    model: g.model.map(|m| crate::plugin::ModelBudget {
                        tokens: m.max_tokens,
                        time: Duration::from_secs(m.timeout_s),
                    }),
                });
            }
        }
        Ok(())
    }
}

impl ProviderConfig {
    /// The built-in scripted provider (the embedded demo script).
    pub fn default_scripted() -> Self {
        ProviderConfig::Scripted(crate::provider::config::ScriptedConfig::default())
    }

    /// A scripted provider reading `script`.
    pub fn scripted_file(script: PathBuf) -> Self {
        ProviderConfig::Scripted(crate::provider::config::ScriptedConfig {
            script: Some(script),
            ..Default::default()
        })
    }

    /// Overrides the model (`--model`); scripted providers have none.
    pub fn set_model(&mut self, model: &str) {
        match self {
            ProviderConfig::Scripted(_) => {}
            ProviderConfig::Openai(c) => c.model = model.to_owned(),
            ProviderConfig::Anthropic(c) => c.model = model.to_owned(),
            ProviderConfig::Command(c) => c.model = Some(model.to_owned()),
        }
    }
}

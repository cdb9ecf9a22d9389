//! Configuration in two layers with different types:
//!
//! - the **user** file `$XDG_CONFIG_HOME/crewbox/config.toml` ([`user::ConfigFile`]):
//!   every setting; unknown keys are an error naming the key and the file;
//! - the **repository** file `.crewbox/config.toml` ([`repo::RepoFile`]): read only
//!   when the user trusts the repository, and then only the keys
//!   [`crate::trust::rules`] allows (selecting a provider by name, lowering quotas, a
//!   dispatcher, …); anything else in it is ignored with a warning.
//!
//! The result, [`Config`], records where every value came from ([`Source`]) and what
//! a repository asked for that was ignored or clamped ([`Ignored`]), which is what
//! `crewbox config` prints. Secrets only ever appear as environment variable names.

mod check;
pub mod effective;
pub mod nats;
pub mod provider;
pub mod quotas;
pub mod repo;
pub mod user;
pub mod workspace;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use effective::{Ignored, IgnoredAction, Source};
pub use nats::{ExecutorKind, NatsSettings};
pub use provider::ProviderChoiceError;
pub use quotas::Quotas;
pub use user::ConfigFile;
pub use workspace::WorkspaceSettings;

use crate::provider::config::ProviderConfig;
use crate::trust::read::{Confined, MAX_FILE_BYTES, ReadError, read_bounded};
use crate::trust::{REPO_CONFIG, Trust};
use crate::vocab::ModeChoice;

/// The most bytes read from the user's own config file.
const USER_FILE_CAP: u64 = 1024 * 1024;

/// Why configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file exists but cannot be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: ReadError,
    },
    /// A file is not valid TOML or has unknown keys or bad values.
    #[error("invalid config file {}: {message}", path.display())]
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

/// The configuration in force.
#[derive(Clone, Debug)]
pub struct Config {
    /// The provider used when none is named (None: chosen by the API keys set, see
    /// `config::provider`).
    pub default_provider: Option<String>,
    /// The mode used when none is named.
    pub default_mode: ModeChoice,
    /// Agents running at once (default 4).
    pub max_concurrent: usize,
    /// The state base from the user's config (each repository gets a directory in it).
    pub state_dir: Option<PathBuf>,
    /// The dispatcher for `auto` (None: the built-in `heuristic`).
    pub dispatcher: Option<String>,
    /// Dispatch decisions kept.
    pub dispatch_history: u32,
    /// Whether the daemon fires scheduled jobs.
    pub scheduling: bool,
    /// How often the daemon retries a transient dead letter, with backoff (0: never).
    pub retry_transient: u32,
    /// The IANA zone cron jobs are read in by default.
    pub timezone: String,
    /// Agent quotas.
    pub quotas: Quotas,
    /// Providers by name: the built-in `anthropic` and `openai`, and the user's.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Directory relative provider paths (scripts) resolve against, per provider.
    pub provider_dirs: BTreeMap<String, PathBuf>,
    /// Files that were read, lowest precedence first.
    pub sources: Vec<PathBuf>,
    /// Where each key set by a file came from (absent: the default).
    pub origins: BTreeMap<String, Source>,
    /// Repository settings that were not applied as written, and why.
    pub ignored: Vec<Ignored>,
    /// Whether the user trusts the repository.
    pub trust: Trust,
    /// The process sandbox of agents' commands (user config only).
    pub sandbox: crate::sandbox::SandboxConfig,
    /// Grants to plugin files (user config only).
    pub plugin_grants: Vec<crate::plugin::UserGrant>,
    /// `[packs] max_access`: the ceiling of imported packs in every trusted repository.
    pub pack_access: crate::vocab::Access,
    /// This repository's own pack ceiling from its trust record
    /// (`crewbox trust --pack-access`), which wins over `pack_access`.
    pub pack_grant: Option<crate::vocab::Access>,
    /// `[packs.models]`: the user's model aliases for packs (lowercase keys).
    pub pack_models: BTreeMap<String, String>,
    /// `executor`: where agents execute (user config or `--executor` only).
    pub executor: ExecutorKind,
    /// `[nats]`: the server and credentials (user config only).
    pub nats: NatsSettings,
    /// `[telemetry]` (user config only): where traces are exported.
    pub telemetry: user::TelemetryFile,
    /// `[workspace]`: the `.crewbox/` grant (user config only) and the limits of an
    /// agent's commit (a repository may lower them).
    pub workspace: WorkspaceSettings,
    /// `[mcp]`: the MCP servers agents may be granted (user config, plus the servers of
    /// a trusted repository's `.mcp.json` the user approved).
    pub mcp: crate::mcp::McpSettings,
    /// The servers of the repository's `.mcp.json`, each with its state.
    pub repo_mcp: Vec<crate::mcp::project::RepoServer>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_provider: None,
            default_mode: ModeChoice::Auto,
            max_concurrent: 4,
            state_dir: None,
            dispatcher: None,
            dispatch_history: 200,
            scheduling: true,
            retry_transient: 0,
            timezone: "UTC".to_owned(),
            quotas: Quotas::default(),
            providers: provider::builtin_providers()
                .into_iter()
                .map(|(n, p)| (n.to_owned(), p))
                .collect(),
            provider_dirs: BTreeMap::new(),
            sources: Vec::new(),
            origins: BTreeMap::new(),
            ignored: Vec::new(),
            trust: Trust::Untrusted,
            sandbox: crate::sandbox::SandboxConfig::default(),
            plugin_grants: Vec::new(),
            pack_access: crate::vocab::Access::ReadOnly,
            pack_grant: None,
            pack_models: BTreeMap::new(),
            executor: ExecutorKind::Local,
            nats: NatsSettings::default(),
            telemetry: user::TelemetryFile::default(),
            workspace: WorkspaceSettings::default(),
            mcp: crate::mcp::McpSettings::default(),
            repo_mcp: Vec::new(),
        }
    }
}

/// The user's config file path (`$XDG_CONFIG_HOME/crewbox/config.toml`, else `~/.config/...`).
pub fn user_config_path() -> Option<PathBuf> {
    crate::paths::user_config_dir().map(|d| d.join("config.toml"))
}

/// The most retries `retry_transient` may ask for (each is a model call or more).
const MAX_RETRY_TRANSIENT: u32 = 20;

fn range(key: &str, origin: &Path, n: usize) -> Result<usize, ConfigError> {
    if n == 0 || n > 256 {
        return Err(ConfigError::Value {
            key: key.into(),
            origin: origin.display().to_string(),
            message: format!("{n} is outside 1..=256"),
        });
    }
    Ok(n)
}

fn zone(origin: &Path, tz: &str) -> Result<(), ConfigError> {
    crate::schedule::parse_time_zone(tz)
        .map(|_| ())
        .map_err(|e| ConfigError::Value {
            key: "timezone".into(),
            origin: origin.display().to_string(),
            message: e.to_string(),
        })
}

impl Config {
    /// What the user allows the repository's teams: its trust and the provider names
    /// a team may select.
    pub fn team_policy(&self) -> crate::team::TeamPolicy {
        crate::team::TeamPolicy {
            trust: self.trust,
            providers: self.providers.keys().cloned().collect(),
            pack_access: self.effective_pack_access(),
        }
    }

    /// Refuses `[sandbox] read`/`write` paths that hold `base`, the state base in use
    /// (from `--state-dir`, which a file check cannot know).
    pub fn check_state_base(&self, base: &Path) -> Result<(), ConfigError> {
        let origin = user_config_path()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "your config".into());
        let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
        check::opened_paths(
            [
                ("sandbox.read".to_owned(), &self.sandbox.read[..]),
                ("sandbox.write".to_owned(), &self.sandbox.write[..]),
            ],
            &origin,
            &[("crewbox's state base", base)],
        )
    }

    /// Whether the user grants network to the commands of agents of `team` (or of no
    /// team): `[sandbox.team.NAME]` grants the team the user defined (their teams
    /// directory, `~/.claude/agents`) or crewbox's built-in one — never a repository's
    /// team that reuses the name, which gets only what `[sandbox] network` gives every
    /// agent.
    pub fn team_network(&self, team: Option<&crate::team::Team>) -> bool {
        match team {
            Some(t) if !matches!(t.source, crate::team::TeamSource::Repo(_)) => {
                self.sandbox.network_for(Some(&t.name))
            }
            Some(_) | None => self.sandbox.network_for(None),
        }
    }

    /// Why a `[sandbox.team.NAME]` network grant does not reach `team`: it is a
    /// repository's team with the name of a grant the user wrote for their own.
    pub fn withheld_team_network(&self, team: &crate::team::Team) -> Option<String> {
        let crate::team::TeamSource::Repo(path) = &team.source else {
            return None;
        };
        let granted = self.sandbox.network_for(Some(&team.name));
        if !granted || self.team_network(Some(team)) {
            return None;
        }
        let origin = match self.source_of("sandbox") {
            Source::User { path, .. } => format!(" in {}", path.display()),
            _ => String::new(),
        };
        Some(format!(
            "`[sandbox.team.{name}] network = true`{origin} grants the team `{name}` you \
             defined, not this repository's team of that name ({}): its agents' commands \
             have no network (`crewbox run --network` grants it for one run)",
            path.display(),
            name = team.name,
        ))
    }

    /// The ceiling of this repository's imported packs: its trust record's, else the
    /// user's `[packs] max_access`; read-only for an untrusted repository.
    pub fn effective_pack_access(&self) -> crate::vocab::Access {
        if !self.trust.is_trusted() {
            return crate::vocab::Access::ReadOnly;
        }
        self.pack_grant.unwrap_or(self.pack_access)
    }

    /// Loads the user's config, then — if the user trusts the repository at
    /// `repo_root` — the settings its `.crewbox/config.toml` may set.
    pub fn load(repo_root: &Path, trust: Trust) -> Result<Self, ConfigError> {
        Self::load_layers(user_config_path().as_deref(), repo_root, trust)
    }

    /// Loads the user's config alone (no repository layer).
    pub fn load_user() -> Result<Self, ConfigError> {
        let mut cfg = Config::default();
        if let Some(path) = user_config_path() {
            cfg.apply_user_file(&path)?;
        }
        Ok(cfg)
    }

    /// Loads `user` (a missing file is skipped) and the repository layer.
    pub fn load_layers(
        user: Option<&Path>,
        repo_root: &Path,
        trust: Trust,
    ) -> Result<Self, ConfigError> {
        let mut cfg = Config {
            trust,
            ..Config::default()
        };
        if let Some(path) = user {
            cfg.apply_user_file(path)?;
        }
        cfg.apply_repo(repo_root)?;
        Ok(cfg)
    }

    fn apply_user_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let read = read_bounded(path, USER_FILE_CAP).and_then(|b| b.into_text(path, USER_FILE_CAP));
        let text = match read {
            Ok(t) => t,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        let f: ConfigFile = toml::from_str(&text).map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            message: crate::text::toml_error(&e, &text),
        })?;
        let lines = user::key_lines(&text);
        check::user_file(&f, path, &lines)?;
        if let Some(m) = &f.mcp {
            self.mcp = check::mcp(m, path, &lines)?;
        }
        for key in lines.keys() {
            self.origins.insert(
                key.clone(),
                Source::User {
                    path: path.to_owned(),
                    line: lines.get(key).copied(),
                },
            );
        }
        // Relative paths in the file resolve against the file's directory.
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        if let Some(p) = f.default_provider {
            self.default_provider = Some(p);
        }
        if let Some(m) = f.default_mode {
            self.default_mode = m;
        }
        if let Some(n) = f.max_concurrent {
            self.max_concurrent = range("max_concurrent", path, n)?;
        }
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
        if let Some(n) = f.retry_transient {
            if n > MAX_RETRY_TRANSIENT {
                return Err(ConfigError::Value {
                    key: "retry_transient".into(),
                    origin: path.display().to_string(),
                    message: format!("{n} is outside 0..={MAX_RETRY_TRANSIENT}"),
                });
            }
            self.retry_transient = n;
        }
        if let Some(tz) = f.timezone {
            zone(path, &tz)?;
            self.timezone = tz;
        }
        if let Some(n) = f.dispatch_history {
            self.dispatch_history = n;
        }
        if let Some(t) = f.telemetry {
            self.telemetry = t;
        }
        if let Some(w) = &f.workspace {
            self.workspace.apply_user(w, &path.display().to_string())?;
        }
        // Commands see `.crewbox/` as the file tools do.
        self.sandbox.crewbox_writable = self.workspace.agents_write_crewbox;
        if let Some(a) = f.packs.max_access {
            self.pack_access = a;
        }
        for (alias, id) in f.packs.models {
            self.pack_models.insert(alias.to_ascii_lowercase(), id);
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        // What a `command` provider's CLI is shown besides the sandbox's view.
        let mut provider_reads = Vec::new();
        for (name, p) in &f.providers {
            if let ProviderConfig::Command(c) = p {
                let key = format!("providers.{name}.read");
                let paths = c
                    .read
                    .iter()
                    .map(|raw| crate::sandbox::config::expand_path(&key, raw, home.as_deref()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| ConfigError::Value {
                        key: e.key,
                        origin: path.display().to_string(),
                        message: e.message,
                    })?;
                provider_reads.push((key, paths));
            }
        }
        for (name, p) in f.providers {
            self.provider_dirs.insert(name.clone(), dir.clone());
            self.providers.insert(name, p);
        }
        if let Some(s) = f.sandbox {
            self.sandbox
                .apply(s, path, home.as_deref())
                .map_err(|e| ConfigError::Value {
                    key: format!("sandbox.{}", e.key),
                    origin: path.display().to_string(),
                    message: e.message,
                })?;
        }
        let lists = [
            ("sandbox.read".to_owned(), &self.sandbox.read[..]),
            ("sandbox.write".to_owned(), &self.sandbox.write[..]),
        ]
        .into_iter()
        .chain(provider_reads.iter().map(|(k, p)| (k.clone(), &p[..])));
        check::opened_paths(
            lists,
            &path.display().to_string(),
            &check::protected_paths(self.state_dir.as_deref()),
        )?;
        if let Some(plugins) = f.plugins {
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
                        time: std::time::Duration::from_secs(m.timeout_s),
                    }),
                });
            }
        }
        if let Some(e) = f.executor {
            self.executor = e;
        }
        if let Some(n) = f.nats {
            self.nats.apply(n, &dir);
        }
        self.sources.push(path.to_owned());
        Ok(())
    }

    /// The repository layer: nothing unless trusted; then only what the rules allow.
    fn apply_repo(&mut self, repo_root: &Path) -> Result<(), ConfigError> {
        let shown = repo_root.join(REPO_CONFIG);
        if !self.trust.is_trusted() {
            if shown.symlink_metadata().is_ok() {
                self.ignored.push(Ignored {
                    file: shown,
                    key: "*".into(),
                    line: None,
                    action: IgnoredAction::Ignored,
                    why: "the repository is not trusted, so none of its settings apply \
                          (run `crewbox trust` to apply the ones a repository may set)"
                        .into(),
                });
            }
            return Ok(());
        }
        let read_err = |source| ConfigError::Read {
            path: shown.clone(),
            source,
        };
        let confined = Confined::new(repo_root).map_err(|source| {
            read_err(ReadError::Io {
                path: repo_root.to_owned(),
                source,
            })
        })?;
        let text = match confined.read_text(Path::new(REPO_CONFIG), MAX_FILE_BYTES) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(read_err(e)),
        };
        let (file, ignored) = repo::parse(&text, &shown)?;
        self.ignored.extend(ignored);
        self.apply_repo_file(file, &shown, &confined)?;
        self.sources.push(shown);
        Ok(())
    }

    fn apply_repo_file(
        &mut self,
        f: repo::RepoFile,
        path: &Path,
        confined: &Confined,
    ) -> Result<(), ConfigError> {
        let at = |line: usize| Source::Repo {
            path: path.to_owned(),
            line: Some(line),
        };
        let note = |key: &str, line: usize, action: IgnoredAction, why: String| Ignored {
            file: path.to_owned(),
            key: key.to_owned(),
            line: Some(line),
            action,
            why,
        };
        if let Some((name, line)) = f.default_provider {
            if self.providers.contains_key(&name) {
                self.default_provider = Some(name);
                self.origins.insert("default_provider".into(), at(line));
            } else {
                let known: Vec<&str> = self.providers.keys().map(String::as_str).collect();
                self.ignored.push(note(
                    "default_provider",
                    line,
                    IgnoredAction::Ignored,
                    format!(
                        "`{name}` is not one of your providers ({}); a repository can only \
                         select a provider you configured",
                        known.join(", ")
                    ),
                ));
            }
        }
        if let Some((mode, line)) = f.default_mode {
            self.default_mode = mode;
            self.origins.insert("default_mode".into(), at(line));
        }
        if let Some((tz, line)) = f.timezone {
            zone(path, &tz)?;
            self.timezone = tz;
            self.origins.insert("timezone".into(), at(line));
        }
        if let Some((d, line)) = f.dispatcher {
            self.dispatcher = Some(if crate::plugin::discover::is_path_spec(&d) {
                // A path, with or without `.wasm`: relative to `.crewbox/`, and it must
                // stay inside the repository.
                let rel = Path::new(REPO_CONFIG)
                    .parent()
                    .unwrap_or(Path::new(""))
                    .join(&d);
                if Path::new(&d).is_absolute() {
                    return Err(ConfigError::Value {
                        key: "dispatcher".into(),
                        origin: format!("{}:{line}", path.display()),
                        message: ReadError::Absolute { path: d.into() }.to_string(),
                    });
                }
                let full = confined
                    .resolve_file(&rel)
                    .map_err(|e| ConfigError::Value {
                        key: "dispatcher".into(),
                        origin: format!("{}:{line}", path.display()),
                        message: e.to_string(),
                    })?;
                full.display().to_string()
            } else {
                d
            });
            self.origins.insert("dispatcher".into(), at(line));
        }
        let mut lower = |key: &str, have: &mut usize, asked: usize, line: usize, why: &str| {
            if asked <= *have {
                *have = asked;
                self.origins.insert(key.into(), at(line));
            } else {
                self.ignored.push(note(
                    key,
                    line,
                    IgnoredAction::Clamped {
                        asked: asked.to_string(),
                        kept: have.to_string(),
                    },
                    why.into(),
                ));
            }
        };
        let rule = |k: &str| crate::trust::rules::rule_for(k).why;
        if let Some((n, line)) = f.max_concurrent {
            let n = range("max_concurrent", path, n)?;
            let mut have = self.max_concurrent;
            lower("max_concurrent", &mut have, n, line, rule("max_concurrent"));
            self.max_concurrent = have;
        }
        if let Some((n, line)) = f.dispatch_history {
            if n == 0 {
                return Err(ConfigError::Value {
                    key: "dispatch_history".into(),
                    origin: format!("{}:{line}", path.display()),
                    message: "0 is outside the allowed range: at least 1 decision".into(),
                });
            }
            let mut have = self.dispatch_history as usize;
            lower(
                "dispatch_history",
                &mut have,
                n as usize,
                line,
                rule("dispatch_history"),
            );
            self.dispatch_history = have as u32;
        }
        let origin = path.display().to_string();
        let clamped = self.workspace.apply_lower(&f.workspace, &origin)?;
        for (key, line) in &f.workspace_lines {
            let full = format!("workspace.{key}");
            match clamped.iter().find(|c| c.key == *key) {
                Some(c) => self.ignored.push(note(
                    &full,
                    *line,
                    IgnoredAction::Clamped {
                        asked: c.asked.to_string(),
                        kept: c.kept.to_string(),
                    },
                    rule(&full).into(),
                )),
                None => {
                    self.origins.insert(full, at(*line));
                }
            }
        }
        check::quotas(&f.quotas, path, |k| {
            f.quota_lines.iter().find(|(q, _)| *q == k).map(|(_, l)| *l)
        })?;
        let clamped = self.quotas.apply_lower(&f.quotas);
        for (key, line) in &f.quota_lines {
            let full = format!("quotas.{key}");
            match clamped.iter().find(|c| c.key == *key) {
                Some(c) => self.ignored.push(note(
                    &full,
                    *line,
                    IgnoredAction::Clamped {
                        asked: c.asked.clone(),
                        kept: c.kept.clone(),
                    },
                    rule(&full).into(),
                )),
                None => {
                    self.origins.insert(full, at(*line));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(user: &str, repo: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let user_path = dir.path().join("user/config.toml");
        std::fs::create_dir_all(user_path.parent().unwrap()).unwrap();
        std::fs::write(&user_path, user).unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join(".crewbox")).unwrap();
        std::fs::write(root.join(REPO_CONFIG), repo).unwrap();
        let root = root.canonicalize().unwrap();
        (dir, user_path, root)
    }

    const USER: &str = "default_provider = \"claude\"\n[quotas]\nmax_tokens = 200000\n\
        [providers.claude]\nkind = \"anthropic\"\nmodel = \"m\"\nbase_url = \"http://good\"\n";
    const REPO: &str = "default_mode = \"crew\"\nstate_dir = \"/tmp/x\"\n[quotas]\n\
        max_tokens = 1000000000\nmax_turns = 3\n[providers.claude]\nkind = \"anthropic\"\n\
        model = \"m\"\nbase_url = \"http://evil\"\n";

    #[test]
    fn untrusted_repositories_set_nothing() {
        let (_d, user, root) = setup(USER, REPO);
        let cfg = Config::load_layers(Some(&user), &root, Trust::Untrusted).unwrap();
        assert_eq!(cfg.default_mode, ModeChoice::Auto);
        assert_eq!(cfg.quotas.max_turns, 30);
        assert_eq!(cfg.state_dir, None);
        let ProviderConfig::Anthropic(c) = &cfg.providers["claude"] else {
            panic!()
        };
        assert_eq!(c.base_url, "http://good");
        assert_eq!(cfg.ignored.len(), 1);
        assert_eq!(cfg.ignored[0].key, "*");
        assert_eq!(cfg.sources, vec![user]);
    }

    #[test]
    fn trusted_repositories_set_only_what_the_rules_allow() {
        let (_d, user, root) = setup(USER, REPO);
        let cfg = Config::load_layers(Some(&user), &root, Trust::Trusted).unwrap();
        assert_eq!(cfg.default_mode, ModeChoice::Mode(crate::vocab::Mode::Crew));
        assert_eq!(cfg.quotas.max_turns, 3);
        assert_eq!(cfg.quotas.max_tokens, 200_000, "clamped to the user's");
        assert_eq!(cfg.state_dir, None);
        let ProviderConfig::Anthropic(c) = &cfg.providers["claude"] else {
            panic!()
        };
        assert_eq!(c.base_url, "http://good");
        let keys: Vec<&str> = cfg.ignored.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["providers", "state_dir", "quotas.max_tokens"]);
        assert_eq!(
            cfg.source_of("default_mode"),
            Source::Repo {
                path: root.join(REPO_CONFIG),
                line: Some(1)
            }
        );
        assert_eq!(
            cfg.source_of("quotas.max_tokens"),
            Source::User {
                path: user.clone(),
                line: Some(3)
            }
        );
        assert_eq!(cfg.source_of("max_concurrent"), Source::Default);
    }

    #[test]
    fn a_repository_selects_only_providers_the_user_has() {
        let (_d, user, root) = setup(USER, "default_provider = \"mine\"\n");
        let cfg = Config::load_layers(Some(&user), &root, Trust::Trusted).unwrap();
        assert_eq!(cfg.default_provider.as_deref(), Some("claude"));
        assert!(cfg.ignored[0].why.contains("not one of your providers"));
        let (_d, user, root) = setup(USER, "default_provider = \"openai\"\n");
        let cfg = Config::load_layers(Some(&user), &root, Trust::Trusted).unwrap();
        assert_eq!(cfg.default_provider.as_deref(), Some("openai"));
    }

    #[test]
    fn a_repository_dispatcher_path_stays_inside() {
        let (d, user, root) = setup("", "dispatcher = \"../../outside.wasm\"\n");
        std::fs::write(d.path().join("outside.wasm"), b"\0asm").unwrap();
        let err = Config::load_layers(Some(&user), &root, Trust::Trusted).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("dispatcher") && msg.contains("config.toml:1"),
            "{msg}"
        );
        assert!(msg.contains("outside the repository"), "{msg}");
        // Whatever the suffix: an absolute path, or one climbing out, is refused.
        std::fs::write(d.path().join("outside"), b"\0asm").unwrap();
        for bad in [
            d.path().join("outside").display().to_string(),
            "../../outside".to_owned(),
        ] {
            std::fs::write(root.join(REPO_CONFIG), format!("dispatcher = \"{bad}\"\n")).unwrap();
            let msg = Config::load_layers(Some(&user), &root, Trust::Trusted)
                .unwrap_err()
                .to_string();
            assert!(
                msg.contains("absolute path") || msg.contains("outside the repository"),
                "{bad}: {msg}"
            );
        }
        std::fs::write(root.join(".crewbox/d.wasm"), b"\0asm").unwrap();
        std::fs::write(root.join(REPO_CONFIG), "dispatcher = \"d.wasm\"\n").unwrap();
        let cfg = Config::load_layers(Some(&user), &root, Trust::Trusted).unwrap();
        assert_eq!(
            cfg.dispatcher.as_deref(),
            Some(root.join(".crewbox/d.wasm").to_str().unwrap())
        );
    }

    #[test]
    fn a_repository_cannot_choose_the_executor_or_the_nats_server() {
        let user = "executor = \"local\"\n[nats]\nurl = \"nats://mine:4222\"\n";
        let repo = "executor = \"nats\"\n[nats]\nurl = \"nats://evil:4222\"\n\
                    creds_file = \"/tmp/evil.creds\"\nallow_remotes = [\"/\"]\n";
        let (_d, user, root) = setup(user, repo);
        let cfg = Config::load_layers(Some(&user), &root, Trust::Trusted).unwrap();
        assert_eq!(cfg.executor, ExecutorKind::Local);
        assert_eq!(cfg.nats.url.as_deref(), Some("nats://mine:4222"));
        assert_eq!(cfg.nats.creds_file, None);
        assert!(cfg.nats.allow_remotes.is_empty());
        let keys: Vec<&str> = cfg.ignored.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["executor", "nats"]);
        assert!(
            cfg.ignored.iter().all(|i| i.why.contains("operator")),
            "{:?}",
            cfg.ignored
        );
    }

    #[test]
    fn user_files_keep_unknown_keys_an_error() {
        let (_d, user, root) = setup("max_concurent = 3\n", "");
        let err = Config::load_layers(Some(&user), &root, Trust::Trusted)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("max_concurent") && err.contains("config.toml"),
            "{err}"
        );
    }
}

//! The `sandbox` key of the user's config file (never of a repository's: it widens access).
//!
//! ```toml
//! sandbox = "off"          # shorthand: no process sandbox (a warning on every run)
//!
//! [sandbox]                # or the table form
//! mode = "on"              # "on" (default) or "off"
//! network = false          # agent commands share the host's network
//! read = ["~/.nvm"]        # extra read-only paths
//! write = ["~/.cache/go"]  # extra writable paths
//! pass_env = ["GOFLAGS"]   # extra variables passed to commands (never a key variable)
//! max_processes = 1024     # processes at once per command (0: unbounded)
//! max_file_size_mb = 4096  # largest file a command writes (0: unbounded)
//! cpu_time_s = 1200        # CPU seconds per process (0: unbounded)
//! [sandbox.team.backend]
//! network = true           # network for one team's agents
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::policy::Limits;

/// Whether agent commands run sandboxed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Every process an agent starts runs in the sandbox; where the kernel cannot
    /// provide it, the process is refused.
    #[default]
    On,
    /// No process sandbox (the environment is still built from the allowlist).
    Off,
}

/// `[sandbox.team.NAME]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamSandboxFile {
    /// Network access for this team's agents.
    pub network: Option<bool>,
}

/// `[sandbox]` as written; every key is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxFile {
    /// `on` or `off`.
    pub mode: Option<SandboxMode>,
    /// Network access for every agent's commands.
    pub network: Option<bool>,
    /// Extra read-only paths (absolute or `~/…`).
    #[serde(default)]
    pub read: Vec<String>,
    /// Extra writable paths (absolute or `~/…`).
    #[serde(default)]
    pub write: Vec<String>,
    /// Extra environment variables passed to commands.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Processes at once per command.
    pub max_processes: Option<u32>,
    /// Largest file a command may write, MiB.
    pub max_file_size_mb: Option<u64>,
    /// CPU seconds per process.
    pub cpu_time_s: Option<u64>,
    /// Per-team settings.
    #[serde(default)]
    pub team: BTreeMap<String, TeamSandboxFile>,
}

/// The `sandbox` key: `"on"`/`"off"` or a `[sandbox]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SandboxSetting {
    /// `sandbox = "off"` (or `"on"`).
    Mode(SandboxMode),
    /// `[sandbox]`.
    Table(SandboxFile),
}

impl<'de> Deserialize<'de> for SandboxSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SandboxSetting;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"on\", \"off\" or a [sandbox] table")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                match s {
                    "on" => Ok(SandboxSetting::Mode(SandboxMode::On)),
                    "off" => Ok(SandboxSetting::Mode(SandboxMode::Off)),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                SandboxFile::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(SandboxSetting::Table)
            }
        }
        d.deserialize_any(V)
    }
}

/// The resolved sandbox settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxConfig {
    /// On or off.
    pub mode: SandboxMode,
    /// Network for every agent.
    pub network: bool,
    /// Per-team network grants.
    pub team_network: BTreeMap<String, bool>,
    /// Extra read-only paths (absolute).
    pub read: Vec<PathBuf>,
    /// Extra writable paths (absolute).
    pub write: Vec<PathBuf>,
    /// Extra variables passed to commands.
    pub pass_env: Vec<String>,
    /// Resource limits.
    pub limits: Limits,
    /// The file that set `mode` last (named in warnings and errors).
    pub origin: Option<PathBuf>,
    /// Whether commands may change the workspace's `.crewbox/` (the user's
    /// `[workspace] agents_write_crewbox`, not a `[sandbox]` key).
    pub crewbox_writable: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            mode: SandboxMode::On,
            network: false,
            team_network: BTreeMap::new(),
            read: Vec::new(),
            write: Vec::new(),
            pass_env: Vec::new(),
            limits: Limits::default(),
            origin: None,
            crewbox_writable: false,
        }
    }
}

/// A bad value in `[sandbox]`.
#[derive(Debug, thiserror::Error)]
#[error("`sandbox.{key}`: {message}")]
pub struct SandboxConfigError {
    /// The key.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// `~/x` against `home`, or an absolute path; anything else is an error.
pub fn expand_path(
    key: &str,
    raw: &str,
    home: Option<&Path>,
) -> Result<PathBuf, SandboxConfigError> {
    let err = |message: String| SandboxConfigError {
        key: key.into(),
        message,
    };
    let path = match raw.strip_prefix("~/") {
        Some(rest) => home
            .ok_or_else(|| err(format!("`{raw}` needs $HOME, which is not set")))?
            .join(rest),
        None => PathBuf::from(raw),
    };
    if !path.is_absolute() {
        return Err(err(format!(
            "`{raw}` must be an absolute path or start with `~/`"
        )));
    }
    Ok(path)
}

fn env_name_ok(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl SandboxConfig {
    /// Applies one file's `sandbox` key (later files win key by key; lists add up).
    pub fn apply(
        &mut self,
        setting: SandboxSetting,
        origin: &Path,
        home: Option<&Path>,
    ) -> Result<(), SandboxConfigError> {
        let f = match setting {
            SandboxSetting::Mode(mode) => SandboxFile {
                mode: Some(mode),
                ..Default::default()
            },
            SandboxSetting::Table(f) => f,
        };
        if let Some(mode) = f.mode {
            self.mode = mode;
            self.origin = Some(origin.to_owned());
        }
        if let Some(n) = f.network {
            self.network = n;
        }
        for raw in &f.read {
            self.read.push(expand_path("read", raw, home)?);
        }
        for raw in &f.write {
            self.write.push(expand_path("write", raw, home)?);
        }
        for name in f.pass_env {
            if !env_name_ok(&name) {
                return Err(SandboxConfigError {
                    key: "pass_env".into(),
                    message: format!("`{name}` is not an environment variable name"),
                });
            }
            self.pass_env.push(name);
        }
        if let Some(n) = f.max_processes {
            self.limits.max_processes = n;
        }
        if let Some(mb) = f.max_file_size_mb {
            self.limits.max_file_size = mb.saturating_mul(1 << 20);
        }
        if let Some(s) = f.cpu_time_s {
            self.limits.cpu_time_s = s;
        }
        for (team, t) in f.team {
            if let Some(n) = t.network {
                self.team_network.insert(team, n);
            }
        }
        Ok(())
    }

    /// Whether agents of `team` (or of no team) get network access.
    pub fn network_for(&self, team: Option<&str>) -> bool {
        team.and_then(|t| self.team_network.get(t).copied())
            .unwrap_or(self.network)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct File {
        sandbox: SandboxSetting,
    }

    fn parse(text: &str) -> Result<SandboxSetting, String> {
        toml::from_str::<File>(text)
            .map(|f| f.sandbox)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn shorthand_and_table() {
        assert_eq!(
            parse("sandbox = \"off\"").unwrap(),
            SandboxSetting::Mode(SandboxMode::Off)
        );
        let e = parse("sandbox = \"maybe\"").unwrap_err();
        assert!(e.contains("\"on\", \"off\""), "{e}");
        let e = parse("[sandbox]\nnetwrok = true\n").unwrap_err();
        assert!(e.contains("unknown field `netwrok`"), "{e}");

        let mut cfg = SandboxConfig::default();
        let setting = parse(
            "[sandbox]\nnetwork = false\nread = [\"~/.nvm\", \"/opt/x\"]\npass_env = [\"GOFLAGS\"]\n\
             max_processes = 64\nmax_file_size_mb = 2\n[sandbox.team.backend]\nnetwork = true\n",
        )
        .unwrap();
        cfg.apply(setting, Path::new("/c/config.toml"), Some(Path::new("/h")))
            .unwrap();
        assert_eq!(cfg.read, [PathBuf::from("/h/.nvm"), "/opt/x".into()]);
        assert_eq!(cfg.pass_env, ["GOFLAGS"]);
        assert_eq!(cfg.limits.max_processes, 64);
        assert_eq!(cfg.limits.max_file_size, 2 << 20);
        assert!(cfg.network_for(Some("backend")));
        assert!(!cfg.network_for(Some("frontend")) && !cfg.network_for(None));
        assert_eq!(cfg.mode, SandboxMode::On);
    }

    #[test]
    fn bad_values_name_the_key() {
        let mut cfg = SandboxConfig::default();
        let e = cfg
            .apply(
                parse("[sandbox]\nwrite = [\"relative/dir\"]\n").unwrap(),
                Path::new("/c"),
                None,
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sandbox.write") && e.contains("relative/dir"),
            "{e}"
        );
        let e = cfg
            .apply(
                parse("[sandbox]\npass_env = [\"A=B\"]\n").unwrap(),
                Path::new("/c"),
                None,
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("sandbox.pass_env"), "{e}");
    }
}

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
//! memory_mb = 4096         # address space per process, MiB (0: unbounded)
//! shm_mb = 64              # size of /dev/shm, MiB (at most memory_mb)
//! [sandbox.team.backend]
//! network = true           # network for one team's agents
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::policy::Limits;

/// The smallest memory cap (`memory_mb`) a command can start under, MiB.
const MIN_MEMORY_MB: u64 = 64;
/// The largest memory or `/dev/shm` size, MiB (16 TiB).
const MAX_MEMORY_MB: u64 = 16 << 20;

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
    /// Address space per process, MiB.
    pub memory_mb: Option<u64>,
    /// The size of `/dev/shm`, MiB.
    pub shm_mb: Option<u64>,
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
        let range = |key: &str, mb: u64, min: u64| {
            if mb < min || mb > MAX_MEMORY_MB {
                Err(SandboxConfigError {
                    key: key.into(),
                    message: format!(
                        "{mb} is outside the allowed range: {}{min}..={MAX_MEMORY_MB} MiB",
                        if min > 0 { "" } else { "0 (unbounded) or " }
                    ),
                })
            } else {
                Ok(mb << 20)
            }
        };
        if let Some(mb) = f.memory_mb {
            // Below 64 MiB not even a shell and Python start.
            self.limits.memory = if mb == 0 {
                0
            } else {
                range("memory_mb", mb, MIN_MEMORY_MB)?
            };
        }
        if let Some(mb) = f.shm_mb {
            self.limits.shm_size = range("shm_mb", mb, 1)?;
        }
        if self.limits.memory > 0 && self.limits.shm_size > self.limits.memory {
            return Err(SandboxConfigError {
                key: "shm_mb".into(),
                message: format!(
                    "/dev/shm ({} MiB) may not be larger than the memory cap memory_mb ({} MiB)",
                    self.limits.shm_size >> 20,
                    self.limits.memory >> 20
                ),
            });
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
    fn memory_and_shm_are_validated() {
        let apply = |text: &str| {
            let mut cfg = SandboxConfig::default();
            cfg.apply(parse(text).unwrap(), Path::new("/c/config.toml"), None)
                .map(|()| cfg.limits)
        };
        let l = apply("[sandbox]\nmemory_mb = 512\nshm_mb = 16\n").unwrap();
        assert_eq!((l.memory, l.shm_size), (512 << 20, 16 << 20));
        let l = apply("[sandbox]\nmemory_mb = 0\n").unwrap();
        assert_eq!((l.memory, l.shm_size), (0, 64 << 20));
        let l = apply("[sandbox]\n").unwrap();
        assert_eq!((l.memory, l.shm_size), (4096 << 20, 64 << 20));
        for (text, key, needle) in [
            ("memory_mb = 10", "memory_mb", "64..="),
            (
                "memory_mb = 99999999999",
                "memory_mb",
                "outside the allowed range",
            ),
            ("shm_mb = 0", "shm_mb", "1..="),
            (
                "memory_mb = 128\nshm_mb = 256",
                "shm_mb",
                "may not be larger",
            ),
        ] {
            let e = apply(&format!("[sandbox]\n{text}\n")).unwrap_err();
            assert_eq!(e.key, key, "{text}");
            assert!(e.message.contains(needle), "{text}: {}", e.message);
        }
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

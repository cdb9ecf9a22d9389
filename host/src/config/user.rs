//! The user's own configuration file, `$XDG_CONFIG_HOME/crewbox/config.toml`: every
//! setting, unknown keys an error. This is the only place that defines providers,
//! the state directory and anything else that widens access or moves secrets.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::quotas::QuotaFile;
use crate::provider::config::ProviderConfig;
use crate::sandbox::SandboxSetting;
use crate::vocab::ModeChoice;

/// The user's config file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The provider used when `--provider` is not given.
    pub default_provider: Option<String>,
    /// The mode used when `--mode` is not given.
    pub default_mode: Option<ModeChoice>,
    /// Agents running at once.
    pub max_concurrent: Option<usize>,
    /// The state base: each repository's state lives in `<state_dir>/<repo-id>/`
    /// (default `$XDG_STATE_HOME/crewbox`).
    pub state_dir: Option<PathBuf>,
    /// The dispatcher plugin for `auto` (a built-in name or a `.wasm` path).
    pub dispatcher: Option<String>,
    /// How many dispatch decisions to keep (default 200).
    pub dispatch_history: Option<u32>,
    /// Whether `crewbox daemon` fires scheduled jobs (default true).
    pub scheduling: Option<bool>,
    /// How often `crewbox daemon` retries a transient dead letter (default 0: never).
    pub retry_transient: Option<u32>,
    /// The IANA zone cron jobs are read in when `schedule add` names none (default UTC).
    pub timezone: Option<String>,
    /// Agent quotas.
    #[serde(default)]
    pub quotas: QuotaFile,
    /// Model providers by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    /// The process sandbox of agents' commands.
    pub sandbox: Option<SandboxSetting>,
    /// Plugin grants (they widen access, so only the user's own config has them).
    pub plugins: Option<PluginsFile>,
    /// What imported role packs (Squad, Claude Code subagents) may do.
    #[serde(default)]
    pub packs: PackFile,
    /// Where agents execute: `local` (default) or `nats`.
    pub executor: Option<super::nats::ExecutorKind>,
    /// The NATS server and credentials for `executor = "nats"` and `crewbox worker`.
    pub nats: Option<super::nats::NatsFile>,
    /// Where traces go (OTLP); user-only, since it decides where run data is sent.
    pub telemetry: Option<TelemetryFile>,
    /// What agents may change in their workspace and how much one commit may take.
    pub workspace: Option<super::workspace::WorkspaceFile>,
    /// `[mcp]`: MCP servers agents may be granted, and the default grant (user-only:
    /// a server runs programs and holds credentials).
    pub mcp: Option<crate::mcp::config::McpFile>,
}

/// `[telemetry]` of the user's config: OTLP trace export (off unless an endpoint is
/// set here or in `OTEL_EXPORTER_OTLP_*`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryFile {
    /// The collector's base URL (`http://127.0.0.1:4318`); traces go to `/v1/traces`
    /// beneath it, as with `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub otlp_endpoint: Option<String>,
    /// The environment variable holding the export's headers (`k=v,k2=v2`, the
    /// `OTEL_EXPORTER_OTLP_HEADERS` format): a header value never sits in a file.
    pub otlp_headers_env: Option<String>,
    /// The `service.name` of the spans (default `crewbox`).
    pub service_name: Option<String>,
}

impl TelemetryFile {
    /// The telemetry settings of the user's own config file (never a repository's);
    /// the defaults (no export) when it does not load — the command that reads the
    /// config reports why. Blocking.
    pub fn of_user() -> Self {
        super::Config::load_user()
            .map(|c| c.telemetry)
            .unwrap_or_default()
    }
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

/// `[packs]`: the ceiling of imported repository packs.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackFile {
    /// The most a member of a trusted repository's Squad or Claude pack may do
    /// (`read-only`, the default, or `full`).
    pub max_access: Option<crate::vocab::Access>,
    /// Model aliases packs use (`sonnet = "claude-sonnet-4-5"`), over the built-in ones.
    #[serde(default)]
    pub models: BTreeMap<String, String>,
}

/// The line (1-based) of byte offset `at` in `text`.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The line each key is written on: top-level keys, and one level into tables
/// (`quotas.max_tokens`, `providers.claude`). Empty when the text does not parse.
pub(crate) fn key_lines(text: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let Ok(doc) = toml::de::DeTable::parse(text) else {
        return out;
    };
    for (key, value) in doc.get_ref() {
        out.insert(key.get_ref().to_string(), line_of(text, key.span().start));
        if let toml::de::DeValue::Table(t) = value.get_ref() {
            for (sub, _) in t {
                out.insert(
                    format!("{}.{}", key.get_ref(), sub.get_ref()),
                    line_of(text, sub.span().start),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_keys_and_table_keys() {
        let text = "default_mode = \"crew\"\n\n[quotas]\nmax_tokens = 5\n[providers.claude]\nkind = \"anthropic\"\n";
        let lines = key_lines(text);
        assert_eq!(lines["default_mode"], 1);
        assert_eq!(lines["quotas.max_tokens"], 4);
        assert_eq!(lines["providers.claude"], 5);
        assert!(key_lines("x = [").is_empty());
    }
}

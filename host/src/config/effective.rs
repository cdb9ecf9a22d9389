//! Where each setting in force came from, and what a repository asked for that was
//! not applied: what `crewbox config` prints.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Value, json};

use super::Config;
use crate::provider::config::ProviderConfig;

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Source {
    /// crewbox's documented default.
    Default,
    /// The user's config file.
    User {
        /// The file.
        #[serde(serialize_with = "crate::paths::serde_path::serialize")]
        path: PathBuf,
        /// The line the key is on.
        line: Option<usize>,
    },
    /// The repository's config file (trusted repositories only).
    Repo {
        /// The file.
        #[serde(serialize_with = "crate::paths::serde_path::serialize")]
        path: PathBuf,
        /// The line the key is on.
        line: Option<usize>,
    },
    /// An environment variable.
    Env {
        /// Its name.
        var: String,
    },
    /// A command-line option.
    Cli {
        /// The option.
        flag: String,
    },
    /// The user's trust record for this repository (`crewbox trust --pack-access`).
    Trust,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at =
            |f: &mut std::fmt::Formatter<'_>, who: &str, path: &PathBuf, line: &Option<usize>| {
                match line {
                    Some(l) => write!(f, "{who} {}:{l}", path.display()),
                    None => write!(f, "{who} {}", path.display()),
                }
            };
        match self {
            Self::Default => f.write_str("default"),
            Self::User { path, line } => at(f, "user", path, line),
            Self::Repo { path, line } => at(f, "repo", path, line),
            Self::Env { var } => write!(f, "environment {var}"),
            Self::Cli { flag } => write!(f, "command line {flag}"),
            Self::Trust => f.write_str("trust record (crewbox trust --pack-access)"),
        }
    }
}

/// What happened to a repository setting that was not applied as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IgnoredAction {
    /// Not applied at all.
    Ignored,
    /// Applied only up to the user's value.
    Clamped {
        /// What the repository wrote.
        asked: String,
        /// What stays in force.
        kept: String,
    },
}

/// A repository setting that was ignored or clamped, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ignored {
    /// The repository file.
    #[serde(serialize_with = "crate::paths::serde_path::serialize")]
    pub file: PathBuf,
    /// The key (`*` for the whole file).
    pub key: String,
    /// Its line, when known.
    pub line: Option<usize>,
    /// Ignored or clamped.
    pub action: IgnoredAction,
    /// The rule, in one line.
    pub why: String,
}

impl std::fmt::Display for Ignored {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        match &self.action {
            IgnoredAction::Ignored if self.key == "*" => write!(f, ": ignored: {}", self.why),
            // The key is the repository's own text.
            IgnoredAction::Ignored => write!(
                f,
                ": `{}` is ignored: {}",
                crate::text::escape(&self.key),
                self.why
            ),
            IgnoredAction::Clamped { asked, kept } => write!(
                f,
                ": `{} = {asked}` is clamped to {kept}: {}",
                crate::text::escape(&self.key),
                self.why
            ),
        }
    }
}

/// A provider as `crewbox config` shows it: kind and where it sends requests, never a
/// key (configs only hold the names of key variables anyway).
pub fn provider_summary(p: &ProviderConfig) -> Value {
    match p {
        ProviderConfig::Scripted(c) => json!({
            "kind": "scripted",
            "script": c.script.as_deref().map(crate::paths::serde_path::json),
        }),
        ProviderConfig::Openai(c) => {
            let mut v = json!({
                "kind": "openai", "base_url": c.base_url, "model": c.model,
                "api_key_env": c.api_key_env, "stream": c.stream,
                "token_limit_field": c.token_limit_field.key(),
            });
            http_settings(
                &mut v,
                &HttpSettings {
                    timeouts: [
                        c.timeout_s,
                        c.connect_timeout_s,
                        c.stall_timeout_s,
                        c.first_byte_timeout_s,
                    ],
                    retries: (c.max_retries, c.retry_base_ms),
                    max_output_tokens: c.max_output_tokens,
                    temperature: c.temperature,
                    stop: &c.stop,
                    max_concurrent: c.max_concurrent,
                    context_tokens: c.context_tokens,
                },
            );
            v
        }
        ProviderConfig::Anthropic(c) => {
            let mut v = json!({
                "kind": "anthropic", "base_url": c.base_url, "model": c.model,
                "api_key_env": c.api_key_env, "stream": c.stream,
                "thinking_budget_tokens": c.thinking_budget_tokens,
            });
            http_settings(
                &mut v,
                &HttpSettings {
                    timeouts: [
                        c.timeout_s,
                        c.connect_timeout_s,
                        c.stall_timeout_s,
                        c.first_byte_timeout_s,
                    ],
                    retries: (c.max_retries, c.retry_base_ms),
                    max_output_tokens: c.max_output_tokens,
                    temperature: c.temperature,
                    stop: &c.stop,
                    max_concurrent: c.max_concurrent,
                    context_tokens: c.context_tokens,
                },
            );
            v
        }
        ProviderConfig::Command(c) => json!({
            "kind": "command", "command": c.command, "model": c.model,
        }),
        ProviderConfig::Replay(c) => json!({
            "kind": "replay", "run": c.run,
            "cassette": c.cassette.as_deref().map(crate::paths::serde_path::json),
        }),
    }
}

/// The settings the two HTTP provider kinds share, as written (`None`: the default).
struct HttpSettings<'a> {
    /// `timeout_s`, `connect_timeout_s`, `stall_timeout_s`, `first_byte_timeout_s`.
    timeouts: [Option<f64>; 4],
    /// `max_retries`, `retry_base_ms`.
    retries: (Option<u32>, Option<u64>),
    max_output_tokens: Option<u32>,
    temperature: Option<f64>,
    stop: &'a [String],
    max_concurrent: Option<usize>,
    context_tokens: Option<u64>,
}

/// Adds the shared HTTP settings to a provider's summary, defaults filled in.
fn http_settings(v: &mut Value, s: &HttpSettings<'_>) {
    let [overall, connect, stall, first] = s.timeouts;
    let stall = stall.unwrap_or(60.0);
    v["timeout_s"] = json!(overall.unwrap_or(600.0));
    v["connect_timeout_s"] = json!(connect.unwrap_or(10.0));
    v["stall_timeout_s"] = json!(stall);
    v["first_byte_timeout_s"] = json!(first.unwrap_or(stall));
    v["max_retries"] = json!(s.retries.0.unwrap_or(3));
    v["retry_base_ms"] = json!(
        s.retries
            .1
            .unwrap_or(crate::provider::RetryPolicy::default().base.as_millis() as u64)
    );
    v["max_output_tokens"] = json!(s.max_output_tokens);
    v["temperature"] = json!(s.temperature);
    v["stop"] = json!(s.stop);
    v["max_concurrent"] = json!(s.max_concurrent);
    v["context_tokens"] = json!(s.context_tokens);
}

/// One setting in force: its key, value and source.
#[derive(Clone, Debug, Serialize)]
pub struct Setting {
    /// The key (dotted for tables).
    pub key: String,
    /// The value.
    pub value: Value,
    /// Where it came from.
    pub source: Source,
}

impl Config {
    /// The source of `key`, `Default` when nothing set it.
    pub fn source_of(&self, key: &str) -> Source {
        if key == "packs.max_access" && self.trust.is_trusted() && self.pack_grant.is_some() {
            return Source::Trust;
        }
        self.origins.get(key).cloned().unwrap_or(Source::Default)
    }

    /// Every setting in force with its source, in a stable order.
    pub fn settings(&self) -> Vec<Setting> {
        let q = &self.quotas;
        let mut values: Vec<(String, Value)> = vec![
            ("default_provider".into(), json!(self.default_provider)),
            ("default_mode".into(), json!(self.default_mode)),
            ("max_concurrent".into(), json!(self.max_concurrent)),
            (
                "state_dir".into(),
                json!(
                    self.state_dir
                        .as_deref()
                        .map(crate::paths::serde_path::json)
                ),
            ),
            (
                "dispatcher".into(),
                json!(self.dispatcher.as_deref().unwrap_or("heuristic")),
            ),
            ("dispatch_history".into(), json!(self.dispatch_history)),
            ("scheduling".into(), json!(self.scheduling)),
            ("retry_transient".into(), json!(self.retry_transient)),
            ("timezone".into(), json!(self.timezone)),
            ("quotas.max_turns".into(), json!(q.max_turns)),
            ("quotas.grace_turns".into(), json!(q.grace_turns)),
            ("quotas.max_tokens".into(), json!(q.max_tokens)),
            ("quotas.wall_time_s".into(), json!(q.wall_time.as_secs())),
            ("quotas.max_tool_calls".into(), json!(q.max_tool_calls)),
            ("quotas.max_cost".into(), json!(q.max_cost)),
            (
                "quotas.model_timeout_s".into(),
                json!(q.model_timeout.as_secs()),
            ),
            (
                "quotas.max_output_tokens".into(),
                json!(q.max_output_tokens),
            ),
            ("quotas.context_tokens".into(), json!(q.context_tokens)),
            ("quotas.keep_turns".into(), json!(q.keep_turns)),
            ("quotas.max_depth".into(), json!(q.max_depth)),
            ("quotas.max_children".into(), json!(q.max_children)),
            (
                "quotas.max_children_per_run".into(),
                json!(q.max_children_per_run),
            ),
            (
                "packs.max_access".into(),
                json!(self.effective_pack_access()),
            ),
            (
                "workspace.agents_write_crewbox".into(),
                json!(self.workspace.agents_write_crewbox),
            ),
            (
                "workspace.max_file_bytes".into(),
                json!(self.workspace.limits.max_file_bytes),
            ),
            (
                "workspace.max_files".into(),
                json!(self.workspace.limits.max_files),
            ),
            (
                "workspace.max_total_bytes".into(),
                json!(self.workspace.limits.max_total_bytes),
            ),
        ];
        for (name, p) in &self.providers {
            values.push((format!("providers.{name}"), provider_summary(p)));
        }
        values
            .into_iter()
            .map(|(key, value)| Setting {
                source: self.source_of(&key),
                key,
                value,
            })
            .collect()
    }
}

//! `[providers.NAME]` tables and turning them into wrapped providers.
//!
//! Every provider built here is `retry(breaker(provider))`: each attempt passes through
//! the circuit breaker (so five failing attempts open it), and an open circuit is not
//! retried.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::anthropic::{AnthropicOptions, AnthropicProvider};
use super::breaker::Breakers;
use super::command::{CommandOptions, CommandProvider, PromptVia};
use super::http::HttpTimeouts;
use super::limit::ConcurrencyLimit;
use super::openai::{OpenAiOptions, OpenAiProvider, TokenLimitField};
use super::retry::{RetryPolicy, RetryProvider};
use super::scripted::ScriptedProvider;
use super::{ModelLimits, Provider, ProviderError, Usage};

/// Prices in currency units per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    /// Per million input tokens.
    pub input_per_mtok: f64,
    /// Per million output tokens.
    pub output_per_mtok: f64,
}

impl Prices {
    /// The cost of `usage`.
    pub fn cost(&self, usage: Usage) -> f64 {
        (usage.input as f64 * self.input_per_mtok + usage.output as f64 * self.output_per_mtok)
            / 1e6
    }
}

/// One `[providers.NAME]` table, tagged by `kind`. Unknown keys are errors.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ProviderConfig {
    /// Replies from a script file.
    Scripted(ScriptedConfig),
    /// An OpenAI-compatible Chat Completions server.
    Openai(OpenaiConfig),
    /// The Anthropic Messages API.
    Anthropic(AnthropicConfig),
    /// An external agent CLI.
    Command(CommandConfig),
    /// Answers from a recorded run.
    Replay(ReplayConfig),
}

/// `kind = "replay"`: exactly one of `run` and `cassette`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayConfig {
    /// A run of this repository's store (`r-…`) whose recording answers.
    pub run: Option<String>,
    /// A cassette file (`crewbox export RUN --cassette FILE`); relative paths resolve
    /// against the config's directory.
    pub cassette: Option<PathBuf>,
}

/// Where a replay provider's recording is.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplaySource<'a> {
    /// A run of this store.
    Run(&'a str),
    /// A cassette file.
    Cassette(&'a Path),
}

impl ReplayConfig {
    /// Where the recording is; an error unless exactly one of `run` and `cassette`.
    pub fn source(&self, name: &str) -> Result<ReplaySource<'_>, ProviderError> {
        match (&self.run, &self.cassette) {
            (Some(run), None) => Ok(ReplaySource::Run(run)),
            (None, Some(path)) => Ok(ReplaySource::Cassette(path)),
            _ => Err(ProviderError::Config(format!(
                "provider `{name}`: a replay provider needs exactly one of `run` (a run id) and `cassette` (a file)"
            ))),
        }
    }
}

/// `kind = "scripted"`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedConfig {
    /// The script; relative paths resolve against the config's directory. `None` =
    /// the embedded demo script.
    pub script: Option<PathBuf>,
    /// Price per million input tokens (for cost budgets of demo runs).
    pub price_input_per_mtok: Option<f64>,
    /// Price per million output tokens.
    pub price_output_per_mtok: Option<f64>,
}

/// `kind = "openai"`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenaiConfig {
    /// e.g. `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// Environment variable holding the API key; none = no `Authorization` header.
    pub api_key_env: Option<String>,
    /// Overall limit of one attempt, seconds (default 600).
    pub timeout_s: Option<f64>,
    /// Connect limit, seconds (default 10).
    pub connect_timeout_s: Option<f64>,
    /// Longest silence in a stream, seconds (default 60).
    pub stall_timeout_s: Option<f64>,
    /// Retries after the first attempt (default 3).
    pub max_retries: Option<u32>,
    /// First backoff ceiling, milliseconds (default 500; doubles per retry).
    pub retry_base_ms: Option<u64>,
    /// Stream replies (default true).
    #[serde(default = "yes")]
    pub stream: bool,
    /// The request field for the output token limit: `max_completion_tokens` (default,
    /// OpenAI) or `max_tokens` (servers that only know the older field).
    #[serde(default)]
    pub token_limit_field: TokenLimitField,
    /// The most bytes of one reply read before the call fails (default 8 MiB).
    pub max_reply_bytes: Option<u64>,
    /// Output cap of one agent turn, overriding `quotas.max_output_tokens` for this
    /// provider.
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature sent with every request.
    pub temperature: Option<f64>,
    /// Stop sequences sent with every request (at most 4).
    #[serde(default)]
    pub stop: Vec<String>,
    /// Calls of this provider in flight at once (default: unlimited; `1` for a local
    /// server with one slot).
    pub max_concurrent: Option<usize>,
    /// Longest wait for a streamed reply's response head, seconds (default: the stall
    /// limit); a busy local server sends none until a slot frees.
    pub first_byte_timeout_s: Option<f64>,
    /// The model's context window in tokens: compaction keeps every request inside it
    /// (llama.cpp's `/props` publishes it as `n_ctx`).
    pub context_tokens: Option<u64>,
    /// Price per million input tokens.
    pub price_input_per_mtok: Option<f64>,
    /// Price per million output tokens.
    pub price_output_per_mtok: Option<f64>,
}

/// `kind = "anthropic"`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnthropicConfig {
    /// Default `https://api.anthropic.com`.
    #[serde(default = "anthropic_url")]
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// Environment variable holding the API key (default `ANTHROPIC_API_KEY`).
    #[serde(default = "anthropic_key_env")]
    pub api_key_env: String,
    /// `max_tokens` of an agent turn, overriding `quotas.max_output_tokens`, and of
    /// any call that sets none (default 4096: the API requires one). `max_tokens` is
    /// accepted as its older name.
    #[serde(alias = "max_tokens")]
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature sent with every request (0..=1). Not with
    /// `thinking_budget_tokens` (the API refuses a temperature when thinking).
    pub temperature: Option<f64>,
    /// Extended thinking: the tokens the model may think before each answer (at least
    /// 1,024), added to the turn's `max_tokens`. Off when unset. The signed thinking
    /// blocks are sent back with the tool results, as the API requires.
    pub thinking_budget_tokens: Option<u32>,
    /// `stop_sequences` sent with every request.
    #[serde(default)]
    pub stop: Vec<String>,
    /// Calls of this provider in flight at once (default: unlimited).
    pub max_concurrent: Option<usize>,
    /// Longest wait for a streamed reply's response head, seconds (default: the stall
    /// limit).
    pub first_byte_timeout_s: Option<f64>,
    /// The model's context window in tokens: compaction keeps every request inside it.
    pub context_tokens: Option<u64>,
    /// Overall limit of one attempt, seconds (default 600).
    pub timeout_s: Option<f64>,
    /// Connect limit, seconds (default 10).
    pub connect_timeout_s: Option<f64>,
    /// Longest silence in a stream, seconds (default 60).
    pub stall_timeout_s: Option<f64>,
    /// Retries after the first attempt (default 3).
    pub max_retries: Option<u32>,
    /// First backoff ceiling, milliseconds (default 500; doubles per retry).
    pub retry_base_ms: Option<u64>,
    /// Stream replies (default true).
    #[serde(default = "yes")]
    pub stream: bool,
    /// The most bytes of one reply read before the call fails (default 8 MiB).
    pub max_reply_bytes: Option<u64>,
    /// Price per million input tokens.
    pub price_input_per_mtok: Option<f64>,
    /// Price per million output tokens.
    pub price_output_per_mtok: Option<f64>,
}

/// `kind = "command"`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandConfig {
    /// argv: program and arguments (no shell unless you name one).
    pub command: Vec<String>,
    /// `stdin` (default) or `arg` (appended as the last argument).
    #[serde(default)]
    pub prompt_via: PromptVia,
    /// Kill the child after this many seconds (default 1800).
    pub timeout_s: Option<f64>,
    /// What to report as the model (default: the program name).
    pub model: Option<String>,
    /// Retries after the first attempt (default 0: an agent CLI run is expensive).
    pub max_retries: Option<u32>,
    /// Environment variables the CLI gets besides the base allowlist (e.g. its own API
    /// key): exactly these, nothing else of crewbox's environment.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Paths the CLI needs to see besides the sandbox's view (its installation, e.g.
    /// `~/.local/share/my-agent`): absolute or `~/…`, read-only.
    #[serde(default)]
    pub read: Vec<String>,
}

fn yes() -> bool {
    true
}
fn anthropic_url() -> String {
    "https://api.anthropic.com".into()
}
fn anthropic_key_env() -> String {
    "ANTHROPIC_API_KEY".into()
}

impl ProviderConfig {
    /// Prices when both are configured.
    pub fn prices(&self) -> Option<Prices> {
        let (i, o) = match self {
            Self::Scripted(c) => (c.price_input_per_mtok, c.price_output_per_mtok),
            Self::Openai(c) => (c.price_input_per_mtok, c.price_output_per_mtok),
            Self::Anthropic(c) => (c.price_input_per_mtok, c.price_output_per_mtok),
            Self::Command(_) | Self::Replay(_) => (None, None),
        };
        Some(Prices {
            input_per_mtok: i?,
            output_per_mtok: o?,
        })
    }
}

/// What `build` needs besides the config.
pub struct BuildContext<'a> {
    /// The shared circuit breakers.
    pub breakers: &'a Breakers,
    /// The shared HTTP clients.
    pub clients: &'a super::http::HttpClients,
    /// Where relative script paths resolve (the config file's directory).
    pub base_dir: &'a Path,
    /// Reads an environment variable (tests pass a closure over a map).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// The embedded demo script, used by `scripted` without a `script`.
    pub default_script: &'a str,
    /// Where the `command` provider runs its child.
    pub sandbox: &'a crate::sandbox::Sandbox,
}

/// The retry policy of scripted providers: injected faults are retried like real ones,
/// but without real servers' patience.
const SCRIPTED_RETRY: RetryPolicy = RetryPolicy {
    max_retries: 3,
    base: Duration::from_millis(10),
    cap: Duration::from_secs(1),
    max_retry_after: Duration::from_secs(120),
};

fn seconds(name: &str, key: &str, v: Option<f64>, default: u64) -> Result<Duration, ProviderError> {
    match v {
        None => Ok(Duration::from_secs(default)),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(ProviderError::Config(format!(
            "provider `{name}`: `{key}` must be a positive number of seconds, not {s}"
        ))),
    }
}

/// The timeouts of an HTTP provider from its `connect_timeout_s`, `timeout_s`,
/// `stall_timeout_s` and `first_byte_timeout_s` (default: the stall limit).
fn timeouts(
    name: &str,
    [connect, overall, stall, first]: [Option<f64>; 4],
) -> Result<HttpTimeouts, ProviderError> {
    let stall = seconds(name, "stall_timeout_s", stall, 60)?;
    Ok(HttpTimeouts {
        connect: seconds(name, "connect_timeout_s", connect, 10)?,
        overall: seconds(name, "timeout_s", overall, 600)?,
        stall,
        first_byte: match first {
            None => stall,
            some => seconds(name, "first_byte_timeout_s", some, 60)?,
        },
    })
}

/// `inner` behind a `max_concurrent` limiter when one is set.
fn limited(inner: Arc<dyn Provider>, max: Option<usize>) -> Arc<dyn Provider> {
    match max {
        Some(n) => Arc::new(ConcurrencyLimit::new(inner, n)),
        None => inner,
    }
}

fn api_key(name: &str, var: &str, ctx: &BuildContext<'_>) -> Result<String, ProviderError> {
    match (ctx.env)(var) {
        Some(v) if !v.trim().is_empty() => {
            crate::redact::register(&v);
            Ok(v)
        }
        _ => Err(ProviderError::Config(format!(
            "provider `{name}`: environment variable `{var}` (api_key_env) is not set or empty"
        ))),
    }
}

fn reply_cap(name: &str, v: Option<u64>) -> Result<u64, ProviderError> {
    match v {
        None => Ok(super::http::DEFAULT_MAX_REPLY_BYTES),
        Some(0) => Err(ProviderError::Config(format!(
            "provider `{name}`: `max_reply_bytes` must be at least 1"
        ))),
        Some(n) => Ok(n),
    }
}

/// The environment variable holding the key of a provider definition, if it has one.
pub fn key_variable(cfg: &ProviderConfig) -> Option<&str> {
    match cfg {
        ProviderConfig::Openai(c) => c.api_key_env.as_deref(),
        ProviderConfig::Anthropic(c) => Some(&c.api_key_env),
        ProviderConfig::Scripted(_) | ProviderConfig::Command(_) | ProviderConfig::Replay(_) => {
            None
        }
    }
}

impl ProviderConfig {
    /// The environment variables holding this provider's secrets: the one it reads its
    /// API key from, or those a `command` provider passes to its CLI. Agent commands
    /// never get any of them.
    pub fn secret_vars(&self) -> Vec<&str> {
        match self {
            ProviderConfig::Command(c) => c.pass_env.iter().map(String::as_str).collect(),
            other => key_variable(other).into_iter().collect(),
        }
    }
}

/// Makes every configured provider's key (the values of their `api_key_env` variables
/// that are set) known to the redactor, whether or not this process uses it: a key
/// echoed by another provider's server or an agent CLI is masked all the same.
pub fn register_secrets<'a>(
    providers: impl IntoIterator<Item = (&'a String, &'a ProviderConfig)>,
    env: &dyn Fn(&str) -> Option<String>,
) {
    for (_, cfg) in providers {
        if let Some(value) = key_variable(cfg).and_then(env) {
            crate::redact::register(&value);
        }
    }
}

fn check_url(name: &str, url: &str) -> Result<(), ProviderError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(ProviderError::Config(format!(
            "provider `{name}`: base_url `{url}` must start with http:// or https://"
        )))
    }
}

/// Builds provider `name` from its config, wrapped in the breaker and the retry policy.
pub fn build(
    name: &str,
    cfg: &ProviderConfig,
    ctx: &BuildContext<'_>,
) -> Result<Arc<dyn Provider>, ProviderError> {
    let retry_policy = |max_retries: Option<u32>, base_ms: Option<u64>| RetryPolicy {
        max_retries: max_retries.unwrap_or(3),
        base: base_ms
            .map(Duration::from_millis)
            .unwrap_or(RetryPolicy::default().base),
        ..RetryPolicy::default()
    };
    let (inner, policy): (Arc<dyn Provider>, RetryPolicy) = match cfg {
        ProviderConfig::Scripted(c) => {
            let script = match &c.script {
                Some(path) => ScriptedProvider::from_file(&ctx.base_dir.join(path)),
                None => ScriptedProvider::parse(ctx.default_script, "<embedded demo script>"),
            }
            .map_err(|e| ProviderError::Config(format!("provider `{name}`: {e}")))?;
            (Arc::new(script.with_name(name)), SCRIPTED_RETRY)
        }
        ProviderConfig::Openai(c) => {
            check_url(name, &c.base_url)?;
            let api_key = c
                .api_key_env
                .as_deref()
                .map(|var| api_key(name, var, ctx))
                .transpose()?;
            let options = OpenAiOptions {
                base_url: c.base_url.clone(),
                model: c.model.clone(),
                api_key,
                stream: c.stream,
                token_limit_field: c.token_limit_field,
                max_reply_bytes: reply_cap(name, c.max_reply_bytes)?,
                timeouts: timeouts(
                    name,
                    [
                        c.connect_timeout_s,
                        c.timeout_s,
                        c.stall_timeout_s,
                        c.first_byte_timeout_s,
                    ],
                )?,
                temperature: c.temperature,
                stop: c.stop.clone(),
                limits: ModelLimits {
                    max_output_tokens: c.max_output_tokens,
                    context_tokens: c.context_tokens,
                },
            };
            (
                limited(
                    Arc::new(OpenAiProvider::new(name, options, ctx.clients)?),
                    c.max_concurrent,
                ),
                retry_policy(c.max_retries, c.retry_base_ms),
            )
        }
        ProviderConfig::Anthropic(c) => {
            check_url(name, &c.base_url)?;
            let options = AnthropicOptions {
                base_url: c.base_url.clone(),
                model: c.model.clone(),
                api_key: Some(api_key(name, &c.api_key_env, ctx)?),
                max_tokens: c.max_output_tokens.unwrap_or(4096),
                stream: c.stream,
                max_reply_bytes: reply_cap(name, c.max_reply_bytes)?,
                timeouts: timeouts(
                    name,
                    [
                        c.connect_timeout_s,
                        c.timeout_s,
                        c.stall_timeout_s,
                        c.first_byte_timeout_s,
                    ],
                )?,
                temperature: c.temperature,
                stop: c.stop.clone(),
                limits: ModelLimits {
                    max_output_tokens: c.max_output_tokens,
                    context_tokens: c.context_tokens,
                },
                thinking_budget: c.thinking_budget_tokens,
            };
            (
                limited(
                    Arc::new(AnthropicProvider::new(name, options, ctx.clients)?),
                    c.max_concurrent,
                ),
                retry_policy(c.max_retries, c.retry_base_ms),
            )
        }
        ProviderConfig::Command(c) => {
            let options = CommandOptions {
                argv: c.command.clone(),
                prompt_via: c.prompt_via,
                timeout: seconds(name, "timeout_s", c.timeout_s, 1800)?,
                model: c.model.clone(),
                pass_env: c.pass_env.clone(),
                read: c
                    .read
                    .iter()
                    .map(|r| {
                        let home = (ctx.env)("HOME").map(PathBuf::from);
                        crate::sandbox::config::expand_path("read", r, home.as_deref())
                            .map_err(|e| ProviderError::Config(format!("provider `{name}`: {e}")))
                    })
                    .collect::<Result<_, _>>()?,
                sandbox: ctx.sandbox.clone(),
            };
            (
                Arc::new(CommandProvider::new(name, options)?),
                retry_policy(Some(c.max_retries.unwrap_or(0)), None),
            )
        }
        // A recording is answered as it is: no breaker, no retry.
        ProviderConfig::Replay(c) => return build_replay(name, c, ctx.base_dir, None),
    };
    let guarded: Arc<dyn Provider> = Arc::new(ctx.breakers.wrap(inner));
    Ok(Arc::new(RetryProvider::new(guarded, policy)))
}

/// Builds a replay provider: a cassette path resolves against `base_dir`; a run's
/// recording is read from the store file `db` (none: only a cassette is possible).
/// Blocking, like reading a script file.
pub fn build_replay(
    name: &str,
    cfg: &ReplayConfig,
    base_dir: &Path,
    db: Option<&Path>,
) -> Result<Arc<dyn Provider>, ProviderError> {
    let config = |detail: String| ProviderError::Config(format!("provider `{name}`: {detail}"));
    let exchanges = match cfg.source(name)? {
        ReplaySource::Cassette(path) => {
            super::replay::Cassette::load(&base_dir.join(path))
                .map_err(|e| config(e.to_string()))?
                .exchanges
        }
        ReplaySource::Run(run) => {
            let db = db.ok_or_else(|| {
                config(
                    "`run` recordings are read from a repository's store; use `cassette` here"
                        .into(),
                )
            })?;
            let id = crate::ids::RunId::from_string(run.to_owned());
            let exchanges = crate::provider::replay::cassette::stored_exchanges(db, &id)
                .map_err(|e| config(e.to_string()))?;
            if exchanges.is_empty() {
                return Err(config(format!(
                    "run `{run}` has no recorded model calls in this store"
                )));
            }
            exchanges
        }
    };
    Ok(Arc::new(super::replay::ReplayProvider::new(
        name, exchanges,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(text: &str) -> Result<ProviderConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn tagged_tables_parse_with_defaults() {
        let c = parse("kind = \"anthropic\"\nmodel = \"claude\"\n").unwrap();
        let ProviderConfig::Anthropic(a) = c else {
            panic!("wrong kind")
        };
        assert_eq!(a.base_url, "https://api.anthropic.com");
        assert_eq!(a.api_key_env, "ANTHROPIC_API_KEY");
        assert!(a.stream);
        let c = parse("kind = \"command\"\ncommand = [\"cat\"]\nprompt_via = \"arg\"\n").unwrap();
        assert!(matches!(
            c,
            ProviderConfig::Command(CommandConfig {
                prompt_via: PromptVia::Arg,
                ..
            })
        ));
        assert_eq!(
            parse("kind = \"scripted\"\n").unwrap(),
            ProviderConfig::Scripted(ScriptedConfig::default())
        );
    }

    #[test]
    fn unknown_keys_and_kinds_are_errors_naming_them() {
        let e =
            parse("kind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\napi_key = \"sk\"\n")
                .unwrap_err();
        assert!(e.contains("unknown field `api_key`"), "{e}");
        let e = parse("kind = \"scripted\"\nscirpt = \"a.toml\"\n").unwrap_err();
        assert!(e.contains("unknown field `scirpt`"), "{e}");
        let e = parse("kind = \"gemini\"\n").unwrap_err();
        assert!(e.contains("gemini"), "{e}");
    }

    #[test]
    fn prices_need_both_sides() {
        let c = parse("kind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\nprice_input_per_mtok = 3.0\nprice_output_per_mtok = 15\n").unwrap();
        let p = c.prices().unwrap();
        assert_eq!(
            p.cost(Usage {
                input: 1_000_000,
                output: 100_000
            }),
            4.5
        );
        let c = parse("kind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\nprice_input_per_mtok = 3.0\n").unwrap();
        assert_eq!(c.prices(), None);
    }

    #[test]
    fn missing_key_variable_is_named_never_valued() {
        let breakers = Breakers::default();
        let env_map: HashMap<&str, &str> = HashMap::from([("OTHER", "sk-live-123")]);
        let env = |k: &str| env_map.get(k).map(|v| v.to_string());
        let clients = super::super::http::HttpClients::default();
        let ctx = BuildContext {
            breakers: &breakers,
            clients: &clients,
            base_dir: Path::new("."),
            env: &env,
            default_script: "",
            sandbox: &crate::sandbox::Sandbox::missing(),
        };
        let cfg = parse("kind = \"anthropic\"\nmodel = \"m\"\n").unwrap();
        let err = build("claude", &cfg, &ctx)
            .err()
            .expect("build fails")
            .to_string();
        assert!(
            err.contains("`ANTHROPIC_API_KEY`") && err.contains("claude"),
            "{err}"
        );
        let cfg = parse(
            "kind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\napi_key_env = \"OTHER\"\n",
        )
        .unwrap();
        assert!(build("o", &cfg, &ctx).is_ok());
        let cfg = parse("kind = \"openai\"\nbase_url = \"ftp://x\"\nmodel = \"m\"\n").unwrap();
        assert!(
            build("o", &cfg, &ctx)
                .err()
                .expect("build fails")
                .to_string()
                .contains("base_url")
        );
    }

    #[test]
    fn scripted_uses_the_embedded_script_or_a_relative_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("s.toml"),
            "[[reply]]\ntext = \"from file\"\n",
        )
        .unwrap();
        let breakers = Breakers::default();
        let env = |_: &str| None;
        let clients = super::super::http::HttpClients::default();
        let ctx = BuildContext {
            breakers: &breakers,
            clients: &clients,
            base_dir: dir.path(),
            env: &env,
            default_script: "[[reply]]\ntext = \"demo\"\n",
            sandbox: &crate::sandbox::Sandbox::missing(),
        };
        let p = build("demo", &parse("kind = \"scripted\"\n").unwrap(), &ctx).unwrap();
        assert_eq!((p.name(), p.model()), ("demo", "script"));
        assert!(
            build(
                "s",
                &parse("kind = \"scripted\"\nscript = \"s.toml\"\n").unwrap(),
                &ctx
            )
            .is_ok()
        );
        let err = build(
            "s",
            &parse("kind = \"scripted\"\nscript = \"missing.toml\"\n").unwrap(),
            &ctx,
        )
        .err()
        .expect("build fails");
        assert!(err.to_string().contains("missing.toml"), "{err}");
    }
}

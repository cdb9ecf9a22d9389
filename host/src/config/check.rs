//! The range of every numeric setting and the paths the sandbox may be widened to,
//! checked when a file is loaded: a value that cannot mean what was written (a zero
//! where zero runs nothing, a negative or NaN budget, a duration no clock can hold, a
//! sandbox `write = ["/"]`) is an error naming the file, the key and what is allowed,
//! never accepted silently or clamped without a word.

use std::path::{Component, Path, PathBuf};

use super::ConfigError;
use super::quotas::{MAX_DURATION_S, QuotaFile};
use super::user::ConfigFile;
use crate::provider::config::ProviderConfig;

/// The most retries a provider may make after its first attempt.
const MAX_RETRIES: u32 = 100;
/// The longest first backoff, milliseconds (ten minutes).
const MAX_RETRY_BASE_MS: u64 = 600_000;

/// `path`, with `:line` when the key's line is known.
fn origin(path: &Path, line: Option<usize>) -> String {
    match line {
        Some(l) => format!("{}:{l}", path.display()),
        None => path.display().to_string(),
    }
}

fn bad(key: impl Into<String>, origin: String, message: impl Into<String>) -> ConfigError {
    ConfigError::Value {
        key: key.into(),
        origin,
        message: message.into(),
    }
}

/// `[quotas]` of a file at `path`; `line` finds a key's line (`max_turns`).
pub(crate) fn quotas(
    q: &QuotaFile,
    path: &Path,
    line: impl Fn(&str) -> Option<usize>,
) -> Result<(), ConfigError> {
    q.check().map_err(|e| {
        bad(
            format!("quotas.{}", e.key),
            origin(path, line(e.key)),
            e.to_string(),
        )
    })
}

/// Seconds as a provider file writes them (fractions allowed).
fn seconds(key: &str, v: Option<f64>) -> Result<(), (String, String)> {
    match v {
        Some(s) if !(s.is_finite() && s > 0.0 && s <= MAX_DURATION_S as f64) => Err((
            key.to_owned(),
            format!(
                "{s} is outside the allowed range: more than 0 and at most {MAX_DURATION_S} seconds (a year)"
            ),
        )),
        _ => Ok(()),
    }
}

fn price(key: &str, v: Option<f64>) -> Result<(), (String, String)> {
    match v {
        Some(p) if !(p.is_finite() && p >= 0.0) => Err((
            key.to_owned(),
            format!("{p} is outside the allowed range: a finite price of 0 or more"),
        )),
        _ => Ok(()),
    }
}

fn retries(max: Option<u32>, base_ms: Option<u64>) -> Result<(), (String, String)> {
    if let Some(n) = max.filter(|n| *n > MAX_RETRIES) {
        return Err((
            "max_retries".into(),
            format!("{n} is outside the allowed range: 0..={MAX_RETRIES}"),
        ));
    }
    if let Some(ms) = base_ms.filter(|ms| !(1..=MAX_RETRY_BASE_MS).contains(ms)) {
        return Err((
            "retry_base_ms".into(),
            format!("{ms} is outside the allowed range: 1..={MAX_RETRY_BASE_MS} milliseconds"),
        ));
    }
    Ok(())
}

fn reply_bytes(v: Option<u64>) -> Result<(), (String, String)> {
    match v {
        Some(0) => Err((
            "max_reply_bytes".into(),
            "0 is outside the allowed range: at least 1 byte".into(),
        )),
        _ => Ok(()),
    }
}

/// The most stop sequences a provider takes (OpenAI's limit).
const MAX_STOP: usize = 4;

/// `temperature` (0..=`max`: 2 for OpenAI-compatible servers, 1 for Anthropic) and
/// `stop` (1..=4 non-empty sequences).
fn sampling(temperature: Option<f64>, max: f64, stop: &[String]) -> Result<(), (String, String)> {
    if let Some(t) = temperature.filter(|t| !(t.is_finite() && (0.0..=max).contains(t))) {
        return Err((
            "temperature".into(),
            format!("{t} is outside the allowed range: 0..={max}"),
        ));
    }
    if stop.len() > MAX_STOP {
        return Err((
            "stop".into(),
            format!(
                "{} sequences are outside the allowed range: at most {MAX_STOP}",
                stop.len()
            ),
        ));
    }
    if stop.iter().any(String::is_empty) {
        return Err((
            "stop".into(),
            "an empty sequence is not allowed: each stop sequence needs at least one character"
                .into(),
        ));
    }
    Ok(())
}

/// The least thinking budget the Messages API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

/// Extended thinking's rules, checked before any request rather than answered with a
/// 400 by the API: a budget of at least 1,024 tokens, and no temperature with it.
fn thinking(budget: Option<u32>, temperature: Option<f64>) -> Result<(), (String, String)> {
    match budget {
        Some(b) if b < MIN_THINKING_BUDGET => Err((
            "thinking_budget_tokens".into(),
            format!("{b} is outside the allowed range: at least {MIN_THINKING_BUDGET}"),
        )),
        Some(_) if temperature.is_some() => Err((
            "temperature".into(),
            "cannot be set with thinking_budget_tokens (the API refuses a temperature while \
             the model thinks): remove one of them"
                .into(),
        )),
        _ => Ok(()),
    }
}

/// `max_output_tokens`, `max_concurrent` and `context_tokens`: each at least 1.
fn model_limits(
    output: Option<u32>,
    concurrent: Option<usize>,
    context: Option<u64>,
) -> Result<(), (String, String)> {
    for (key, zero) in [
        ("max_output_tokens", output == Some(0)),
        ("max_concurrent", concurrent == Some(0)),
        ("context_tokens", context == Some(0)),
    ] {
        if zero {
            return Err((
                key.into(),
                "0 is outside the allowed range: at least 1".into(),
            ));
        }
    }
    Ok(())
}

/// One provider's numbers: timeouts, retries, reply caps, token limits and prices.
fn provider(p: &ProviderConfig) -> Result<(), (String, String)> {
    match p {
        ProviderConfig::Scripted(c) => {
            price("price_input_per_mtok", c.price_input_per_mtok)?;
            price("price_output_per_mtok", c.price_output_per_mtok)
        }
        ProviderConfig::Openai(c) => {
            seconds("timeout_s", c.timeout_s)?;
            seconds("connect_timeout_s", c.connect_timeout_s)?;
            seconds("stall_timeout_s", c.stall_timeout_s)?;
            retries(c.max_retries, c.retry_base_ms)?;
            reply_bytes(c.max_reply_bytes)?;
            sampling(c.temperature, 2.0, &c.stop)?;
            model_limits(c.max_output_tokens, c.max_concurrent, c.context_tokens)?;
            seconds("first_byte_timeout_s", c.first_byte_timeout_s)?;
            price("price_input_per_mtok", c.price_input_per_mtok)?;
            price("price_output_per_mtok", c.price_output_per_mtok)
        }
        ProviderConfig::Anthropic(c) => {
            seconds("timeout_s", c.timeout_s)?;
            seconds("connect_timeout_s", c.connect_timeout_s)?;
            seconds("stall_timeout_s", c.stall_timeout_s)?;
            retries(c.max_retries, c.retry_base_ms)?;
            reply_bytes(c.max_reply_bytes)?;
            sampling(c.temperature, 1.0, &c.stop)?;
            thinking(c.thinking_budget_tokens, c.temperature)?;
            model_limits(c.max_output_tokens, c.max_concurrent, c.context_tokens)?;
            seconds("first_byte_timeout_s", c.first_byte_timeout_s)?;
            price("price_input_per_mtok", c.price_input_per_mtok)?;
            price("price_output_per_mtok", c.price_output_per_mtok)
        }
        ProviderConfig::Command(c) => {
            seconds("timeout_s", c.timeout_s)?;
            retries(c.max_retries, None)
        }
        ProviderConfig::Replay(c) => match (&c.run, &c.cassette) {
            (Some(_), None) | (None, Some(_)) => Ok(()),
            _ => Err((
                "cassette".into(),
                "a replay provider needs exactly one of `run` (a run id) and `cassette` (a file)"
                    .into(),
            )),
        },
    }
}

/// Every numeric setting of the user's file at `path` (`lines`: where each key is).
pub(crate) fn user_file(
    f: &ConfigFile,
    path: &Path,
    lines: &std::collections::BTreeMap<String, usize>,
) -> Result<(), ConfigError> {
    let at = |key: &str| origin(path, lines.get(key).copied());
    quotas(&f.quotas, path, |k| {
        lines.get(&format!("quotas.{k}")).copied()
    })?;
    if f.dispatch_history == Some(0) {
        return Err(bad(
            "dispatch_history",
            at("dispatch_history"),
            "0 is outside the allowed range: at least 1 decision",
        ));
    }
    for (name, p) in &f.providers {
        provider(p).map_err(|(key, message)| {
            bad(
                format!("providers.{name}.{key}"),
                at(&format!("providers.{name}")),
                message,
            )
        })?;
    }
    if let Some(plugins) = &f.plugins {
        for (name, g) in &plugins.grants {
            let Some(m) = &g.model else { continue };
            let key = |k: &str| format!("plugins.grants.{name}.model.{k}");
            if m.max_tokens == 0 {
                return Err(bad(
                    key("max_tokens"),
                    at("plugins.grants"),
                    "0 is outside the allowed range: at least 1 token",
                ));
            }
            if !(1..=MAX_DURATION_S).contains(&m.timeout_s) {
                return Err(bad(
                    key("timeout_s"),
                    at("plugins.grants"),
                    format!(
                        "{} is outside the allowed range: 1..={MAX_DURATION_S} seconds (a year)",
                        m.timeout_s
                    ),
                ));
            }
        }
    }
    if let Some(n) = &f.nats
        && let Some(s) = n.ack_wait_s
        && !(1..=3600).contains(&s)
    {
        return Err(bad(
            "nats.ack_wait_s",
            at("nats.ack_wait_s"),
            format!("{s} is outside the allowed range: 1..=3600 seconds"),
        ));
    }
    Ok(())
}

/// `[mcp]` of the user's file at `path`, checked and turned into settings (`lines`:
/// where each key is).
pub(crate) fn mcp(
    f: &crate::mcp::config::McpFile,
    path: &Path,
    lines: &std::collections::BTreeMap<String, usize>,
) -> Result<crate::mcp::McpSettings, ConfigError> {
    crate::mcp::config::check(f).map_err(|e| {
        let line = lines
            .get(&e.key)
            .or_else(|| lines.get("mcp.servers"))
            .or_else(|| lines.get("mcp"))
            .copied();
        bad(e.key, origin(path, line), e.message)
    })
}

/// `p` without `.` and `..` (resolved against its parents) and, when it exists, with
/// its symlinks resolved: what a sandbox path would really open.
fn real(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// What no `[sandbox] read` or `write` path may be or contain: the whole filesystem,
/// the home directory (its keys, shell startup files), crewbox's config and state
/// (stores, other agents' worktrees, trust records) and the state base in use.
pub(crate) fn protected_paths(state_base: Option<&Path>) -> Vec<(&'static str, PathBuf)> {
    let mut out = vec![("the whole filesystem", PathBuf::from("/"))];
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    out.extend(home.map(|h| ("your home directory", h)));
    out.extend(crate::paths::user_config_dir().map(|d| ("crewbox's config directory", d)));
    out.extend(
        crate::paths::user_state_dir()
            .map(|d| ("crewbox's state directory (stores, worktrees, trust)", d)),
    );
    out.extend(
        std::env::var_os(crate::paths::STATE_DIR_ENV)
            .map(PathBuf::from)
            .filter(|d| d.is_absolute())
            .map(|d| ("crewbox's state base", d)),
    );
    out.extend(state_base.map(|d| ("crewbox's state base", d.to_path_buf())));
    out
}

/// Refuses a path agents' commands would see (`[sandbox] read`/`write`, a `command`
/// provider's `read`) that is, or holds, one of `protected`: listing it would open
/// what the sandbox exists to hide. `lists` are (key, paths); `origin` names the file.
pub(crate) fn opened_paths<'a>(
    lists: impl IntoIterator<Item = (String, &'a [PathBuf])>,
    origin: &str,
    protected: &[(&'static str, PathBuf)],
) -> Result<(), ConfigError> {
    for (key, list) in lists {
        for p in list {
            let opened = real(p);
            if let Some((what, at)) = protected
                .iter()
                .find(|(_, at)| real(at).starts_with(&opened))
            {
                return Err(bad(
                    key,
                    origin.to_owned(),
                    format!(
                        "`{}` would open {what} ({}) to agents' commands; list the \
                         directories under it they need instead",
                        p.display(),
                        at.display()
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_paths_may_not_hold_what_the_sandbox_hides() {
        let protected = vec![
            ("the whole filesystem", PathBuf::from("/")),
            ("your home directory", PathBuf::from("/h/me")),
            (
                "crewbox's state base",
                PathBuf::from("/h/me/.local/state/crewbox"),
            ),
        ];
        let check = |read: &[&str], write: &[&str]| {
            let read: Vec<PathBuf> = read.iter().map(PathBuf::from).collect();
            let write: Vec<PathBuf> = write.iter().map(PathBuf::from).collect();
            let lists = [
                ("sandbox.read".to_owned(), &read[..]),
                ("sandbox.write".to_owned(), &write[..]),
            ];
            opened_paths(lists, "c.toml:3", &protected).map_err(|e| e.to_string())
        };
        assert!(check(&["/h/me/.nvm", "/opt/x"], &["/h/me/.cache/go"]).is_ok());
        for (read, write, names) in [
            (&[][..], &["/"][..], "the whole filesystem"),
            (&[], &["/h/me"], "your home directory"),
            (&[], &["/h"], "your home directory"),
            (&[], &["/h/me/.local/../.local"], "state base"),
            (&["/h/me/"], &[], "your home directory"),
            (&[], &["/h/me/x/../.."], "your home directory"),
        ] {
            let e = check(read, write).unwrap_err();
            assert!(e.contains(names) && e.contains("c.toml:3"), "{e}");
        }
    }

    #[test]
    fn provider_numbers_have_ranges() {
        let p: ProviderConfig = toml::from_str(
            "kind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\ntimeout_s = 1e300\n",
        )
        .unwrap();
        assert_eq!(provider(&p).unwrap_err().0, "timeout_s");
        let p: ProviderConfig =
            toml::from_str("kind = \"scripted\"\nprice_input_per_mtok = -1.0\n").unwrap();
        assert_eq!(provider(&p).unwrap_err().0, "price_input_per_mtok");
        let p: ProviderConfig =
            toml::from_str("kind = \"anthropic\"\nmodel = \"m\"\nmax_retries = 4000000000\n")
                .unwrap();
        assert_eq!(provider(&p).unwrap_err().0, "max_retries");
        let p: ProviderConfig =
            toml::from_str("kind = \"command\"\ncommand = [\"x\"]\ntimeout_s = 0.5\n").unwrap();
        assert!(provider(&p).is_ok());
    }
}

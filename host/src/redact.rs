//! The one redactor: every secret value this process knows is replaced by
//! [`MASK`] wherever text leaves it — stored rows (the store writer applies it to every
//! write), log lines (the tracing writer), errors (providers clean server text as they
//! build an error) and the CLI's last error line.
//!
//! Secrets are process facts (environment variables named by the provider config, and
//! variables whose names say they hold a secret), so the set is process-wide and only
//! grows: a sink that was handed no redactor cannot leak what it never received, but a
//! sink is easy to forget, and one global set reaches them all. Values shorter than
//! [`MIN_SECRET_LEN`] are ignored: masking `"1"` or `"true"` everywhere would destroy
//! text and protect nothing.

use std::borrow::Cow;
use std::sync::{Arc, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};

/// What a secret is replaced by.
pub const MASK: &str = "[redacted]";

/// Shorter values are not treated as secrets.
pub const MIN_SECRET_LEN: usize = 8;

/// Name segments (split on `_`, case-insensitive) that mark an environment variable as
/// holding a secret, e.g. `OPENAI_API_KEY`, `GITHUB_TOKEN`, `DB_PASSWORD`.
const SECRET_NAME_PARTS: &[&str] = &[
    "KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "PAT",
];

/// A set of secret values and the automaton that finds them in one pass.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    secrets: Vec<String>,
    finder: Option<AhoCorasick>,
}

impl Redactor {
    /// A redactor for `secrets` (short or blank values are dropped).
    #[cfg(test)]
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut r = Self::default();
        for s in secrets {
            r.insert(s.as_ref());
        }
        r
    }

    /// Adds a secret; returns whether the set changed.
    fn insert(&mut self, secret: &str) -> bool {
        let secret = secret.trim();
        if secret.len() < MIN_SECRET_LEN {
            return false;
        }
        let mut changed = false;
        // The JSON-escaped form too: stored events are JSON text.
        let escaped = serde_json::to_string(secret).unwrap_or_default();
        let escaped = escaped
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or(secret);
        for form in [secret, escaped] {
            if !self.secrets.iter().any(|s| s == form) {
                self.secrets.push(form.to_owned());
                changed = true;
            }
        }
        if changed {
            self.finder = AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&self.secrets)
                .ok();
        }
        changed
    }

    /// [`Redactor::clean`] in place.
    pub fn clean_in_place(&self, text: &mut String) {
        if let Cow::Owned(cleaned) = self.clean(text) {
            *text = cleaned;
        }
    }

    /// Whether it knows no secret.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `text` with every known secret replaced by [`MASK`] (borrowed when clean).
    pub fn clean<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let Some(finder) = &self.finder else {
            return Cow::Borrowed(text);
        };
        if !finder.is_match(text) {
            return Cow::Borrowed(text);
        }
        let masks = vec![MASK; self.secrets.len()];
        Cow::Owned(finder.replace_all(text, &masks))
    }
}

static GLOBAL: RwLock<Option<Arc<Redactor>>> = RwLock::new(None);

fn current() -> Option<Arc<Redactor>> {
    GLOBAL.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The process's redactor as it is now (`None` while no secret is known), for a sink
/// that cleans many strings at once.
pub fn snapshot() -> Option<Arc<Redactor>> {
    current()
}

/// Makes `secret` known to every sink of this process from now on.
pub fn register(secret: &str) {
    let mut guard = GLOBAL.write().unwrap_or_else(|p| p.into_inner());
    let mut next = guard.as_deref().cloned().unwrap_or_default();
    if next.insert(secret) {
        *guard = Some(Arc::new(next));
    }
}

/// Name segments that say the variable points at a secret rather than holding one
/// (`SSH_KEY_PATH`, `TOKEN_URL`): their values are paths and addresses, left alone.
const POINTER_NAME_PARTS: &[&str] = &["PATH", "FILE", "DIR", "URL", "SOCK", "SOCKET"];

/// Whether an environment variable's name says it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let has = |parts: &[&str]| {
        name.split('_')
            .any(|segment| parts.iter().any(|p| segment.eq_ignore_ascii_case(p)))
    };
    has(SECRET_NAME_PARTS) && !has(POINTER_NAME_PARTS)
}

/// Registers every environment variable whose name says it holds a secret
/// (`is_secret_name`): an agent CLI run by the `command` provider reads such keys
/// without the config naming them, and may echo them.
pub fn register_secret_env() {
    for (name, value) in std::env::vars_os() {
        if is_secret_name(&name.to_string_lossy()) {
            register(&value.to_string_lossy());
        }
    }
}

/// `text` with every registered secret replaced by [`MASK`].
pub fn clean(text: &str) -> Cow<'_, str> {
    match current() {
        Some(r) => r.clean(text),
        None => Cow::Borrowed(text),
    }
}

/// [`clean`] for an owned string (no copy when there is nothing to mask).
pub fn clean_owned(text: String) -> String {
    match current() {
        Some(r) => match r.clean(&text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(cleaned) => cleaned,
        },
        None => text,
    }
}

/// [`clean_owned`] in place.
#[cfg(test)]
pub fn clean_in_place(text: &mut String) {
    if let Some(r) = current()
        && let Cow::Owned(cleaned) = r.clean(text)
    {
        *text = cleaned;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_every_secret_in_one_pass_and_keeps_short_values() {
        let r = Redactor::new(["sk-live-0123456789", "sk-live-01234567890000", "abc"]);
        assert_eq!(
            r.clean("a sk-live-01234567890000 b sk-live-0123456789 c abc"),
            "a [redacted] b [redacted] c abc"
        );
        assert!(matches!(r.clean("nothing here"), Cow::Borrowed(_)));
        assert!(Redactor::new(["short", "   "]).is_empty());
    }

    #[test]
    fn json_escaped_forms_are_masked_too() {
        let r = Redactor::new(["pa\"ss\\word-1234"]);
        let json = serde_json::json!({ "m": "key pa\"ss\\word-1234 here" }).to_string();
        assert_eq!(r.clean(&json), r#"{"m":"key [redacted] here"}"#);
    }

    #[test]
    fn secret_like_names() {
        for name in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "db_password",
            "AWS_SECRET_ACCESS_KEY",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "KEYBOARD",
            "MONKEY_BUSINESS",
            "TOKENIZERS",
            "SSH_KEY_PATH",
            "GIT_TOKEN_URL",
        ] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn the_process_set_reaches_every_caller() {
        register("global-secret-value-42");
        assert_eq!(clean("x global-secret-value-42 y"), "x [redacted] y");
        let mut s = String::from("global-secret-value-42");
        clean_in_place(&mut s);
        assert_eq!(s, MASK);
    }
}

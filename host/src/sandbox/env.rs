//! The environment of agent commands: built from an allowlist, never by removing
//! suspicious names from the host's environment.
//!
//! A command gets [`BASE_VARS`] (and `LC_*`) as the host has them, the names the user
//! lists in `[sandbox] pass_env`, and fixed non-interactive settings. No variable a
//! provider reads its key from (`api_key_env`) is ever passed, even when listed, and no
//! variable whose value contains such a key.

use std::collections::BTreeSet;
use std::ffi::OsString;

/// Variables passed as the host has them.
pub const BASE_VARS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
];

/// Set for every command: nothing waits for a terminal, and Python writes no
/// `__pycache__` into the worktree (it would land on the agent's branch, and a `.pyc`
/// from the same second as an edit of the same size is silently stale).
pub const FIXED_VARS: &[(&str, &str)] = &[
    ("GIT_TERMINAL_PROMPT", "0"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
];

/// Keys shorter than this are not searched for inside other values (too many false hits).
const MIN_KEY_LEN: usize = 8;

/// What must never reach a command: the names keys are read from, and their values.
#[derive(Clone, Debug, Default)]
pub struct Secrets {
    names: BTreeSet<String>,
    values: Vec<String>,
}

impl Secrets {
    /// The secrets behind these variable names, valued from `lookup`.
    pub fn new<'a>(
        names: impl IntoIterator<Item = &'a str>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let names: BTreeSet<String> = names.into_iter().map(str::to_owned).collect();
        let values = names
            .iter()
            .filter_map(|n| lookup(n))
            .map(|v| v.trim().to_owned())
            .filter(|v| v.len() >= MIN_KEY_LEN)
            .collect();
        Self { names, values }
    }

    /// Whether `name=value` carries a key.
    pub fn is_secret(&self, name: &str, value: &str) -> bool {
        self.names.contains(name) || self.values.iter().any(|k| value.contains(k.as_str()))
    }
}

/// Which host variables a command receives.
#[derive(Clone, Debug, Default)]
pub struct EnvPolicy {
    /// Names passed besides [`BASE_VARS`] and `LC_*`.
    pub pass: Vec<String>,
    /// Whether key variables may be passed when named in `pass` (only for the `command`
    /// provider, whose child is the model CLI that needs its own key).
    pub allow_named_keys: bool,
}

/// Builds a command's environment from the host's `vars`. Variables that are not valid
/// UTF-8 are left out (the policy is JSON).
pub fn build(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    policy: &EnvPolicy,
    secrets: &Secrets,
) -> Vec<(String, String)> {
    let wanted = |name: &str| {
        BASE_VARS.contains(&name)
            || name.starts_with("LC_")
            || policy.pass.iter().any(|p| p == name)
    };
    let mut env: Vec<(String, String)> = vars
        .into_iter()
        .filter_map(|(n, v)| Some((n.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(n, _)| wanted(n) && !FIXED_VARS.iter().any(|(f, _)| f == n))
        .filter(|(n, v)| {
            let named = policy.allow_named_keys && policy.pass.iter().any(|p| p == n);
            named || !secrets.is_secret(n, v)
        })
        .collect();
    env.sort();
    for (name, value) in FIXED_VARS {
        env.push(((*name).into(), (*value).into()));
    }
    env
}

/// Sets `name` to `value` in `env`, replacing an earlier value.
pub fn set(env: &mut Vec<(String, String)>, name: &str, value: &str) {
    env.retain(|(n, _)| n != name);
    env.push((name.into(), value.into()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/h"),
            ("LC_ALL", "C.UTF-8"),
            ("OPENAI_API_KEY", "sk-live-0123456789"),
            ("LLM_AUTH_VALUE", "odd-name-secret-42"),
            ("COPY_OF_KEY", "prefix-odd-name-secret-42"),
            ("GITHUB_TOKEN", "ghp_xyz"),
            ("MY_TOOL_FLAGS", "-v"),
            ("PAGER", "less"),
        ]
        .into_iter()
        .map(|(n, v)| (n.into(), v.into()))
        .collect()
    }

    fn secrets() -> Secrets {
        let host = host();
        Secrets::new(["OPENAI_API_KEY", "LLM_AUTH_VALUE"], |n| {
            host.iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        })
    }

    fn names(env: &[(String, String)]) -> Vec<&str> {
        env.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn only_allowlisted_names_pass_and_keys_never_do() {
        let policy = EnvPolicy {
            pass: vec![
                "MY_TOOL_FLAGS".into(),
                "LLM_AUTH_VALUE".into(),
                "COPY_OF_KEY".into(),
            ],
            allow_named_keys: false,
        };
        let env = build(host(), &policy, &secrets());
        assert_eq!(
            names(&env),
            [
                "HOME",
                "LC_ALL",
                "MY_TOOL_FLAGS",
                "PATH",
                "GIT_TERMINAL_PROMPT",
                "PAGER",
                "GIT_PAGER",
                "PYTHONDONTWRITEBYTECODE"
            ]
        );
        // A token nobody configured is not passed either: it was never allowlisted.
        assert!(!names(&env).contains(&"GITHUB_TOKEN"));
    }

    #[test]
    fn the_command_provider_gets_exactly_the_keys_it_names() {
        let policy = EnvPolicy {
            pass: vec!["LLM_AUTH_VALUE".into()],
            allow_named_keys: true,
        };
        let env = build(host(), &policy, &secrets());
        assert!(names(&env).contains(&"LLM_AUTH_VALUE"));
        assert!(!names(&env).contains(&"OPENAI_API_KEY"));
        assert!(!names(&env).contains(&"COPY_OF_KEY"));
    }

    #[test]
    fn set_replaces() {
        let mut env = vec![("TMPDIR".to_owned(), "/x".to_owned())];
        set(&mut env, "TMPDIR", "/tmp");
        assert_eq!(env, [("TMPDIR".to_owned(), "/tmp".to_owned())]);
    }
}

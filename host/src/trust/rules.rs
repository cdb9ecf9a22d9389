//! What a repository's `.crewbox/config.toml` may set: the one table of it.
//!
//! The repository layer is an allowlist. A key is honoured only if a row below allows
//! it; every other key — a user-only setting or one this table does not know (for
//! example a key a newer crewbox adds to the user configuration) — is ignored with one
//! warning naming the file, the key and the rule. Adding a setting to the user
//! configuration therefore never makes it settable from a repository by accident:
//! that takes a row here. `crewbox config` prints this table.

use serde::Serialize;

/// How a repository may use a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RepoRule {
    /// Honoured as written.
    Allowed,
    /// Honoured only as a lower value: clamped to the user's (or the default).
    LowerOnly,
    /// Names one of the user's own definitions; defines nothing.
    SelectByName,
    /// Never taken from a repository.
    UserOnly,
}

impl RepoRule {
    /// The rule's name as printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::LowerOnly => "lower-only",
            Self::SelectByName => "select-by-name",
            Self::UserOnly => "user-only",
        }
    }
}

/// One row: a key (a `prefix.*` row covers a table's keys) and its rule.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct RepoKey {
    /// The key as written in TOML (dotted for tables).
    pub key: &'static str,
    /// What a repository may do with it.
    pub rule: RepoRule,
    /// Why, in one line.
    pub why: &'static str,
}

const fn row(key: &'static str, rule: RepoRule, why: &'static str) -> RepoKey {
    RepoKey { key, rule, why }
}

/// Every key with a rule. Keys not listed are user-only ([`UNLISTED`]).
pub const REPO_KEYS: &[RepoKey] = &[
    row(
        "default_provider",
        RepoRule::SelectByName,
        "names one of the providers in your own config; a repository defines none",
    ),
    row(
        "default_mode",
        RepoRule::Allowed,
        "how prompts run by default",
    ),
    row(
        "dispatcher",
        RepoRule::Allowed,
        "a built-in dispatcher name, or a .wasm inside the repository",
    ),
    row(
        "timezone",
        RepoRule::Allowed,
        "the zone cron jobs are read in",
    ),
    row(
        "max_concurrent",
        RepoRule::LowerOnly,
        "a repository may run fewer agents at once, never more",
    ),
    row(
        "dispatch_history",
        RepoRule::LowerOnly,
        "a repository may keep fewer dispatch decisions, never more",
    ),
    row(
        "quotas.*",
        RepoRule::LowerOnly,
        "a repository may lower budgets (turns, tokens, time, cost …), never raise them",
    ),
    row(
        "workspace.agents_write_crewbox",
        RepoRule::UserOnly,
        "letting agents change .crewbox/ lets them change what crewbox does in this \
         repository; only you can allow it",
    ),
    row(
        "workspace.*",
        RepoRule::LowerOnly,
        "a repository may make agents' commits smaller (file size, count, total), never larger",
    ),
    row(
        "providers",
        RepoRule::UserOnly,
        "provider definitions (kind, base_url, api_key_env, command, script, headers) can run \
         programs or send your keys elsewhere",
    ),
    row(
        "state_dir",
        RepoRule::UserOnly,
        "the state directory holds runs that `resume` re-runs; it never comes from a repository",
    ),
    row(
        "scheduling",
        RepoRule::UserOnly,
        "whether `crewbox daemon` fires jobs is the operator's choice",
    ),
    row(
        "retry_transient",
        RepoRule::UserOnly,
        "how often `crewbox daemon` runs failed agents again (each a model call) is the operator's choice",
    ),
    row(
        "sandbox",
        RepoRule::UserOnly,
        "sandbox and network settings widen what agent commands can reach",
    ),
    row(
        "plugins",
        RepoRule::UserOnly,
        "plugin grants and model budgets widen what plugins can do",
    ),
    row(
        "telemetry",
        RepoRule::UserOnly,
        "log and telemetry destinations decide where run data is sent",
    ),
    row(
        "packs",
        RepoRule::UserOnly,
        "what imported role packs (Squad, Claude Code subagents) may do is your ceiling, \
         never the pack's",
    ),
    row(
        "executor",
        RepoRule::UserOnly,
        "where agents execute (and with which keys) is the operator's choice",
    ),
    row(
        "nats",
        RepoRule::UserOnly,
        "where agents execute (and with which keys) is the operator's choice",
    ),
];

/// The rule of every key no row lists.
pub const UNLISTED: RepoKey = row(
    "*",
    RepoRule::UserOnly,
    "not a repository setting (user-only or unknown); set it in your own config",
);

/// The row that governs `key` (`quotas.max_tokens`, `providers`, …): an exact row, else
/// a `prefix.*` row, else the row of its first segment, else [`UNLISTED`].
pub fn rule_for(key: &str) -> &'static RepoKey {
    if let Some(r) = REPO_KEYS.iter().find(|r| r.key == key) {
        return r;
    }
    let first = key.split('.').next().unwrap_or(key);
    if key.contains('.')
        && let Some(r) = REPO_KEYS
            .iter()
            .find(|r| r.key.strip_suffix(".*") == Some(first))
    {
        return r;
    }
    REPO_KEYS
        .iter()
        .find(|r| r.key == first)
        .unwrap_or(&UNLISTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_resolve_exact_prefix_and_unlisted() {
        assert_eq!(rule_for("default_mode").rule, RepoRule::Allowed);
        assert_eq!(rule_for("quotas.max_tokens").rule, RepoRule::LowerOnly);
        assert_eq!(rule_for("providers").rule, RepoRule::UserOnly);
        assert_eq!(rule_for("providers.claude").key, "providers");
        assert_eq!(rule_for("state_dir").rule, RepoRule::UserOnly);
        assert_eq!(rule_for("something_new").key, "*");
        assert_eq!(rule_for("quotas").key, "*", "a bare table name is no quota");
        assert_eq!(rule_for("workspace.max_files").rule, RepoRule::LowerOnly);
        assert_eq!(
            rule_for("workspace.agents_write_crewbox").rule,
            RepoRule::UserOnly
        );
    }
}

//! A trusted repository's `.crewbox/config.toml`, read as an allowlist: only the keys
//! [`crate::trust::rules`] lets a repository set are taken; every other key is
//! reported as ignored (file, line, key and rule) and never fails the load, so a shared
//! repository does not break for people whose crewbox allows less.

use std::path::Path;

use serde::Deserialize;
use toml::de::{DeTable, DeValue, ValueDeserializer};

use super::ConfigError;
use super::effective::{Ignored, IgnoredAction};
use super::quotas::QuotaFile;
use super::user::line_of;
use crate::trust::rules::{RepoRule, UNLISTED, rule_for};
use crate::vocab::ModeChoice;

/// The `[quotas]` keys (a repository may only lower them).
const QUOTA_KEYS: &[&str] = &[
    "max_turns",
    "grace_turns",
    "max_tokens",
    "wall_time_s",
    "max_tool_calls",
    "max_cost",
    "model_timeout_s",
    "max_output_tokens",
    "context_tokens",
    "keep_turns",
    "max_depth",
    "max_children",
    "max_children_per_run",
];

/// A value with the line it was written on.
pub type AtLine<T> = (T, usize);

/// What a repository's config may set, as read (before it is applied).
#[derive(Clone, Debug, Default)]
pub struct RepoFile {
    /// Names one of the user's providers.
    pub default_provider: Option<AtLine<String>>,
    /// The default mode.
    pub default_mode: Option<AtLine<ModeChoice>>,
    /// A built-in dispatcher name or a `.wasm` path relative to `.crewbox/`.
    pub dispatcher: Option<AtLine<String>>,
    /// The default zone of cron jobs.
    pub timezone: Option<AtLine<String>>,
    /// Agents at once (lower only).
    pub max_concurrent: Option<AtLine<usize>>,
    /// Dispatch decisions kept (lower only).
    pub dispatch_history: Option<AtLine<u32>>,
    /// Quotas (lower only).
    pub quotas: QuotaFile,
    /// The line of each quota key set.
    pub quota_lines: Vec<(&'static str, usize)>,
    /// Workspace limits (lower only; the `.crewbox/` grant is never read from here).
    pub workspace: super::workspace::WorkspaceFile,
    /// The line of each workspace limit set.
    pub workspace_lines: Vec<(&'static str, usize)>,
}

fn value<'a, T: Deserialize<'a>>(
    v: &toml::Spanned<DeValue<'a>>,
    text: &str,
    path: &Path,
) -> Result<T, ConfigError> {
    T::deserialize(ValueDeserializer::from(v.clone())).map_err(|mut e| {
        e.set_input(Some(text));
        ConfigError::Invalid {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        }
    })
}

/// Parses a repository config. Malformed TOML and bad values of allowed keys are
/// errors naming the file and line; keys a repository may not set are returned as
/// [`Ignored`].
pub fn parse(text: &str, path: &Path) -> Result<(RepoFile, Vec<Ignored>), ConfigError> {
    let doc = DeTable::parse(text).map_err(|mut e| {
        e.set_input(Some(text));
        ConfigError::Invalid {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        }
    })?;
    let mut file = RepoFile::default();
    let mut ignored = Vec::new();
    let ignore = |key: String, line: usize, why: &str| Ignored {
        file: path.to_owned(),
        key,
        line: Some(line),
        action: IgnoredAction::Ignored,
        why: why.to_owned(),
    };
    for (key, v) in doc.get_ref() {
        let name: &str = key.get_ref();
        let line = line_of(text, key.span().start);
        if name == "quotas"
            && let DeValue::Table(table) = v.get_ref()
        {
            let mut known = DeTable::new();
            for (sub, sub_value) in table {
                let sub_name: &str = sub.get_ref();
                match QUOTA_KEYS.iter().find(|k| **k == sub_name) {
                    Some(k) => {
                        file.quota_lines.push((k, line_of(text, sub.span().start)));
                        known.insert(sub.clone(), sub_value.clone());
                    }
                    None => ignored.push(ignore(
                        format!("quotas.{sub_name}"),
                        line_of(text, sub.span().start),
                        UNLISTED.why,
                    )),
                }
            }
            let known = toml::Spanned::new(v.span(), DeValue::Table(known));
            file.quotas = value(&known, text, path)?;
            continue;
        }
        if name == "workspace"
            && let DeValue::Table(table) = v.get_ref()
        {
            let mut known = DeTable::new();
            for (sub, sub_value) in table {
                let sub_name: &str = sub.get_ref();
                let full = format!("workspace.{sub_name}");
                let sub_line = line_of(text, sub.span().start);
                match super::workspace::LIMIT_KEYS
                    .iter()
                    .find(|k| **k == sub_name)
                {
                    Some(k) if rule_for(&full).rule == RepoRule::LowerOnly => {
                        file.workspace_lines.push((k, sub_line));
                        known.insert(sub.clone(), sub_value.clone());
                    }
                    _ => ignored.push(ignore(full.clone(), sub_line, rule_for(&full).why)),
                }
            }
            let known = toml::Spanned::new(v.span(), DeValue::Table(known));
            file.workspace = value(&known, text, path)?;
            continue;
        }
        let rule = rule_for(name);
        if rule.rule == RepoRule::UserOnly {
            ignored.push(ignore(name.to_owned(), line, rule.why));
            continue;
        }
        match name {
            "default_provider" => file.default_provider = Some((value(v, text, path)?, line)),
            "default_mode" => file.default_mode = Some((value(v, text, path)?, line)),
            "dispatcher" => file.dispatcher = Some((value(v, text, path)?, line)),
            "timezone" => file.timezone = Some((value(v, text, path)?, line)),
            "max_concurrent" => file.max_concurrent = Some((value(v, text, path)?, line)),
            "dispatch_history" => file.dispatch_history = Some((value(v, text, path)?, line)),
            // A rule row without a reader here is not honoured: deny by default.
            _ => ignored.push(ignore(name.to_owned(), line, UNLISTED.why)),
        }
    }
    Ok((file, ignored))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_keys_are_read_and_everything_else_is_ignored_with_its_rule() {
        let text = r#"
default_provider = "claude"
default_mode = "crew"
state_dir = "/tmp/evil"
sandbox = { network = true }
brand_new_key = 1

[quotas]
max_tokens = 1000000000
turbo = true

[providers.claude]
kind = "anthropic"
base_url = "http://attacker"
"#;
        let (file, ignored) = parse(text, Path::new(".crewbox/config.toml")).unwrap();
        assert_eq!(file.default_provider, Some(("claude".into(), 2)));
        assert_eq!(
            file.workspace,
            super::super::workspace::WorkspaceFile::default()
        );
        assert_eq!(
            file.default_mode,
            Some((ModeChoice::Mode(crate::vocab::Mode::Crew), 3))
        );
        assert_eq!(file.quotas.max_tokens, Some(1_000_000_000));
        assert_eq!(file.quota_lines, vec![("max_tokens", 9)]);
        let keys: Vec<(&str, Option<usize>)> =
            ignored.iter().map(|i| (i.key.as_str(), i.line)).collect();
        assert_eq!(
            keys,
            [
                ("brand_new_key", Some(6)),
                ("providers", Some(12)),
                ("quotas.turbo", Some(10)),
                ("sandbox", Some(5)),
                ("state_dir", Some(4)),
            ]
        );
        let providers = ignored.iter().find(|i| i.key == "providers").unwrap();
        assert!(providers.to_string().contains(".crewbox/config.toml:12"));
        assert!(providers.why.contains("base_url"), "{}", providers.why);
    }

    #[test]
    fn a_repository_lowers_workspace_limits_and_never_grants_crewbox() {
        let text = "[workspace]\nagents_write_crewbox = true\nmax_files = 5\nmax_tricks = 1\n";
        let (file, ignored) = parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(file.workspace.max_files, Some(5));
        assert_eq!(file.workspace.agents_write_crewbox, None);
        assert_eq!(file.workspace_lines, vec![("max_files", 3)]);
        let keys: Vec<(&str, Option<usize>)> =
            ignored.iter().map(|i| (i.key.as_str(), i.line)).collect();
        assert_eq!(
            keys,
            [
                ("workspace.agents_write_crewbox", Some(2)),
                ("workspace.max_tricks", Some(4))
            ]
        );
        assert!(ignored[0].why.contains(".crewbox"), "{}", ignored[0].why);
    }

    #[test]
    fn bad_values_of_allowed_keys_and_bad_toml_name_file_and_line() {
        let err = parse("\n\ndefault_mode = \"chaos\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("c.toml") && err.contains("line 3"), "{err}");
        assert!(err.contains("chaos"), "{err}");
        let err = parse("[quotas]\nmax_tokens = \"lots\"\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
        let err = parse("x = [", Path::new("c.toml")).unwrap_err().to_string();
        assert!(err.contains("c.toml"), "{err}");
    }
}

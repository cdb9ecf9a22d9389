//! What a pack's declared model means for the provider a member runs on.
//!
//! Packs name models the way their tool does: Claude Code aliases (`sonnet`, `opus`,
//! `haiku`), Anthropic ids, Copilot-style ids with dots (`claude-sonnet-4.6`) or
//! OpenAI ids (`gpt-5`). A declared model is used when the member's provider can
//! serve it; otherwise the provider's own default model is used and the run says
//! so. Aliases resolve through the user's `[packs.models]` table, then the built-in
//! one below.

use std::collections::BTreeMap;

use crate::provider::config::ProviderConfig;

/// The built-in aliases (Claude Code's), overridable in `[packs.models]`.
pub const ALIASES: &[(&str, &str)] = &[
    ("opus", "claude-opus-4-1"),
    ("sonnet", "claude-sonnet-4-5"),
    ("haiku", "claude-haiku-4-5"),
];

/// The id a declared model stands for: an alias resolved (the user's table first),
/// an Anthropic id without dots (`claude-sonnet-4.6` is `claude-sonnet-4-6`), any
/// other name as written.
pub fn canonical(declared: &str, aliases: &BTreeMap<String, String>) -> String {
    let trimmed = declared.trim();
    let lower = trimmed.to_ascii_lowercase();
    let id = aliases
        .get(&lower)
        .cloned()
        .or_else(|| {
            ALIASES
                .iter()
                .find(|(a, _)| *a == lower)
                .map(|(_, id)| (*id).to_owned())
        })
        .unwrap_or_else(|| trimmed.to_owned());
    if id.starts_with("claude-") {
        id.replace('.', "-")
    } else {
        id
    }
}

/// The model id to ask `provider` for, or why it cannot serve `declared` (then the
/// provider's default is used).
pub fn resolve(
    declared: &str,
    provider: &ProviderConfig,
    aliases: &BTreeMap<String, String>,
) -> Result<String, String> {
    let id = canonical(declared, aliases);
    let unknown = |kind: &str| {
        Err(format!(
            "model `{declared}` is not one {kind} provider serves; its default model is used"
        ))
    };
    match provider {
        ProviderConfig::Anthropic(_) if id.starts_with("claude-") => Ok(id),
        ProviderConfig::Anthropic(_) => unknown("an Anthropic"),
        ProviderConfig::Openai(_) if is_openai(&id) => Ok(id),
        ProviderConfig::Openai(_) => unknown("an OpenAI"),
        ProviderConfig::Scripted(_) => unknown("the scripted"),
        ProviderConfig::Command(_) => unknown("a command"),
        ProviderConfig::Replay(_) => unknown("the replay"),
    }
}

fn is_openai(id: &str) -> bool {
    id.starts_with("gpt-")
        || id.starts_with("chatgpt-")
        || id.starts_with("codex-")
        || (id.starts_with('o') && id[1..].starts_with(|c: char| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anthropic() -> ProviderConfig {
        toml::from_str("kind = \"anthropic\"\nmodel = \"m\"\n").unwrap()
    }

    fn openai() -> ProviderConfig {
        toml::from_str("kind = \"openai\"\nbase_url = \"http://x\"\nmodel = \"m\"\n").unwrap()
    }

    #[test]
    fn aliases_ids_and_fallbacks() {
        let none = BTreeMap::new();
        let mine: BTreeMap<String, String> =
            [("opus".to_owned(), "claude-opus-9".to_owned())].into();
        assert_eq!(
            resolve("sonnet", &anthropic(), &none).unwrap(),
            "claude-sonnet-4-5"
        );
        assert_eq!(
            resolve("opus", &anthropic(), &mine).unwrap(),
            "claude-opus-9"
        );
        assert_eq!(
            resolve("claude-sonnet-4.6", &anthropic(), &none).unwrap(),
            "claude-sonnet-4-6"
        );
        assert!(resolve("gpt-5", &anthropic(), &none).is_err());
        assert_eq!(resolve("gpt-5.4", &openai(), &none).unwrap(), "gpt-5.4");
        assert_eq!(resolve("o3-mini", &openai(), &none).unwrap(), "o3-mini");
        let err = resolve("sonnet", &openai(), &none).unwrap_err();
        assert!(err.contains("`sonnet`") && err.contains("default"), "{err}");
        let scripted: ProviderConfig = toml::from_str("kind = \"scripted\"\n").unwrap();
        assert!(resolve("haiku", &scripted, &none).is_err());
    }
}

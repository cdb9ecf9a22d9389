//! Which provider a run uses: the one place that decides it.
//!
//! - `--script FILE` (or `--provider scripted --script FILE`): the scripted model with
//!   that script;
//! - `--provider NAME`: the user's `[providers.NAME]`, or one of the built-in
//!   `anthropic` / `openai` providers;
//! - neither: `default_provider` (the user's, or one a trusted repository selects by
//!   name); with none set, `anthropic` when `ANTHROPIC_API_KEY` is set, else `openai`
//!   when `OPENAI_API_KEY` is set, else an error saying how to configure one.
//!
//! The scripted model never answers unless named: the embedded demo script is used by
//! `crewbox demo` only.

use std::path::{Path, PathBuf};

use super::Config;
use super::effective::Source;
use crate::provider::config::{ProviderConfig, ScriptedConfig};

/// The name of the scripted provider.
pub const SCRIPTED: &str = "scripted";
/// The model of the built-in `anthropic` provider.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "claude-sonnet-4-5";
/// The model of the built-in `openai` provider.
pub const DEFAULT_OPENAI_MODEL: &str = "gpt-4.1";

/// The built-in providers, present unless the user defines the same name: the
/// vendors' own endpoints with their usual key variables (every other setting is the
/// provider's documented default).
pub fn builtin_providers() -> Vec<(&'static str, ProviderConfig)> {
    let tables = [
        (
            "anthropic",
            format!("kind = \"anthropic\"\nmodel = \"{DEFAULT_ANTHROPIC_MODEL}\"\n"),
        ),
        (
            "openai",
            format!(
                "kind = \"openai\"\nbase_url = \"https://api.openai.com/v1\"\n\
                 model = \"{DEFAULT_OPENAI_MODEL}\"\napi_key_env = \"OPENAI_API_KEY\"\n"
            ),
        ),
    ];
    // Both parse (a unit test says so); a table that did not would just be absent.
    tables
        .into_iter()
        .filter_map(|(name, text)| toml::from_str(&text).ok().map(|p| (name, p)))
        .collect()
}

/// Why no provider could be chosen.
#[derive(Debug, thiserror::Error)]
pub enum ProviderChoiceError {
    /// Nothing names a provider and no key variable is set.
    #[error(
        "no model provider is configured: set `default_provider` and a [providers.NAME] table \
         in {config}, pass --provider NAME, or export ANTHROPIC_API_KEY or OPENAI_API_KEY \
         (the built-in `anthropic` / `openai` providers use them); `crewbox demo` shows the \
         scripted model without any{note}"
    )]
    NoneConfigured {
        /// Where the user's config lives.
        config: String,
        /// Why a repository's choice did not count, when it made one.
        note: String,
    },
    /// The name is not a provider of the user's.
    #[error(
        "unknown provider `{}` (configured: {known})",
        crate::text::escape(name)
    )]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names there are.
        known: String,
    },
    /// `scripted` was named without a script.
    #[error(
        "the scripted provider needs a script: pass --script FILE (`crewbox demo` runs the \
         built-in demo script)"
    )]
    ScriptedWithoutScript,
}

/// The provider a run uses, with the directory its relative paths resolve against.
#[derive(Clone, Debug)]
pub struct ProviderChoice {
    /// Its name.
    pub name: String,
    /// Its configuration.
    pub config: ProviderConfig,
    /// Where a relative `script` resolves.
    pub base_dir: Option<PathBuf>,
    /// What chose it.
    pub chosen_by: Source,
}

impl Config {
    /// Picks the provider for a run: `script` and `requested` come from the command
    /// line (or a stored request), `env` reads environment variables.
    pub fn choose_provider(
        &self,
        requested: Option<&str>,
        script: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProviderChoice, ProviderChoiceError> {
        if let Some(script) = script {
            return Ok(ProviderChoice {
                name: SCRIPTED.into(),
                config: ProviderConfig::scripted_file(script.to_owned()),
                base_dir: None,
                chosen_by: Source::Cli {
                    flag: "--script".into(),
                },
            });
        }
        let (name, chosen_by) = match requested {
            Some(name) => (
                name.to_owned(),
                Source::Cli {
                    flag: "--provider".into(),
                },
            ),
            None => match &self.default_provider {
                Some(name) => (name.clone(), self.source_of("default_provider")),
                None => {
                    let set = |var: &str| env(var).is_some_and(|v| !v.trim().is_empty());
                    let (name, var) = if set("ANTHROPIC_API_KEY") {
                        ("anthropic", "ANTHROPIC_API_KEY")
                    } else if set("OPENAI_API_KEY") {
                        ("openai", "OPENAI_API_KEY")
                    } else {
                        return Err(ProviderChoiceError::NoneConfigured {
                            config: super::user_config_path()
                                .map(|p| p.display().to_string())
                                .unwrap_or_else(|| "~/.config/crewbox/config.toml".into()),
                            note: self.repo_note(),
                        });
                    };
                    (name.to_owned(), Source::Env { var: var.into() })
                }
            },
        };
        match self.providers.get(&name) {
            // The user's own scripted provider without a script plays the demo only if
            // the user wrote it so; a bare `--provider scripted` needs a script.
            Some(config) => Ok(ProviderChoice {
                base_dir: self.provider_dirs.get(&name).cloned(),
                config: config.clone(),
                name,
                chosen_by,
            }),
            None if name == SCRIPTED => Err(ProviderChoiceError::ScriptedWithoutScript),
            None => Err(ProviderChoiceError::Unknown {
                known: self
                    .providers
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                name,
            }),
        }
    }
}

impl Config {
    /// A sentence about the repository's config when it was not applied (for errors
    /// that a repository setting might seem to explain).
    fn repo_note(&self) -> String {
        match self.ignored.iter().find(|i| i.key == "*") {
            Some(i) => format!(". Note: {} was ignored: {}", i.file.display(), i.why),
            None => String::new(),
        }
    }
}

impl ProviderConfig {
    /// The scripted provider with the embedded demo script (`crewbox demo` only).
    pub fn demo_scripted() -> Self {
        ProviderConfig::Scripted(ScriptedConfig::default())
    }

    /// A scripted provider reading `script`.
    pub fn scripted_file(script: PathBuf) -> Self {
        ProviderConfig::Scripted(ScriptedConfig {
            script: Some(script),
            ..Default::default()
        })
    }

    /// Overrides the model (`--model`); scripted providers have none.
    pub fn set_model(&mut self, model: &str) {
        match self {
            ProviderConfig::Scripted(_) => {}
            ProviderConfig::Openai(c) => c.model = model.to_owned(),
            ProviderConfig::Anthropic(c) => c.model = model.to_owned(),
            ProviderConfig::Command(c) => c.model = Some(model.to_owned()),
            // A recording answers as it was recorded.
            ProviderConfig::Replay(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn builtin_providers_are_the_vendors_endpoints() {
        let b = builtin_providers();
        let names: Vec<&str> = b.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["anthropic", "openai"]);
        let crate::provider::config::ProviderConfig::Anthropic(a) = &b[0].1 else {
            panic!("anthropic")
        };
        assert_eq!(
            (
                a.base_url.as_str(),
                a.model.as_str(),
                a.api_key_env.as_str()
            ),
            (
                "https://api.anthropic.com",
                DEFAULT_ANTHROPIC_MODEL,
                "ANTHROPIC_API_KEY"
            )
        );
        let crate::provider::config::ProviderConfig::Openai(o) = &b[1].1 else {
            panic!("openai")
        };
        assert_eq!(o.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        assert_eq!(o.model, DEFAULT_OPENAI_MODEL);
    }

    #[test]
    fn no_provider_means_a_real_vendor_by_key_or_an_error_never_the_demo() {
        let cfg = Config::default();
        let err = cfg.choose_provider(None, None, &env(&[])).unwrap_err();
        assert!(matches!(err, ProviderChoiceError::NoneConfigured { .. }));
        assert!(err.to_string().contains("ANTHROPIC_API_KEY"), "{err}");
        let c = cfg
            .choose_provider(None, None, &env(&[("OPENAI_API_KEY", "sk")]))
            .unwrap();
        assert_eq!(c.name, "openai");
        let c = cfg
            .choose_provider(
                None,
                None,
                &env(&[("OPENAI_API_KEY", "sk"), ("ANTHROPIC_API_KEY", "sk")]),
            )
            .unwrap();
        assert_eq!(c.name, "anthropic");
        assert_eq!(
            c.chosen_by,
            Source::Env {
                var: "ANTHROPIC_API_KEY".into()
            }
        );
        let err = cfg
            .choose_provider(Some("scripted"), None, &env(&[]))
            .unwrap_err();
        assert!(matches!(err, ProviderChoiceError::ScriptedWithoutScript));
        let c = cfg
            .choose_provider(Some("scripted"), Some(Path::new("/s.toml")), &env(&[]))
            .unwrap();
        assert_eq!(c.config, ProviderConfig::scripted_file("/s.toml".into()));
        let err = cfg
            .choose_provider(Some("nope"), None, &env(&[]))
            .unwrap_err();
        assert!(err.to_string().contains("unknown provider `nope`"), "{err}");
    }
}

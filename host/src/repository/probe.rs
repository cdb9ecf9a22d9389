//! What `crewbox health --provider NAME` asks a repository: a configured
//! OpenAI-compatible server's llama.cpp `/props`, and what crewbox would run into with
//! it (a chat template that renders no tools, a context window or slot count the
//! provider's settings do not match). Typed answers; the binary renders them.

use std::time::Duration;

use crate::config::ProviderChoiceError;
use crate::provider::config::ProviderConfig;
use crate::provider::props::{self, ServerProps};

use super::Repository;

/// How long the probe waits for the server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What [`Repository::probe_provider`] found for one provider.
#[derive(Clone, Debug)]
pub struct ProviderProbe {
    /// The provider, as the config names it.
    pub name: String,
    /// What its server said.
    pub outcome: ProbeOutcome,
}

/// What a provider's server said when asked for `/props`.
#[derive(Clone, Debug)]
pub enum ProbeOutcome {
    /// Not an OpenAI-compatible provider: only those servers publish `/props`.
    NotProbed,
    /// The server did not answer.
    Unreachable {
        /// The URL asked.
        props_url: String,
        /// Why not (redacted).
        error: String,
    },
    /// The server answered, but not as llama.cpp's `/props` (another server).
    NoProps {
        /// The URL asked.
        props_url: String,
    },
    /// llama.cpp's `/props`, beside the provider's own settings.
    Props {
        /// The URL asked.
        props_url: String,
        /// What the server says.
        props: ServerProps,
        /// The provider's `context_tokens`, if set.
        context_tokens: Option<u64>,
        /// The provider's `max_concurrent`, if set.
        max_concurrent: Option<usize>,
    },
}

impl ProviderProbe {
    /// Whether what the probe found stops agents from working: the server cannot be
    /// reached, or its chat template renders no tools.
    pub fn stops_agents(&self) -> bool {
        match &self.outcome {
            ProbeOutcome::Unreachable { .. } => true,
            ProbeOutcome::Props { props, .. } => props.supports_tools == Some(false),
            ProbeOutcome::NotProbed | ProbeOutcome::NoProps { .. } => false,
        }
    }
}

impl Repository {
    /// Asks the server of provider `name` (as the config in force defines it, its key
    /// read from the environment through `env` and registered as a secret) for
    /// llama.cpp's `/props`. A provider the config does not define is an error; a
    /// server that does not answer is an outcome.
    pub async fn probe_provider(
        &self,
        name: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ProviderProbe, ProviderChoiceError> {
        let choice = self.config.choose_provider(Some(name), None, env)?;
        let ProviderConfig::Openai(c) = &choice.config else {
            return Ok(ProviderProbe {
                name: choice.name,
                outcome: ProbeOutcome::NotProbed,
            });
        };
        let props_url = props::url(&c.base_url);
        let key = c.api_key_env.as_deref().and_then(env).inspect(|k| {
            crate::redact::register(k);
        });
        let outcome = match props::ask(&c.base_url, key.as_deref(), PROBE_TIMEOUT).await {
            Err(e) => ProbeOutcome::Unreachable {
                props_url,
                error: crate::redact::clean_owned(e),
            },
            Ok(None) => ProbeOutcome::NoProps { props_url },
            Ok(Some(props)) => ProbeOutcome::Props {
                props_url,
                props,
                context_tokens: c.context_tokens,
                max_concurrent: c.max_concurrent,
            },
        };
        Ok(ProviderProbe {
            name: choice.name,
            outcome,
        })
    }
}

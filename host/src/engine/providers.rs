//! Building the model providers a run uses: the one the request names (or the
//! configured default, or `--script`), with `--model` applied, sharing the engine's
//! circuit breakers.

use std::sync::Arc;

use super::error::EngineError;
use super::request::RunRequest;
use super::services::Services;
use crate::provider::config::{BuildContext, Prices};
use crate::provider::{Provider, ProviderConfig};

/// The scripted demo conversation embedded in the binary.
pub const DEMO_SCRIPT: &str = include_str!("../../assets/demo/script.toml");

/// A built provider with its name and prices.
pub(crate) struct BuiltProvider {
    /// The provider's configured name (`scripted` for `--script`).
    pub name: String,
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// Prices for cost budgets, when configured.
    pub prices: Option<Prices>,
}

/// Builds the provider named by `req` (or the default), with its overrides applied.
pub(crate) fn build(services: &Services, req: &RunRequest) -> Result<BuiltProvider, EngineError> {
    let config = services.config();
    let env = |var: &str| std::env::var(var).ok();
    // Which provider: decided in one place (config/provider.rs).
    let choice = config.choose_provider(req.provider.as_deref(), req.script.as_deref(), &env)?;
    let (name, mut cfg) = (choice.name, choice.config);
    if let Some(model) = &req.model {
        cfg.set_model(model);
    }
    let base_dir = choice
        .base_dir
        .unwrap_or_else(|| services.repo().to_path_buf());
    let ctx = BuildContext {
        breakers: services.breakers(),
        clients: services.http_clients(),
        base_dir: &base_dir,
        env: &env,
        default_script: DEMO_SCRIPT,
        sandbox: services.manager().sandbox(),
    };
    let provider = match &cfg {
        // A run's recording is read from this repository's store.
        ProviderConfig::Replay(c) => crate::provider::config::build_replay(
            &name,
            c,
            &base_dir,
            Some(services.store().path()),
        ),
        other => crate::provider::config::build(&name, other, &ctx),
    }
    .map_err(|source| EngineError::Provider {
        name: name.clone(),
        source,
    })?;
    let prices = config.providers.get(&name).and_then(|p| p.prices());
    Ok(BuiltProvider {
        name,
        provider,
        prices,
    })
}

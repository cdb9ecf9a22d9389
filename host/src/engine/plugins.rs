//! The plugins a run uses: built-ins by name or components by path, loaded once per
//! process with the grants their kind allows (compiled components are cached on disk).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;

use super::error::{EngineError, PluginLoadError};
use super::validate::ValidatorEntry;
use crate::plugin::builtin::{BUILTINS, Builtin};
use crate::plugin::{
    Grants, ModelBudget, Plugin, PluginKind, PluginRuntime, PluginSource, UserGrant,
};
use crate::vocab::{Access, Mode};

/// Budget of a built-in validator that asks the model (criteria-judge).
pub const JUDGE_BUDGET: ModelBudget = ModelBudget {
    tokens: 50_000,
    time: Duration::from_secs(120),
};

/// Built-ins granted the model import (trusted: they ship with crewbox).
const MODEL_BUILTINS: &[&str] = &["criteria-judge"];

/// Loaded plugins, by name or path.
#[derive(Clone)]
pub struct PluginSet {
    runtime: PluginRuntime,
    base_dir: PathBuf,
    user_grants: Arc<[UserGrant]>,
    /// Whether names are also looked up in `base_dir`'s `.crewbox/plugins/` (a trusted
    /// repository only).
    repo_plugins: bool,
    loaded: Arc<Mutex<HashMap<String, Plugin>>>,
}

impl PluginSet {
    /// Plugins resolved against `base_dir` (relative paths), compiled by `runtime`.
    pub fn new(runtime: PluginRuntime, base_dir: PathBuf) -> Self {
        Self {
            runtime,
            base_dir,
            user_grants: Arc::from([]),
            repo_plugins: false,
            loaded: Arc::default(),
        }
    }

    /// With the grants of the user's own config (`[plugins.grants.NAME]`).
    pub fn with_user_grants(mut self, grants: Vec<UserGrant>) -> Self {
        self.user_grants = grants.into();
        self
    }

    /// Also finds plugins by name in the repository's `.crewbox/plugins/`: pass whether
    /// the user trusts the repository (an untrusted one's plugins are never opened).
    pub fn with_repo_plugins(mut self, trusted: bool) -> Self {
        self.repo_plugins = trusted;
        self
    }

    /// The runtime.
    pub fn runtime(&self) -> &PluginRuntime {
        &self.runtime
    }

    /// A built-in by name, or a `.wasm` file by path; it must be of `kind`.
    pub async fn get(&self, name_or_path: &str, kind: PluginKind) -> Result<Plugin, EngineError> {
        if let Some(p) = self.loaded.lock().await.get(name_or_path) {
            return Ok(p.clone());
        }
        let plugin = match builtin(name_or_path) {
            Some(b) => {
                if b.kind != kind {
                    return Err(PluginLoadError::WrongKind {
                        what: "built-in plugin",
                        name: b.name.to_owned(),
                        actual: b.kind,
                        expected: kind,
                    }
                    .into());
                }
                let wasm = b.wasm().map_err(PluginLoadError::Damaged)?;
                let grants = grants_for(b.name, &PluginSource::Builtin, kind, &wasm, &[]);
                self.runtime
                    .load(b.name, PluginSource::Builtin, wasm, grants, None)
                    .await
                    .map_err(PluginLoadError::Runtime)?
            }
            None => self.load_file(name_or_path, kind).await?,
        };
        if plugin.kind() != kind {
            return Err(PluginLoadError::WrongKind {
                what: "plugin",
                name: name_or_path.to_owned(),
                actual: plugin.kind(),
                expected: kind,
            }
            .into());
        }
        self.loaded
            .lock()
            .await
            .insert(name_or_path.to_owned(), plugin.clone());
        Ok(plugin)
    }

    /// Loads the validators that `NAME[=CRITERION]` arguments name, in order.
    pub async fn validators(&self, args: &[String]) -> Result<Vec<ValidatorEntry>, EngineError> {
        let mut out = Vec::new();
        for (name, criteria) in parse_validator_args(args) {
            let plugin = self.get(&name, PluginKind::Validator).await?;
            out.push(ValidatorEntry { plugin, criteria });
        }
        Ok(out)
    }

    /// A plugin that is not a built-in: a `.wasm` path (relative to the repository), or
    /// a name in the trusted repository's `.crewbox/plugins/` or the user's plugins, as
    /// `validate --plugin NAME` resolves it.
    async fn load_file(&self, spec: &str, kind: PluginKind) -> Result<Plugin, EngineError> {
        use crate::plugin::discover;
        // A FIFO or a link to a device named by a config must not hang or exhaust us.
        let max = self.runtime.compile_limits().max_component_bytes;
        let repo = self.repo_plugins.then(|| self.base_dir.clone());
        let (owned, base) = (spec.to_owned(), self.base_dir.clone());
        let found = tokio::task::spawn_blocking(move || {
            discover::resolve_in(&owned, &base, repo.as_deref(), max)
        })
        .await
        .map_err(|e| EngineError::Internal(format!("reading plugin {spec}: {e}")))?
        .map_err(PluginLoadError::File)?;
        let Some(found) = found else {
            let names: Vec<&str> = BUILTINS
                .iter()
                .filter(|b| b.kind == kind)
                .map(|b| b.name)
                .collect();
            let dirs: Vec<String> =
                discover::searched(self.repo_plugins.then_some(&*self.base_dir))
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect();
            return Err(PluginLoadError::NotFound {
                name: crate::text::escape(spec).into_owned(),
                kind,
                builtins: names,
                searched: dirs,
            }
            .into());
        };
        let grants = grants_for(
            &found.name,
            &found.source,
            kind,
            &found.bytes,
            &self.user_grants,
        );
        self.runtime
            .load(&found.name, found.source, found.bytes, grants, None)
            .await
            .map_err(|e| PluginLoadError::Runtime(e).into())
    }
}

// The WIT package has its own `mode` and `access` enums (generated by `bindgen!`); they
// become crewbox's vocabulary here, at the boundary, and nowhere else.

/// The WIT mode a dispatcher answers with, as crewbox names it.
impl From<crate::plugin::Mode> for Mode {
    fn from(mode: crate::plugin::Mode) -> Self {
        use crate::plugin::Mode as P;
        match mode {
            P::Single => Mode::Single,
            P::Swarm => Mode::Swarm,
            P::Crew => Mode::Crew,
            P::Broadcast => Mode::Broadcast,
            P::Sequential => Mode::Sequential,
            P::Orchestrate => Mode::Orchestrate,
            P::Reflect => Mode::Reflect,
        }
    }
}

/// A crewbox mode as the WIT package names it (the modes offered to a dispatcher).
impl From<Mode> for crate::plugin::Mode {
    fn from(mode: Mode) -> Self {
        use crate::plugin::Mode as P;
        match mode {
            Mode::Single => P::Single,
            Mode::Swarm => P::Swarm,
            Mode::Crew => P::Crew,
            Mode::Broadcast => P::Broadcast,
            Mode::Sequential => P::Sequential,
            Mode::Orchestrate => P::Orchestrate,
            Mode::Reflect => P::Reflect,
        }
    }
}

/// The access a role plugin asks for, as crewbox names it.
impl From<crate::plugin::Access> for Access {
    fn from(access: crate::plugin::Access) -> Self {
        match access {
            crate::plugin::Access::ReadOnly => Access::ReadOnly,
            crate::plugin::Access::Full => Access::Full,
        }
    }
}

/// The grants a plugin gets: its kind's defaults, plus the model for the built-ins that
/// need it (trusted: they ship with crewbox). A file gets the model only from a grant in
/// the user's own config naming it, its path (and its hash, when pinned).
pub fn grants_for(
    name: &str,
    source: &PluginSource,
    kind: PluginKind,
    bytes: &[u8],
    user_grants: &[UserGrant],
) -> Grants {
    let grants = Grants::defaults_for(kind);
    if kind != PluginKind::Validator {
        return grants;
    }
    match source {
        PluginSource::Builtin if MODEL_BUILTINS.contains(&name) => grants.model(JUDGE_BUDGET),
        PluginSource::Builtin
        | PluginSource::User(_)
        | PluginSource::Repo(_)
        | PluginSource::File(_) => match user_grants
            .iter()
            .find(|g| g.applies_to(name, source, bytes))
            .and_then(|g| g.model)
        {
            Some(budget) => grants.model(budget),
            None => grants,
        },
    }
}

fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// Parses `NAME[=CRITERION]` arguments into validators with their criteria, in order;
/// repeated names collect their criteria.
pub fn parse_validator_args(args: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for arg in args {
        let (name, criterion) = match arg.split_once('=') {
            Some((n, c)) => (n.trim(), Some(c.trim().to_owned())),
            None => (arg.trim(), None),
        };
        match out.iter_mut().find(|(n, _)| n == name) {
            Some((_, criteria)) => criteria.extend(criterion),
            None => out.push((name.to_owned(), criterion.into_iter().collect())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validator_args_group_criteria_by_name() {
        let args: Vec<String> = [
            "no-secrets",
            "criteria-judge=tests pass",
            "criteria-judge=no TODOs",
            "x.wasm",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            parse_validator_args(&args),
            vec![
                ("no-secrets".into(), vec![]),
                (
                    "criteria-judge".into(),
                    vec!["tests pass".into(), "no TODOs".into()]
                ),
                ("x.wasm".into(), vec![]),
            ]
        );
    }
}

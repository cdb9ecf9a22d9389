//! Plugin kinds: which world a component implements.

use serde::{Deserialize, Serialize};

/// The world a plugin implements, detected from its exports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// Exports `crewbox:plugin/dispatch`: routes prompts to modes.
    Dispatcher,
    /// Exports `crewbox:plugin/validate`: judges agent output.
    Validator,
    /// Exports `crewbox:plugin/crew-role`: builds prompts and reads replies for a role.
    Role,
}

impl PluginKind {
    /// The kind's name as printed and configured.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dispatcher => "dispatcher",
            Self::Validator => "validator",
            Self::Role => "role",
        }
    }

    /// Parses a configured name.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Dispatcher, Self::Validator, Self::Role]
            .into_iter()
            .find(|k| k.as_str() == s)
    }

    /// The interface this kind exports (without version).
    pub fn export_interface(self) -> &'static str {
        match self {
            Self::Dispatcher => "crewbox:plugin/dispatch",
            Self::Validator => "crewbox:plugin/validate",
            Self::Role => "crewbox:plugin/crew-role",
        }
    }
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

//! Deny-by-default grants and the import rules checked before anything is linked.
//!
//! A plugin's kind decides what it may *ever* import; its grants (from the user's own
//! config) decide what it *does* get. Both are checked against the component's import
//! list, and every mismatch is reported, not just the first.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::kind::PluginKind;

/// A model budget, charged per call: every call that gets a model starts with all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ModelBudget {
    /// Input plus output tokens the plugin may spend in one call.
    pub tokens: u64,
    /// Wall time the plugin may spend waiting on the model in one call.
    pub time: Duration,
}

/// A grant from the user's own config (`[plugins.grants.NAME]`): it applies to the
/// plugin called `name` loaded from exactly `path` (and with exactly `sha256`, when
/// pinned), never to a built-in and never to a plugin a repository brought along.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UserGrant {
    /// The plugin's name (its file stem).
    pub name: String,
    /// The component file the grant is for.
    pub path: PathBuf,
    /// The sha256 of the file's bytes, hex; when set, other bytes get no grant.
    pub sha256: Option<String>,
    /// The model budget granted (`model = { max_tokens, timeout_s }`).
    pub model: Option<ModelBudget>,
}

impl UserGrant {
    /// Whether this grant applies to the plugin `name` from `source` with `bytes`.
    pub fn applies_to(
        &self,
        name: &str,
        source: &super::runtime::PluginSource,
        bytes: &[u8],
    ) -> bool {
        use super::runtime::PluginSource as S;
        let path = match source {
            S::File(p) | S::User(p) => p,
            S::Builtin | S::Repo(_) => return false,
        };
        let same_file = match (self.path.canonicalize(), path.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        let pinned = self.sha256.as_deref().is_none_or(|want| {
            use sha2::{Digest, Sha256};
            let got = crate::text::hex(&Sha256::digest(bytes));
            want.eq_ignore_ascii_case(&got)
        });
        self.name == name && same_file && pinned
    }
}

/// A host directory preopened read-only for WASI filesystem access.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReadOnlyDir {
    /// The directory on the host.
    pub host: PathBuf,
    /// The name the guest sees it under.
    pub guest: String,
}

/// What a plugin is granted. Starts empty; each capability is one explicit call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Grants {
    log: bool,
    workspace: bool,
    model: Option<ModelBudget>,
    read_only_dirs: Vec<ReadOnlyDir>,
}

impl Grants {
    /// Nothing at all (the empty WASI context is always linked; it grants nothing).
    pub fn none() -> Self {
        Self::default()
    }

    /// What a kind gets without any user config: `log`, plus `workspace` for validators
    /// and roles. Never a model or a directory.
    pub fn defaults_for(kind: PluginKind) -> Self {
        let g = Self::none().log();
        match kind {
            PluginKind::Dispatcher => g,
            PluginKind::Validator | PluginKind::Role => g.workspace(),
        }
    }

    /// Grants `crewbox:plugin/log`.
    pub fn log(mut self) -> Self {
        self.log = true;
        self
    }

    /// Grants `crewbox:plugin/workspace` (read-only by construction).
    pub fn workspace(mut self) -> Self {
        self.workspace = true;
        self
    }

    /// Grants `crewbox:plugin/model` with a per-call budget.
    pub fn model(mut self, budget: ModelBudget) -> Self {
        self.model = Some(budget);
        self
    }

    /// Preopens `host` read-only as `guest` for `wasi:filesystem`.
    pub fn wasi_read_only_dir(
        mut self,
        host: impl Into<PathBuf>,
        guest: impl Into<String>,
    ) -> Self {
        self.read_only_dirs.push(ReadOnlyDir {
            host: host.into(),
            guest: guest.into(),
        });
        self
    }

    /// Whether `log` is granted.
    pub fn has_log(&self) -> bool {
        self.log
    }

    /// Whether `workspace` is granted.
    pub fn has_workspace(&self) -> bool {
        self.workspace
    }

    /// The model budget, if a model is granted.
    pub fn model_budget(&self) -> Option<ModelBudget> {
        self.model
    }

    /// The read-only directories granted.
    pub fn read_only_dirs(&self) -> &[ReadOnlyDir] {
        &self.read_only_dirs
    }

    /// Whether a capability is granted.
    pub fn has(&self, cap: Capability) -> bool {
        match cap {
            Capability::Log => self.log,
            Capability::Workspace => self.workspace,
            Capability::Model => self.model.is_some(),
            Capability::ReadOnlyFs => !self.read_only_dirs.is_empty(),
        }
    }
}

/// A capability a grant can give.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// `crewbox:plugin/log`.
    Log,
    /// `crewbox:plugin/workspace`.
    Workspace,
    /// `crewbox:plugin/model`.
    Model,
    /// `wasi:filesystem/*` over read-only preopens.
    ReadOnlyFs,
}

impl Capability {
    fn grant_name(self) -> &'static str {
        match self {
            Self::Log => "a log grant",
            Self::Workspace => "a workspace grant",
            Self::Model => "a model grant in the user's config",
            Self::ReadOnlyFs => "a read-only filesystem grant",
        }
    }
}

/// Which rule an import or export breaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum Rule {
    /// The kind may never import this interface, whatever the config says.
    NeverGranted {
        /// The plugin's kind.
        kind: PluginKind,
    },
    /// The kind may import it, but this plugin's grants do not include it.
    NeedsGrant {
        /// The missing capability.
        capability: Capability,
    },
    /// Network access is never granted to any plugin.
    NetworkNeverGranted,
    /// The host does not provide this interface or version at all.
    NotProvided,
    /// The component exports none of the plugin interfaces.
    NoPluginExport,
    /// The component exports more than one plugin interface.
    SeveralPluginExports {
        /// The kinds it exports.
        kinds: Vec<PluginKind>,
    },
    /// The bytes are not a component wasmtime can compile.
    NotAComponent {
        /// What the compiler said.
        reason: String,
    },
    /// The imports pass these rules, but linking them against the host failed (a
    /// function crewbox does not have, or a different signature).
    DoesNotLink {
        /// What the linker said.
        reason: String,
    },
    /// The component's kind is not the one it was configured as.
    KindMismatch {
        /// The configured kind.
        expected: PluginKind,
        /// The kind its exports say.
        found: PluginKind,
    },
}

/// One broken rule, with everything a person needs to fix it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The plugin's name.
    pub plugin: String,
    /// The plugin's kind, when known.
    pub kind: Option<PluginKind>,
    /// The interface (without version) the rule is about.
    pub interface: String,
    /// The rule broken.
    #[serde(flatten)]
    pub rule: Rule,
    /// How to fix it with the toolchain that built the component, when it can be told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_rule(f)?;
        match &self.hint {
            Some(hint) => write!(f, " (to fix: {hint})"),
            None => Ok(()),
        }
    }
}

impl Violation {
    fn fmt_rule(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = match self.kind {
            Some(k) => format!("{k} `{}`", self.plugin),
            None => format!("plugin `{}`", self.plugin),
        };
        let iface = &self.interface;
        match &self.rule {
            Rule::NeverGranted { kind } => {
                write!(
                    f,
                    "{who} imports `{iface}`, which {kind}s are never granted"
                )
            }
            Rule::NeedsGrant {
                capability: Capability::Model,
            } => write!(
                f,
                "{who} imports `{iface}`, which needs a model grant in the user's config: \
                 `[plugins.grants.{}]` with `path = \"…\"` (this file) and \
                 `model = {{ max_tokens = …, timeout_s = … }}`",
                self.plugin
            ),
            Rule::NeedsGrant { capability } => {
                write!(
                    f,
                    "{who} imports `{iface}`, which needs {}",
                    capability.grant_name()
                )
            }
            Rule::NetworkNeverGranted => {
                write!(f, "{who} imports `{iface}`: network is never granted")
            }
            Rule::NotProvided => write!(
                f,
                "{who} imports `{iface}`, which crewbox does not provide to plugins \
                 (it provides crewbox:plugin@{PACKAGE_VERSION} and WASI 0.2.0 to 0.2.{})",
                WASI_VERSION.2
            ),
            Rule::NoPluginExport => write!(
                f,
                "{who} exports none of `crewbox:plugin/dispatch`, `crewbox:plugin/validate`, `crewbox:plugin/crew-role`"
            ),
            Rule::SeveralPluginExports { kinds } => {
                let names: Vec<&str> = kinds.iter().map(|k| k.export_interface()).collect();
                write!(
                    f,
                    "{who} exports several plugin interfaces ({}); a plugin implements exactly one",
                    names.join(", ")
                )
            }
            Rule::NotAComponent { reason } => {
                write!(f, "{who} is not a loadable component: {reason}")
            }
            Rule::DoesNotLink { reason } => {
                write!(
                    f,
                    "{who} does not link against what crewbox provides: {reason}"
                )
            }
            Rule::KindMismatch { expected, found } => {
                write!(
                    f,
                    "{who} was configured as a {expected} but exports `{iface}` (a {found})"
                )
            }
        }
    }
}

/// The crewbox package version the host speaks.
pub const PACKAGE_VERSION: &str = "0.1.0";

/// The newest WASI 0.2 release the host implements (wasmtime-wasi 48): a guest built
/// against a newer one may call what is not there.
pub const WASI_VERSION: (u64, u64, u64) = (0, 2, 12);

/// Whether `version` is a WASI 0.2 release the host provides (0.2.0 up to
/// [`WASI_VERSION`]).
fn wasi_provided(version: &str) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u64>());
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Ok(0)), Some(Ok(2)), Some(Ok(patch)), None) => patch <= WASI_VERSION.2,
        _ => false,
    }
}

/// WASI interfaces linked for every plugin over an empty context: they expose no
/// files, network, environment or arguments, only clocks, randomness and captured stdio.
const SANDBOXED_WASI: &[&str] = &[
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/wall-clock",
    "wasi:clocks/monotonic-clock",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
];

/// Splits `ns:pkg/iface@1.2.3` into the unversioned name and the version.
pub fn split_version(name: &str) -> (&str, Option<&str>) {
    match name.split_once('@') {
        Some((base, v)) => (base, Some(v)),
        None => (name, None),
    }
}

/// Which plugin kinds a component's exports claim.
pub fn kinds_exported<'a>(exports: impl IntoIterator<Item = &'a str>) -> Vec<PluginKind> {
    let mut kinds = Vec::new();
    for name in exports {
        let (base, version) = split_version(name);
        for kind in [
            PluginKind::Dispatcher,
            PluginKind::Validator,
            PluginKind::Role,
        ] {
            if base == kind.export_interface()
                && version == Some(PACKAGE_VERSION)
                && !kinds.contains(&kind)
            {
                kinds.push(kind);
            }
        }
    }
    kinds
}

/// Checks one import against a kind and its grants; `None` means allowed.
fn check_import(kind: PluginKind, grants: &Grants, name: &str) -> Option<Rule> {
    let (base, version) = split_version(name);
    if let Some(iface) = base.strip_prefix("crewbox:plugin/") {
        if version != Some(PACKAGE_VERSION) {
            return Some(Rule::NotProvided);
        }
        let (allowed, cap) = match iface {
            "types" => return None,
            "log" => (true, Capability::Log),
            "workspace" => (kind != PluginKind::Dispatcher, Capability::Workspace),
            "model" => (kind == PluginKind::Validator, Capability::Model),
            _ => return Some(Rule::NotProvided),
        };
        return if !allowed {
            Some(Rule::NeverGranted { kind })
        } else if !grants.has(cap) {
            Some(Rule::NeedsGrant { capability: cap })
        } else {
            None
        };
    }
    if base.starts_with("wasi:sockets/") {
        return Some(Rule::NetworkNeverGranted);
    }
    if base == "wasi:filesystem/types" || base == "wasi:filesystem/preopens" {
        if !version.is_some_and(wasi_provided) {
            return Some(Rule::NotProvided);
        }
        return (!grants.has(Capability::ReadOnlyFs)).then_some(Rule::NeedsGrant {
            capability: Capability::ReadOnlyFs,
        });
    }
    if SANDBOXED_WASI.contains(&base) && version.is_some_and(wasi_provided) {
        return None;
    }
    Some(Rule::NotProvided)
}

/// Every rule a component with these imports and exports breaks as a plugin of `kind`
/// (or of the kind its exports say, when `kind` is `None`) under `grants`.
pub fn violations<'a>(
    plugin: &str,
    kind: Option<PluginKind>,
    imports: impl IntoIterator<Item = &'a str>,
    exports: impl IntoIterator<Item = &'a str>,
    grants: &Grants,
) -> Vec<Violation> {
    let exports: Vec<&str> = exports.into_iter().collect();
    let found = kinds_exported(exports.iter().copied());
    let mut out = Vec::new();
    // Import names are the component's own strings: escaped before any message shows them.
    let mut violation = |kind: Option<PluginKind>, interface: &str, rule: Rule| {
        out.push(Violation {
            plugin: super::text::escape(plugin).into_owned(),
            kind,
            interface: super::text::escape(interface).into_owned(),
            rule,
            hint: None,
        });
    };
    let effective = match (found.as_slice(), kind) {
        ([], k) => {
            violation(k, "", Rule::NoPluginExport);
            k
        }
        ([one], None) => Some(*one),
        ([one], Some(expected)) if *one == expected => Some(expected),
        ([one], Some(expected)) => {
            violation(
                Some(expected),
                one.export_interface(),
                Rule::KindMismatch {
                    expected,
                    found: *one,
                },
            );
            Some(expected)
        }
        (several, k) => {
            violation(
                k,
                "",
                Rule::SeveralPluginExports {
                    kinds: several.to_vec(),
                },
            );
            k
        }
    };
    if let Some(kind) = effective {
        for name in imports {
            if let Some(rule) = check_import(kind, grants, name) {
                violation(Some(kind), split_version(name).0, rule);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STD: &[&str] = &[
        "wasi:io/streams@0.2.6",
        "wasi:cli/stdout@0.2.0",
        "crewbox:plugin/types@0.1.0",
    ];

    fn check(kind: PluginKind, grants: &Grants, extra: &[&str], export: &str) -> Vec<String> {
        let imports = STD.iter().chain(extra).copied();
        violations("x", Some(kind), imports, [export], grants)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn std_wasi_and_granted_imports_pass() {
        let g = Grants::defaults_for(PluginKind::Validator);
        let v = check(
            PluginKind::Validator,
            &g,
            &["crewbox:plugin/log@0.1.0", "crewbox:plugin/workspace@0.1.0"],
            "crewbox:plugin/validate@0.1.0",
        );
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn dispatcher_never_gets_workspace_and_model_needs_grant() {
        let v = check(
            PluginKind::Dispatcher,
            &Grants::none().log(),
            &["crewbox:plugin/workspace@0.1.0"],
            "crewbox:plugin/dispatch@0.1.0",
        );
        assert_eq!(
            v,
            [
                "dispatcher `x` imports `crewbox:plugin/workspace`, which dispatchers are never granted"
            ]
        );
        let g = Grants::defaults_for(PluginKind::Validator);
        let v = check(
            PluginKind::Validator,
            &g,
            &["crewbox:plugin/model@0.1.0"],
            "crewbox:plugin/validate@0.1.0",
        );
        assert_eq!(
            v,
            [
                "validator `x` imports `crewbox:plugin/model`, which needs a model grant in the user's config: `[plugins.grants.x]` with `path = \"…\"` (this file) and `model = { max_tokens = …, timeout_s = … }`"
            ]
        );
    }

    #[test]
    fn only_the_wasi_releases_the_host_implements_are_accepted() {
        let g = Grants::defaults_for(PluginKind::Validator);
        let export = "crewbox:plugin/validate@0.1.0";
        for ok in ["wasi:cli/stdout@0.2.0", "wasi:io/streams@0.2.12"] {
            assert!(
                check(PluginKind::Validator, &g, &[ok], export).is_empty(),
                "{ok}"
            );
        }
        for newer in [
            "wasi:io/streams@0.2.13",
            "wasi:cli/stdout@0.3.0",
            "wasi:cli/stdout@0.2",
        ] {
            let v = check(PluginKind::Validator, &g, &[newer], export);
            assert_eq!(v.len(), 1, "{newer}: {v:?}");
            assert!(v[0].contains("WASI 0.2.0 to 0.2.12"), "{v:?}");
        }
    }

    #[test]
    fn every_violation_is_reported() {
        let extra = [
            "wasi:sockets/tcp@0.2.0",
            "wasi:filesystem/preopens@0.2.0",
            "wasi:http/types@0.2.0",
            "crewbox:plugin/log@0.2.0",
        ];
        let v = check(
            PluginKind::Role,
            &Grants::none(),
            &extra,
            "crewbox:plugin/crew-role@0.1.0",
        );
        assert_eq!(
            v,
            [
                "role `x` imports `wasi:sockets/tcp`: network is never granted",
                "role `x` imports `wasi:filesystem/preopens`, which needs a read-only filesystem grant",
                "role `x` imports `wasi:http/types`, which crewbox does not provide to plugins (it provides crewbox:plugin@0.1.0 and WASI 0.2.0 to 0.2.12)",
                "role `x` imports `crewbox:plugin/log`, which crewbox does not provide to plugins (it provides crewbox:plugin@0.1.0 and WASI 0.2.0 to 0.2.12)",
            ]
        );
    }

    #[test]
    fn exports_decide_the_kind() {
        assert_eq!(
            kinds_exported(["crewbox:plugin/validate@0.1.0"]),
            [PluginKind::Validator]
        );
        assert!(kinds_exported(["crewbox:plugin/validate@0.2.0"]).is_empty());
        let v = violations(
            "x",
            None,
            [],
            [
                "crewbox:plugin/dispatch@0.1.0",
                "crewbox:plugin/crew-role@0.1.0",
            ],
            &Grants::none(),
        );
        assert!(matches!(&v[0].rule, Rule::SeveralPluginExports { kinds } if kinds.len() == 2));
        let v = violations(
            "x",
            Some(PluginKind::Role),
            [],
            ["crewbox:plugin/dispatch@0.1.0"],
            &Grants::none(),
        );
        assert!(matches!(v[0].rule, Rule::KindMismatch { .. }));
        let v = violations("x", None, [], ["run"], &Grants::none());
        assert!(matches!(v[0].rule, Rule::NoPluginExport));
    }
}

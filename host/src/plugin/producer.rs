//! Which toolchain built a component, so a refused import comes with the build flag
//! that drops it. Read from the component itself: the `producers` custom sections
//! (`processed-by`, `language`, `sdk`) and the names of its core modules' imports and
//! exports (componentize-py's runtime calls itself `componentize_py_runtime`, jco's
//! QuickJS backend `componentize_qjs_runtime`). A component that names none of them
//! gets no hint: a guess would send the author the wrong way.

use super::grants::{Rule, Violation, split_version};
use super::kind::PluginKind;

/// A toolchain crewbox can give build advice for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Producer {
    /// componentize-py (Python).
    ComponentizePy,
    /// jco with its QuickJS backend (`--backend qjs`, componentize-qjs).
    JcoQuickJs,
    /// componentize-js / jco's default StarlingMonkey backend.
    StarlingMonkey,
    /// Rust with wit-bindgen (the crewbox SDK or bare).
    Rust,
}

/// The toolchain that built `bytes`, when it says so. Blocking (parses the component).
pub fn producer(bytes: &[u8]) -> Option<Producer> {
    use wasmparser::{KnownCustom, Payload};
    let mut rust = false;
    let named = |s: &str| -> Option<Producer> {
        let s = s.to_ascii_lowercase();
        if s.contains("componentize_py") || s.contains("componentize-py") {
            Some(Producer::ComponentizePy)
        } else if s.contains("componentize_qjs") || s.contains("componentize-qjs") {
            Some(Producer::JcoQuickJs)
        } else if s.contains("starlingmonkey")
            || s.contains("componentizejs")
            || s.contains("componentize-js")
        {
            Some(Producer::StarlingMonkey)
        } else {
            None
        }
    };
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else { break };
        match payload {
            Payload::ImportSection(reader) => {
                for import in reader.into_imports().flatten() {
                    if let Some(p) = named(import.module).or_else(|| named(import.name)) {
                        return Some(p);
                    }
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader.into_iter().flatten() {
                    if let Some(p) = named(export.name) {
                        return Some(p);
                    }
                }
            }
            Payload::CustomSection(section) => {
                if let KnownCustom::Producers(reader) = section.as_known() {
                    for field in reader.into_iter().flatten() {
                        for value in field.values.into_iter().flatten() {
                            if let Some(p) = named(value.name) {
                                return Some(p);
                            }
                            rust |= value.name == "wit-bindgen-rust"
                                || (field.name == "language" && value.name == "Rust");
                        }
                    }
                }
            }
            _ => {}
        }
    }
    rust.then_some(Producer::Rust)
}

/// How to drop the refused import `interface` when building with `producer`.
fn hint(producer: Producer, kind: Option<PluginKind>, interface: &str) -> Option<String> {
    let model = interface == "crewbox:plugin/model";
    let wasi = interface.starts_with("wasi:");
    let judge_only = "the model: target world `validator`, not `judge`, unless it really asks \
                      the model (then grant it in the user's config)";
    Some(match producer {
        Producer::ComponentizePy if model && kind != Some(PluginKind::Dispatcher) => format!(
            "componentize-py imports every interface of its world; for a validator without {judge_only}: `-w validator`"
        ),
        Producer::ComponentizePy if wasi => {
            "rebuild with componentize-py's `--stub-wasi` (as `crewbox plugin build` does): \
             CPython's files, sockets and clocks become stubs"
                .to_owned()
        }
        Producer::JcoQuickJs if model => {
            format!(
                "jco imports every interface of its world; for a validator without {judge_only}: `-n validator`"
            )
        }
        Producer::JcoQuickJs if wasi => "rebuild with `jco componentize --backend qjs \
             --backend-qjs-stub-wasi --backend-qjs-disable-async` (as `crewbox plugin build` does)"
            .to_owned(),
        Producer::StarlingMonkey if model => {
            format!("for a validator without {judge_only}: `-n validator`")
        }
        Producer::StarlingMonkey if wasi => "rebuild with jco's QuickJS backend (`--backend qjs \
             --backend-qjs-stub-wasi --backend-qjs-disable-async`, 1.6 MB), or keep StarlingMonkey \
             and drop what it adds with `-d stdio http fetch-event` (12 MB)"
            .to_owned(),
        Producer::Rust if wasi => "the Rust code uses std's files, network or environment (or a \
             crate that does); plugins get none: read the agent's files through the `workspace` \
             interface"
            .to_owned(),
        _ => return None,
    })
}

/// Adds the build advice for `bytes`' toolchain to each violation about a refused
/// import. Blocking (parses the component once, only when there is something to advise).
pub(crate) fn advise(violations: &mut [Violation], bytes: &[u8]) {
    let refused_import = |v: &Violation| {
        matches!(
            v.rule,
            Rule::NeverGranted { .. } | Rule::NeedsGrant { .. } | Rule::NetworkNeverGranted
        )
    };
    if !violations.iter().any(refused_import) {
        return;
    }
    let Some(producer) = producer(bytes) else {
        return;
    };
    for v in violations.iter_mut().filter(|v| refused_import(v)) {
        let (base, _) = split_version(&v.interface);
        v.hint = hint(producer, v.kind, base);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_components_say_so_and_others_say_nothing() {
        let rust = include_bytes!("../../../tests/guests/dist/trivial-validator.wasm");
        assert_eq!(producer(rust), Some(Producer::Rust));
        let bare = wat::parse_str("(module)").unwrap();
        assert_eq!(producer(&bare), None);
    }

    #[test]
    fn runtime_names_give_the_toolchain_away() {
        let py =
            wat::parse_str(r#"(module (import "componentize_py_runtime" "f" (func)))"#).unwrap();
        assert_eq!(producer(&py), Some(Producer::ComponentizePy));
        let qjs =
            wat::parse_str(r#"(module (func (export "componentize_qjs_runtime_init")))"#).unwrap();
        assert_eq!(producer(&qjs), Some(Producer::JcoQuickJs));
        let hint = hint(
            Producer::JcoQuickJs,
            Some(PluginKind::Validator),
            "wasi:http/types",
        )
        .unwrap();
        assert!(hint.contains("--backend-qjs-stub-wasi"), "{hint}");
        let hint = hint_for_py_model();
        assert!(hint.contains("`-w validator`"), "{hint}");
    }

    fn hint_for_py_model() -> String {
        hint(
            Producer::ComponentizePy,
            Some(PluginKind::Validator),
            "crewbox:plugin/model",
        )
        .unwrap()
    }
}

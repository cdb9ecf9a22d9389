//! The built-in plugins, embedded so a fresh install needs no extra step.
//!
//! The components are ordinary plugins built from `plugins/` with the public SDK by
//! `scripts/build-wasm.sh`; CI checks that the committed bytes match a fresh build.

use super::PluginKind;

/// One embedded plugin component.
#[derive(Debug)]
pub struct Builtin {
    /// The name it is configured by, e.g. `no-secrets`.
    pub name: &'static str,
    /// The world it implements.
    pub kind: PluginKind,
    /// One line describing what it does.
    pub description: &'static str,
    /// The component binary.
    pub wasm: &'static [u8],
}

macro_rules! dist {
    ($file:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../plugins/dist/",
            $file
        ))
    };
}

/// Every built-in plugin, dispatcher first, then validators, then roles.
pub static BUILTINS: &[Builtin] = &[
    Builtin {
        name: "heuristic",
        kind: PluginKind::Dispatcher,
        description: "Routes a prompt to single, swarm or crew from keywords, file paths and steps.",
        wasm: dist!("heuristic.wasm"),
    },
    Builtin {
        name: "handoff-schema",
        kind: PluginKind::Validator,
        description: "Checks that the reply ends with a handoff v2 JSON object within the bounds.",
        wasm: dist!("handoff-schema.wasm"),
    },
    Builtin {
        name: "no-secrets",
        kind: PluginKind::Validator,
        description: "Flags private keys, cloud and forge tokens and high-entropy secrets in the changes.",
        wasm: dist!("no-secrets.wasm"),
    },
    Builtin {
        name: "criteria-judge",
        kind: PluginKind::Validator,
        description: "Asks the model whether the reply and changes meet each criterion; strictly typed answers only.",
        wasm: dist!("criteria-judge.wasm"),
    },
    Builtin {
        name: "planner",
        kind: PluginKind::Role,
        description: "Reads the repository and writes a numbered plan; never edits files.",
        wasm: dist!("planner.wasm"),
    },
    Builtin {
        name: "executor",
        kind: PluginKind::Role,
        description: "Makes the planned changes and revises them on review findings.",
        wasm: dist!("executor.wasm"),
    },
    Builtin {
        name: "reviewer",
        kind: PluginKind::Role,
        description: "Reviews the executor's diff and ends with VERDICT: PASS or VERDICT: FAIL.",
        wasm: dist!("reviewer.wasm"),
    },
];

/// The built-in plugin called `name`, if there is one.
pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// Whether `bytes` are exactly one of the embedded components (trusted: compiled
/// in-process without compile limits).
pub fn is_builtin(bytes: &[u8]) -> bool {
    BUILTINS.iter().any(|b| b.wasm == bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `\0asm`, then the component-model version (0x0d) and layer (0x01), little-endian.
    const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

    #[test]
    fn every_builtin_is_a_component() {
        for b in BUILTINS {
            assert!(
                b.wasm.starts_with(&COMPONENT_HEADER),
                "built-in `{}` is not a WebAssembly component (header {:02x?})",
                b.name,
                &b.wasm[..b.wasm.len().min(8)]
            );
        }
    }

    #[test]
    fn names_are_unique_and_found() {
        for b in BUILTINS {
            assert!(std::ptr::eq(builtin(b.name).unwrap(), b), "{}", b.name);
        }
        assert_eq!(BUILTINS.len(), 7);
        assert!(builtin("nope").is_none());
    }

    #[test]
    fn kinds_match_the_names() {
        let kind = |n| builtin(n).unwrap().kind;
        assert_eq!(kind("heuristic"), PluginKind::Dispatcher);
        assert_eq!(kind("no-secrets"), PluginKind::Validator);
        assert_eq!(kind("handoff-schema"), PluginKind::Validator);
        assert_eq!(kind("criteria-judge"), PluginKind::Validator);
        assert_eq!(kind("reviewer"), PluginKind::Role);
    }
}

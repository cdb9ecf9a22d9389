//! The built-in plugins, embedded so a fresh install needs no extra step.
//!
//! The components are ordinary plugins built from `plugins/` with the public SDK by
//! `scripts/build-wasm.sh`; CI checks that the committed bytes match a fresh build.
//! The build script packs them (`host/build.rs`: the length, then raw DEFLATE); a
//! built-in is unpacked the first time it is asked for, once per process.

use std::sync::{Arc, OnceLock};

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
    /// The component as the build script packed it.
    packed: &'static [u8],
    /// The component, once unpacked.
    unpacked: OnceLock<Arc<[u8]>>,
}

/// A built-in whose embedded bytes do not unpack: this crewbox binary is damaged (the
/// build script checked every one before embedding it).
#[derive(Debug, thiserror::Error)]
#[error("built-in plugin `{name}` is damaged in this crewbox binary ({why}); reinstall crewbox")]
pub struct Damaged {
    /// The built-in.
    pub name: &'static str,
    /// What is wrong with it.
    pub why: &'static str,
}

impl Builtin {
    /// The component binary (unpacked on first use, then shared).
    pub fn wasm(&self) -> Result<Arc<[u8]>, Damaged> {
        if let Some(bytes) = self.unpacked.get() {
            return Ok(bytes.clone());
        }
        let bytes = unpack(self.packed).map_err(|why| Damaged {
            name: self.name,
            why,
        })?;
        Ok(self.unpacked.get_or_init(|| bytes).clone())
    }

    /// Its length unpacked, as the build script recorded it.
    fn len(&self) -> Option<usize> {
        recorded_len(self.packed)
    }
}

/// The length recorded ahead of the stream: 4 bytes, little-endian.
fn recorded_len(packed: &[u8]) -> Option<usize> {
    let head: [u8; 4] = packed.get(..4)?.try_into().ok()?;
    usize::try_from(u32::from_le_bytes(head)).ok()
}

/// The component of `packed`: its recorded length, then raw DEFLATE of exactly that
/// many bytes.
fn unpack(packed: &[u8]) -> Result<Arc<[u8]>, &'static str> {
    let len = recorded_len(packed).ok_or("no length")?;
    let bytes = miniz_oxide::inflate::decompress_to_vec_with_limit(&packed[4..], len)
        .map_err(|_| "not a DEFLATE stream of its recorded length")?;
    if bytes.len() != len {
        return Err("shorter than its recorded length");
    }
    Ok(bytes.into())
}

macro_rules! builtin {
    ($name:literal, $kind:ident, $description:literal) => {
        Builtin {
            name: $name,
            kind: PluginKind::$kind,
            description: $description,
            packed: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".wasm")),
            unpacked: OnceLock::new(),
        }
    };
}

/// Every built-in plugin, dispatcher first, then validators, then roles.
pub static BUILTINS: [Builtin; 7] = [
    builtin!(
        "heuristic",
        Dispatcher,
        "Routes a prompt to single, swarm or crew from keywords, file paths and steps."
    ),
    builtin!(
        "handoff-schema",
        Validator,
        "Checks that the reply ends with a handoff v2 JSON object within the bounds."
    ),
    builtin!(
        "no-secrets",
        Validator,
        "Flags private keys, cloud and forge tokens and high-entropy secrets in the changes."
    ),
    builtin!(
        "criteria-judge",
        Validator,
        "Asks the model whether the reply and changes meet each criterion; strictly typed answers only."
    ),
    builtin!(
        "planner",
        Role,
        "Reads the repository and writes a numbered plan; never edits files."
    ),
    builtin!(
        "executor",
        Role,
        "Makes the planned changes and revises them on review findings."
    ),
    builtin!(
        "reviewer",
        Role,
        "Reviews the executor's diff and ends with VERDICT: PASS or VERDICT: FAIL."
    ),
];

/// The built-in plugin called `name`, if there is one.
pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

/// Whether `bytes` are exactly one of the embedded components (trusted: compiled
/// in-process without compile limits).
pub fn is_builtin(bytes: &[u8]) -> bool {
    BUILTINS
        .iter()
        .filter(|b| b.len() == Some(bytes.len()))
        .any(|b| b.wasm().is_ok_and(|wasm| *wasm == *bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `\0asm`, then the component-model version (0x0d) and layer (0x01), little-endian.
    const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

    #[test]
    fn every_builtin_is_a_component() {
        for b in &BUILTINS {
            let wasm = b.wasm().unwrap();
            assert!(
                wasm.starts_with(&COMPONENT_HEADER),
                "built-in `{}` is not a WebAssembly component (header {:02x?})",
                b.name,
                &wasm[..wasm.len().min(8)]
            );
        }
    }

    #[test]
    fn a_builtin_unpacks_to_its_committed_bytes_once() {
        let dist = concat!(env!("CARGO_MANIFEST_DIR"), "/../plugins/dist");
        for b in &BUILTINS {
            let committed = std::fs::read(format!("{dist}/{}.wasm", b.name)).unwrap();
            let wasm = b.wasm().unwrap();
            assert_eq!(*wasm, *committed, "{}", b.name);
            assert!(b.packed.len() < committed.len(), "{} is not packed", b.name);
            assert!(
                Arc::ptr_eq(&wasm, &b.wasm().unwrap()),
                "{} unpacked twice",
                b.name
            );
            assert!(is_builtin(&committed), "{}", b.name);
            let mut other = committed.clone();
            *other.last_mut().unwrap() ^= 1;
            assert!(
                !is_builtin(&other),
                "{}: a changed byte is still built in",
                b.name
            );
            other.push(0);
            assert!(
                !is_builtin(&other),
                "{}: a longer component is built in",
                b.name
            );
        }
    }

    #[test]
    fn damaged_packed_bytes_are_refused_with_what_is_wrong() {
        let packed = BUILTINS[0].packed;
        assert_eq!(unpack(&packed[..3]).unwrap_err(), "no length");
        let mut longer = packed.to_vec();
        longer[..4].copy_from_slice(&(u32::MAX).to_le_bytes());
        assert_eq!(
            unpack(&longer).unwrap_err(),
            "shorter than its recorded length"
        );
        let mut shorter = packed.to_vec();
        shorter[..4].copy_from_slice(&10u32.to_le_bytes());
        assert_eq!(
            unpack(&shorter).unwrap_err(),
            "not a DEFLATE stream of its recorded length"
        );
        let truncated = &packed[..packed.len() / 2];
        assert!(unpack(truncated).is_err());
        let damaged = Builtin {
            name: "x",
            kind: PluginKind::Validator,
            description: "",
            packed: &packed[..packed.len() / 2],
            unpacked: OnceLock::new(),
        };
        let err = damaged.wasm().unwrap_err().to_string();
        assert!(err.contains("built-in plugin `x` is damaged"), "{err}");
    }

    #[test]
    fn names_are_unique_and_found() {
        for b in &BUILTINS {
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

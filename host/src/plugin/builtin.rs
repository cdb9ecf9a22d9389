//! PLACEHOLDER until h/plugins lands: the table of built-in plugins embedded in the binary.

use super::kind::PluginKind;

/// One built-in plugin.
pub struct Builtin {
    /// Its name.
    pub name: &'static str,
    /// Its kind.
    pub kind: PluginKind,
    /// One line describing it.
    pub description: &'static str,
    /// The component bytes.
    pub wasm: &'static [u8],
}

/// Every built-in plugin.
pub static BUILTINS: &[Builtin] = &[];

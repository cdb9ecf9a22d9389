//! The WebAssembly plugin runtime: one `bindgen!`, deny-by-default grants, limits, cache.

mod kind;

pub use kind::PluginKind;

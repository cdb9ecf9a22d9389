//! The WebAssembly plugin runtime: one `bindgen!`, deny-by-default grants, limits, cache.

pub mod builtin;
mod kind;

pub use kind::PluginKind;

//! Plugin text made safe for terminals, logs and prompts: a plugin's criteria, details,
//! reasons, signals, log messages and names are its own words. The escaping is the one
//! every sink uses, [`crate::text`]; this name stays for the plugin runtime's callers.

pub use crate::text::{escape, quote};

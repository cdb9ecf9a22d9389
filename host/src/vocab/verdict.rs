//! A validator's answer, as the engine, the events and the store keep it. The same
//! shape as the WIT `verdict` record a validator returns (`wit/`); the plugin host
//! converts one into the other (`plugin/call.rs`), so the floors below the plugin
//! runtime never name the generated bindings.

use serde::{Deserialize, Serialize};

/// One criterion a validator checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionResult {
    /// The criterion as given to the validator.
    pub criterion: String,
    /// Whether it is met.
    pub passed: bool,
    /// Why; never contains secrets.
    pub detail: String,
}

/// A validator's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// True only if every criterion passed (the engine also checks each criterion).
    pub passed: bool,
    /// One entry per criterion checked.
    pub results: Vec<CriterionResult>,
    /// Instructions for the agent to fix what failed, if anything failed.
    pub fix_prompt: Option<String>,
}

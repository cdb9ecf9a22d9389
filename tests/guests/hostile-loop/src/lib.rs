//! Hostile validator: spins forever inside `validate`.
//!
//! The loop has no imports and no allocation, so only the host's epoch deadline can
//! stop it; `describe` stays well-behaved so loading and describing still work.

wit_bindgen::generate!({ path: "../../../wit", world: "validator" });

use exports::crewbox::plugin::validate::{AgentOutput, Guest, ValidatorInfo, Verdict};

struct Spinner;

impl Guest for Spinner {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "hostile-loop".into(),
            description: "Never returns from validate.".into(),
            default_criteria: Vec::new(),
        }
    }

    fn validate(_output: AgentOutput, _criteria: Vec<String>) -> Result<Verdict, String> {
        let mut n: u64 = 0;
        // `black_box` keeps the optimiser from proving anything about the counter.
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

export!(Spinner);

//! Hostile validator: faults inside `validate` in the way its first criterion names.
//!
//! `panic` (the default) panics, which aborts into a wasm trap; `unreachable` executes
//! the `unreachable` instruction directly; `recurse` overflows the call stack.

wit_bindgen::generate!({ path: "../../../wit", world: "validator" });

use exports::crewbox::plugin::validate::{AgentOutput, Guest, ValidatorInfo, Verdict};

struct Trapper;

/// Recurses without bound; `black_box` stops the optimiser turning it into a loop.
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 256];
    frame[(depth % 256) as usize] = depth as u8;
    std::hint::black_box(&mut frame);
    recurse(std::hint::black_box(depth + 1)) + u64::from(frame[0])
}

impl Guest for Trapper {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "hostile-trap".into(),
            description: "Faults inside validate.".into(),
            default_criteria: vec!["panic".into()],
        }
    }

    fn validate(_output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        match criteria.first().map(String::as_str).unwrap_or("panic") {
            "unreachable" => {
                #[cfg(target_arch = "wasm32")]
                core::arch::wasm32::unreachable();
                #[cfg(not(target_arch = "wasm32"))]
                std::process::abort();
            }
            "recurse" => Err(format!("recursion returned {}", recurse(0))),
            _ => panic!("hostile-trap panics on purpose"),
        }
    }
}

export!(Trapper);

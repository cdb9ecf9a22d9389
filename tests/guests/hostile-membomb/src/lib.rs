//! Hostile validator: allocates 1 MiB chunks (touching every page) until memory runs out.
//!
//! Allocation goes through the ordinary Rust allocator, as a careless plugin's would:
//! once the host's limiter refuses `memory.grow`, the allocator aborts, so the host
//! sees a trap it must report as a memory-limit fault rather than a generic one.

wit_bindgen::generate!({ path: "../../../wit", world: "validator" });

use exports::crewbox::plugin::validate::{AgentOutput, Guest, ValidatorInfo, Verdict};

struct Bomb;

const CHUNK: usize = 1 << 20;

impl Guest for Bomb {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "hostile-membomb".into(),
            description: "Allocates until the memory cap.".into(),
            default_criteria: Vec::new(),
        }
    }

    fn validate(_output: AgentOutput, _criteria: Vec<String>) -> Result<Verdict, String> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            // Writing every byte makes the pages resident, not just reserved.
            hoard.push(std::hint::black_box(vec![0xA5; CHUNK]));
        }
    }
}

export!(Bomb);

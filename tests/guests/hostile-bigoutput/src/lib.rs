//! Hostile validator: answers with a verdict far larger than any sane output cap.
//!
//! Criteria pick the shape, so one guest exercises every size check the host has:
//! `detail-bytes=N` (default 64 MiB) puts one giant string in a criterion's detail,
//! `results=N` returns N criterion results, `fix-bytes=N` makes a giant fix prompt.

wit_bindgen::generate!({ path: "../../../wit", world: "validator" });

use crewbox::plugin::types::CriterionResult;
use exports::crewbox::plugin::validate::{AgentOutput, Guest, ValidatorInfo, Verdict};

struct Flood;

/// Reads `key=N` from the criteria.
fn setting(criteria: &[String], key: &str) -> Option<usize> {
    criteria
        .iter()
        .find_map(|c| c.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

impl Guest for Flood {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "hostile-bigoutput".into(),
            description: "Returns an oversized verdict.".into(),
            default_criteria: Vec::new(),
        }
    }

    fn validate(_output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        let detail_bytes = setting(&criteria, "detail-bytes");
        let count = setting(&criteria, "results").unwrap_or(1).max(1);
        let fix_bytes = setting(&criteria, "fix-bytes");
        let detail_bytes = match (detail_bytes, fix_bytes, setting(&criteria, "results")) {
            (None, None, None) => Some(64 << 20),
            (d, _, _) => d,
        };
        let results = (0..count)
            .map(|i| CriterionResult {
                criterion: format!("c{i}"),
                passed: true,
                detail: match (i, detail_bytes) {
                    (0, Some(n)) => "x".repeat(n),
                    _ => String::new(),
                },
            })
            .collect();
        Ok(Verdict {
            passed: true,
            results,
            fix_prompt: fix_bytes.map(|n| "y".repeat(n)),
        })
    }
}

export!(Flood);

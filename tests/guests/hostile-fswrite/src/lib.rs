//! Hostile validator: writes files through WASI (`std::fs::write`), which validators
//! are never allowed to do.
//!
//! Each criterion is a path to write (defaults: a relative and an absolute one). Using
//! `std::fs` makes the component import `wasi:filesystem`, so a host that grants no
//! filesystem must refuse to load it; a host that grants a read-only view must make
//! every write fail. The verdict reports each attempt: `passed` means the write
//! succeeded (a sandbox breach), `detail` carries the error the guest saw.

wit_bindgen::generate!({ path: "../../../wit", world: "validator" });

use crewbox::plugin::types::CriterionResult;
use exports::crewbox::plugin::validate::{AgentOutput, Guest, ValidatorInfo, Verdict};

struct Writer;

const DEFAULT_TARGETS: [&str; 2] = ["crewbox-hostile-write.txt", "/crewbox-hostile-write.txt"];

impl Guest for Writer {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "hostile-fswrite".into(),
            description: "Tries to write files through WASI.".into(),
            default_criteria: DEFAULT_TARGETS.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn validate(_output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        let targets = if criteria.is_empty() {
            DEFAULT_TARGETS.iter().map(|s| s.to_string()).collect()
        } else {
            criteria
        };
        let results: Vec<CriterionResult> = targets
            .into_iter()
            .map(|path| {
                let attempt = std::fs::write(&path, b"written by hostile-fswrite\n");
                CriterionResult {
                    passed: attempt.is_ok(),
                    detail: match attempt {
                        Ok(()) => "write succeeded".into(),
                        Err(e) => format!("write failed: {e}"),
                    },
                    criterion: path,
                }
            })
            .collect();
        Ok(Verdict {
            passed: results.iter().any(|r| r.passed),
            results,
            fix_prompt: None,
        })
    }
}

export!(Writer);

//! A validator that only looks at the reply text: the smallest useful validator.
//!
//! Criteria: `non-empty`, `contains:TEXT`. Any other criterion is an `err` answer (the
//! validator cannot judge), which the host must keep apart from a failed verdict.

wit_bindgen::generate!({ path: "../../../wit", world: "validator" });

use crewbox::plugin::types::{AgentOutput, CriterionResult, ValidatorInfo, Verdict};
use exports::crewbox::plugin::validate::Guest;

struct Trivial;

impl Guest for Trivial {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "trivial".to_owned(),
            description: "Checks the reply text is non-empty or contains given text.".to_owned(),
            default_criteria: vec!["non-empty".to_owned()],
        }
    }

    fn validate(output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        let criteria = if criteria.is_empty() {
            vec!["non-empty".to_owned()]
        } else {
            criteria
        };
        let mut results = Vec::with_capacity(criteria.len());
        for criterion in criteria {
            let passed = if criterion == "non-empty" {
                !output.reply.trim().is_empty()
            } else if let Some(needle) = criterion.strip_prefix("contains:") {
                output.reply.contains(needle)
            } else {
                return Err(format!("unknown criterion `{criterion}`"));
            };
            let detail = if passed { "ok" } else { "not met" }.to_owned();
            results.push(CriterionResult {
                criterion,
                passed,
                detail,
            });
        }
        let passed = results.iter().all(|r| r.passed);
        let fix_prompt = (!passed).then(|| "Your reply does not meet the criteria.".to_owned());
        Ok(Verdict {
            passed,
            results,
            fix_prompt,
        })
    }
}

export!(Trivial);

//! The built-in `handoff-schema` validator: the agent's reply must end with a handoff
//! v2 object (the last fenced JSON block, or the whole reply as an object) that the
//! bounded parser in `crewbox-handoff` accepts.

use crewbox_handoff::HandoffStatus;
use crewbox_plugin_sdk::{AgentOutput, CriterionResult, Validator, ValidatorInfo, Verdict};

/// A check this validator knows; its name is the criterion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Criterion {
    /// The reply holds handoff JSON at all.
    Present,
    /// The JSON parses as a v2 handoff within the bounds.
    Valid,
    /// The handoff's status is `success` (not checked by default).
    Success,
}

impl Criterion {
    /// Every criterion, in reporting order.
    pub const ALL: [Criterion; 3] = [Criterion::Present, Criterion::Valid, Criterion::Success];
    /// The criteria checked when none are given.
    pub const DEFAULT: [Criterion; 2] = [Criterion::Present, Criterion::Valid];

    /// The criterion's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Criterion::Present => "handoff-present",
            Criterion::Valid => "handoff-valid",
            Criterion::Success => "handoff-success",
        }
    }

    /// Parses a criterion name.
    pub fn parse(name: &str) -> Option<Criterion> {
        Criterion::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// What to tell the agent when its handoff is missing or rejected.
const FIX_PROMPT: &str = "End your reply with a fenced ```json block holding one handoff v2 object: \
{\"status\": \"success\" | \"partial\" | \"failed\", \"summary\": \"what you did\", \
\"findings\": [\"at least one finding\"], \"next_steps\": [], \"artifacts\": \
[{\"type\": \"file\", \"path\": \"…\"} | {\"type\": \"branch\", \"branch\": \"…\"} | \
{\"type\": \"url\", \"url\": \"…\"} | {\"type\": \"note\", \"title\": \"…\", \"value\": \"…\"}]}.";

/// Parses criteria; empty means [`Criterion::DEFAULT`].
pub fn criteria_for(criteria: &[String]) -> Result<Vec<Criterion>, String> {
    if criteria.is_empty() {
        return Ok(Criterion::DEFAULT.to_vec());
    }
    criteria
        .iter()
        .map(|c| {
            Criterion::parse(c.trim()).ok_or_else(|| {
                let known: Vec<&str> = Criterion::ALL.iter().map(|k| k.as_str()).collect();
                format!(
                    "unknown criterion `{c}`; handoff-schema checks: {}",
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// Checks `reply` against `criteria`.
pub fn check(reply: &str, criteria: &[Criterion]) -> Verdict {
    let present = crewbox_handoff::extract(reply).is_some();
    let parsed = crewbox_handoff::parse(reply);
    let mut problem = None;
    let results = criteria
        .iter()
        .map(|&c| {
            let (passed, detail) = match (c, &parsed) {
                (Criterion::Present, _) if present => (true, "found handoff JSON".to_string()),
                (Criterion::Present, _) => (
                    false,
                    "no fenced JSON block and the reply is not a JSON object".to_string(),
                ),
                (Criterion::Valid, Ok(h)) => {
                    (true, format!("valid v2 handoff, status {}", h.status))
                }
                (Criterion::Valid, Err(e)) => (false, format!("rejected: {e}")),
                (Criterion::Success, Ok(h)) if h.status == HandoffStatus::Success => {
                    (true, "status is success".to_string())
                }
                (Criterion::Success, Ok(h)) => {
                    (false, format!("status is {}, not success", h.status))
                }
                (Criterion::Success, Err(_)) => {
                    (false, "no valid handoff to read a status from".to_string())
                }
            };
            if !passed && problem.is_none() {
                problem = Some(detail.clone());
            }
            CriterionResult::new(c.as_str(), passed, detail)
        })
        .collect();
    let fix = problem.map(|p| format!("Your handoff was not accepted ({p}). {FIX_PROMPT}"));
    Verdict::from_results(results, fix)
}

/// The exported validator.
pub struct HandoffSchema;

impl Validator for HandoffSchema {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "handoff-schema".into(),
            description:
                "Checks that the reply ends with a handoff v2 JSON object within the bounds.".into(),
            default_criteria: Criterion::DEFAULT
                .iter()
                .map(|c| c.as_str().to_string())
                .collect(),
        }
    }

    fn validate(output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        Ok(check(&output.reply, &criteria_for(&criteria)?))
    }
}

crewbox_plugin_sdk::export_validator!(HandoffSchema);

#[cfg(test)]
mod tests;

//! Small constructors that keep plugin code about the check, not the record layout.

use crate::{CriterionResult, Signal, Verdict};

impl CriterionResult {
    /// One criterion's result.
    pub fn new(criterion: impl Into<String>, passed: bool, detail: impl Into<String>) -> Self {
        Self {
            criterion: criterion.into(),
            passed,
            detail: detail.into(),
        }
    }
}

impl Verdict {
    /// A verdict that passes only if every result passed.
    pub fn from_results(results: Vec<CriterionResult>, fix_prompt: Option<String>) -> Self {
        let passed = results.iter().all(|r| r.passed);
        Self {
            passed,
            results,
            fix_prompt: if passed { None } else { fix_prompt },
        }
    }
}

impl Signal {
    /// One observation, e.g. `Signal::new("review", "keyword `audit`")`.
    pub fn new(name: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_passes_only_when_every_result_passes() {
        let ok = CriterionResult::new("a", true, "");
        let bad = CriterionResult::new("b", false, "missing");
        let v = Verdict::from_results(vec![ok.clone()], Some("fix".into()));
        assert!(v.passed);
        assert_eq!(v.fix_prompt, None);
        let v = Verdict::from_results(vec![ok, bad], Some("fix".into()));
        assert!(!v.passed);
        assert_eq!(v.fix_prompt.as_deref(), Some("fix"));
    }

    #[test]
    fn empty_results_pass() {
        assert!(Verdict::from_results(Vec::new(), None).passed);
    }
}

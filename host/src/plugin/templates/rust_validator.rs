//! `{{name}}`: a crewbox validator. It fails when the agent's reply still says `TODO`
//! and when a file it needs is missing from the agent's workspace.
//!
//! Criteria (one string each; none given means the defaults in `describe`):
//! - `no-todo`: the reply does not contain `TODO`;
//! - `file:PATH`: PATH can be read in the workspace (read-only, relative to its root).

use crewbox_plugin_sdk::{
    AgentOutput, CriterionResult, Validator, ValidatorInfo, Verdict, log, workspace,
};

struct Check;

impl Validator for Check {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "{{name}}".into(),
            description: "The reply has no TODO and the files it needs exist.".into(),
            default_criteria: vec!["no-todo".into(), "file:README.md".into()],
        }
    }

    fn validate(output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        let criteria = if criteria.is_empty() {
            Self::describe().default_criteria
        } else {
            criteria
        };
        let mut results = Vec::new();
        for criterion in criteria {
            let result = if criterion == "no-todo" {
                let ok = !output.reply.contains("TODO");
                CriterionResult::new(&criterion, ok, if ok { "no TODO" } else { "the reply says TODO" })
            } else if let Some(path) = criterion.strip_prefix("file:") {
                match workspace::read_file(path) {
                    Ok(text) => CriterionResult::new(&criterion, true, format!("{} bytes", text.len())),
                    Err(workspace::FsError::NotFound(p)) => {
                        CriterionResult::new(&criterion, false, format!("not found: {p}"))
                    }
                    Err(e) => CriterionResult::new(&criterion, false, format!("{e:?}")),
                }
            } else {
                // Not a failed check: this validator cannot judge it.
                return Err(format!("unknown criterion `{criterion}`"));
            };
            log::debug(&format!("{}: {}", result.criterion, result.passed));
            results.push(result);
        }
        let fix = "Finish the TODOs in your reply and create the files the task needs.";
        Ok(Verdict::from_results(results, Some(fix.into())))
    }
}

crewbox_plugin_sdk::export_validator!(Check);

//! The built-in `no-secrets` validator: flags credentials in an agent's changes.
//!
//! It scans every changed (not deleted) file and the added lines of the diff, and
//! reports the path, line and rule of each hit — never the secret itself.

pub mod scan;

use std::collections::BTreeSet;

use crewbox_plugin_sdk::workspace::{self, ChangeKind, FsError};
use crewbox_plugin_sdk::{AgentOutput, CriterionResult, Validator, ValidatorInfo, Verdict, log};

pub use scan::Rule;

/// Locations listed per criterion before the rest are summarised as a count.
const MAX_LISTED: usize = 20;

/// One secret found: where and which rule, without the matched text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// Path relative to the workspace root.
    pub path: String,
    /// 1-based line number in the current file.
    pub line: u32,
    /// The rule that fired.
    pub rule: Rule,
}

/// All findings in `files` (`(path, content)`) and in the added lines of `diff`,
/// sorted and without duplicates.
pub fn find_secrets(files: &[(String, String)], diff: &str) -> Vec<Finding> {
    let mut found = BTreeSet::new();
    for (path, content) in files {
        for (line, rule) in scan::scan_text(content) {
            found.insert(Finding {
                path: path.clone(),
                line,
                rule,
            });
        }
    }
    for added in scan::added_lines(diff) {
        for rule in scan::scan_line(added.text) {
            found.insert(Finding {
                path: added.path.to_string(),
                line: added.line,
                rule,
            });
        }
    }
    found.into_iter().collect()
}

/// Parses criteria into rules; empty means every rule.
pub fn rules_for(criteria: &[String]) -> Result<Vec<Rule>, String> {
    if criteria.is_empty() {
        return Ok(Rule::ALL.to_vec());
    }
    criteria
        .iter()
        .map(|c| {
            Rule::parse(c.trim()).ok_or_else(|| {
                let known: Vec<&str> = Rule::ALL.iter().map(|r| r.as_str()).collect();
                format!(
                    "unknown criterion `{c}`; no-secrets checks: {}",
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// One result per rule, failing where the rule has findings.
pub fn verdict(findings: &[Finding], rules: &[Rule]) -> Verdict {
    let mut failed_at = Vec::new();
    let results = rules
        .iter()
        .map(|&rule| {
            let hits: Vec<String> = findings
                .iter()
                .filter(|f| f.rule == rule)
                .map(|f| format!("{}:{}", f.path, f.line))
                .collect();
            if hits.is_empty() {
                return CriterionResult::new(rule.as_str(), true, "none found");
            }
            failed_at.extend(hits.iter().map(|h| format!("{h} ({})", rule.as_str())));
            CriterionResult::new(rule.as_str(), false, format!("found at {}", list(&hits)))
        })
        .collect();
    let fix = format!(
        "Remove the credentials flagged at {} from the files and their history in this change; \
         read them from the environment or a secret store instead, and rotate any that were real.",
        list(&failed_at)
    );
    Verdict::from_results(results, Some(fix))
}

fn list(items: &[String]) -> String {
    if items.len() <= MAX_LISTED {
        return items.join(", ");
    }
    format!(
        "{} and {} more",
        items[..MAX_LISTED].join(", "),
        items.len() - MAX_LISTED
    )
}

/// The exported validator.
pub struct NoSecrets;

impl Validator for NoSecrets {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "no-secrets".into(),
            description: "Flags private keys, AWS/GitHub/GitLab/Slack tokens and random-looking \
                          values assigned to secret names in changed files and added lines."
                .into(),
            default_criteria: Rule::ALL.iter().map(|r| r.as_str().to_string()).collect(),
        }
    }

    fn validate(_output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        let rules = rules_for(&criteria)?;
        let mut files = Vec::new();
        for changed in workspace::changed_paths() {
            if changed.change == ChangeKind::Deleted {
                continue;
            }
            match workspace::read_file(&changed.path) {
                Ok(content) => files.push((changed.path, content)),
                // Binary or oversized files are still covered by the diff's added lines.
                Err(e @ (FsError::NotText(_) | FsError::TooLarge(_) | FsError::NotFound(_))) => {
                    log::debug(&format!("no-secrets: skipped {}: {e}", changed.path));
                }
                Err(e) => return Err(format!("cannot read changed file {}: {e}", changed.path)),
            }
        }
        let findings = find_secrets(&files, &workspace::diff());
        Ok(verdict(&findings, &rules))
    }
}

crewbox_plugin_sdk::export_validator!(NoSecrets);

#[cfg(test)]
mod tests;

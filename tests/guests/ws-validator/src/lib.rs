//! A validator that uses every validator import: `workspace`, `model` and `log`.
//!
//! Each criterion names one probe, and the criterion's detail reports what the host
//! answered, so tests can check the host side exactly:
//! `read:PATH`, `list:PATH`, `changed`, `diff`, `model:PROMPT`.

wit_bindgen::generate!({ path: "../../../wit", world: "judge" });

use crewbox::plugin::log::{Level, log};
use crewbox::plugin::model::{CompletionRequest, ModelError, complete};
use crewbox::plugin::types::{AgentOutput, CriterionResult, ValidatorInfo, Verdict};
use crewbox::plugin::workspace::{
    ChangeKind, EntryKind, FsError, changed_paths, diff, list_dir, read_file,
};
use exports::crewbox::plugin::validate::Guest;

struct Ws;

fn fs_error(e: &FsError) -> String {
    match e {
        FsError::NotFound(p) => format!("not-found:{p}"),
        FsError::OutsideWorkspace(p) => format!("outside-workspace:{p}"),
        FsError::TooLarge(n) => format!("too-large:{n}"),
        FsError::NotText(p) => format!("not-text:{p}"),
        FsError::Io(m) => format!("io:{m}"),
    }
}

fn probe(criterion: &str) -> Result<(bool, String), String> {
    if let Some(path) = criterion.strip_prefix("read:") {
        return Ok(match read_file(path) {
            Ok(text) => (true, text),
            Err(e) => (false, fs_error(&e)),
        });
    }
    if let Some(path) = criterion.strip_prefix("list:") {
        return Ok(match list_dir(path) {
            Ok(entries) => {
                let names: Vec<String> = entries
                    .iter()
                    .map(|e| {
                        let kind = match e.kind {
                            EntryKind::File => "file",
                            EntryKind::Directory => "dir",
                            EntryKind::Symlink => "symlink",
                            EntryKind::Other => "other",
                        };
                        format!("{}:{kind}", e.name)
                    })
                    .collect();
                (true, names.join(","))
            }
            Err(e) => (false, fs_error(&e)),
        });
    }
    if criterion == "changed" {
        let changed: Vec<String> = changed_paths()
            .iter()
            .map(|c| {
                let kind = match c.change {
                    ChangeKind::Added => "added",
                    ChangeKind::Modified => "modified",
                    ChangeKind::Deleted => "deleted",
                };
                format!("{}:{kind}", c.path)
            })
            .collect();
        return Ok((true, changed.join(",")));
    }
    if criterion == "diff" {
        return Ok((true, diff()));
    }
    if let Some(prompt) = criterion.strip_prefix("model:") {
        let request = CompletionRequest {
            system: None,
            prompt: prompt.to_owned(),
            max_tokens: Some(16),
        };
        return Ok(match complete(&request) {
            Ok(c) => (
                true,
                format!("{}|{}|{}", c.text, c.input_tokens, c.output_tokens),
            ),
            Err(ModelError::BudgetExhausted(m)) => (false, format!("budget-exhausted:{m}")),
            Err(ModelError::Unavailable(m)) => (false, format!("unavailable:{m}")),
            Err(ModelError::Failed(m)) => (false, format!("failed:{m}")),
        });
    }
    Err(format!("unknown probe `{criterion}`"))
}

impl Guest for Ws {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "ws-probe".to_owned(),
            description: "Probes the workspace and model imports and reports what the host said."
                .to_owned(),
            default_criteria: vec!["changed".to_owned()],
        }
    }

    fn validate(_output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        let mut results = Vec::with_capacity(criteria.len());
        for criterion in criteria {
            let (passed, detail) = probe(&criterion)?;
            log(Level::Info, &format!("{criterion} -> {passed}"));
            results.push(CriterionResult {
                criterion,
                passed,
                detail,
            });
        }
        let passed = results.iter().all(|r| r.passed);
        Ok(Verdict {
            passed,
            results,
            fix_prompt: None,
        })
    }
}

export!(Ws);

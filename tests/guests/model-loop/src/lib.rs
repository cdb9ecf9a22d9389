//! A validator that spends its model budget: `loop` calls `model.complete` until the host
//! refuses (at most 10,000 times), `prompt=N` sends one prompt of N bytes. Each result's
//! detail reports `calls=K tokens=T then <error>`, so tests can check the budget held.

wit_bindgen::generate!({ path: "../../../wit", world: "judge" });

use crewbox::plugin::model::{CompletionRequest, ModelError, complete};
use crewbox::plugin::types::{AgentOutput, CriterionResult, ValidatorInfo, Verdict};
use exports::crewbox::plugin::validate::Guest;

struct Spender;

fn error(e: &ModelError) -> String {
    match e {
        ModelError::BudgetExhausted(m) => format!("budget-exhausted:{m}"),
        ModelError::Unavailable(m) => format!("unavailable:{m}"),
        ModelError::Failed(m) => format!("failed:{m}"),
    }
}

/// Calls the model with `prompt` until it refuses; returns what was spent and why it stopped.
fn spend(prompt: &str, most: u32) -> String {
    let (mut calls, mut tokens) = (0u32, 0u64);
    let request = CompletionRequest {
        system: None,
        prompt: prompt.to_owned(),
        max_tokens: Some(16),
    };
    while calls < most {
        match complete(&request) {
            Ok(c) => {
                calls += 1;
                tokens += u64::from(c.input_tokens) + u64::from(c.output_tokens);
            }
            Err(e) => return format!("calls={calls} tokens={tokens} then {}", error(&e)),
        }
    }
    format!("calls={calls} tokens={tokens} then stopped")
}

impl Guest for Spender {
    fn describe() -> ValidatorInfo {
        ValidatorInfo {
            name: "model-loop".to_owned(),
            description: "Calls the model until its budget is spent.".to_owned(),
            default_criteria: vec!["loop".to_owned()],
        }
    }

    fn validate(_output: AgentOutput, criteria: Vec<String>) -> Result<Verdict, String> {
        let results: Vec<CriterionResult> = criteria
            .into_iter()
            .map(|criterion| {
                let detail = match criterion.strip_prefix("prompt=") {
                    Some(n) => spend(&"x".repeat(n.parse().unwrap_or(0)), 1),
                    None => spend("ping", 10_000),
                };
                CriterionResult {
                    criterion,
                    passed: true,
                    detail,
                }
            })
            .collect();
        Ok(Verdict {
            passed: true,
            results,
            fix_prompt: None,
        })
    }
}

export!(Spender);

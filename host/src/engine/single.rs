//! `single`: one agent with full tools, in its own worktree, validated. With `chain`, a
//! handoff that lists `next_steps` starts a follow-up agent on the previous agent's
//! branch, up to the chain depth.

use serde_json::json;

use super::execute::{ExecOptions, ExecResult, Isolation};
use super::run::{Engine, EngineError, ModeContext, ModeResult, status_of};
use super::validate::ValidationStatus;
use crate::agent::permissions::CapSet;

/// Default bound on follow-up agents.
pub const DEFAULT_CHAIN_DEPTH: u32 = 3;

/// The follow-up task from a handoff, if it asks for one.
pub fn follow_up_task(result: &str) -> Option<String> {
    let handoff = crewbox_handoff::parse(result).ok()?;
    if handoff.next_steps.is_empty() {
        return None;
    }
    let steps: Vec<String> = handoff
        .next_steps
        .iter()
        .map(|s| format!("- {s}"))
        .collect();
    Some(format!(
        "Continue the work of the previous agent, whose changes are already in this workspace.\n\n\
         Its summary: {}\n\nNext steps it handed over:\n{}",
        handoff.summary,
        steps.join("\n")
    ))
}

impl Engine {
    /// Runs one executor on the prompt (and its chain of follow-ups).
    pub(super) async fn run_single(&self, ctx: &ModeContext) -> Result<ModeResult, EngineError> {
        let opts = ExecOptions {
            isolation: ctx.isolation(),
            validators: ctx.validators.clone(),
            max_fix_rounds: ctx.max_fix_rounds(),
            join: None,
        };
        let spec = self.agent_spec(ctx, "agent", "executor", &ctx.req.prompt, CapSet::full());
        let mut last: ExecResult = self.execute(spec, opts.clone()).await?;
        let mut chain = Vec::new();
        let depth = ctx.req.chain_depth.unwrap_or(DEFAULT_CHAIN_DEPTH);
        while ctx.req.chain && chain.len() < depth as usize && last.outcome.state.is_success() {
            let Some(task) = follow_up_task(&last.outcome.result) else {
                break;
            };
            let mut spec = self.agent_spec(
                ctx,
                &format!("agent-{}", chain.len() + 2),
                "executor",
                &task,
                CapSet::full(),
            );
            spec.parent = Some(last.agent_id.clone());
            let base = last.branch.as_ref().and_then(|b| b.commits.last().cloned());
            let next = match (base, ctx.isolation()) {
                (Some(commit), Isolation::Worktree) => {
                    self.execute_at(spec, opts.clone(), &commit).await?
                }
                _ => self.execute(spec, opts.clone()).await?,
            };
            self.store.log_event(
                &ctx.run_id,
                Some(&next.agent_id),
                "agent.chain",
                json!({ "after": last.agent_id }),
            );
            chain.push(json!({ "agent": next.agent_id, "branch": next.branch.as_ref().map(|b| &b.branch) }));
            last = next;
        }
        let (status, reason) = status_of(last.outcome.state, last.validation);
        let mut details = serde_json::Map::new();
        if let Some(branch) = &last.branch {
            details.insert("branch".into(), json!(branch));
        }
        if last.validation != ValidationStatus::Skipped {
            details.insert("validation".into(), json!(last.validation));
        }
        if !chain.is_empty() {
            details.insert("chain".into(), json!(chain));
        }
        Ok(ModeResult {
            status,
            reason,
            result: last.outcome.result,
            details,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_handoffs_with_next_steps_continue() {
        let with = "done\n```json\n{\"status\":\"partial\",\"summary\":\"half\",\"findings\":[\"x\"],\"next_steps\":[\"write tests\"]}\n```";
        let task = follow_up_task(with).unwrap();
        assert!(task.contains("- write tests") && task.contains("half"));
        let without =
            "```json\n{\"status\":\"success\",\"summary\":\"all\",\"findings\":[\"x\"]}\n```";
        assert_eq!(follow_up_task(without), None);
        assert_eq!(follow_up_task("no handoff at all"), None);
    }
}

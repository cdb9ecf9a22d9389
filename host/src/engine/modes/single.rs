//! `single`: one agent with full tools, in its own worktree, validated. With `chain`, a
//! handoff that lists `next_steps` starts a follow-up agent on the previous agent's
//! branch, up to the chain depth.
//!
//! Each agent is a journal step (`agent/agent`, `agent/agent-2`, …): a resumed run
//! reads back every agent with a stored result and runs only the first without one.

use async_trait::async_trait;

use super::{Mode, ModeOutcome, status_of, validator_fault};
use crate::engine::context::RunContext;
use crate::engine::error::EngineError;
use crate::engine::executor::{ExecResult, Placement};
use crate::engine::journal::StepKey;
use crate::engine::report::{ChainLink, ModeDetails, SingleDetails};
use crate::event::{Event, ValidationStatus};
use crate::vocab::{Access, Isolation};

/// Default bound on follow-up agents.
pub const DEFAULT_CHAIN_DEPTH: u32 = 3;

/// One executor on the prompt, and its chain of follow-ups.
pub(crate) struct Single;

#[async_trait]
impl Mode for Single {
    async fn run(&self, ctx: &RunContext) -> Result<ModeOutcome, EngineError> {
        let opts = ctx.exec_options(&[]);
        let spec = ctx.agent_spec("agent", "executor", &ctx.req.prompt, Access::Full);
        let first = StepKey::Agent(spec.name.clone());
        let mut job = ctx.job(spec, opts.clone());
        // At the run's stored base: a resumed run starts where the first process did.
        job.placement = Placement::Isolated {
            base: ctx.run_base().await?,
        };
        let mut last: ExecResult = ctx.execute_step(&first, job).await?;
        let mut chain = Vec::new();
        let depth = ctx.req.chain_depth.unwrap_or(DEFAULT_CHAIN_DEPTH);
        // The newest branch of the chain: each link starts at its predecessor's tip, so
        // it holds the work of every link before it (a link that changed nothing has
        // no branch of its own).
        let mut tip = last.branch.clone();
        // Work that failed validation is not built on (as in every team mode).
        while ctx.req.chain
            && chain.len() < depth as usize
            && last.outcome.state.is_success()
            && last.validation.accepts()
        {
            let Some(task) = follow_up_task(&last.outcome.result) else {
                break;
            };
            let name = format!("agent-{}", chain.len() + 2);
            let mut spec = ctx.agent_spec(&name, "executor", &task, Access::Full);
            spec.parent = Some(last.agent_id.clone());
            let mut job = ctx.job(spec, opts.clone());
            // The follow-up starts where its predecessor's branch ends.
            if ctx.req.isolation() == Isolation::Worktree {
                let base = last.branch.as_ref().and_then(|b| b.commits.last().cloned());
                job.placement = Placement::Isolated { base };
            }
            let key = StepKey::Agent(name);
            let replayed = ctx.journal.has(&key);
            let next = ctx.execute_step(&key, job).await?;
            if !replayed {
                ctx.emit(
                    Some(&next.agent_id),
                    Event::AgentChain {
                        after: last.agent_id.clone(),
                    },
                );
            }
            chain.push(ChainLink {
                agent: next.agent_id.clone(),
                branch: next.branch.as_ref().map(|b| b.branch.clone()),
            });
            if next.branch.is_some() {
                tip.clone_from(&next.branch);
            }
            last = next;
        }
        let details = SingleDetails {
            branch: tip,
            validation: (last.validation != ValidationStatus::Skipped).then_some(last.validation),
            chain,
        };
        let mut outcome = ModeOutcome::new(
            status_of(last.outcome.state, last.validation),
            last.outcome.result,
            ModeDetails::Single(details),
        );
        outcome.fault = validator_fault(last.validation, &last.rounds);
        Ok(outcome)
    }
}

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

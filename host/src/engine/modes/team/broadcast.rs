//! `broadcast`: every member answers the request at once, told its name, role and who
//! the others are; the result is every reply under a heading.

use async_trait::async_trait;

use super::prompts::{WorkerInfo, broadcast_prompt};
use super::{GroupItem, collect_replies, integrate, run_group};
use crate::engine::context::RunContext;
use crate::engine::error::EngineError;
use crate::engine::journal::StepKey;
use crate::engine::modes::{Mode, ModeOutcome};

/// Every member in parallel.
pub(crate) struct Broadcast;

#[async_trait]
impl Mode for Broadcast {
    async fn run(&self, ctx: &RunContext) -> Result<ModeOutcome, EngineError> {
        let tc = ctx.team()?;
        let team = &tc.team;
        let names: Vec<&str> = team.members.iter().map(|m| m.name.as_str()).collect();
        let items = team
            .members
            .iter()
            .map(|m| {
                let others: Vec<&str> = names.iter().copied().filter(|n| *n != m.name).collect();
                let prompt = broadcast_prompt(
                    &WorkerInfo::from_member(m, None),
                    &others,
                    team.shared_context.as_deref(),
                    &ctx.req.prompt,
                );
                GroupItem {
                    key: StepKey::member(&m.name),
                    spec: tc.member_spec(ctx, m, &prompt),
                    opts: tc.member_options(ctx, m),
                    assigned: ctx.req.prompt.clone(),
                }
            })
            .collect();
        let mut runs = run_group(ctx, tc, items, None).await?;
        let mut stage: Vec<(&str, &mut super::MemberRun)> = team
            .members
            .iter()
            .map(|m| m.name.as_str())
            .zip(runs.iter_mut())
            .collect();
        integrate(ctx, tc, "members", &mut stage).await?;
        Ok(collect_replies(team, &runs))
    }
}

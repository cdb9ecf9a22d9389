//! `sequential`: members one after another, each seeing the earlier replies.

use async_trait::async_trait;

use super::prompts::{EarlierReply, WorkerInfo, sequential_prompt};
use super::{GroupItem, MemberRun, collect_replies, integrate, run_group};
use crate::engine::context::RunContext;
use crate::engine::error::EngineError;
use crate::engine::journal::StepKey;
use crate::engine::modes::{Mode, ModeOutcome};

/// Members one at a time.
pub(crate) struct Sequential;

#[async_trait]
impl Mode for Sequential {
    async fn run(&self, ctx: &RunContext) -> Result<ModeOutcome, EngineError> {
        let tc = ctx.team()?;
        let team = &tc.team;
        let mut runs: Vec<MemberRun> = Vec::with_capacity(team.members.len());
        for m in &team.members {
            let earlier: Vec<EarlierReply<'_>> = team
                .members
                .iter()
                .zip(&runs)
                .map(|(m, r)| EarlierReply {
                    name: &m.name,
                    reply: &r.reply,
                })
                .collect();
            let prompt = sequential_prompt(
                &WorkerInfo::from_member(m, None),
                team.shared_context.as_deref(),
                &ctx.req.prompt,
                &earlier,
            );
            let item = GroupItem {
                key: StepKey::member(&m.name),
                spec: tc.member_spec(ctx, m, &prompt),
                opts: tc.member_options(ctx, m),
                assigned: ctx.req.prompt.clone(),
            };
            let mut one = run_group(ctx, tc, vec![item], None).await?;
            // The next member starts from the work merged so far.
            if let Some(run) = one.first_mut() {
                let stage = StepKey::member(&m.name).to_string();
                integrate(ctx, tc, &stage, &mut [(m.name.as_str(), run)]).await?;
            }
            runs.append(&mut one);
        }
        Ok(collect_replies(team, &runs))
    }
}

//! `single`: one agent with full tools, in its own worktree, validated.

use serde_json::json;

use super::execute::ExecOptions;
use super::run::{Engine, EngineError, ModeContext, ModeResult, status_of};
use super::validate::ValidationStatus;
use crate::agent::permissions::CapSet;

impl Engine {
    /// Runs one executor on the prompt.
    pub(super) async fn run_single(&self, ctx: &ModeContext) -> Result<ModeResult, EngineError> {
        let spec = self.agent_spec(ctx, "agent", "executor", &ctx.req.prompt, CapSet::full());
        let opts = ExecOptions {
            isolation: ctx.isolation(),
            validators: ctx.validators.clone(),
            max_fix_rounds: ctx.max_fix_rounds(),
            join: None,
        };
        let r = self.execute(spec, opts).await?;
        let (status, reason) = status_of(r.outcome.state, r.validation);
        let mut details = serde_json::Map::new();
        if let Some(branch) = &r.branch {
            details.insert("branch".into(), json!(branch));
        }
        if r.validation != ValidationStatus::Skipped {
            details.insert("validation".into(), json!(r.validation));
        }
        Ok(ModeResult {
            status,
            reason,
            result: r.outcome.result,
            details,
        })
    }
}

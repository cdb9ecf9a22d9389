//! `crew`: planner (read-only) → executor (full tools, its own worktree) → reviewer
//! (read-only, sees the diff and the request). The role plugins build each prompt and read
//! each reply; permissions come from tool sets, never from prompt text. A FAIL sends the
//! findings back to the executor (same worktree, same conversation) for a revision.

use serde_json::json;

use super::execute::{ExecOptions, HeldWorktree, Isolation};
use super::run::{Engine, EngineError, ModeContext, ModeResult, status_of};
use super::validate::ValidationStatus;
use super::{ExitReason, RunStatus};
use crate::agent::permissions::CapSet;
use crate::agent::runner::AgentSpec;
use crate::plugin::{Access, CallEnv, Outcome, Plugin, PluginKind, RoleContext, WorkspaceView};

/// Most executor revisions a crew allows.
pub const MAX_REVISIONS: u32 = 3;

fn caps(access: Access) -> CapSet {
    match access {
        Access::ReadOnly => CapSet::read_only(),
        Access::Full => CapSet::full(),
    }
}

/// [plugin helper, issue 13] The most each crew position may do. A role plugin's
/// `spec().access` can only narrow it: the tool set never comes from the plugin itself.
fn ceiling(position: &str) -> Access {
    match position {
        "executor" => Access::Full,
        _ => Access::ReadOnly,
    }
}

/// The tools of a crew position: its ceiling, narrowed by what the role says it needs.
fn role_caps(position: &str, wanted: Access) -> CapSet {
    match (ceiling(position), wanted) {
        (Access::Full, Access::Full) => caps(Access::Full),
        _ => caps(Access::ReadOnly),
    }
}

impl Engine {
    fn role_env(&self, root: &std::path::Path, diff: Option<&str>) -> CallEnv {
        CallEnv {
            workspace: Some(WorkspaceView {
                root: root.to_path_buf(),
                changed: Vec::new(),
                diff: diff.unwrap_or_default().to_owned(),
            }),
            model: None,
        }
    }

    async fn role(&self, name: &str) -> Result<(Plugin, crate::plugin::RoleSpec), EngineError> {
        let plugin = self.plugins.get(name, PluginKind::Role).await?;
        let spec = plugin
            .role_spec()
            .await
            .map_err(|f| EngineError::Config(format!("role `{name}` faulted: {f}")))?;
        Ok((plugin, spec))
    }

    fn role_agent(
        &self,
        ctx: &ModeContext,
        position: &str,
        role: &crate::plugin::RoleSpec,
        task: String,
    ) -> AgentSpec {
        let tools = role_caps(position, role.access);
        let mut spec = self.agent_spec(ctx, position, position, &task, tools);
        if let Some(limit) = role.turn_limit {
            spec.quotas.max_turns = spec.quotas.max_turns.min(limit.max(1));
        }
        spec
    }

    /// Runs the crew.
    pub(super) async fn run_crew(&self, ctx: &ModeContext) -> Result<ModeResult, EngineError> {
        let max_revisions = ctx.req.max_revisions.unwrap_or(1).min(MAX_REVISIONS);
        let (planner, planner_spec) = self.role("planner").await?;
        let (executor, executor_spec) = self.role("executor").await?;
        let (reviewer, reviewer_spec) = self.role("reviewer").await?;
        let fault = |role: &str, f: crate::plugin::PluginFault| {
            EngineError::Config(format!("role `{role}` faulted: {f}"))
        };
        let mut role_ctx = RoleContext {
            request: ctx.req.prompt.clone(),
            task: ctx.req.prompt.clone(),
            plan: None,
            diff: None,
            findings: Vec::new(),
            revision: 0,
        };
        let mut details = serde_json::Map::new();

        // Plan (read-only, in the repository itself).
        let prompt = planner
            .role_prompt(self.role_env(&self.repo, None), &role_ctx)
            .await
            .map_err(|f| fault("planner", f))?;
        let plan_spec = self.role_agent(ctx, "planner", &planner_spec, prompt);
        let plan_run = self
            .run_agent(plan_spec, &ExecOptions::default(), None, None)
            .await?;
        if !plan_run.outcome.state.is_success() {
            return Ok(ModeResult {
                status: RunStatus::Failed,
                reason: ExitReason::Failed,
                result: format!(
                    "planner ended {}: {}",
                    plan_run.outcome.state,
                    plan_run.outcome.error.unwrap_or_default()
                ),
                details,
            });
        }
        let plan = match planner
            .role_interpret(
                self.role_env(&self.repo, None),
                &role_ctx,
                &plan_run.outcome.result,
            )
            .await
            .map_err(|f| fault("planner", f))?
        {
            Outcome::Plan(tasks) if !tasks.is_empty() => tasks
                .iter()
                .enumerate()
                .map(|(i, t)| format!("{}. {t}", i + 1))
                .collect::<Vec<_>>()
                .join("\n"),
            Outcome::Plan(_) | Outcome::Pass(_) | Outcome::Fail(_) => {
                plan_run.outcome.result.clone()
            }
            Outcome::Done(text) => text,
        };
        details.insert("plan".into(), json!(plan));
        role_ctx.plan = Some(plan);

        // Execute (full tools, its own worktree kept across revisions), then review.
        let mut exec_spec = self.role_agent(ctx, "executor", &executor_spec, String::new());
        let held: Option<HeldWorktree> = match ctx.isolation() {
            Isolation::Worktree
                if exec_spec
                    .perms
                    .caps
                    .contains(crate::tool::Capability::Write) =>
            {
                Some(self.acquire_worktree(&mut exec_spec).await?)
            }
            _ => None,
        };
        let opts = ExecOptions {
            isolation: ctx.isolation(),
            validators: ctx.validators.clone(),
            max_fix_rounds: ctx.max_fix_rounds(),
            join: None,
        };
        let mut history = None;
        let mut verdict = json!(null);
        let mut revisions = 0;
        let mut last_exec;
        loop {
            let workspace = exec_spec.workspace.clone();
            let prompt = executor
                .role_prompt(self.role_env(&workspace, None), &role_ctx)
                .await
                .map_err(|f| fault("executor", f))?;
            let mut spec = exec_spec.clone();
            spec.id = crate::ids::AgentId::new();
            spec.task = prompt.clone();
            if role_ctx.revision > 0 {
                spec.name = format!("executor-r{}", role_ctx.revision);
            }
            let hist = history.take().map(|mut h: Vec<crate::provider::Message>| {
                h.push(crate::provider::Message::user(prompt.clone()));
                h
            });
            last_exec = self.run_agent(spec, &opts, held.as_ref(), hist).await?;
            history = Some(last_exec.outcome.history.clone());
            if !last_exec.outcome.state.is_success() {
                break;
            }
            let diff = match &held {
                Some((manager, wt)) => manager
                    .diff(wt, 512 * 1024)
                    .await
                    .map_err(|e| EngineError::Config(e.to_string()))?,
                None => String::new(),
            };
            role_ctx.diff = Some(diff.clone());
            let prompt = reviewer
                .role_prompt(self.role_env(&workspace, Some(&diff)), &role_ctx)
                .await
                .map_err(|f| fault("reviewer", f))?;
            let mut review_spec = self.role_agent(ctx, "reviewer", &reviewer_spec, prompt);
            // The reviewer reads the executor's worktree; its tool set has no write or exec.
            review_spec.workspace = workspace.clone();
            let review = self
                .run_agent(review_spec, &ExecOptions::default(), None, None)
                .await?;
            let outcome = reviewer
                .role_interpret(
                    self.role_env(&workspace, Some(&diff)),
                    &role_ctx,
                    &review.outcome.result,
                )
                .await
                .map_err(|f| fault("reviewer", f))?;
            let findings = match outcome {
                Outcome::Pass(summary) => {
                    verdict = json!({ "verdict": "PASS", "summary": summary, "findings": [] });
                    break;
                }
                Outcome::Fail(findings) => findings,
                other => vec![format!(
                    "the reviewer's reply could not be read as a verdict: {other:?}"
                )],
            };
            verdict = json!({ "verdict": "FAIL", "findings": findings });
            self.store
                .log_event(&ctx.run_id, None, "crew.review", verdict.clone());
            if revisions >= max_revisions {
                break;
            }
            revisions += 1;
            role_ctx.findings = findings;
            role_ctx.revision = revisions;
        }
        let exec_result = last_exec.outcome.result.clone();
        if let Some(held) = held {
            let wt = self.finish_worktree(&exec_spec, held, &exec_result).await?;
            if let Some(b) = wt.branch {
                details.insert("branch".into(), json!(b));
            }
            details.insert("changed".into(), json!(wt.changed));
        }
        let passed = verdict["verdict"] == "PASS";
        details.insert("verdict".into(), verdict);
        details.insert("revisions".into(), json!(revisions));
        if last_exec.validation != ValidationStatus::Skipped {
            details.insert("validation".into(), json!(last_exec.validation));
        }
        let (mut status, mut reason) = status_of(last_exec.outcome.state, last_exec.validation);
        if status == RunStatus::Completed && !passed {
            (status, reason) = (RunStatus::Failed, ExitReason::Failed);
        }
        Ok(ModeResult {
            status,
            reason,
            result: exec_result,
            details,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A role plugin claiming `full` access for the planner or reviewer position gets
    /// read-only tools; the executor gets full tools only if its role asks for them.
    #[test]
    fn a_role_never_widens_its_positions_tools() {
        assert_eq!(role_caps("planner", Access::Full), CapSet::read_only());
        assert_eq!(role_caps("reviewer", Access::Full), CapSet::read_only());
        assert_eq!(role_caps("executor", Access::Full), CapSet::full());
        assert_eq!(role_caps("executor", Access::ReadOnly), CapSet::read_only());
    }
}

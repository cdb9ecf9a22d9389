//! `crew`: planner (read-only) → executor (full tools, its own worktree) → reviewer
//! (read-only, sees the diff and the request). The role plugins build each prompt and read
//! each reply; permissions come from tool sets, never from prompt text. A FAIL sends the
//! findings back to the executor (same worktree, same conversation) for a revision.
//!
//! Every stage is a journal step — the planner's reply (`agent/planner`), the plan read
//! from it (`crew/plan`), the held worktree (`crew/worktree`, see [`held`]), each
//! revision's executor (`crew/r<n>/executor`, with its conversation and a checkpoint of
//! the worktree) and review (`crew/r<n>/review`), the branch (`crew/branch`) — so a
//! resumed crew goes on at the stage it stopped in, with the same plan, worktree state,
//! branch name and executor conversation.

mod held;

use async_trait::async_trait;

use super::{Mode, ModeOutcome, status_of, validator_fault};
use crate::agent::runner::AgentSpec;
use crate::engine::context::RunContext;
use crate::engine::error::{EngineError, PluginStep, RoleCall};
use crate::engine::executor::{ExecOptions, Placement};
use crate::engine::journal::StepKey;
use crate::engine::recorded::StoredExec;
use crate::engine::report::{CrewDetails, CrewExecution, ModeDetails};
use crate::event::{Event, ReviewVerdict, ValidationStatus};
use crate::ids::AgentId;
use crate::plugin::{
    CallEnv, Outcome, Plugin, PluginFault, PluginKind, RoleContext, RoleSpec, WorkspaceView,
};
use crate::provider::Message;
use crate::vocab::{Access, ExitReason, RunStatus};
use held::Held;

/// Most executor revisions a crew allows.
pub const MAX_REVISIONS: u32 = 3;

/// Planner → executor → reviewer.
pub(crate) struct Crew;

/// A loaded role plugin with its spec.
struct Role {
    name: &'static str,
    plugin: Plugin,
    spec: RoleSpec,
}

impl Role {
    async fn load(ctx: &RunContext, name: &'static str) -> Result<Self, EngineError> {
        let plugin = ctx.services().plugins().get(name, PluginKind::Role).await?;
        let spec = plugin
            .role_spec()
            .await
            .map_err(|f| fault(name, RoleCall::Spec, f))?;
        Ok(Self { name, plugin, spec })
    }

    async fn prompt(
        &self,
        root: &std::path::Path,
        diff: Option<&str>,
        rc: &RoleContext,
    ) -> Result<String, EngineError> {
        self.plugin
            .role_prompt(env(root, diff), rc)
            .await
            .map_err(|f| fault(self.name, RoleCall::Prompt, f))
    }

    async fn interpret(
        &self,
        root: &std::path::Path,
        diff: Option<&str>,
        rc: &RoleContext,
        output: &str,
    ) -> Result<Outcome, EngineError> {
        self.plugin
            .role_interpret(env(root, diff), rc, output)
            .await
            .map_err(|f| fault(self.name, RoleCall::Interpret, f))
    }

    /// The position's agent: the access its role asks for under the position's
    /// ceiling, its turn limit under the run's.
    fn agent(&self, ctx: &RunContext, task: String) -> AgentSpec {
        let access = role_access(self.name, Access::from(self.spec.access));
        let mut spec = ctx.agent_spec(self.name, self.name, &task, access);
        if let Some(limit) = self.spec.turn_limit {
            spec.quotas.max_turns = spec.quotas.max_turns.min(limit.max(1));
        }
        spec
    }
}

/// The most each crew position may do. A role plugin's `spec().access` can only
/// narrow it: the tool set never comes from the plugin itself.
fn ceiling(position: &str) -> Access {
    match position {
        "executor" => Access::Full,
        _ => Access::ReadOnly,
    }
}

/// The access of a crew position: its ceiling, narrowed by what the role says it needs.
fn role_access(position: &str, wanted: Access) -> Access {
    match (ceiling(position), wanted) {
        (Access::Full, Access::Full) => Access::Full,
        (Access::Full | Access::ReadOnly, Access::ReadOnly) | (Access::ReadOnly, Access::Full) => {
            Access::ReadOnly
        }
    }
}

fn fault(role: &str, call: RoleCall, fault: PluginFault) -> EngineError {
    EngineError::PluginFault {
        step: PluginStep::Role {
            role: role.to_owned(),
            call,
        },
        fault,
    }
}

fn env(root: &std::path::Path, diff: Option<&str>) -> CallEnv {
    CallEnv {
        workspace: Some(WorkspaceView {
            root: root.to_path_buf(),
            changed: Vec::new(),
            diff: diff.unwrap_or_default().to_owned(),
        }),
        model: None,
    }
}

#[async_trait]
impl Mode for Crew {
    async fn run(&self, ctx: &RunContext) -> Result<ModeOutcome, EngineError> {
        let max_revisions = ctx.req.max_revisions.unwrap_or(1).min(MAX_REVISIONS);
        let planner = Role::load(ctx, "planner").await?;
        let executor = Role::load(ctx, "executor").await?;
        let reviewer = Role::load(ctx, "reviewer").await?;
        let repo = ctx.services().repo().to_path_buf();
        let mut rc = RoleContext {
            request: ctx.req.prompt.clone(),
            task: ctx.req.prompt.clone(),
            plan: None,
            diff: None,
            findings: Vec::new(),
            revision: 0,
        };
        let mut details = CrewDetails::default();

        // Plan (read-only, in the repository itself); the plan read from its reply is
        // a step of its own, so a resumed crew executes the very same plan.
        let plan = match ctx.journal.done::<String>(&StepKey::CrewPlan) {
            Some(plan) => plan,
            None => {
                let prompt = planner.prompt(&repo, None, &rc).await?;
                let job = ctx.job(planner.agent(ctx, prompt), ExecOptions::unvalidated());
                let key = StepKey::Agent("planner".into());
                let planned = ctx.execute_step(&key, job).await?;
                if !planned.outcome.state.is_success() {
                    return Ok(ModeOutcome::failed(
                        format!(
                            "planner ended {}: {}",
                            planned.outcome.state,
                            planned.outcome.error.unwrap_or_default()
                        ),
                        ModeDetails::Crew(details),
                    ));
                }
                let plan = read_plan(&planner, &repo, &rc, planned.outcome.result).await?;
                ctx.journal
                    .finish(&StepKey::CrewPlan, None, &plan, Vec::new())
                    .await?;
                plan
            }
        };
        details.plan = Some(plan.clone());
        rc.plan = Some(plan);

        // Execute (full tools, its own worktree kept across revisions), then review.
        let mut exec_spec = executor.agent(ctx, String::new());
        held::recover_execution(ctx).await?;
        let held = Held::open(ctx, &mut exec_spec).await?;
        let opts = ctx.exec_options(&[]);
        let mut history: Option<Vec<Message>> = None;
        let mut verdict = None;
        let mut revisions = 0;
        let workspace = exec_spec.workspace.clone();
        let last = loop {
            let key = StepKey::CrewExecution(rc.revision);
            let (exec, diff) = match ctx.replay(&key).await? {
                Some(exec) => {
                    let diff = exec.diff.clone();
                    (exec, diff)
                }
                None => {
                    let prompt = executor.prompt(&workspace, None, &rc).await?;
                    let mut spec = exec_spec.clone();
                    // The first executor is the agent the worktree (and so its branch)
                    // was named after; each revision, and each run of it after a resume,
                    // is an agent of its own.
                    if rc.revision > 0 || held.reopened {
                        spec.id = AgentId::new();
                    }
                    spec.task = prompt.clone();
                    if rc.revision > 0 {
                        spec.name = format!("executor-r{}", rc.revision);
                    }
                    let mut job = ctx.job(spec, opts.clone());
                    if let Some(wt) = held.worktree() {
                        job.placement = Placement::Held(wt.clone());
                        job.checkpoint = Some(held.reference().to_owned());
                    }
                    job.history = history.take().map(|mut h| {
                        h.push(Message::user(prompt));
                        h
                    });
                    ctx.begin_job(&key, &mut job).await?;
                    let exec = ctx.execute(job).await?;
                    let diff = held.diff(&exec_spec).await?;
                    let mut stored = StoredExec::of(&exec);
                    stored.diff = diff.clone();
                    stored.checkpoint = held.checkpoint(&exec_spec, rc.revision).await?;
                    ctx.journal
                        .finish_agent(&key, &exec.agent_id, &stored, &exec.outcome.history)
                        .await?;
                    (exec, diff)
                }
            };
            history = Some(exec.outcome.history.clone());
            if !exec.outcome.state.is_success() {
                break exec;
            }
            rc.diff = Some(diff.clone());
            let key = StepKey::CrewReview(rc.revision);
            let fresh = !ctx.journal.has(&key);
            let prompt = reviewer.prompt(&workspace, Some(&diff), &rc).await?;
            let mut review_spec = reviewer.agent(ctx, prompt);
            // The reviewer reads the executor's worktree; its tool set has no write or exec.
            review_spec.workspace = workspace.clone();
            let review = ctx
                .execute_step(&key, ctx.job(review_spec, ExecOptions::unvalidated()))
                .await?;
            let findings = match reviewer
                .interpret(&workspace, Some(&diff), &rc, &review.outcome.result)
                .await?
            {
                Outcome::Pass(summary) => {
                    verdict = Some(ReviewVerdict::Pass {
                        summary,
                        findings: Vec::new(),
                    });
                    break exec;
                }
                Outcome::Fail(findings) => findings,
                other @ (Outcome::Done(_) | Outcome::Plan(_)) => vec![format!(
                    "the reviewer's reply could not be read as a verdict: {other:?}"
                )],
            };
            let failed = ReviewVerdict::Fail {
                findings: findings.clone(),
            };
            if fresh {
                ctx.emit(None, Event::CrewReview(failed.clone()));
            }
            verdict = Some(failed);
            if revisions >= max_revisions {
                break exec;
            }
            revisions += 1;
            rc.findings = findings;
            rc.revision = revisions;
        };
        let result = last.outcome.result.clone();
        let mut execution = CrewExecution {
            verdict,
            revisions,
            branch: None,
            changed: None,
            validation: (last.validation != ValidationStatus::Skipped).then_some(last.validation),
        };
        if let Some(wt) = held.finish(ctx, &exec_spec, &result).await? {
            execution.branch = wt.branch;
            execution.changed = Some(wt.changed);
        }
        let passed = execution
            .verdict
            .as_ref()
            .is_some_and(ReviewVerdict::passed);
        let (mut status, mut reason) = status_of(last.outcome.state, last.validation);
        if status == RunStatus::Completed && !passed {
            (status, reason) = (RunStatus::Failed, ExitReason::Failed);
        }
        details.execution = Some(execution);
        let mut outcome = ModeOutcome::new((status, reason), result, ModeDetails::Crew(details));
        outcome.fault = validator_fault(last.validation, &last.rounds);
        Ok(outcome)
    }
}

/// The plan the planner's role reads from its reply: numbered tasks, or the reply.
async fn read_plan(
    planner: &Role,
    repo: &std::path::Path,
    rc: &RoleContext,
    reply: String,
) -> Result<String, EngineError> {
    Ok(match planner.interpret(repo, None, rc, &reply).await? {
        Outcome::Plan(tasks) if !tasks.is_empty() => tasks
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{}. {t}", i + 1))
            .collect::<Vec<_>>()
            .join("\n"),
        Outcome::Plan(_) | Outcome::Pass(_) | Outcome::Fail(_) => reply,
        Outcome::Done(text) => text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::CapSet;

    /// A role plugin claiming `full` access for the planner or reviewer position gets
    /// read-only tools; the executor gets full tools only if its role asks for them.
    #[test]
    fn a_role_never_widens_its_positions_tools() {
        let caps = |position, wanted| CapSet::from(role_access(position, wanted));
        assert_eq!(caps("planner", Access::Full), CapSet::read_only());
        assert_eq!(caps("reviewer", Access::Full), CapSet::read_only());
        assert_eq!(caps("executor", Access::Full), CapSet::full());
        assert_eq!(caps("executor", Access::ReadOnly), CapSet::read_only());
    }
}

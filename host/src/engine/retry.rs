//! Retrying a dead letter: the failed agent's step is reopened in its run (with the
//! steps that took its failure in), the run is reopened, and the run is resumed — the
//! resume machinery does the rest. When the mode reaches the reopened step it runs a new
//! agent from the dead one's last conversation (or from its task with `fresh`), with the
//! retry's provider, model and turn limit; the join, the later stages and the report take
//! the new result as if the first attempt had succeeded. The retry is an audited
//! decision, recorded before anything runs.

use super::Inner;
use super::context::RunContext;
use super::error::{EngineError, UsageError};
use super::executor::Job;
use super::journal::StepKey;
use super::providers;
use super::report::RunReport;
use super::request::{RunRequest, RunSpec};
use crate::ids::AgentId;
use crate::provider::Message;
use crate::store::{DeadLetter, RetryOverrides, StoreError};
use crate::vocab::Capability;

/// Told to a writing agent whose retry continues its dead attempt's conversation.
pub const RETRY_WORKSPACE: &str = "This is a retry of your earlier attempt, which failed. Your \
workspace is a fresh checkout of the run's base: the file changes you made in the earlier \
attempt are not in it. Check the files before you rely on earlier edits, and make again \
every change the task still needs.";

/// Runs dead letter `agent` again inside its run and finishes the run.
pub(super) async fn retry(
    engine: &Inner,
    agent: &AgentId,
    overrides: &RetryOverrides,
) -> Result<RunReport, EngineError> {
    let services = &engine.services;
    let store = services.store();
    let dead = dead_letter(engine, agent).await?;
    if dead.step.is_none() {
        return Err(UsageError::NotDead {
            agent: agent.clone(),
            why: "another agent spawned it, so it has no step of its own; retry the agent \
                  that spawned it"
                .into(),
        }
        .into());
    }
    if overrides.max_turns == Some(0) {
        return Err(UsageError::RetryTurns.into());
    }
    // A provider or model that cannot be built is refused before anything is recorded.
    if overrides.provider.is_some() || overrides.model.is_some() {
        let run = store.run(&dead.run_id).await?;
        let spec = run.and_then(|r| serde_json::from_value::<RunSpec>(r.spec).ok());
        let run_provider = spec.and_then(|s| s.request.provider);
        providers::build(
            services,
            &override_request(overrides, run_provider.as_ref()),
        )?;
    }
    // Held from before the retry is recorded to the end of the resume: a run this
    // process still drives (a daemon's retry of one member while the others work) is
    // refused before anything is written, not after its letter was consumed.
    let driving = super::run::Driving::take_or_busy(&dead.run_id)?;
    store
        .retry_dead(&dead, overrides)
        .await
        .map_err(|e| match e {
            StoreError::NotDead { agent, why } => UsageError::NotDead {
                agent: AgentId::from_string(agent),
                why,
            }
            .into(),
            other => EngineError::from(other),
        })?;
    super::run::resume_driving(engine, &dead.run_id, None, Some(driving)).await
}

/// Agent `agent` as a dead letter, or why it is not one.
async fn dead_letter(engine: &Inner, agent: &AgentId) -> Result<DeadLetter, EngineError> {
    let store = engine.services.store();
    if let Some(dead) = store.dead_letter(agent).await? {
        return Ok(dead);
    }
    let why = match store.agent(agent).await? {
        None => "no agent has that id".to_owned(),
        Some(a) if !a.state.is_terminal() => format!("it is still {}", a.state),
        Some(a) if !matches!(a.state.as_str(), "error" | "aborted") => {
            format!("it ended {} and no validator faulted on its work", a.state)
        }
        Some(a) => {
            // A retry whose process stopped before the run ended: the run is what
            // is left to finish, not the letter.
            let retried = store
                .retry_plans(&a.run_id)
                .await?
                .iter()
                .any(|p| p.agent_id == *agent);
            let unfinished = store
                .run(&a.run_id)
                .await?
                .is_some_and(|r| r.status == crate::vocab::RunStatus::Running);
            if retried && unfinished {
                format!(
                    "it was retried already, and that retry's run {} did not finish (its \
                     process stopped): `crewbox resume {}` finishes it",
                    a.run_id, a.run_id
                )
            } else {
                "it was dropped or retried already, or a resume ran its step again".into()
            }
        }
    };
    Err(UsageError::NotDead {
        agent: agent.clone(),
        why,
    }
    .into())
}

/// The request a retry's provider is built from: the override's provider (else the
/// run's) with the override's model.
fn override_request(o: &RetryOverrides, run_provider: Option<&String>) -> RunRequest {
    RunRequest {
        provider: o.provider.clone().or_else(|| run_provider.cloned()),
        model: o.model.clone(),
        ..RunRequest::default()
    }
}

impl RunContext {
    /// Applies the retry that reopened step `key`, if any, to `job`, the agent about to
    /// redo it: the dead agent's last conversation (unless `fresh`), the provider,
    /// model and turn limit asked for.
    pub(crate) async fn apply_retry(
        &self,
        key: &StepKey,
        job: &mut Job,
    ) -> Result<(), EngineError> {
        let Some(plan) = self.journal.retry_of(key) else {
            return Ok(());
        };
        let o = &plan.overrides;
        if o.provider.is_some() || o.model.is_some() {
            let req = override_request(o, self.req.provider.as_ref());
            let built = providers::build(self.services(), &req)?;
            job.spec.provider = built.provider;
            job.spec.prices = built.prices;
        }
        if let Some(turns) = o.max_turns {
            job.spec.quotas.max_turns = turns;
        }
        if !o.fresh {
            let stored = self
                .services()
                .store()
                .agent_conversation(&plan.agent_id)
                .await?;
            let history = stored.and_then(|text| serde_json::from_str::<Vec<Message>>(&text).ok());
            match history {
                Some(mut h) if !h.is_empty() => {
                    // Its conversation goes on, its workspace does not (probe 17: the
                    // agent took its earlier edits for done and changed nothing).
                    if job.spec.perms.caps.contains(Capability::Write) {
                        h.push(Message::user(RETRY_WORKSPACE));
                    }
                    job.history = Some(h);
                }
                _ => tracing::warn!(
                    agent_id = %plan.agent_id,
                    "the dead agent's conversation is not stored; its retry starts from its task"
                ),
            }
        }
        tracing::info!(step = %key, replaces = %plan.agent_id, agent_id = %job.spec.id, "retrying a dead letter");
        Ok(())
    }
}

//! `reflect`: orchestrate rounds in a loop. Each iteration takes the messages sent to
//! the team, plans from the last evaluation, runs the workers, synthesises and is
//! evaluated — by the team's `[evaluator]` (a `SCORE:`), or by the orchestrator
//! itself (a sentinel line). The pure [`ReflectLoop`] decides what comes next: goal
//! met, another iteration (after a backoff when the last one failed), or an exit for
//! max-iterations, a stall or a spent error budget.
//!
//! Every step is journaled, so a resumed loop replays its stored iterations through
//! the same state machine (same stall history, same error budget) and carries on
//! from the first step that has no stored result.

use std::collections::HashSet;

use async_trait::async_trait;

use super::TeamContext;
use super::eval::{DEFAULT_THRESHOLD, Evaluation, parse_evaluation};
use super::orchestrate::{
    RoundEnd, RoundInput, StoredReply, orchestrate_round, orchestrator_step, progress,
};
use super::prompts::{evaluator_prompt, self_evaluation_prompt};
use super::reflect_loop::{
    ErrorBudget, IterationOutcome, ReflectAction, ReflectConfig, ReflectLoop, trend,
};
use crate::engine::context::RunContext;
use crate::engine::error::EngineError;
use crate::engine::journal::{Round, StepKey};
use crate::engine::modes::{Mode, ModeOutcome};
use crate::engine::report::{EvaluatorKind, ModeDetails, ReflectDetails};
use crate::event::{Event, IterationRecord};
use crate::store::ControlKind;
use crate::vocab::{ExitReason, RunStatus};

/// Evaluated orchestrate rounds until an exit.
pub(crate) struct Reflect;

/// (score, iteration, synthesis) of an evaluated iteration.
type Scored = (f64, u32, String);

#[async_trait]
impl Mode for Reflect {
    async fn run(&self, ctx: &RunContext) -> Result<ModeOutcome, EngineError> {
        let tc = ctx.team()?;
        let team = &tc.team;
        let config = ReflectConfig {
            max_iterations: ctx.req.max_iterations.unwrap_or(5).max(1),
            threshold: team
                .evaluator
                .as_ref()
                .and_then(|e| e.threshold)
                .unwrap_or(DEFAULT_THRESHOLD),
            error_limit: ErrorBudget::DEFAULT_LIMIT,
        };
        let mut state = ReflectLoop::new(config);
        let mut dispatched: HashSet<String> = HashSet::new();
        let mut last: Option<(u32, Evaluation)> = None;
        let mut iterations: Vec<IterationRecord> = Vec::new();
        let mut best: Option<Scored> = None;
        let mut last_evaluated: Option<Scored> = None;
        let mut last_error: Option<String> = None;
        // `n` is the iteration, `step` the try: journal keys count tries, so a retried
        // iteration (after a failed try) has steps of its own and a resume replays them.
        let (mut n, mut step, mut attempt) = (1u32, 1u32, 1u32);
        let reason = loop {
            let messages = team_inbox(ctx, tc, step).await?;
            let round = orchestrate_round(
                ctx,
                &RoundInput {
                    round: Round::Iteration(step),
                    last_evaluation: last.as_ref().map(|(i, e)| (*i, e)),
                    messages: &messages,
                },
            )
            .await?;
            for (name, _, _) in &round.workers {
                dispatched.insert(name.to_ascii_lowercase());
            }
            let all_dispatched = team
                .members
                .iter()
                .all(|m| dispatched.contains(&m.name.to_ascii_lowercase()));
            let mut entry = IterationRecord {
                iteration: n,
                retry: attempt - 1,
                workers: round.assignments(),
                unknown_workers: round.plan.unknown.clone(),
                messages: messages.clone(),
                ..IterationRecord::default()
            };
            let outcome = match &round.end {
                RoundEnd::Synthesised(synthesis) => {
                    let reply = evaluate(ctx, tc, step, synthesis, config.threshold).await?;
                    match reply.text {
                        Some(text) => {
                            let eval = parse_evaluation(&text);
                            if eval.score_defaulted && !eval.complete && !eval.needs_iteration {
                                tracing::warn!(
                                    iteration = n,
                                    "the evaluation had no readable score; counting it as 0.5"
                                );
                                ctx.emit(
                                    None,
                                    Event::ReflectScoreUnreadable {
                                        iteration: n,
                                        assumed: eval.score,
                                    },
                                );
                                entry.score_defaulted = true;
                            }
                            entry.score = Some(eval.score);
                            entry.rationale = eval.rationale.clone();
                            entry.trend =
                                Some(last.as_ref().map(|(_, prev)| trend(prev.score, eval.score)));
                            entry.complete = eval.complete;
                            let this = (eval.score, n, synthesis.clone());
                            if best.as_ref().is_none_or(|(s, _, _)| eval.score >= *s) {
                                best = Some(this.clone());
                            }
                            last_evaluated = Some(this);
                            IterationOutcome::Evaluated {
                                synthesis: synthesis.clone(),
                                evaluation: eval,
                                all_dispatched,
                            }
                        }
                        None => {
                            let why = reply.error.unwrap_or_default();
                            entry.error = Some(why.clone());
                            last_error = Some(why);
                            if reply.stopped {
                                IterationOutcome::Cancelled
                            } else {
                                IterationOutcome::Failed
                            }
                        }
                    }
                }
                // After an evaluated iteration, no work means the orchestrator is done.
                RoundEnd::NoAssignment(_) if last.is_some() => {
                    IterationOutcome::NoWork { all_dispatched }
                }
                RoundEnd::NoAssignment(_) => {
                    let why = "the orchestrator assigned no worker, even after the nudge";
                    entry.error = Some(why.to_owned());
                    last_error = Some(why.to_owned());
                    IterationOutcome::Failed
                }
                RoundEnd::Stopped(why) => {
                    entry.error = Some(why.clone());
                    last_error = Some(why.clone());
                    IterationOutcome::Cancelled
                }
                RoundEnd::Failed(why) => {
                    entry.error = Some(why.clone());
                    last_error = Some(why.clone());
                    IterationOutcome::Failed
                }
            };
            if let IterationOutcome::Evaluated { evaluation, .. } = &outcome {
                last = Some((n, evaluation.clone()));
            }
            let action = state.step(outcome);
            if let ReflectAction::Continue {
                stall_warning: true,
                ..
            } = action
            {
                entry.stall_warning = true;
            }
            ctx.emit(None, Event::ReflectIteration(entry.clone()));
            iterations.push(entry);
            match action {
                ReflectAction::Exit(reason) => break reason,
                ReflectAction::Continue {
                    iteration, backoff, ..
                } => {
                    // A replayed failure already waited before the crash.
                    if !backoff.is_zero() && !ctx.journal.has(&StepKey::Inbox(step + 1)) {
                        tokio::select! {
                            _ = tokio::time::sleep(backoff) => {}
                            _ = ctx.stop().run_stopped() => {
                                return Err(EngineError::Stopped(ctx.run_id.clone()));
                            }
                        }
                    }
                    attempt = if iteration == n { attempt + 1 } else { 1 };
                    n = iteration;
                    step += 1;
                }
            }
        };
        // Goal met: the synthesis that met it. Otherwise the best-scored one.
        let chosen = if reason == ExitReason::GoalMet {
            last_evaluated
        } else {
            best
        };
        // Messages that came in after the last iteration began are this loop's too:
        // taken now and reported, never left for the next loop on the team.
        let unread_messages = take_messages(ctx, tc, &StepKey::Leftovers).await?;
        let mut details = ReflectDetails {
            unread_messages,
            iterations,
            threshold: config.threshold,
            max_iterations: config.max_iterations,
            evaluator: if team.evaluator.is_some() {
                EvaluatorKind::Evaluator
            } else {
                EvaluatorKind::Orchestrator
            },
            best_iteration: None,
        };
        let result = match chosen {
            Some((_, i, synthesis)) => {
                details.best_iteration = Some(i);
                synthesis
            }
            None => last_error.unwrap_or_else(|| "no iteration produced a synthesis".into()),
        };
        let status = match reason {
            ExitReason::GoalMet | ExitReason::AnsweredDirectly => RunStatus::Completed,
            ExitReason::Cancelled => RunStatus::Cancelled,
            ExitReason::MaxIterations
            | ExitReason::Stalled
            | ExitReason::ErrorBudget
            | ExitReason::Paused
            | ExitReason::Failed => RunStatus::Failed,
            ExitReason::Diverged => RunStatus::Diverged,
        };
        Ok(ModeOutcome::new(
            (status, reason),
            result,
            ModeDetails::Reflect(details),
        ))
    }
}

/// The messages sent to this loop for iteration step `n`, taken from the store once
/// and journaled together with their consumption (a resumed loop sees the same ones).
async fn team_inbox(
    ctx: &RunContext,
    tc: &TeamContext,
    n: u32,
) -> Result<Vec<String>, EngineError> {
    let messages = take_messages(ctx, tc, &StepKey::Inbox(n)).await?;
    if !messages.is_empty() {
        ctx.emit(
            None,
            Event::TeamMessages {
                iteration: n,
                count: messages.len(),
            },
        );
    }
    Ok(messages)
}

/// Takes the messages queued for this loop as journal step `key` (read back when
/// stored). Only messages sent while this loop ran are its own: a message never
/// reaches a later loop on the team.
async fn take_messages(
    ctx: &RunContext,
    tc: &TeamContext,
    key: &StepKey,
) -> Result<Vec<String>, EngineError> {
    if let Some(messages) = ctx.journal.done::<Vec<String>>(key) {
        return Ok(messages);
    }
    let target = crate::team::message_target(&tc.team.name, ctx.run_id.as_str());
    let pending: Vec<_> = ctx
        .services()
        .store()
        .pending_controls()
        .await?
        .into_iter()
        .filter(|c| c.kind == ControlKind::Message && c.target == target)
        .collect();
    let messages: Vec<String> = pending
        .iter()
        .map(|c| c.message.clone().unwrap_or_default())
        .collect();
    ctx.journal
        .finish(
            key,
            None,
            &messages,
            pending.iter().map(|c| c.seq).collect(),
        )
        .await?;
    Ok(messages)
}

/// Evaluates a synthesis: the team's evaluator asks for a score, the orchestrator
/// judging itself for a sentinel.
async fn evaluate(
    ctx: &RunContext,
    tc: &TeamContext,
    n: u32,
    synthesis: &str,
    threshold: f64,
) -> Result<StoredReply, EngineError> {
    let mut prompt = if tc.team.evaluator.is_some() {
        evaluator_prompt(&ctx.req.prompt, synthesis, threshold)
    } else {
        self_evaluation_prompt(&ctx.req.prompt, synthesis)
    };
    // The evaluator judges the work in the integration branch, not only the text.
    prompt.push_str(&progress(ctx).await?);
    orchestrator_step(
        ctx,
        &StepKey::Evaluation(n),
        "evaluator",
        "evaluator",
        &prompt,
        &tc.evaluator,
    )
    .await
}

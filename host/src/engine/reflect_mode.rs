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

use serde_json::json;

use super::orchestrate::{
    DEFAULT_THRESHOLD, ErrorBudget, Evaluation, IterationOutcome, ReflectAction, ReflectConfig,
    ReflectLoop, evaluator_prompt, parse_evaluation, self_evaluation_prompt, trend,
};
use super::orchestrate_mode::{RoundEnd, RoundInput, StoredReply};
use super::run::{Engine, EngineError, ModeContext, ModeResult};
use super::team_modes::TeamContext;
use super::{ExitReason, RunStatus};
use crate::store::ControlKind;

impl Engine {
    /// Reflect: evaluated orchestrate rounds until an exit.
    pub(super) async fn run_reflect(&self, ctx: &ModeContext) -> Result<ModeResult, EngineError> {
        let tc = self.team(ctx)?;
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
        let mut iterations: Vec<serde_json::Value> = Vec::new();
        // (score, iteration, synthesis) of the best evaluated iteration so far.
        let mut best: Option<(f64, u32, String)> = None;
        let mut last_error: Option<String> = None;
        // The same, of the last evaluated iteration.
        let mut last_evaluated: Option<(f64, u32, String)> = None;
        let mut n = 1u32;
        let reason = loop {
            let messages = self.team_inbox(ctx, tc, n).await?;
            let prefix = format!("it{n}/");
            let round = self
                .orchestrate_round(
                    ctx,
                    &RoundInput {
                        prefix: prefix.clone(),
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
            let mut entry = serde_json::Map::new();
            entry.insert("iteration".into(), json!(n));
            entry.insert("workers".into(), round.workers_json());
            if !messages.is_empty() {
                entry.insert("messages".into(), json!(messages));
            }
            let outcome = match &round.end {
                RoundEnd::Synthesised(synthesis) => {
                    let reply = self
                        .evaluate(ctx, tc, &prefix, synthesis, config.threshold)
                        .await?;
                    match reply.text {
                        Some(text) => {
                            let eval = parse_evaluation(&text);
                            if eval.score_defaulted && !eval.complete && !eval.needs_iteration {
                                tracing::warn!(
                                    iteration = n,
                                    "the evaluation had no readable score; counting it as 0.5"
                                );
                                self.store.log_event(
                                    &ctx.run_id,
                                    None,
                                    "reflect.score-unreadable",
                                    json!({ "iteration": n, "assumed": eval.score }),
                                );
                                entry.insert("score_defaulted".into(), json!(true));
                            }
                            entry.insert("score".into(), json!(eval.score));
                            entry.insert("rationale".into(), json!(eval.rationale));
                            entry.insert(
                                "trend".into(),
                                json!(
                                    last.as_ref()
                                        .map(|(_, prev)| trend(prev.score, eval.score).as_str())
                                ),
                            );
                            if eval.complete {
                                entry.insert("complete".into(), json!(true));
                            }
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
                            entry.insert("error".into(), json!(why));
                            last_error = Some(why);
                            IterationOutcome::Failed
                        }
                    }
                }
                RoundEnd::NoAssignment(_) => {
                    let why = "the orchestrator assigned no worker, even after the nudge";
                    entry.insert("error".into(), json!(why));
                    last_error = Some(why.to_owned());
                    IterationOutcome::Failed
                }
                RoundEnd::Failed(why) => {
                    entry.insert("error".into(), json!(why));
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
                entry.insert("stall_warning".into(), json!(true));
            }
            let entry = serde_json::Value::Object(entry);
            self.store
                .log_event(&ctx.run_id, None, "reflect.iteration", entry.clone());
            iterations.push(entry);
            match action {
                ReflectAction::Exit(reason) => break reason,
                ReflectAction::Continue {
                    iteration, backoff, ..
                } => {
                    // A replayed failure already waited before the crash.
                    if !backoff.is_zero() && !ctx.journal.has(&inbox_key(iteration)) {
                        tokio::time::sleep(backoff).await;
                    }
                    n = iteration;
                }
            }
        };
        let mut details = serde_json::Map::new();
        details.insert("iterations".into(), json!(iterations));
        details.insert("threshold".into(), json!(config.threshold));
        details.insert("max_iterations".into(), json!(config.max_iterations));
        details.insert(
            "evaluator".into(),
            json!(if team.evaluator.is_some() {
                "evaluator"
            } else {
                "orchestrator"
            }),
        );
        // Goal met: the synthesis that met it. Otherwise the best-scored one.
        let chosen = if reason == ExitReason::GoalMet {
            last_evaluated
        } else {
            best
        };
        let result = match chosen {
            Some((_, i, synthesis)) => {
                details.insert("best_iteration".into(), json!(i));
                synthesis
            }
            None => last_error.unwrap_or_else(|| "no iteration produced a synthesis".into()),
        };
        let status = match reason {
            ExitReason::GoalMet => RunStatus::Completed,
            ExitReason::Cancelled => RunStatus::Cancelled,
            _ => RunStatus::Failed,
        };
        Ok(ModeResult {
            status,
            reason,
            result,
            details,
        })
    }

    /// The messages sent to the team for iteration `n`, taken from the store once and
    /// journaled together with their consumption (a resumed loop sees the same ones).
    async fn team_inbox(
        &self,
        ctx: &ModeContext,
        tc: &TeamContext,
        n: u32,
    ) -> Result<Vec<String>, EngineError> {
        let key = inbox_key(n);
        if let Some(messages) = ctx.journal.done::<Vec<String>>(&key) {
            return Ok(messages);
        }
        let target = crate::team::message_target(&tc.team.name);
        let pending: Vec<_> = self
            .store
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
                &key,
                None,
                &messages,
                pending.iter().map(|c| c.seq).collect(),
            )
            .await?;
        if !messages.is_empty() {
            self.store.log_event(
                &ctx.run_id,
                None,
                "team.messages",
                json!({ "iteration": n, "count": messages.len() }),
            );
        }
        Ok(messages)
    }

    /// Evaluates a synthesis: the team's evaluator asks for a score, the orchestrator
    /// judging itself for a sentinel.
    async fn evaluate(
        &self,
        ctx: &ModeContext,
        tc: &TeamContext,
        prefix: &str,
        synthesis: &str,
        threshold: f64,
    ) -> Result<StoredReply, EngineError> {
        let prompt = if tc.team.evaluator.is_some() {
            evaluator_prompt(&ctx.req.prompt, synthesis, threshold)
        } else {
            self_evaluation_prompt(&ctx.req.prompt, synthesis)
        };
        self.orchestrator_step(
            ctx,
            &format!("{prefix}evaluation"),
            "evaluator",
            "evaluator",
            &prompt,
            &tc.evaluator,
        )
        .await
    }
}

fn inbox_key(n: u32) -> String {
    format!("it{n}/inbox")
}

//! `swarm`: N agents (2..=5) on the same prompt, each in its own worktree, joined by a
//! strategy. The join rule is the pure [`SwarmJoin`] (in `batch/`), driven by the one
//! await loop in `engine/join.rs`. Each member is a journal step (`agent/swarm-<n>`),
//! so a resumed swarm runs only its members without a stored result.

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures::FutureExt;
use futures::future::BoxFuture;

use super::{Mode, ModeOutcome};
use crate::batch::{JoinMode, SwarmId, SwarmJoin, WaveConfig};
use crate::engine::context::{RunContext, received};
use crate::engine::error::EngineError;
use crate::engine::executor::{ExecResult, Placement};
use crate::engine::join::{Members, Step};
use crate::engine::journal::StepKey;
use crate::engine::recorded;
use crate::engine::report::{ModeDetails, SwarmDetails, VoteGroup};
use crate::event::Event;
use crate::ids::AgentId;
use crate::vocab::{Access, ExitReason, RunStatus, Strategy};

/// N agents on the same prompt.
pub(crate) struct Swarm;

#[async_trait]
impl Mode for Swarm {
    async fn run(&self, ctx: &RunContext) -> Result<ModeOutcome, EngineError> {
        let size = size(&ctx.req, &ctx.decision);
        let strategy = ctx.req.strategy.unwrap_or_default();
        // Members go through the spawn batcher as one swarm; flush, then await them. A
        // member with a stored result is read back (and joined like the others); only
        // the rest run, each stored the moment it ends, before the join sees it.
        let swarm_id = SwarmId::new(ctx.run_id.as_str());
        // Every member starts at the run's stored base, also after a resume.
        let base = ctx.run_base().await?;
        let mut pending: Vec<BoxFuture<'_, (usize, Result<ExecResult, EngineError>)>> =
            Vec::with_capacity(size);
        for i in 0..size {
            let name = format!("swarm-{}", i + 1);
            let key = StepKey::Agent(name.clone());
            if let Some(done) = ctx.replay(&key).await? {
                pending.push(async move { (i, Ok(done)) }.boxed());
                continue;
            }
            if let Some(done) = ctx.recover(&key).await? {
                recorded::record(&ctx.journal, &key, &done).await?;
                pending.push(async move { (i, Ok(done)) }.boxed());
                continue;
            }
            let spec = ctx.agent_spec(&name, "executor", &ctx.req.prompt, Access::Full);
            let mut job = ctx.job(spec, ctx.exec_options(&[]));
            job.placement = Placement::Isolated { base: base.clone() };
            ctx.begin_job(&key, &mut job).await?;
            let rx = ctx.submit(job, JoinMode::Swarm(swarm_id.clone())).await?;
            let journal = &ctx.journal;
            pending.push(
                async move {
                    let r = received(rx.await);
                    let r = match r {
                        Ok(r) => recorded::record(journal, &key, &r).await.map(|()| r),
                        Err(e) => Err(e),
                    };
                    (i, r)
                }
                .boxed(),
            );
        }
        ctx.flush().await?;
        let mut members = Members::new(
            pending,
            SwarmJoin::new(strategy, size, WaveConfig::default()),
        );
        // A resumed swarm does not deliver again what the killed process delivered.
        let mut delivered_before: Vec<AgentId> = Vec::new();
        let mut waves_before = 0u32;
        if ctx.journal.is_resumed() {
            for e in ctx
                .services()
                .store()
                .events_of_kinds(&ctx.run_id, &["swarm.delivery"])
                .await?
            {
                if let Event::SwarmDelivery { agents, .. } = e.event {
                    waves_before += 1;
                    delivered_before.extend(agents);
                }
            }
        }
        let mut results: BTreeMap<usize, ExecResult> = BTreeMap::new();
        let mut deliveries: Vec<Vec<usize>> = Vec::new();
        let mut errors = Vec::new();
        while let Some(step) = members.next().await {
            match step {
                Step::Completed(i, Ok(r)) => {
                    results.insert(i, r);
                }
                Step::Completed(i, Err(e)) => errors.push(format!("swarm-{}: {e}", i + 1)),
                Step::Deliver(delivered) => {
                    let agents: Vec<AgentId> = ids(&results, &delivered)
                        .into_iter()
                        .filter(|a| !delivered_before.contains(a))
                        .collect();
                    if !agents.is_empty() {
                        waves_before += 1;
                        ctx.emit(
                            None,
                            Event::SwarmDelivery {
                                wave: waves_before,
                                agents,
                            },
                        );
                    }
                    deliveries.push(delivered);
                }
            }
        }
        if results.is_empty() {
            return Err(EngineError::Internal(format!(
                "every swarm member failed to start: {}",
                errors.join("; ")
            )));
        }
        let changed: Vec<(usize, Vec<String>)> = results
            .iter()
            .map(|(i, r)| (*i, r.changed.clone()))
            .collect();
        let conflicts = conflicts(&changed);
        // A member counts only if its work passed validation.
        let any_ok = results.values().any(counts);
        let mut details = SwarmDetails {
            strategy,
            deliveries: deliveries.iter().map(|w| ids(&results, w)).collect(),
            branches: results
                .values()
                .filter_map(|r| r.branch.as_ref().map(|b| b.branch.clone()))
                .collect(),
            conflicts,
            groups: None,
            winner: None,
            not_run: errors,
        };
        let result = match strategy {
            Strategy::Vote => {
                let answers: Vec<(usize, String, String)> = results
                    .iter()
                    // Only validated work can win the vote.
                    .filter(|(_, r)| counts(r))
                    .map(|(i, r)| (*i, r.outcome.result.clone(), r.diff.clone()))
                    .collect();
                let groups = vote_groups(&answers);
                details.groups = Some(
                    groups
                        .iter()
                        .map(|g| VoteGroup {
                            count: g.len(),
                            agents: ids(&results, g),
                        })
                        .collect(),
                );
                match groups.first() {
                    Some(winner) => {
                        details.winner = Some(ids(&results, winner));
                        winner
                            .first()
                            .and_then(|i| results.get(i))
                            .map(|r| r.outcome.result.clone())
                            .unwrap_or_default()
                    }
                    None => String::new(),
                }
            }
            Strategy::Live | Strategy::Quorum | Strategy::Merge | Strategy::Batch => {
                merged_report(&results, &deliveries, &details.conflicts)
            }
        };
        // A member that never ran is not silently dropped from what the swarm reports.
        let result = if details.not_run.is_empty() {
            result
        } else {
            format!(
                "{result}\nnot run ({} of {size}): {}\n",
                details.not_run.len(),
                details.not_run.join("; ")
            )
        };
        let ended = if any_ok {
            (RunStatus::Completed, ExitReason::GoalMet)
        } else {
            (RunStatus::Failed, ExitReason::Failed)
        };
        Ok(ModeOutcome::new(ended, result, ModeDetails::Swarm(details)))
    }
}

/// How many members a swarm runs: the request's size, else the dispatcher's, else 3;
/// 2 to 5.
pub(crate) fn size(
    req: &crate::engine::request::RunRequest,
    decision: &crate::engine::dispatch::Decision,
) -> usize {
    req.swarm_size
        .or(decision.swarm_size)
        .unwrap_or(3)
        .clamp(2, 5) as usize
}

/// Whether a member's result counts: it ended well and its work passed validation.
fn counts(r: &ExecResult) -> bool {
    r.outcome.state.is_success() && r.validation.accepts()
}

/// The agent ids of members `indexes` that produced a result.
fn ids(results: &BTreeMap<usize, ExecResult>, indexes: &[usize]) -> Vec<AgentId> {
    indexes
        .iter()
        .filter_map(|i| results.get(i))
        .map(|r| r.agent_id.clone())
        .collect()
}

/// Normalised answer text for voting: lowercase, whitespace collapsed.
pub fn normalise(text: &str) -> String {
    text.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Groups members by equivalent answer: the same changes (same diff) when they changed
/// files, else the same normalised text. Returns groups largest first (ties: earliest).
pub fn vote_groups(answers: &[(usize, String, String)]) -> Vec<Vec<usize>> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, text, diff) in answers {
        let key = if diff.is_empty() {
            format!("text:{}", normalise(text))
        } else {
            format!("diff:{diff}")
        };
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(*i),
            None => groups.push((key, vec![*i])),
        }
    }
    let mut groups: Vec<Vec<usize>> = groups.into_iter().map(|(_, m)| m).collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
    groups
}

/// Files changed by more than one member.
pub fn conflicts(changed: &[(usize, Vec<String>)]) -> Vec<String> {
    let mut by_file: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, files) in changed {
        for f in files {
            *by_file.entry(f.as_str()).or_default() += 1;
        }
    }
    by_file
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(f, _)| f.to_owned())
        .collect()
}

fn merged_report(
    results: &BTreeMap<usize, ExecResult>,
    deliveries: &[Vec<usize>],
    conflicts: &[String],
) -> String {
    let mut out = String::new();
    for (i, r) in deliveries
        .iter()
        .flatten()
        .filter_map(|i| results.get(i).map(|r| (i, r)))
    {
        // Work that failed validation is marked, as team modes mark it (it read like
        // the good results beside it).
        let unaccepted = if r.outcome.state.is_success() && !r.validation.accepts() {
            ", its work did not pass validation"
        } else {
            ""
        };
        out.push_str(&format!(
            "## swarm-{} ({}, {}{unaccepted})\n",
            i + 1,
            r.agent_id,
            r.outcome.state
        ));
        if let Some(b) = &r.branch {
            out.push_str(&format!("branch: {}\n", b.branch));
        }
        out.push_str(r.outcome.result.trim());
        out.push_str("\n\n");
    }
    if !conflicts.is_empty() {
        out.push_str(&format!(
            "conflicts (changed by more than one member): {}\n",
            conflicts.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn votes_group_by_changes_then_text() {
        let answers = vec![
            (0, "Done.  Fixed it".to_owned(), String::new()),
            (1, "done. fixed IT".to_owned(), String::new()),
            (2, "other".to_owned(), "diff --git a/x".to_owned()),
            (3, "different words".to_owned(), "diff --git a/x".to_owned()),
            (4, "lonely".to_owned(), String::new()),
        ];
        let groups = vote_groups(&answers);
        assert_eq!(groups, vec![vec![0, 1], vec![2, 3], vec![4]]);
    }

    #[test]
    fn files_changed_by_several_members_are_conflicts() {
        let changed = vec![
            (0, vec!["a.rs".into(), "b.rs".into()]),
            (1, vec!["b.rs".into()]),
            (2, vec!["c.rs".into()]),
        ];
        assert_eq!(conflicts(&changed), vec!["b.rs".to_owned()]);
    }
}

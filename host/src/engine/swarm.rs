//! `swarm`: N agents (2..=5) on the same prompt, each in its own worktree, joined by a
//! strategy. The join is a pure state machine ([`SwarmJoin`]) fed completions and wave
//! timers, so every strategy's delivery rule is unit-tested without agents.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::time::Instant;

use super::execute::{ExecOptions, ExecResult};
use super::run::{Engine, EngineError, ModeContext, ModeResult};
use super::{ExitReason, RunStatus};
use crate::agent::permissions::CapSet;

/// How a swarm's results are joined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Each completion is delivered as it arrives, once, in order.
    Live,
    /// Delivered once ⌈n/2⌉ have finished, then each later one.
    Quorum,
    /// Waits for all; groups equivalent answers with counts and a winner.
    Vote,
    /// Waits for all; one merged report.
    #[default]
    Merge,
    /// Waits for all or a timeout; stragglers in later waves.
    Batch,
}

impl Strategy {
    /// Parses a strategy name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "live" => Some(Self::Live),
            "quorum" => Some(Self::Quorum),
            "vote" => Some(Self::Vote),
            "merge" => Some(Self::Merge),
            "batch" => Some(Self::Batch),
            _ => None,
        }
    }
}

/// Wave timing of the `batch` strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waves {
    /// First wave this long after the first completion.
    pub first: Duration,
    /// Then a wave this often.
    pub every: Duration,
}

impl Default for Waves {
    fn default() -> Self {
        Self {
            first: Duration::from_secs(30),
            every: Duration::from_secs(15),
        }
    }
}

/// The delivery rule of a strategy over member indexes. Each member is delivered once.
#[derive(Debug)]
pub struct SwarmJoin {
    strategy: Strategy,
    size: usize,
    waves: Waves,
    finished: Vec<usize>,
    delivered: BTreeSet<usize>,
    next_wave: Option<Instant>,
}

impl SwarmJoin {
    /// A join of `size` members.
    pub fn new(strategy: Strategy, size: usize, waves: Waves) -> Self {
        Self {
            strategy,
            size,
            waves,
            finished: Vec::new(),
            delivered: BTreeSet::new(),
            next_wave: None,
        }
    }

    /// When the next batch wave is due, if one is pending.
    pub fn next_wave(&self) -> Option<Instant> {
        self.next_wave
    }

    fn take_undelivered(&mut self) -> Vec<usize> {
        let out: Vec<usize> = self
            .finished
            .iter()
            .copied()
            .filter(|i| !self.delivered.contains(i))
            .collect();
        self.delivered.extend(out.iter().copied());
        out
    }

    /// Member `index` finished at `now`; returns the members to deliver now.
    pub fn complete(&mut self, index: usize, now: Instant) -> Vec<usize> {
        if self.finished.contains(&index) {
            return Vec::new();
        }
        self.finished.push(index);
        let all = self.finished.len() == self.size;
        match self.strategy {
            Strategy::Live => self.take_undelivered(),
            Strategy::Quorum if self.finished.len() >= self.size.div_ceil(2) => {
                self.take_undelivered()
            }
            Strategy::Quorum => Vec::new(),
            Strategy::Vote | Strategy::Merge if all => self.take_undelivered(),
            Strategy::Vote | Strategy::Merge => Vec::new(),
            Strategy::Batch if all => {
                self.next_wave = None;
                self.take_undelivered()
            }
            Strategy::Batch => {
                if self.next_wave.is_none() && self.delivered.is_empty() {
                    self.next_wave = Some(now + self.waves.first);
                }
                Vec::new()
            }
        }
    }

    /// The batch wave timer fired at `now`; returns the members to deliver.
    pub fn wave(&mut self, now: Instant) -> Vec<usize> {
        match self.next_wave {
            Some(due) if now >= due => {
                self.next_wave = (self.finished.len() < self.size).then(|| now + self.waves.every);
                self.take_undelivered()
            }
            _ => Vec::new(),
        }
    }
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

impl Engine {
    /// Runs the swarm.
    pub(super) async fn run_swarm(&self, ctx: &ModeContext) -> Result<ModeResult, EngineError> {
        let size = ctx
            .req
            .swarm_size
            .or(ctx.decision.swarm_size)
            .unwrap_or(3)
            .clamp(2, 5) as usize;
        let strategy = ctx.req.strategy.unwrap_or_default();
        // Members go through the spawn batcher as one swarm; flush, then await them.
        let swarm_id = crate::batch::SwarmId::new(ctx.run_id.as_str());
        let mut running = FuturesUnordered::new();
        for i in 0..size {
            let name = format!("swarm-{}", i + 1);
            let spec = self.agent_spec(ctx, &name, "executor", &ctx.req.prompt, CapSet::full());
            let opts = ExecOptions {
                isolation: ctx.isolation(),
                validators: ctx.validators.clone(),
                max_fix_rounds: ctx.max_fix_rounds(),
                join: None,
            };
            let result = self
                .submit(spec, opts, crate::batch::JoinMode::Swarm(swarm_id.clone()))
                .await?;
            running.push(async move {
                let r = result.await.unwrap_or_else(|_| {
                    Err(EngineError::Config(
                        "the spawn queue dropped the agent".into(),
                    ))
                });
                (i, r)
            });
        }
        self.flush_spawns().await?;
        let mut join = SwarmJoin::new(strategy, size, Waves::default());
        let mut results: BTreeMap<usize, ExecResult> = BTreeMap::new();
        let mut deliveries: Vec<Vec<usize>> = Vec::new();
        let mut errors = Vec::new();
        loop {
            let wave = join.next_wave();
            let delivered = tokio::select! {
                next = running.next() => match next {
                    Some((i, Ok(r))) => { results.insert(i, r); join.complete(i, Instant::now()) }
                    Some((i, Err(e))) => { errors.push(format!("member {}: {e}", i + 1)); join.complete(i, Instant::now()) }
                    None => break,
                },
                _ = async { tokio::time::sleep_until(wave.unwrap_or_else(Instant::now)).await }, if wave.is_some() => join.wave(Instant::now()),
            };
            if !delivered.is_empty() {
                let ids: Vec<String> = delivered
                    .iter()
                    .filter_map(|i| results.get(i))
                    .map(|r| r.agent_id.to_string())
                    .collect();
                self.store.log_event(
                    &ctx.run_id,
                    None,
                    "swarm.delivery",
                    json!({ "wave": deliveries.len() + 1, "agents": ids }),
                );
                deliveries.push(delivered);
            }
        }
        if results.is_empty() {
            return Err(EngineError::Config(format!(
                "every swarm member failed to start: {}",
                errors.join("; ")
            )));
        }
        let changed: Vec<(usize, Vec<String>)> = results
            .iter()
            .map(|(i, r)| (*i, r.changed.clone()))
            .collect();
        let conflicts = conflicts(&changed);
        // [plugin helper, issue 13] A member counts only if its work passed validation.
        let ok: Vec<&ExecResult> = results
            .values()
            .filter(|r| r.outcome.state.is_success() && r.validation.accepts())
            .collect();
        let mut details = serde_json::Map::new();
        details.insert("strategy".into(), json!(strategy));
        details.insert("conflicts".into(), json!(conflicts));
        details.insert(
            "deliveries".into(),
            json!(
                deliveries
                    .iter()
                    .map(|w| w
                        .iter()
                        .map(|i| results[i].agent_id.to_string())
                        .collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            ),
        );
        details.insert(
            "branches".into(),
            json!(
                results
                    .values()
                    .filter_map(|r| r.branch.as_ref().map(|b| b.branch.clone()))
                    .collect::<Vec<_>>()
            ),
        );
        let result = match strategy {
            Strategy::Vote => {
                let answers: Vec<(usize, String, String)> = results
                    .iter()
                    // [plugin helper, issue 13] Only validated work can win the vote.
                    .filter(|(_, r)| r.outcome.state.is_success() && r.validation.accepts())
                    .map(|(i, r)| (*i, r.outcome.result.clone(), r.diff.clone()))
                    .collect();
                let groups = vote_groups(&answers);
                let as_ids = |g: &Vec<usize>| {
                    g.iter()
                        .map(|i| results[i].agent_id.to_string())
                        .collect::<Vec<_>>()
                };
                details.insert(
                    "groups".into(),
                    json!(
                        groups
                            .iter()
                            .map(|g| json!({ "count": g.len(), "agents": as_ids(g) }))
                            .collect::<Vec<_>>()
                    ),
                );
                match groups.first() {
                    Some(winner) => {
                        details.insert("winner".into(), json!(as_ids(winner)));
                        results[&winner[0]].outcome.result.clone()
                    }
                    None => String::new(),
                }
            }
            _ => merged_report(&results, &deliveries, &conflicts),
        };
        let (status, reason) = if ok.is_empty() {
            (RunStatus::Failed, ExitReason::Failed)
        } else {
            (RunStatus::Completed, ExitReason::GoalMet)
        };
        Ok(ModeResult {
            status,
            reason,
            result,
            details,
        })
    }
}

fn merged_report(
    results: &BTreeMap<usize, ExecResult>,
    deliveries: &[Vec<usize>],
    conflicts: &[String],
) -> String {
    let mut out = String::new();
    for i in deliveries.iter().flatten() {
        let r = &results[i];
        out.push_str(&format!(
            "## swarm-{} ({}, {})\n",
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

    fn t0() -> Instant {
        Instant::now()
    }

    #[test]
    fn live_delivers_each_once_in_order() {
        let now = t0();
        let mut j = SwarmJoin::new(Strategy::Live, 3, Waves::default());
        assert_eq!(j.complete(2, now), vec![2]);
        assert_eq!(j.complete(2, now), Vec::<usize>::new(), "never twice");
        assert_eq!(j.complete(0, now), vec![0]);
        assert_eq!(j.complete(1, now), vec![1]);
    }

    #[test]
    fn quorum_waits_for_half_then_streams() {
        let now = t0();
        let mut j = SwarmJoin::new(Strategy::Quorum, 5, Waves::default());
        assert!(j.complete(4, now).is_empty());
        assert!(j.complete(1, now).is_empty());
        assert_eq!(j.complete(0, now), vec![4, 1, 0], "⌈5/2⌉ = 3");
        assert_eq!(j.complete(3, now), vec![3]);
    }

    #[test]
    fn vote_and_merge_wait_for_all() {
        for s in [Strategy::Vote, Strategy::Merge] {
            let now = t0();
            let mut j = SwarmJoin::new(s, 2, Waves::default());
            assert!(j.complete(1, now).is_empty());
            assert_eq!(j.complete(0, now), vec![1, 0]);
        }
    }

    #[test]
    fn batch_delivers_in_waves() {
        let now = t0();
        let waves = Waves {
            first: Duration::from_secs(30),
            every: Duration::from_secs(15),
        };
        let mut j = SwarmJoin::new(Strategy::Batch, 4, waves);
        assert!(j.complete(0, now).is_empty());
        assert_eq!(j.next_wave(), Some(now + Duration::from_secs(30)));
        assert!(j.complete(1, now + Duration::from_secs(10)).is_empty());
        assert!(
            j.wave(now + Duration::from_secs(29)).is_empty(),
            "not due yet"
        );
        assert_eq!(j.wave(now + Duration::from_secs(30)), vec![0, 1]);
        assert_eq!(j.next_wave(), Some(now + Duration::from_secs(45)));
        assert!(j.complete(2, now + Duration::from_secs(40)).is_empty());
        assert_eq!(j.wave(now + Duration::from_secs(45)), vec![2]);
        assert_eq!(
            j.complete(3, now + Duration::from_secs(50)),
            vec![3],
            "the last one ends the batch"
        );
        assert_eq!(j.next_wave(), None);
    }

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

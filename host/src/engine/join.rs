//! The one loop that awaits a set of members and hands their results on as a join rule
//! releases them: completions and wave deadlines go into the rule (a pure state
//! machine: [`SwarmJoin`] or [`GroupJoin`], both in `batch/`), and its deliveries come
//! out, each after the completions it contains. Swarms and team groups both use it.

use std::collections::VecDeque;
use std::future::Future;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::time::Instant;

use crate::batch::{Delivery, GroupJoin, SwarmJoin};
use crate::ids::AgentId;

/// A join's delivery rule over member indexes, fed the time by [`Members`].
pub(crate) trait JoinRule {
    /// What a delivery hands on.
    type Delivery;

    /// Member `index` completed at `now`; a delivery if this releases one.
    fn complete(&mut self, index: usize, now: Instant) -> Option<Self::Delivery>;

    /// The wave deadline passed at `now`; a delivery if one is due.
    fn tick(&mut self, now: Instant) -> Option<Self::Delivery>;

    /// When [`JoinRule::tick`] should next be called, if ever.
    fn next_deadline(&self) -> Option<Instant>;
}

impl JoinRule for SwarmJoin {
    type Delivery = Vec<usize>;

    fn complete(&mut self, index: usize, now: Instant) -> Option<Vec<usize>> {
        Some(SwarmJoin::complete(self, index, now)).filter(|d| !d.is_empty())
    }

    fn tick(&mut self, now: Instant) -> Option<Vec<usize>> {
        Some(self.wave(now)).filter(|d| !d.is_empty())
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.next_wave()
    }
}

/// A team group's join: a [`GroupJoin`] over its members, or none for a member run
/// alone (a group needs two).
pub(crate) enum GroupRule {
    /// Members joined as one group (ids in member order).
    Group(GroupJoin<usize>, Vec<AgentId>),
    /// One member: nothing to join, nothing delivered.
    Alone,
}

impl JoinRule for GroupRule {
    type Delivery = Delivery<usize>;

    fn complete(&mut self, index: usize, now: Instant) -> Option<Delivery<usize>> {
        match self {
            Self::Group(join, ids) => {
                let agent = ids.get(index)?.clone();
                join.complete(agent, index, now).unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "group join refused a completion");
                    None
                })
            }
            Self::Alone => None,
        }
    }

    fn tick(&mut self, now: Instant) -> Option<Delivery<usize>> {
        match self {
            Self::Group(join, _) => join.tick(now),
            Self::Alone => None,
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        match self {
            Self::Group(join, _) => join.next_deadline(),
            Self::Alone => None,
        }
    }
}

/// What [`Members::next`] yields.
pub(crate) enum Step<T, D> {
    /// Member `index` finished with `T`.
    Completed(usize, T),
    /// The rule released a delivery (after every completion it holds was yielded).
    Deliver(D),
}

/// Members being awaited, with their join rule.
pub(crate) struct Members<F, R: JoinRule> {
    pending: FuturesUnordered<F>,
    rule: R,
    queued: VecDeque<R::Delivery>,
}

impl<T, F, R> Members<F, R>
where
    F: Future<Output = (usize, T)>,
    R: JoinRule,
{
    /// Awaits `pending` (each yields its member index and result) under `rule`.
    pub(crate) fn new(pending: impl IntoIterator<Item = F>, rule: R) -> Self {
        Self {
            pending: pending.into_iter().collect(),
            rule,
            queued: VecDeque::new(),
        }
    }

    /// The next completion or delivery; `None` once every member has completed and
    /// every delivery was handed out.
    pub(crate) async fn next(&mut self) -> Option<Step<T, R::Delivery>> {
        loop {
            if let Some(d) = self.queued.pop_front() {
                return Some(Step::Deliver(d));
            }
            let wave = self.rule.next_deadline();
            tokio::select! {
                next = self.pending.next() => {
                    let (index, result) = next?;
                    if let Some(d) = self.rule.complete(index, Instant::now()) {
                        self.queued.push_back(d);
                    }
                    return Some(Step::Completed(index, result));
                }
                _ = sleep_until(wave), if wave.is_some() => {
                    if let Some(d) = self.rule.tick(Instant::now()) {
                        return Some(Step::Deliver(d));
                    }
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::batch::{DeliveryKind, DeliveryMode, GroupId, GroupJoinConfig, WaveConfig};
    use crate::vocab::Strategy;

    /// Member `i` finishes after `delays[i]` (paused time).
    fn members(delays: &[u64]) -> Vec<impl Future<Output = (usize, usize)>> {
        delays
            .iter()
            .enumerate()
            .map(|(i, ms)| {
                let ms = *ms;
                async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    (i, i * 10)
                }
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn quorum_delivers_after_the_completions_it_holds() {
        let rule = SwarmJoin::new(Strategy::Quorum, 3, WaveConfig::default());
        let mut m = Members::new(members(&[30, 10, 20]), rule);
        let mut log = Vec::new();
        while let Some(step) = m.next().await {
            log.push(match step {
                Step::Completed(i, r) => format!("done {i}={r}"),
                Step::Deliver(d) => format!("deliver {d:?}"),
            });
        }
        assert_eq!(
            log,
            [
                "done 1=10",
                "done 2=20",
                "deliver [1, 2]",
                "done 0=0",
                "deliver [0]"
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn progressive_groups_deliver_waves_on_their_deadlines() {
        let config = GroupJoinConfig {
            mode: DeliveryMode::Progressive,
            waves: WaveConfig {
                first: Duration::from_secs(1),
                every: Duration::from_secs(1),
            },
        };
        let ids: Vec<AgentId> = (0..3)
            .map(|i| AgentId::from_string(format!("a{i}")))
            .collect();
        let join = GroupJoin::new(GroupId::new("g"), ids.clone(), config).unwrap();
        let mut m = Members::new(members(&[100, 200, 5000]), GroupRule::Group(join, ids));
        let mut kinds = Vec::new();
        while let Some(step) = m.next().await {
            if let Step::Deliver(d) = step {
                let members: Vec<usize> = d.results.iter().map(|(_, i)| *i).collect();
                kinds.push((d.kind, members));
            }
        }
        assert_eq!(
            kinds,
            [
                (DeliveryKind::Wave(1), vec![0, 1]),
                (DeliveryKind::Final, vec![2])
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_alone_completes_without_deliveries() {
        let mut m = Members::new(members(&[5]), GroupRule::Alone);
        assert!(matches!(m.next().await, Some(Step::Completed(0, 0))));
        assert!(m.next().await.is_none());
    }
}

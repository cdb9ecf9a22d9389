//! Batching and join tests, all on paused tokio time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pretty_assertions::assert_eq;
use tokio::time::{Instant, advance, sleep};

use super::*;
use crate::ids::AgentId;

fn agent(n: usize) -> AgentId {
    AgentId::from_string(format!("a{n}"))
}

fn group(name: &str) -> JoinMode {
    JoinMode::Group(GroupId::new(name))
}

fn swarm(name: &str) -> JoinMode {
    JoinMode::Swarm(SwarmId::new(name))
}

fn spawn(n: usize, join: JoinMode) -> Spawn<u32> {
    Spawn::new(agent(n), join, n as u32)
}

fn ids<P>(spawns: &[Spawn<P>]) -> Vec<String> {
    spawns.iter().map(|s| s.agent.to_string()).collect()
}

const MS: Duration = Duration::from_millis(1);

// ---- Debouncer (pure) ----

#[tokio::test(start_paused = true)]
async fn debounce_is_trailing_and_capped_by_max_wait() {
    let t0 = Instant::now();
    let mut d = Debouncer::new(DebounceConfig::default());
    assert!(!d.due(t0));
    assert_eq!(
        d.push(spawn(1, JoinMode::Individual), t0),
        Some(t0 + 100 * MS)
    );
    assert_eq!(
        d.push(spawn(2, JoinMode::Individual), t0 + 60 * MS),
        Some(t0 + 160 * MS)
    );
    assert!(!d.due(t0 + 159 * MS));
    assert!(d.due(t0 + 160 * MS));
    // A steady stream moves the deadline only up to first + max wait.
    assert_eq!(
        d.push(spawn(3, JoinMode::Individual), t0 + 950 * MS),
        Some(t0 + 1000 * MS)
    );
    assert_eq!(d.push(spawn(4, JoinMode::Individual), t0 + 990 * MS), None);
    assert!(d.due(t0 + 1000 * MS));
    assert_eq!(d.finalize().individuals.len(), 4);
    assert!(d.is_empty() && d.deadline().is_none());
}

#[tokio::test(start_paused = true)]
async fn duplicate_agent_merges_and_latest_join_wins() {
    let now = Instant::now();
    let mut d = Debouncer::new(DebounceConfig::default());
    d.push(spawn(1, group("g")), now);
    d.push(spawn(2, group("g")), now);
    d.push(spawn(3, JoinMode::Individual), now);
    d.push(Spawn::new(agent(1), swarm("s"), 99), now);
    assert_eq!(d.len(), 3);
    let b = d.finalize();
    // Agent 1 left the group, so the group of one dissolves.
    assert_eq!(b.groups, vec![]);
    assert_eq!(b.swarms.len(), 1);
    assert_eq!(
        b.swarms[0].members,
        vec![Spawn::new(agent(1), swarm("s"), 99)]
    );
    assert_eq!(ids(&b.individuals), vec!["a3", "a2"]);
    assert_eq!(b.len(), 3);
}

#[test]
fn partition_thresholds() {
    let b = partition(vec![
        spawn(1, group("pair")),
        spawn(2, swarm("solo")),
        spawn(3, group("lonely")),
        spawn(4, JoinMode::Individual),
        spawn(5, group("pair")),
        spawn(6, swarm("duo")),
        spawn(7, swarm("duo")),
    ]);
    assert_eq!(b.groups.len(), 1);
    assert_eq!(b.groups[0].id, GroupId::new("pair"));
    assert_eq!(ids(&b.groups[0].members), vec!["a1", "a5"]);
    let swarms: Vec<(String, usize)> = b
        .swarms
        .iter()
        .map(|s| (s.id.to_string(), s.members.len()))
        .collect();
    assert_eq!(swarms, vec![("solo".to_owned(), 1), ("duo".to_owned(), 2)]);
    assert_eq!(ids(&b.individuals), vec!["a4", "a3"]);
    assert_eq!(b.len(), 7);
    assert_eq!(
        ids(&b.clone().into_individuals().individuals),
        vec!["a1", "a5", "a2", "a6", "a7", "a4", "a3"]
    );
}

// ---- Batcher (tokio task) ----

#[tokio::test(start_paused = true)]
async fn batcher_releases_after_the_trailing_window() {
    let (batcher, mut out) = Batcher::start(DebounceConfig::default());
    let t0 = Instant::now();
    batcher.spawn(spawn(1, JoinMode::Individual)).await.unwrap();
    sleep(50 * MS).await;
    batcher.spawn(spawn(2, JoinMode::Individual)).await.unwrap();
    sleep(70 * MS).await;
    batcher.spawn(spawn(3, JoinMode::Individual)).await.unwrap();
    let f = out.recv().await.unwrap();
    assert_eq!(Instant::now() - t0, 220 * MS);
    assert_eq!(ids(&f.batch.individuals), vec!["a1", "a2", "a3"]);
    assert_eq!(f.fallback, None);
}

#[tokio::test(start_paused = true)]
async fn steady_stream_is_cut_at_max_wait() {
    let (batcher, mut out) = Batcher::start(DebounceConfig::default());
    let t0 = Instant::now();
    let producer = tokio::spawn(async move {
        for n in 0..60 {
            batcher.spawn(spawn(n, JoinMode::Individual)).await.unwrap();
            sleep(30 * MS).await;
        }
        batcher
    });
    let first = out.recv().await.unwrap();
    assert_eq!(Instant::now() - t0, 1000 * MS);
    // Spawns at 0, 30, …, 990 ms.
    assert_eq!(first.batch.len(), 34);
    let second = out.recv().await.unwrap();
    assert_eq!(first.batch.len() + second.batch.len(), 60);
    assert_eq!(second.batch.individuals[0].agent, agent(34));
    drop(producer.await.unwrap());
}

#[tokio::test(start_paused = true)]
async fn flush_releases_immediately_for_foreground_dispatch() {
    let (batcher, mut out) = Batcher::start(DebounceConfig::default());
    let t0 = Instant::now();
    batcher.spawn(spawn(1, group("g"))).await.unwrap();
    batcher.spawn(spawn(2, group("g"))).await.unwrap();
    batcher.flush().await.unwrap();
    assert_eq!(Instant::now(), t0);
    let f = out.try_recv().expect("flush put the batch on the channel");
    assert_eq!(f.batch.groups.len(), 1);
    assert_eq!(f.batch.groups[0].members.len(), 2);
    // An empty flush releases nothing.
    batcher.flush().await.unwrap();
    assert!(out.try_recv().is_err());
}

#[tokio::test(start_paused = true)]
async fn failing_finalize_delivers_everyone_individually() {
    let hook: FinalizeHook<u32> = Box::new(|b| {
        let agents = b.len();
        Box::pin(async move {
            Err(BatchError {
                agents,
                reason: "store is read-only".into(),
            })
        })
    });
    let (batcher, mut out) = Batcher::start_with_hook(DebounceConfig::default(), hook);
    for (n, join) in [
        (1, group("g")),
        (2, group("g")),
        (3, swarm("s")),
        (4, JoinMode::Individual),
    ] {
        batcher.spawn(spawn(n, join)).await.unwrap();
    }
    let f = out.recv().await.unwrap();
    assert_eq!(f.batch.groups, vec![]);
    assert_eq!(f.batch.swarms, vec![]);
    assert_eq!(ids(&f.batch.individuals), vec!["a1", "a2", "a3", "a4"]);
    assert_eq!(
        f.fallback.unwrap().to_string(),
        "finalising a batch of 4 agents failed, delivering each individually: store is read-only"
    );
}

#[tokio::test(start_paused = true)]
async fn finalisation_is_not_reentrant() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let hook: FinalizeHook<u32> = Box::new(move |b| {
        log.lock().unwrap().push(b.len());
        // A slow store write.
        Box::pin(async {
            sleep(Duration::from_millis(500)).await;
            Ok(())
        })
    });
    let (batcher, mut out) = Batcher::start_with_hook(DebounceConfig::default(), hook);
    batcher.spawn(spawn(1, JoinMode::Individual)).await.unwrap();
    sleep(200 * MS).await; // finalisation of [a1] is now under way
    batcher.spawn(spawn(2, JoinMode::Individual)).await.unwrap();
    batcher.spawn(spawn(1, group("late"))).await.unwrap();
    let first = out.recv().await.unwrap();
    let second = out.recv().await.unwrap();
    assert_eq!(ids(&first.batch.individuals), vec!["a1"]);
    assert_eq!(ids(&second.batch.individuals), vec!["a2", "a1"]);
    assert_eq!(*seen.lock().unwrap(), vec![1, 2]);
}

#[tokio::test(start_paused = true)]
async fn close_finalises_pending_and_drop_cancels() {
    let (batcher, mut out) = Batcher::start(DebounceConfig::default());
    batcher.spawn(spawn(1, JoinMode::Individual)).await.unwrap();
    batcher.close().await.unwrap();
    assert_eq!(out.recv().await.unwrap().batch.len(), 1);
    assert!(out.recv().await.is_none());

    let (batcher, mut out) = Batcher::<u32>::start(DebounceConfig::default());
    drop(batcher);
    assert!(out.recv().await.is_none(), "the task ends with its owner");
}

// ---- GroupJoin ----

fn join(n: usize, mode: DeliveryMode) -> GroupJoin<String> {
    let config = GroupJoinConfig {
        mode,
        waves: WaveConfig::default(),
    };
    GroupJoin::new(GroupId::new("g"), (1..=n).map(agent), config).unwrap()
}

fn result_ids(d: &Delivery<String>) -> Vec<String> {
    d.results.iter().map(|(a, _)| a.to_string()).collect()
}

#[tokio::test(start_paused = true)]
async fn all_or_nothing_waits_for_every_member() {
    let t0 = Instant::now();
    let mut j = join(3, DeliveryMode::AllOrNothing);
    assert_eq!(j.complete(agent(2), "r2".into(), t0).unwrap(), None);
    assert_eq!(j.complete(agent(1), "r1".into(), t0).unwrap(), None);
    assert_eq!(j.next_deadline(), None, "no waves in all-or-nothing");
    assert_eq!(j.tick(t0 + Duration::from_secs(600)), None);
    let d = j.complete(agent(3), "r3".into(), t0).unwrap().unwrap();
    assert_eq!(d.kind, DeliveryKind::All);
    assert_eq!(result_ids(&d), vec!["a1", "a2", "a3"]);
    assert_eq!(
        d.counts,
        MemberCounts {
            total: 3,
            completed: 3,
            delivered: 3
        }
    );
    assert!(j.is_done());
}

#[tokio::test(start_paused = true)]
async fn progressive_delivers_in_straggler_waves() {
    let t0 = Instant::now();
    let mut j = join(5, DeliveryMode::Progressive);
    j.complete(agent(1), "r1".into(), t0).unwrap();
    assert_eq!(j.next_deadline(), Some(t0 + Duration::from_secs(30)));
    j.complete(agent(3), "r3".into(), t0 + Duration::from_secs(10))
        .unwrap();
    assert_eq!(j.tick(t0 + Duration::from_secs(29)), None);
    let w1 = j.tick(t0 + Duration::from_secs(30)).unwrap();
    assert_eq!(
        (w1.kind, result_ids(&w1)),
        (DeliveryKind::Wave(1), vec!["a1".into(), "a3".into()])
    );
    assert_eq!(
        w1.counts,
        MemberCounts {
            total: 5,
            completed: 2,
            delivered: 2
        }
    );
    // Nothing new by the next wave: skipped, but the cadence continues.
    assert_eq!(j.tick(t0 + Duration::from_secs(45)), None);
    assert_eq!(j.next_deadline(), Some(t0 + Duration::from_secs(60)));
    j.complete(agent(2), "r2".into(), t0 + Duration::from_secs(50))
        .unwrap();
    let w2 = j.tick(t0 + Duration::from_secs(60)).unwrap();
    assert_eq!(
        (w2.kind, result_ids(&w2)),
        (DeliveryKind::Wave(2), vec!["a2".into()])
    );
    j.complete(agent(4), "r4".into(), t0 + Duration::from_secs(61))
        .unwrap();
    let last = j
        .complete(agent(5), "r5".into(), t0 + Duration::from_secs(62))
        .unwrap()
        .unwrap();
    assert_eq!(
        (last.kind, result_ids(&last)),
        (DeliveryKind::Final, vec!["a4".into(), "a5".into()])
    );
    assert_eq!(
        last.counts,
        MemberCounts {
            total: 5,
            completed: 5,
            delivered: 5
        }
    );
    assert_eq!(j.next_deadline(), None);
    assert!(j.is_done());
}

#[tokio::test(start_paused = true)]
async fn wave_timing_is_configurable() {
    let t0 = Instant::now();
    let config = GroupJoinConfig {
        mode: DeliveryMode::Progressive,
        waves: WaveConfig {
            first: Duration::from_secs(2),
            every: Duration::from_secs(1),
        },
    };
    let mut j: GroupJoin<u8> =
        GroupJoin::new(GroupId::new("g"), [agent(1), agent(2), agent(3)], config).unwrap();
    j.complete(agent(1), 1, t0).unwrap();
    assert_eq!(
        j.tick(t0 + Duration::from_secs(2)).unwrap().kind,
        DeliveryKind::Wave(1)
    );
    j.complete(agent(2), 2, t0 + Duration::from_secs(2))
        .unwrap();
    assert_eq!(j.next_deadline(), Some(t0 + Duration::from_secs(3)));
    assert_eq!(
        j.tick(t0 + Duration::from_secs(3)).unwrap().results,
        vec![(agent(2), 2)]
    );
}

#[tokio::test(start_paused = true)]
async fn no_double_delivery_and_exact_counts() {
    let t0 = Instant::now();
    let mut j = join(4, DeliveryMode::Progressive);
    j.complete(agent(1), "r1".into(), t0).unwrap();
    assert_eq!(
        j.complete(agent(1), "again".into(), t0),
        Err(JoinError::AlreadyCompleted {
            group: GroupId::new("g"),
            agent: agent(1)
        })
    );
    assert!(matches!(
        j.complete(agent(9), "x".into(), t0),
        Err(JoinError::NotAMember { .. })
    ));
    let mut delivered = Vec::new();
    delivered.extend(j.tick(t0 + Duration::from_secs(30)).unwrap().results);
    assert_eq!(
        j.tick(t0 + Duration::from_secs(30)),
        None,
        "a wave fires once"
    );
    j.complete(agent(2), "r2".into(), t0 + Duration::from_secs(31))
        .unwrap();
    j.complete(agent(3), "r3".into(), t0 + Duration::from_secs(32))
        .unwrap();
    delivered.extend(j.tick(t0 + Duration::from_secs(45)).unwrap().results);
    delivered.extend(
        j.complete(agent(4), "r4".into(), t0 + Duration::from_secs(46))
            .unwrap()
            .unwrap()
            .results,
    );
    let names: Vec<&str> = delivered.iter().map(|(_, r)| r.as_str()).collect();
    assert_eq!(names, vec!["r1", "r2", "r3", "r4"]);
    assert_eq!(
        j.counts(),
        MemberCounts {
            total: 4,
            completed: 4,
            delivered: 4
        }
    );
    assert!(matches!(
        j.complete(agent(4), "late".into(), t0),
        Err(JoinError::AlreadyCompleted { .. })
    ));
}

#[test]
fn group_members_must_be_distinct_and_present() {
    let g = GroupId::new("g");
    assert!(matches!(
        GroupJoin::<()>::new(g.clone(), [], GroupJoinConfig::default()),
        Err(JoinError::NoMembers { .. })
    ));
    assert!(matches!(
        GroupJoin::<()>::new(g, [agent(1), agent(1)], GroupJoinConfig::default()),
        Err(JoinError::DuplicateMember { .. })
    ));
}

// ---- delivery retries ----

/// A parent inbox that refuses the first `failures` attempts, recording when each
/// attempt came.
struct FlakyInbox {
    failures: usize,
    attempts: Vec<Instant>,
    received: Vec<Delivery<String>>,
}

impl Deliver<String> for FlakyInbox {
    type Error = String;

    fn deliver(
        &mut self,
        delivery: &Delivery<String>,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send {
        self.attempts.push(Instant::now());
        let result = if self.attempts.len() <= self.failures {
            Err(format!("inbox busy ({})", self.attempts.len()))
        } else {
            self.received.push(delivery.clone());
            Ok(())
        };
        async move { result }
    }
}

fn all_delivery() -> Delivery<String> {
    let mut j = join(2, DeliveryMode::AllOrNothing);
    let now = Instant::now();
    j.complete(agent(1), "r1".into(), now).unwrap();
    j.complete(agent(2), "r2".into(), now).unwrap().unwrap()
}

#[tokio::test(start_paused = true)]
async fn delivery_retries_with_backoff_then_succeeds() {
    let t0 = Instant::now();
    let mut inbox = FlakyInbox {
        failures: 2,
        attempts: vec![],
        received: vec![],
    };
    let attempts = deliver_with_retry(&mut inbox, all_delivery(), &RetryPolicy::default())
        .await
        .unwrap();
    assert_eq!(attempts, 3);
    let offsets: Vec<Duration> = inbox.attempts.iter().map(|t| *t - t0).collect();
    assert_eq!(offsets, vec![Duration::ZERO, 500 * MS, 1500 * MS]);
    assert_eq!(inbox.received.len(), 1, "delivered exactly once");
}

#[tokio::test(start_paused = true)]
async fn delivery_failing_every_attempt_returns_an_error_record() {
    let t0 = Instant::now();
    let mut inbox = FlakyInbox {
        failures: usize::MAX,
        attempts: vec![],
        received: vec![],
    };
    let delivery = all_delivery();
    let failed = deliver_with_retry(&mut inbox, delivery.clone(), &RetryPolicy::default())
        .await
        .unwrap_err();
    let offsets: Vec<Duration> = inbox.attempts.iter().map(|t| *t - t0).collect();
    assert_eq!(
        offsets,
        vec![Duration::ZERO, 500 * MS, 1500 * MS, 3500 * MS]
    );
    assert_eq!(failed.attempts, 4);
    assert_eq!(failed.errors.len(), 4);
    assert_eq!(
        failed.delivery, delivery,
        "the results survive in the record"
    );
    assert_eq!(
        failed.to_string(),
        "delivery All of group g failed after 4 attempts: inbox busy (4)"
    );
    advance(Duration::from_secs(60)).await;
    assert_eq!(inbox.attempts.len(), 4, "no attempt after the record");
}

//! Reading the store into the model, incrementally: each tick reads only the events
//! after the newest one seen (by sequence number); the run list, the followed run's
//! agents and steps are read again only when its events say something changed (or
//! every few seconds, for processes that died without an event); schedules and
//! store facts every few seconds. Nothing reads the whole store.

use std::time::{Duration, Instant};

use super::model::{ACTIVITY_LEN, Dashboard, Health, RunDetail, TAIL_LEN};
use crewbox::{EventKind, Watch};

/// Runs listed.
const RUNS: u32 = 50;
/// Events read per query while catching up.
const BATCH: u32 = 1000;
/// How often rows without an event of their own (pids, schedules) are read again.
const SLOW: Duration = Duration::from_secs(3);

/// The kinds a newly followed run reads its history of, beside its latest events.
const HISTORY_KINDS: &[EventKind] = &[EventKind::ReflectIteration];
const ACTIVITY_KINDS: &[EventKind] = &[
    EventKind::ModelReply,
    EventKind::ToolCall,
    EventKind::AgentSteer,
];

/// The store as the dashboard reads it.
pub struct Source {
    watch: Watch,
    rows_at: Option<Instant>,
    slow_at: Option<Instant>,
}

impl Source {
    /// Starts following `watch` from its newest event.
    pub async fn new(watch: Watch, model: &mut Dashboard) -> anyhow::Result<Self> {
        model.last_seq = watch.last_seq().await?;
        Ok(Self {
            watch,
            rows_at: None,
            slow_at: None,
        })
    }

    /// Brings the model up to date; whether anything changed.
    pub async fn refresh(&mut self, model: &mut Dashboard) -> anyhow::Result<bool> {
        let mut changed = false;
        let mut touched = Vec::new();
        // A bounded catch-up per tick, so a burst of events cannot stall the keys.
        for _ in 0..10 {
            let events = self.watch.page(None, model.last_seq, BATCH).await?;
            let full = events.len() as u32 == BATCH;
            touched.extend(model.apply_all(&events));
            if !full {
                break;
            }
        }
        let due = |at: Option<Instant>| at.is_none_or(|t| t.elapsed() >= SLOW);
        if !touched.is_empty() || due(self.rows_at) {
            let before = model.runs.clone();
            model.set_runs(self.watch.runs(RUNS).await?);
            changed |= model.runs != before;
            if let Some(d) = model.detail.as_mut() {
                d.stale = true;
            }
            self.rows_at = Some(Instant::now());
        }
        if model.detail_outdated() {
            model.detail = match model.selected_run() {
                Some(run) => Some(self.follow(run.id.clone()).await?),
                None => None,
            };
            changed = true;
        }
        if let Some(d) = model.detail.as_mut().filter(|d| d.stale) {
            let agents = self.watch.agents(&d.run_id).await?;
            let steps = self.watch.steps(&d.run_id).await?;
            changed |= agents != d.agents || steps != d.steps || !touched.is_empty();
            d.set_agents(agents);
            d.steps = steps;
            d.stale = false;
        }
        if due(self.slow_at) {
            let facts = self.watch.health().await?;
            let health = Health {
                running_agents: facts.agents.running,
                queued_agents: facts.agents.queued,
                unfinished: facts.unfinished,
                interrupted: facts.interrupted,
                store_bytes: facts.size_bytes,
            };
            let schedules = facts.jobs;
            changed |= health != model.health || schedules != model.schedules;
            model.health = health;
            model.schedules = schedules;
            self.slow_at = Some(Instant::now());
        }
        Ok(changed)
    }

    /// Starts following a run: its agents, steps, latest events, latest activity and
    /// every reflect iteration, merged in sequence order.
    async fn follow(&self, run: crewbox::RunId) -> anyhow::Result<RunDetail> {
        let mut d = RunDetail::new(run.clone());
        d.set_agents(self.watch.agents(&run).await?);
        d.steps = self.watch.steps(&run).await?;
        let mut history = self.watch.latest(&run, &[], TAIL_LEN as u32).await?;
        history.extend(
            self.watch
                .latest(&run, ACTIVITY_KINDS, 4 * ACTIVITY_LEN as u32)
                .await?,
        );
        history.extend(self.watch.latest(&run, HISTORY_KINDS, 1000).await?);
        history.sort_by_key(|e| e.seq);
        history.dedup_by_key(|e| e.seq);
        for e in &history {
            d.apply(e);
        }
        d.stale = false;
        Ok(d)
    }
}

//! The swarm join: N members on the same prompt, delivered by a [`Strategy`]. Pure,
//! like [`super::GroupJoin`] beside it: the caller supplies the time and calls
//! [`SwarmJoin::wave`] at [`SwarmJoin::next_wave`]. Each member is delivered once.

use std::collections::BTreeSet;

use tokio::time::Instant;

use super::WaveConfig;
use crate::vocab::Strategy;

/// The delivery rule of a strategy over member indexes.
#[derive(Debug)]
pub struct SwarmJoin {
    strategy: Strategy,
    size: usize,
    waves: WaveConfig,
    finished: Vec<usize>,
    delivered: BTreeSet<usize>,
    next_wave: Option<Instant>,
}

impl SwarmJoin {
    /// A join of `size` members (`batch` waves timed by `waves`).
    pub fn new(strategy: Strategy, size: usize, waves: WaveConfig) -> Self {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn t0() -> Instant {
        Instant::now()
    }

    #[test]
    fn live_delivers_each_once_in_order() {
        let now = t0();
        let mut j = SwarmJoin::new(Strategy::Live, 3, WaveConfig::default());
        assert_eq!(j.complete(2, now), vec![2]);
        assert_eq!(j.complete(2, now), Vec::<usize>::new(), "never twice");
        assert_eq!(j.complete(0, now), vec![0]);
        assert_eq!(j.complete(1, now), vec![1]);
    }

    #[test]
    fn quorum_waits_for_half_then_streams() {
        let now = t0();
        let mut j = SwarmJoin::new(Strategy::Quorum, 5, WaveConfig::default());
        assert!(j.complete(4, now).is_empty());
        assert!(j.complete(1, now).is_empty());
        assert_eq!(j.complete(0, now), vec![4, 1, 0], "⌈5/2⌉ = 3");
        assert_eq!(j.complete(3, now), vec![3]);
    }

    #[test]
    fn vote_and_merge_wait_for_all() {
        for s in [Strategy::Vote, Strategy::Merge] {
            let now = t0();
            let mut j = SwarmJoin::new(s, 2, WaveConfig::default());
            assert!(j.complete(1, now).is_empty());
            assert_eq!(j.complete(0, now), vec![1, 0]);
        }
    }

    #[test]
    fn batch_delivers_in_waves() {
        let now = t0();
        let waves = WaveConfig {
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
}

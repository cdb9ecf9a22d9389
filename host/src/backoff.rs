//! The one backoff: a first wait that doubles per attempt up to a cap, optionally with
//! full jitter. Model calls, deliveries of joined results, the reflect loop, the daemon's
//! retries of dead letters and the NATS loops all wait by it.

use std::time::Duration;

/// Exponential backoff: `first`, doubling per attempt, at most `cap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the first retry.
    pub first: Duration,
    /// The longest wait.
    pub cap: Duration,
}

impl Backoff {
    /// Waits of `first`, `2 × first`, … up to `cap`.
    pub const fn new(first: Duration, cap: Duration) -> Self {
        Self { first, cap }
    }

    /// The wait before retry `n` (0-based): `first × 2ⁿ`, at most `cap`.
    pub fn wait(&self, n: u32) -> Duration {
        self.first
            .saturating_mul(1u32.checked_shl(n).unwrap_or(u32::MAX))
            .min(self.cap)
    }

    /// [`wait`](Self::wait) with full jitter: `unit` (a uniform sample in `[0, 1)`) of it.
    pub fn jittered(&self, n: u32, unit: f64) -> Duration {
        self.wait(n).mul_f64(unit.clamp(0.0, 1.0))
    }

    /// The first `n` waits.
    pub fn waits(&self, n: u32) -> Vec<Duration> {
        (0..n).map(|i| self.wait(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_without_overflow() {
        let b = Backoff::new(Duration::from_millis(500), Duration::from_secs(2));
        assert_eq!(
            b.waits(4),
            [500, 1000, 2000, 2000].map(Duration::from_millis).to_vec()
        );
        assert_eq!(b.wait(u32::MAX), Duration::from_secs(2));
        assert_eq!(b.jittered(1, 0.5), Duration::from_millis(500));
        assert_eq!(b.jittered(1, 7.0), Duration::from_secs(1));
    }
}

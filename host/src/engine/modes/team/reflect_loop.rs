//! The reflect loop's decisions: stall detection, quality trend, error budget and a
//! pure state machine that turns iteration results into the next action.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use super::eval::{DEFAULT_THRESHOLD, Evaluation, goal_met};
use crate::vocab::ExitReason;
pub use crate::vocab::Trend;

/// How many earlier syntheses an exact repeat is checked against.
pub const STALL_HISTORY: usize = 5;
/// Token similarity with the previous synthesis above which it counts as a repeat.
pub const STALL_SIMILARITY: f64 = 0.9;

/// Jaccard similarity of the whitespace-separated token sets (two empty texts are equal).
pub fn jaccard(a: &str, b: &str) -> f64 {
    let a: HashSet<&str> = a.split_whitespace().collect();
    let b: HashSet<&str> = b.split_whitespace().collect();
    let union = a.union(&b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

/// What one synthesis says about progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StallVerdict {
    /// New material.
    Fresh,
    /// A repeat; one more in a row stops the loop.
    Warn,
    /// A second repeat in a row.
    Stop,
}

/// Spots a loop that keeps producing the same synthesis.
#[derive(Clone, Debug, Default)]
pub struct StallDetector {
    recent: VecDeque<String>,
    consecutive: u32,
}

impl StallDetector {
    /// A detector with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a synthesis: a repeat is an exact match with one of the last
    /// [`STALL_HISTORY`] or more than [`STALL_SIMILARITY`] similar to the previous.
    pub fn observe(&mut self, synthesis: &str) -> StallVerdict {
        let exact = self.recent.iter().any(|s| s == synthesis);
        let similar = self
            .recent
            .back()
            .is_some_and(|prev| jaccard(prev, synthesis) > STALL_SIMILARITY);
        if self.recent.len() == STALL_HISTORY {
            self.recent.pop_front();
        }
        self.recent.push_back(synthesis.to_owned());
        if exact || similar {
            self.consecutive += 1;
            if self.consecutive >= 2 {
                StallVerdict::Stop
            } else {
                StallVerdict::Warn
            }
        } else {
            self.consecutive = 0;
            StallVerdict::Fresh
        }
    }
}

/// Compares scores in rounded thousandths, so a change of exactly 0.1 is stable
/// whatever the floating-point noise.
pub fn trend(previous: f64, current: f64) -> Trend {
    let milli = |x: f64| (x * 1000.0).round() as i64;
    let delta = milli(current) - milli(previous);
    if delta > 100 {
        Trend::Improving
    } else if delta < -100 {
        Trend::Degrading
    } else {
        Trend::Stable
    }
}

/// Waiting time before the iteration after `failures` consecutive failures:
/// 2 s, 4 s, 8 s, … capped at 60 s; zero after none.
pub fn backoff_delay(failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    crate::backoff::Backoff::new(Duration::from_secs(2), Duration::from_secs(60)).wait(failures - 1)
}

/// Counts consecutive failed iterations; a success resets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorBudget {
    consecutive: u32,
    limit: u32,
}

impl Default for ErrorBudget {
    fn default() -> Self {
        Self::new(Self::DEFAULT_LIMIT)
    }
}

impl ErrorBudget {
    /// Consecutive failures that end the loop.
    pub const DEFAULT_LIMIT: u32 = 3;

    /// A budget that is spent after `limit` consecutive failures.
    pub fn new(limit: u32) -> Self {
        Self {
            consecutive: 0,
            limit: limit.max(1),
        }
    }

    /// Records a failure; true when the budget is now spent.
    pub fn record_failure(&mut self) -> bool {
        self.consecutive += 1;
        self.exhausted()
    }

    /// Records a success.
    pub fn record_success(&mut self) {
        self.consecutive = 0;
    }

    /// Failures in a row so far.
    pub fn consecutive(&self) -> u32 {
        self.consecutive
    }

    /// The limit has been reached.
    pub fn exhausted(&self) -> bool {
        self.consecutive >= self.limit
    }

    /// How long to wait before the next try.
    pub fn backoff(&self) -> Duration {
        backoff_delay(self.consecutive)
    }
}

/// Limits of a reflect loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReflectConfig {
    /// Iterations before stopping with [`ExitReason::MaxIterations`].
    pub max_iterations: u32,
    /// Score at which the goal is met.
    pub threshold: f64,
    /// Consecutive failed iterations before [`ExitReason::ErrorBudget`].
    pub error_limit: u32,
}

impl Default for ReflectConfig {
    fn default() -> Self {
        Self {
            max_iterations: 5,
            threshold: DEFAULT_THRESHOLD,
            error_limit: ErrorBudget::DEFAULT_LIMIT,
        }
    }
}

/// How one iteration ended, as the engine reports it.
#[derive(Clone, Debug, PartialEq)]
pub enum IterationOutcome {
    /// Planned, worked, synthesised and evaluated.
    Evaluated {
        /// The synthesis text.
        synthesis: String,
        /// Its evaluation.
        evaluation: Evaluation,
        /// Every worker has been dispatched at least once by now.
        all_dispatched: bool,
    },
    /// The iteration failed (no plan after the nudge in the first iteration,
    /// orchestrator or evaluator error); it is tried again, within the error budget.
    Failed,
    /// The orchestrator assigned no work after an earlier iteration: it considers the
    /// goal met, which counts once every worker has worked at least once.
    NoWork {
        /// Every worker has been dispatched at least once by now.
        all_dispatched: bool,
    },
    /// A person cancelled the run.
    Cancelled,
    /// A person paused the run.
    Paused,
}

/// What the engine does next.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReflectAction {
    /// Run another iteration.
    Continue {
        /// The number of the iteration to run, from 1.
        iteration: u32,
        /// Score direction against the previous evaluation, when there are two.
        trend: Option<Trend>,
        /// The last synthesis repeated an earlier one; one more repeat stops.
        stall_warning: bool,
        /// Wait this long first (after failures).
        backoff: Duration,
    },
    /// Stop for this reason.
    Exit(ExitReason),
}

/// The reflect loop as a pure state machine: feed it each iteration's outcome.
#[derive(Clone, Debug)]
pub struct ReflectLoop {
    config: ReflectConfig,
    completed: u32,
    stall: StallDetector,
    budget: ErrorBudget,
    last_score: Option<f64>,
    exited: Option<ExitReason>,
}

impl ReflectLoop {
    /// A loop about to run iteration 1.
    pub fn new(config: ReflectConfig) -> Self {
        Self {
            config,
            completed: 0,
            stall: StallDetector::new(),
            budget: ErrorBudget::new(config.error_limit),
            last_score: None,
            exited: None,
        }
    }

    /// Iterations evaluated so far (a failed try is retried, not counted).
    pub fn iterations(&self) -> u32 {
        self.completed
    }

    /// Why the loop stopped, once it has.
    pub fn exit_reason(&self) -> Option<ExitReason> {
        self.exited
    }

    /// Takes one iteration's outcome and decides what comes next. Once the loop has
    /// exited, it keeps answering with the same exit.
    pub fn step(&mut self, outcome: IterationOutcome) -> ReflectAction {
        if let Some(reason) = self.exited {
            return ReflectAction::Exit(reason);
        }
        let action = self.decide(outcome);
        if let ReflectAction::Exit(reason) = action {
            self.exited = Some(reason);
        }
        action
    }

    fn decide(&mut self, outcome: IterationOutcome) -> ReflectAction {
        let (trend, stall_warning) = match outcome {
            IterationOutcome::Cancelled => return ReflectAction::Exit(ExitReason::Cancelled),
            IterationOutcome::Paused => return ReflectAction::Exit(ExitReason::Paused),
            IterationOutcome::NoWork {
                all_dispatched: true,
            } => return ReflectAction::Exit(ExitReason::GoalMet),
            // A failed try does not use up an iteration: the same one runs again, after
            // a backoff, until the error budget is spent.
            IterationOutcome::Failed
            | IterationOutcome::NoWork {
                all_dispatched: false,
            } => {
                if self.budget.record_failure() {
                    return ReflectAction::Exit(ExitReason::ErrorBudget);
                }
                return ReflectAction::Continue {
                    iteration: self.completed + 1,
                    trend: None,
                    stall_warning: false,
                    backoff: self.budget.backoff(),
                };
            }
            IterationOutcome::Evaluated {
                synthesis,
                evaluation,
                all_dispatched,
            } => {
                self.completed += 1;
                self.budget.record_success();
                if goal_met(&evaluation, self.config.threshold, all_dispatched) {
                    return ReflectAction::Exit(ExitReason::GoalMet);
                }
                let verdict = self.stall.observe(&synthesis);
                if verdict == StallVerdict::Stop {
                    return ReflectAction::Exit(ExitReason::Stalled);
                }
                let trend = self.last_score.map(|prev| trend(prev, evaluation.score));
                self.last_score = Some(evaluation.score);
                (trend, verdict == StallVerdict::Warn)
            }
        };
        if self.completed >= self.config.max_iterations {
            return ReflectAction::Exit(ExitReason::MaxIterations);
        }
        ReflectAction::Continue {
            iteration: self.completed + 1,
            trend,
            stall_warning,
            backoff: self.budget.backoff(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn jaccard_basics() {
        assert_eq!(jaccard("a b c", "a b c"), 1.0);
        assert_eq!(jaccard("a b", "c d"), 0.0);
        assert_eq!(jaccard("a b c d", "a b c e"), 3.0 / 5.0);
        assert_eq!(jaccard("", "  "), 1.0);
        // Whitespace layout does not matter.
        assert_eq!(jaccard("a  b\nc", "a b c"), 1.0);
    }

    fn words(n: usize, prefix: &str) -> String {
        (0..n)
            .map(|i| format!("{prefix}{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn similarity_threshold_is_strictly_above_point_nine() {
        let base = words(20, "w");
        // 19 shared of 21 in the union: 0.905 > 0.9 → a repeat.
        let close = format!("{} x", words(19, "w"));
        assert!(jaccard(&base, &close) > STALL_SIMILARITY);
        let mut d = StallDetector::new();
        d.observe(&base);
        assert_eq!(d.observe(&close), StallVerdict::Warn);
        // 18 shared of 20 in the union: exactly 0.9 → not a repeat.
        let base = words(19, "w");
        let edge = format!("{} y", words(18, "w"));
        assert_eq!(jaccard(&base, &edge), 0.9);
        let mut d = StallDetector::new();
        d.observe(&base);
        assert_eq!(d.observe(&edge), StallVerdict::Fresh);
    }

    #[test]
    fn stall_warns_then_stops_and_resets_after_fresh() {
        let mut d = StallDetector::new();
        assert_eq!(d.observe("first answer"), StallVerdict::Fresh);
        assert_eq!(d.observe("first answer"), StallVerdict::Warn);
        assert_eq!(d.observe("something new entirely"), StallVerdict::Fresh);
        assert_eq!(d.observe("something new entirely"), StallVerdict::Warn);
        assert_eq!(d.observe("something new entirely"), StallVerdict::Stop);
    }

    #[test]
    fn exact_repeat_of_an_older_synthesis_counts() {
        let mut d = StallDetector::new();
        for s in ["one", "two", "three", "four"] {
            assert_eq!(d.observe(s), StallVerdict::Fresh);
        }
        assert_eq!(d.observe("one"), StallVerdict::Warn);
        // Only the last five are remembered: `a` has dropped out, `c` has not.
        let mut d = StallDetector::new();
        for s in ["a", "b", "c", "d", "e", "f"] {
            d.observe(s);
        }
        assert_eq!(d.observe("a"), StallVerdict::Fresh);
        assert_eq!(d.observe("c"), StallVerdict::Warn);
    }

    #[test]
    fn trend_in_thousandths() {
        assert_eq!(trend(0.6, 0.7), Trend::Stable);
        assert_eq!(trend(0.7, 0.6), Trend::Stable);
        assert_eq!(trend(0.1, 0.2), Trend::Stable);
        assert_eq!(trend(0.2, 0.3), Trend::Stable);
        assert_eq!(trend(0.6, 0.701), Trend::Improving);
        assert_eq!(trend(0.8, 0.699), Trend::Degrading);
        assert_eq!(trend(0.5, 0.5), Trend::Stable);
    }

    #[test]
    fn error_budget_and_backoff() {
        let mut b = ErrorBudget::default();
        assert_eq!(b.backoff(), Duration::ZERO);
        assert!(!b.record_failure());
        assert_eq!(b.backoff(), Duration::from_secs(2));
        assert!(!b.record_failure());
        assert_eq!(b.backoff(), Duration::from_secs(4));
        b.record_success();
        assert_eq!(b.consecutive(), 0);
        assert!(!b.record_failure());
        assert!(!b.record_failure());
        assert!(b.record_failure());
        assert!(b.exhausted());
        assert_eq!(backoff_delay(10), Duration::from_secs(60));
        assert_eq!(backoff_delay(u32::MAX), Duration::from_secs(60));
    }

    fn evaluated(synthesis: &str, score: f64, all_dispatched: bool) -> IterationOutcome {
        IterationOutcome::Evaluated {
            synthesis: synthesis.into(),
            evaluation: Evaluation {
                score,
                score_defaulted: false,
                rationale: None,
                complete: false,
                needs_iteration: false,
            },
            all_dispatched,
        }
    }

    #[test]
    fn loop_meets_the_goal() {
        let mut l = ReflectLoop::new(ReflectConfig::default());
        assert_eq!(
            l.step(evaluated("v1 draft", 0.5, true)),
            ReflectAction::Continue {
                iteration: 2,
                trend: None,
                stall_warning: false,
                backoff: Duration::ZERO
            }
        );
        assert_eq!(
            l.step(evaluated("v2 much better text", 0.7, true)),
            ReflectAction::Continue {
                iteration: 3,
                trend: Some(Trend::Improving),
                stall_warning: false,
                backoff: Duration::ZERO
            }
        );
        assert_eq!(
            l.step(evaluated("v3 final", 0.95, true)),
            ReflectAction::Exit(ExitReason::GoalMet)
        );
        assert_eq!(l.exit_reason(), Some(ExitReason::GoalMet));
        assert_eq!(
            l.step(evaluated("late", 0.1, true)),
            ReflectAction::Exit(ExitReason::GoalMet)
        );
    }

    #[test]
    fn goal_waits_for_every_worker() {
        let mut l = ReflectLoop::new(ReflectConfig::default());
        assert!(matches!(
            l.step(evaluated("partial", 1.0, false)),
            ReflectAction::Continue { .. }
        ));
    }

    #[test]
    fn loop_hits_max_iterations() {
        let mut l = ReflectLoop::new(ReflectConfig {
            max_iterations: 3,
            ..ReflectConfig::default()
        });
        assert!(matches!(
            l.step(evaluated("alpha one", 0.1, true)),
            ReflectAction::Continue { .. }
        ));
        assert!(matches!(
            l.step(evaluated("beta two", 0.2, true)),
            ReflectAction::Continue { .. }
        ));
        assert_eq!(
            l.step(evaluated("gamma three", 0.3, true)),
            ReflectAction::Exit(ExitReason::MaxIterations)
        );
        assert_eq!(l.iterations(), 3);
    }

    #[test]
    fn loop_stalls_on_second_repeat() {
        let mut l = ReflectLoop::new(ReflectConfig::default());
        l.step(evaluated("same", 0.5, true));
        assert!(matches!(
            l.step(evaluated("same", 0.5, true)),
            ReflectAction::Continue {
                stall_warning: true,
                ..
            }
        ));
        assert_eq!(
            l.step(evaluated("same", 0.5, true)),
            ReflectAction::Exit(ExitReason::Stalled)
        );
    }

    #[test]
    fn loop_spends_its_error_budget() {
        let mut l = ReflectLoop::new(ReflectConfig {
            max_iterations: 10,
            ..ReflectConfig::default()
        });
        assert!(matches!(
            l.step(IterationOutcome::Failed),
            ReflectAction::Continue { backoff, .. } if backoff == Duration::from_secs(2)
        ));
        // A success in between resets the count.
        l.step(evaluated("ok", 0.3, true));
        l.step(IterationOutcome::Failed);
        l.step(IterationOutcome::Failed);
        assert_eq!(
            l.step(IterationOutcome::Failed),
            ReflectAction::Exit(ExitReason::ErrorBudget)
        );
    }

    #[test]
    fn failed_tries_repeat_the_iteration_without_using_it_up() {
        let mut l = ReflectLoop::new(ReflectConfig {
            max_iterations: 1,
            ..ReflectConfig::default()
        });
        assert!(matches!(
            l.step(IterationOutcome::Failed),
            ReflectAction::Continue { iteration: 1, .. }
        ));
        assert_eq!(
            l.step(evaluated("done", 0.2, true)),
            ReflectAction::Exit(ExitReason::MaxIterations)
        );
        assert_eq!(l.iterations(), 1);
    }

    #[test]
    fn no_work_after_everyone_worked_is_the_goal_met() {
        let mut l = ReflectLoop::new(ReflectConfig::default());
        assert!(matches!(
            l.step(IterationOutcome::NoWork {
                all_dispatched: false
            }),
            ReflectAction::Continue { iteration: 1, .. }
        ));
        l.step(evaluated("first", 0.2, true));
        assert_eq!(
            l.step(IterationOutcome::NoWork {
                all_dispatched: true
            }),
            ReflectAction::Exit(ExitReason::GoalMet)
        );
    }

    #[test]
    fn cancel_and_pause_exit_at_once() {
        let mut l = ReflectLoop::new(ReflectConfig::default());
        assert_eq!(
            l.step(IterationOutcome::Paused),
            ReflectAction::Exit(ExitReason::Paused)
        );
        let mut l = ReflectLoop::new(ReflectConfig::default());
        assert_eq!(
            l.step(IterationOutcome::Cancelled),
            ReflectAction::Exit(ExitReason::Cancelled)
        );
        assert!(!ExitReason::Cancelled.is_success());
    }
}

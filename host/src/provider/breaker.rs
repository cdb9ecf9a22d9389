//! Circuit breaker per provider+model around every model call.
//!
//! After [`BreakerConfig::failure_threshold`] consecutive failures the circuit opens and
//! calls are refused at once with [`ProviderError::CircuitOpen`]. After
//! [`BreakerConfig::cooldown`] it is half-open: exactly one trial call runs at a time;
//! success closes the circuit, failure opens it again for another cooldown.
//!
//! What counts as a failure ([`counts_as_failure`]): errors that say the *server* is
//! unwell — timeouts (incl. stalled streams), rate limits, 5xx, connection failures and
//! malformed responses. Errors that say the *request or setup* is wrong (`Rejected`,
//! `Config`, `NoScriptedReply`) neither count nor reset the streak: the server answered,
//! but that answer says nothing about its health.
//!
//! The state machine ([`Breaker`]) is pure: every method takes `now`, so it is tested on
//! fixed instants. [`BreakerProvider`] reads the clock from `tokio::time::Instant`, which
//! follows paused test time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use tokio::time::Instant;

use super::{Completion, CompletionRequest, Provider, ProviderError};

/// Thresholds of a circuit breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failures that open the circuit.
    pub failure_threshold: u32,
    /// How long an open circuit refuses calls before a trial is allowed.
    pub cooldown: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            failure_threshold: 5,
            cooldown: Duration::from_secs(30),
        }
    }
}

/// The state of one circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BreakerState {
    /// Calls flow.
    Closed,
    /// Calls are refused until the cooldown ends.
    Open,
    /// One trial call decides whether to close or reopen.
    HalfOpen,
}

/// Whether an error says the model server is unhealthy (see the module doc).
pub fn counts_as_failure(err: &ProviderError) -> bool {
    match err {
        ProviderError::Timeout(_)
        | ProviderError::RateLimited { .. }
        | ProviderError::Overloaded { .. }
        | ProviderError::Server { .. }
        | ProviderError::Connection(_)
        | ProviderError::BadResponse(_) => true,
        // A CLI that fails for its own reasons (a bad flag, no login) says nothing
        // about the service behind it.
        ProviderError::CommandFailed(exit) => exit.transient,
        // A reply over our own size cap says more about the request than the server.
        ProviderError::ReplyTooLarge { .. }
        | ProviderError::Rejected { .. }
        | ProviderError::CircuitOpen { .. }
        | ProviderError::NoScriptedReply { .. }
        | ProviderError::ToolsIgnored(_)
        | ProviderError::Config(_)
        | ProviderError::Diverged(_) => false,
    }
}

/// What a call was allowed to do by [`Breaker::try_acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A normal call on a closed circuit.
    Normal,
    /// The one trial call of a half-open circuit.
    Trial,
}

/// How a call ended, as the breaker sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The call succeeded.
    Success,
    /// The call failed in a way that counts (see [`counts_as_failure`]).
    Failure,
    /// The call ended without telling us about the server's health.
    Neutral,
}

/// The pure state machine of one circuit.
#[derive(Clone, Debug)]
pub struct Breaker {
    config: BreakerConfig,
    state: BreakerState,
    consecutive_failures: u32,
    opened_at: Option<Instant>,
    opened_at_wall: Option<SystemTime>,
    trial_in_flight: bool,
    last_failure: Option<String>,
}

impl Breaker {
    /// A closed circuit.
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            state: BreakerState::Closed,
            consecutive_failures: 0,
            opened_at: None,
            opened_at_wall: None,
            trial_in_flight: false,
            last_failure: None,
        }
    }

    /// The current state (an open circuit past its cooldown still reads `Open` until a
    /// call arrives and becomes the trial).
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Failures since the last success.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Asks to make a call at `now`; `Err(retry_in)` refuses it.
    pub fn try_acquire(&mut self, now: Instant) -> Result<Admission, Duration> {
        match self.state {
            BreakerState::Closed => Ok(Admission::Normal),
            BreakerState::Open => {
                let opened = self.opened_at.unwrap_or(now);
                let ready_at = opened + self.config.cooldown;
                if now >= ready_at {
                    self.state = BreakerState::HalfOpen;
                    self.trial_in_flight = true;
                    Ok(Admission::Trial)
                } else {
                    Err(ready_at - now)
                }
            }
            BreakerState::HalfOpen if self.trial_in_flight => Err(Duration::ZERO),
            BreakerState::HalfOpen => {
                self.trial_in_flight = true;
                Ok(Admission::Trial)
            }
        }
    }

    /// The last failure that counted, as its error said (kept for the open circuit's
    /// error and for `crewbox health`).
    pub fn last_failure(&self) -> Option<&str> {
        self.last_failure.as_deref()
    }

    /// Records a failure's cause and how it ended; true when it opened the circuit.
    pub fn record_failure(&mut self, admission: Admission, cause: &str, now: Instant) -> bool {
        self.last_failure = Some(cause.to_owned());
        self.record(admission, Outcome::Failure, now)
    }

    /// Records how an admitted call ended; true when this opened the circuit.
    pub fn record(&mut self, admission: Admission, outcome: Outcome, now: Instant) -> bool {
        if admission == Admission::Trial {
            self.trial_in_flight = false;
        }
        match outcome {
            Outcome::Success => {
                self.state = BreakerState::Closed;
                self.consecutive_failures = 0;
                self.opened_at = None;
                self.opened_at_wall = None;
                false
            }
            Outcome::Failure => {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                let trip = match self.state {
                    BreakerState::HalfOpen => admission == Admission::Trial,
                    BreakerState::Closed => {
                        self.consecutive_failures >= self.config.failure_threshold
                    }
                    // A call admitted before the circuit opened fails late: the circuit
                    // is already open, the cooldown is not restarted.
                    BreakerState::Open => false,
                };
                if trip {
                    self.state = BreakerState::Open;
                    self.opened_at = Some(now);
                    self.opened_at_wall = Some(SystemTime::now());
                }
                trip
            }
            Outcome::Neutral => false,
        }
    }
}

/// One circuit as `crewbox health` shows it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BreakerStatus {
    /// `provider/model`.
    pub key: String,
    /// The circuit's state.
    pub state: BreakerState,
    /// Failures since the last success.
    pub consecutive_failures: u32,
    /// Wall-clock time the circuit last opened, while it is not closed.
    pub opened_at: Option<SystemTime>,
    /// The last failure that counted.
    pub last_failure: Option<String>,
}

/// The shared registry of circuits, one per `provider/model` key.
#[derive(Clone, Debug, Default)]
pub struct Breakers {
    inner: Arc<Mutex<BTreeMap<String, Arc<Mutex<Breaker>>>>>,
    config: BreakerConfig,
}

impl Breakers {
    /// A registry whose circuits use `config`.
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            inner: Arc::default(),
            config,
        }
    }

    /// The circuit for `key`, created closed on first use.
    pub fn get(&self, key: &str) -> Arc<Mutex<Breaker>> {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(key.to_owned())
            .or_insert_with(|| Arc::new(Mutex::new(Breaker::new(self.config))))
            .clone()
    }

    /// Every circuit's state, sorted by key.
    pub fn snapshot(&self) -> Vec<BreakerStatus> {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.iter()
            .map(|(key, b)| {
                let b = b.lock().unwrap_or_else(|e| e.into_inner());
                BreakerStatus {
                    key: key.clone(),
                    state: b.state,
                    consecutive_failures: b.consecutive_failures,
                    opened_at: b.opened_at_wall,
                    last_failure: b.last_failure.clone(),
                }
            })
            .collect()
    }

    /// Wraps `inner` so each of its calls passes through the circuit for
    /// `inner.name()/inner.model()`.
    pub fn wrap(&self, inner: Arc<dyn Provider>) -> BreakerProvider {
        let key = format!("{}/{}", inner.name(), inner.model());
        BreakerProvider {
            breaker: self.get(&key),
            key,
            inner,
        }
    }
}

/// A provider whose calls pass through a circuit breaker.
pub struct BreakerProvider {
    key: String,
    breaker: Arc<Mutex<Breaker>>,
    inner: Arc<dyn Provider>,
}

/// Releases a half-open trial if the call is dropped before it ends (cancellation), so
/// the circuit does not stay half-open with a trial nobody runs.
struct TrialGuard<'a> {
    breaker: &'a Mutex<Breaker>,
    admission: Admission,
    done: bool,
}

impl TrialGuard<'_> {
    /// Records the call's end; true when its failure opened the circuit.
    fn finish(mut self, outcome: Result<(), &ProviderError>) -> bool {
        self.done = true;
        let mut b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match outcome {
            Ok(()) => b.record(self.admission, Outcome::Success, now),
            Err(e) if counts_as_failure(e) => b.record_failure(self.admission, &e.to_string(), now),
            Err(_) => b.record(self.admission, Outcome::Neutral, now),
        }
    }
}

impl Drop for TrialGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
            b.record(self.admission, Outcome::Neutral, Instant::now());
        }
    }
}

#[async_trait]
impl Provider for BreakerProvider {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn acts(&self) -> bool {
        self.inner.acts()
    }
    fn limits(&self) -> super::ModelLimits {
        self.inner.limits()
    }
    async fn limits_for(&self, request_tokens: u64) -> super::ModelLimits {
        self.inner.limits_for(request_tokens).await
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    async fn complete(&self, request: &CompletionRequest) -> Result<Completion, ProviderError> {
        let admission = {
            let mut b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
            b.try_acquire(Instant::now())
                .map_err(|retry_in| ProviderError::CircuitOpen {
                    key: self.key.clone(),
                    retry_in,
                    cause: b.last_failure().unwrap_or("unknown").to_owned(),
                    opened_now: false,
                })?
        };
        let guard = TrialGuard {
            breaker: &self.breaker,
            admission,
            done: false,
        };
        let result = self.inner.complete(request).await;
        let opened = guard.finish(result.as_ref().map(|_| ()));
        match result {
            // The failure that opens the circuit is reported as the opening (naming it),
            // so the retry layer stops and the caller can record the event once.
            Err(cause) if opened => {
                tracing::warn!(breaker = %self.key, error = %cause, "circuit breaker opened");
                let retry_in = {
                    let b = self.breaker.lock().unwrap_or_else(|e| e.into_inner());
                    b.config.cooldown
                };
                Err(ProviderError::CircuitOpen {
                    key: self.key.clone(),
                    retry_in,
                    cause: cause.to_string(),
                    opened_now: true,
                })
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(b: &mut Breaker, now: Instant) {
        let a = b.try_acquire(now).expect("admitted");
        b.record(a, Outcome::Failure, now);
    }

    #[test]
    fn opens_after_threshold_and_refuses_until_cooldown() {
        let t0 = Instant::now();
        let mut b = Breaker::new(BreakerConfig::default());
        for _ in 0..4 {
            fail(&mut b, t0);
        }
        assert_eq!(b.state(), BreakerState::Closed);
        fail(&mut b, t0);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(
            b.try_acquire(t0 + Duration::from_secs(10)),
            Err(Duration::from_secs(20))
        );
        assert_eq!(
            b.try_acquire(t0 + Duration::from_secs(30)),
            Ok(Admission::Trial)
        );
        assert_eq!(b.state(), BreakerState::HalfOpen);
    }

    #[test]
    fn half_open_admits_one_trial_at_a_time() {
        let t0 = Instant::now();
        let mut b = Breaker::new(BreakerConfig {
            failure_threshold: 1,
            ..Default::default()
        });
        fail(&mut b, t0);
        let t1 = t0 + Duration::from_secs(31);
        assert_eq!(b.try_acquire(t1), Ok(Admission::Trial));
        assert_eq!(b.try_acquire(t1), Err(Duration::ZERO));
        b.record(Admission::Trial, Outcome::Success, t1);
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.consecutive_failures(), 0);
        assert_eq!(b.try_acquire(t1), Ok(Admission::Normal));
    }

    #[test]
    fn failed_trial_reopens_for_a_full_cooldown() {
        let t0 = Instant::now();
        let mut b = Breaker::new(BreakerConfig::default());
        for _ in 0..5 {
            fail(&mut b, t0);
        }
        let t1 = t0 + Duration::from_secs(30);
        fail(&mut b, t1);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(
            b.try_acquire(t1 + Duration::from_secs(29)),
            Err(Duration::from_secs(1))
        );
        assert_eq!(
            b.try_acquire(t1 + Duration::from_secs(30)),
            Ok(Admission::Trial)
        );
    }

    #[test]
    fn success_resets_the_streak_and_neutral_does_not() {
        let t0 = Instant::now();
        let mut b = Breaker::new(BreakerConfig::default());
        for _ in 0..4 {
            fail(&mut b, t0);
        }
        let a = b.try_acquire(t0).unwrap();
        b.record(a, Outcome::Neutral, t0);
        assert_eq!(b.consecutive_failures(), 4);
        let a = b.try_acquire(t0).unwrap();
        b.record(a, Outcome::Success, t0);
        assert_eq!(b.consecutive_failures(), 0);
        for _ in 0..4 {
            fail(&mut b, t0);
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn neutral_trial_end_frees_the_trial_slot() {
        let t0 = Instant::now();
        let mut b = Breaker::new(BreakerConfig {
            failure_threshold: 1,
            ..Default::default()
        });
        fail(&mut b, t0);
        let t1 = t0 + Duration::from_secs(30);
        let a = b.try_acquire(t1).unwrap();
        b.record(a, Outcome::Neutral, t1);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        assert_eq!(b.try_acquire(t1), Ok(Admission::Trial));
    }

    #[test]
    fn late_failure_of_a_call_admitted_before_opening_keeps_the_cooldown() {
        let t0 = Instant::now();
        let mut b = Breaker::new(BreakerConfig {
            failure_threshold: 1,
            ..Default::default()
        });
        let early = b.try_acquire(t0).unwrap();
        fail(&mut b, t0);
        b.record(early, Outcome::Failure, t0 + Duration::from_secs(20));
        assert_eq!(
            b.try_acquire(t0 + Duration::from_secs(30)),
            Ok(Admission::Trial)
        );
    }

    #[test]
    fn failure_classification() {
        assert!(counts_as_failure(&ProviderError::Timeout("stall".into())));
        assert!(counts_as_failure(&ProviderError::BadResponse("x".into())));
        assert!(!counts_as_failure(&ProviderError::Rejected {
            status: 401,
            message: String::new()
        }));
        assert!(!counts_as_failure(&ProviderError::Config("x".into())));
    }
}

//! Agent quotas: the `[quotas]` table, its documented defaults, the range each value
//! must lie in (checked when a file is loaded, whoever wrote it), and the clamp that
//! lets a repository lower them but never raise them.

use std::time::Duration;

use serde::Deserialize;

pub use crate::vocab::MAX_DURATION_S;

/// Agent quotas. Every field is optional in files; defaults are in [`Quotas::default`].
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QuotaFile {
    /// Soft turn limit: at this turn the agent is told to wrap up.
    pub max_turns: Option<u32>,
    /// Extra turns after the soft limit before the hard stop.
    pub grace_turns: Option<u32>,
    /// Total tokens (input + output).
    pub max_tokens: Option<u64>,
    /// Wall time in seconds.
    pub wall_time_s: Option<u64>,
    /// Tool calls.
    pub max_tool_calls: Option<u32>,
    /// Cost budget in the provider's price unit (needs prices in the provider config).
    pub max_cost: Option<f64>,
    /// Seconds a single model call may take in all (tokens arriving or not).
    pub model_timeout_s: Option<u64>,
    /// Output tokens of one agent turn (sent as the provider's token limit field).
    pub max_output_tokens: Option<u32>,
    /// Context budget in tokens; old tool outputs are compacted when it is near.
    pub context_tokens: Option<u64>,
    /// Turns kept verbatim by compaction.
    pub keep_turns: Option<u32>,
    /// Maximum depth of the agent tree.
    pub max_depth: Option<u32>,
    /// Child agents one agent may start with `spawn_agent`.
    pub max_children: Option<u32>,
    /// Child agents all the agents of one run may start together.
    pub max_children_per_run: Option<u32>,
}

/// Why a quota value is out of range: the key under `[quotas]` and what is allowed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{value} is outside the allowed range: {allowed}")]
pub struct QuotaRangeError {
    /// The key under `[quotas]`.
    pub key: &'static str,
    /// The value as written.
    pub value: String,
    /// What the key accepts.
    pub allowed: &'static str,
}

impl QuotaFile {
    /// Checks every value set against its range: zero where zero means nothing could
    /// run, negative, NaN or infinite costs, and durations no clock can hold are
    /// refused (a user's file and a repository's alike).
    pub fn check(&self) -> Result<(), QuotaRangeError> {
        fn within<T: PartialOrd + ToString>(
            key: &'static str,
            value: Option<T>,
            lo: T,
            hi: T,
            allowed: &'static str,
        ) -> Result<(), QuotaRangeError> {
            match value {
                Some(v) if v < lo || v > hi => Err(QuotaRangeError {
                    key,
                    value: v.to_string(),
                    allowed,
                }),
                _ => Ok(()),
            }
        }
        const SECONDS: &str = "1..=31536000 seconds (at most a year)";
        within("max_turns", self.max_turns, 1, u32::MAX, "at least 1 turn")?;
        within(
            "max_tokens",
            self.max_tokens,
            1,
            u64::MAX,
            "at least 1 token",
        )?;
        within("wall_time_s", self.wall_time_s, 1, MAX_DURATION_S, SECONDS)?;
        within(
            "model_timeout_s",
            self.model_timeout_s,
            1,
            MAX_DURATION_S,
            SECONDS,
        )?;
        within(
            "max_output_tokens",
            self.max_output_tokens,
            1,
            u32::MAX,
            "at least 1 token",
        )?;
        within(
            "context_tokens",
            self.context_tokens,
            1,
            u64::MAX,
            "at least 1 token",
        )?;
        if let Some(c) = self.max_cost
            && !(c.is_finite() && c > 0.0)
        {
            return Err(QuotaRangeError {
                key: "max_cost",
                value: c.to_string(),
                allowed: "a finite number above 0 (leave it out for no cost budget)",
            });
        }
        Ok(())
    }
}

/// Resolved agent quotas.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Quotas {
    /// Soft turn limit.
    pub max_turns: u32,
    /// Grace turns after the soft limit.
    pub grace_turns: u32,
    /// Token budget.
    pub max_tokens: u64,
    /// Wall time.
    pub wall_time: Duration,
    /// Tool-call budget.
    pub max_tool_calls: u32,
    /// Optional cost budget.
    pub max_cost: Option<f64>,
    /// Per-call model timeout, overall (`model_timeout_s`).
    pub model_timeout: Duration,
    /// Output tokens of one agent turn (a provider's `max_output_tokens` overrides it).
    #[serde(default = "default_max_output_tokens")]
    pub max_output_tokens: u32,
    /// Context budget in tokens.
    pub context_tokens: u64,
    /// Turns kept verbatim by compaction.
    pub keep_turns: u32,
    /// Maximum agent tree depth.
    pub max_depth: u32,
    /// Child agents one agent may start (`spawn_agent`); 0: none.
    #[serde(default = "default_max_children")]
    pub max_children: u32,
    /// Child agents the agents of one run may start together; 0: none.
    #[serde(default = "default_max_children_per_run")]
    pub max_children_per_run: u32,
}

/// The default of [`Quotas::max_output_tokens`].
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 4096;

fn default_max_output_tokens() -> u32 {
    DEFAULT_MAX_OUTPUT_TOKENS
}

/// The default of [`Quotas::max_children`].
pub const DEFAULT_MAX_CHILDREN: u32 = 8;
/// The default of [`Quotas::max_children_per_run`].
pub const DEFAULT_MAX_CHILDREN_PER_RUN: u32 = 32;

fn default_max_children() -> u32 {
    DEFAULT_MAX_CHILDREN
}

fn default_max_children_per_run() -> u32 {
    DEFAULT_MAX_CHILDREN_PER_RUN
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            max_turns: 30,
            grace_turns: 2,
            max_tokens: 500_000,
            wall_time: Duration::from_secs(600),
            max_tool_calls: 100,
            max_cost: None,
            model_timeout: Duration::from_secs(300),
            max_output_tokens: DEFAULT_MAX_OUTPUT_TOKENS,
            context_tokens: 120_000,
            keep_turns: 6,
            max_depth: 5,
            max_children: DEFAULT_MAX_CHILDREN,
            max_children_per_run: DEFAULT_MAX_CHILDREN_PER_RUN,
        }
    }
}

/// One quota a repository asked for that was above the user's: (key, asked, kept).
#[derive(Clone, Debug, PartialEq)]
pub struct Clamped {
    /// The key under `[quotas]`.
    pub key: &'static str,
    /// What the repository wrote.
    pub asked: String,
    /// What stays in force.
    pub kept: String,
}

impl Quotas {
    /// Applies the keys set in `f` (the user's own file: any value in range, see
    /// [`QuotaFile::check`]).
    pub fn apply(&mut self, f: &QuotaFile) {
        macro_rules! set {
            ($($k:ident),*) => { $(if let Some(v) = f.$k { self.$k = v; })* };
        }
        set!(
            max_turns,
            grace_turns,
            max_tokens,
            max_tool_calls,
            max_output_tokens,
            context_tokens,
            keep_turns,
            max_depth,
            max_children,
            max_children_per_run
        );
        // Checked at load; the clamp keeps an unchecked caller from building a deadline
        // no clock can hold.
        if let Some(s) = f.wall_time_s {
            self.wall_time = Duration::from_secs(s.min(MAX_DURATION_S));
        }
        if let Some(s) = f.model_timeout_s {
            self.model_timeout = Duration::from_secs(s.min(MAX_DURATION_S));
        }
        if f.max_cost.is_some() {
            self.max_cost = f.max_cost;
        }
    }

    /// Applies a repository's keys, each only as far as it lowers the value in force;
    /// returns the ones that asked for more (and were kept at the user's value).
    pub fn apply_lower(&mut self, f: &QuotaFile) -> Vec<Clamped> {
        let mut clamped = Vec::new();
        fn lower<T: PartialOrd + Copy + ToString>(
            key: &'static str,
            have: &mut T,
            asked: Option<T>,
            out: &mut Vec<Clamped>,
        ) {
            let Some(asked) = asked else { return };
            if asked <= *have {
                *have = asked;
            } else {
                out.push(Clamped {
                    key,
                    asked: asked.to_string(),
                    kept: have.to_string(),
                });
            }
        }
        let c = &mut clamped;
        lower("max_turns", &mut self.max_turns, f.max_turns, c);
        lower("grace_turns", &mut self.grace_turns, f.grace_turns, c);
        lower("max_tokens", &mut self.max_tokens, f.max_tokens, c);
        lower(
            "max_tool_calls",
            &mut self.max_tool_calls,
            f.max_tool_calls,
            c,
        );
        lower(
            "max_output_tokens",
            &mut self.max_output_tokens,
            f.max_output_tokens,
            c,
        );
        lower(
            "context_tokens",
            &mut self.context_tokens,
            f.context_tokens,
            c,
        );
        lower("keep_turns", &mut self.keep_turns, f.keep_turns, c);
        lower("max_depth", &mut self.max_depth, f.max_depth, c);
        lower("max_children", &mut self.max_children, f.max_children, c);
        lower(
            "max_children_per_run",
            &mut self.max_children_per_run,
            f.max_children_per_run,
            c,
        );
        let mut secs = self.wall_time.as_secs();
        lower("wall_time_s", &mut secs, f.wall_time_s, c);
        self.wall_time = self.wall_time.min(Duration::from_secs(secs));
        let mut secs = self.model_timeout.as_secs();
        lower("model_timeout_s", &mut secs, f.model_timeout_s, c);
        self.model_timeout = self.model_timeout.min(Duration::from_secs(secs));
        match (self.max_cost, f.max_cost) {
            (_, None) => {}
            // No cost budget is the highest there is: any budget lowers it.
            (None, Some(asked)) if asked.is_finite() && asked >= 0.0 => self.max_cost = Some(asked),
            (None, Some(asked)) => c.push(Clamped {
                key: "max_cost",
                asked: asked.to_string(),
                kept: "none".into(),
            }),
            (Some(mut have), asked) => {
                lower("max_cost", &mut have, asked.filter(|a| !a.is_nan()), c);
                self.max_cost = Some(have);
            }
        }
        clamped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_lowers_but_never_raises() {
        let mut q = Quotas::default();
        q.apply(&QuotaFile {
            max_tokens: Some(200_000),
            ..QuotaFile::default()
        });
        let clamped = q.apply_lower(&QuotaFile {
            max_tokens: Some(1_000_000_000),
            max_turns: Some(10),
            wall_time_s: Some(60),
            model_timeout_s: Some(100_000),
            max_cost: Some(3.0),
            ..QuotaFile::default()
        });
        assert_eq!(q.max_tokens, 200_000);
        assert_eq!(q.max_turns, 10);
        assert_eq!(q.wall_time, Duration::from_secs(60));
        assert_eq!(q.model_timeout, Duration::from_secs(300));
        assert_eq!(q.max_cost, Some(3.0));
        let keys: Vec<&str> = clamped.iter().map(|c| c.key).collect();
        assert_eq!(keys, ["max_tokens", "model_timeout_s"]);
        assert_eq!(clamped[0].asked, "1000000000");
        assert_eq!(clamped[0].kept, "200000");
        let clamped = q.apply_lower(&QuotaFile {
            max_cost: Some(f64::INFINITY),
            ..QuotaFile::default()
        });
        assert_eq!(q.max_cost, Some(3.0));
        assert_eq!(clamped.len(), 1);
        let clamped = q.apply_lower(&QuotaFile {
            max_children: Some(2),
            max_children_per_run: Some(1000),
            ..QuotaFile::default()
        });
        assert_eq!((q.max_children, q.max_children_per_run), (2, 32));
        assert_eq!(clamped[0].key, "max_children_per_run");
    }

    #[test]
    fn values_out_of_range_name_their_key() {
        let bad = |f: QuotaFile| f.check().unwrap_err().key;
        assert_eq!(
            bad(QuotaFile {
                wall_time_s: Some(u64::MAX),
                ..QuotaFile::default()
            }),
            "wall_time_s"
        );
        for cost in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
            let e = QuotaFile {
                max_cost: Some(cost),
                ..QuotaFile::default()
            }
            .check()
            .unwrap_err();
            assert_eq!(e.key, "max_cost", "{cost}");
        }
        assert!(
            QuotaFile {
                max_children: Some(0),
                max_tool_calls: Some(0),
                keep_turns: Some(0),
                max_depth: Some(0),
                wall_time_s: Some(MAX_DURATION_S),
                ..QuotaFile::default()
            }
            .check()
            .is_ok(),
            "zero children, tool calls, kept turns and depth all mean something"
        );
        // Unchecked callers still get a deadline a clock can hold.
        let mut q = Quotas::default();
        q.apply(&QuotaFile {
            wall_time_s: Some(u64::MAX),
            ..QuotaFile::default()
        });
        assert_eq!(q.wall_time, Duration::from_secs(MAX_DURATION_S));
    }
}

//! Agent quotas: the `[quotas]` table, its documented defaults, and the clamp that
//! lets a repository lower them but never raise them.

use std::time::Duration;

use serde::Deserialize;

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
    /// Seconds a single model call may take before it counts as stalled.
    pub model_timeout_s: Option<u64>,
    /// Context budget in tokens; old tool outputs are compacted when it is near.
    pub context_tokens: Option<u64>,
    /// Turns kept verbatim by compaction.
    pub keep_turns: Option<u32>,
    /// Maximum depth of the agent tree.
    pub max_depth: Option<u32>,
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
    /// Per-call model timeout (a stalled stream counts).
    pub model_timeout: Duration,
    /// Context budget in tokens.
    pub context_tokens: u64,
    /// Turns kept verbatim by compaction.
    pub keep_turns: u32,
    /// Maximum agent tree depth.
    pub max_depth: u32,
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
            context_tokens: 120_000,
            keep_turns: 6,
            max_depth: 5,
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
    /// Applies the keys set in `f` (the user's own file: any value).
    pub fn apply(&mut self, f: &QuotaFile) {
        macro_rules! set {
            ($($k:ident),*) => { $(if let Some(v) = f.$k { self.$k = v; })* };
        }
        set!(
            max_turns,
            grace_turns,
            max_tokens,
            max_tool_calls,
            context_tokens,
            keep_turns,
            max_depth
        );
        if let Some(s) = f.wall_time_s {
            self.wall_time = Duration::from_secs(s);
        }
        if let Some(s) = f.model_timeout_s {
            self.model_timeout = Duration::from_secs(s);
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
            "context_tokens",
            &mut self.context_tokens,
            f.context_tokens,
            c,
        );
        lower("keep_turns", &mut self.keep_turns, f.keep_turns, c);
        lower("max_depth", &mut self.max_depth, f.max_depth, c);
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
    }
}

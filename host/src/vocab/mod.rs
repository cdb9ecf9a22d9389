//! The words every floor shares: modes, run status, exit reasons, access levels,
//! isolation, swarm strategies. This module is the bottom of the crate: it imports
//! nothing of crewbox, and the store, team, config, schedule and engine modules take
//! their vocabulary from here.

pub mod access;
pub mod agent;
pub mod branch;
pub mod model;
pub mod verdict;

pub use access::{CapSet, Capability};
pub use agent::{AgentState, AgentStats, Exceeded, FailReason};
pub use branch::{BranchArtifact, LeftOut, LeftOutReason};
pub use model::{StopReason, Usage};
pub use verdict::{CriterionResult, Verdict};

use serde::{Deserialize, Serialize};

/// The longest duration a setting may name: a year. Beyond it a value is a mistake
/// (or `u64::MAX`), and a deadline computed from it would not fit a clock.
pub const MAX_DURATION_S: u64 = 365 * 24 * 3600;

/// Declares a closed enum whose values have one stored/printed name each, with
/// `ALL`, `as_str`, `parse`, `Display` and serde by that name.
macro_rules! str_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $s:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vdoc])* #[serde(rename = $s)] $variant),+
        }

        impl $name {
            /// Every value.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The value's name as stored and printed.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }

            /// Parses a stored or typed name.
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use str_enum;

str_enum!(
    /// How a run is orchestrated, once it is decided (a run never executes `auto`; see
    /// [`ModeChoice`] for what a request may ask for).
    Mode {
        /// One agent.
        Single = "single",
        /// N agents on the same prompt.
        Swarm = "swarm",
        /// Planner → executor → reviewer.
        Crew = "crew",
        /// Every team member in parallel.
        Broadcast = "broadcast",
        /// Team members one at a time.
        Sequential = "sequential",
        /// Orchestrator plans, workers execute, orchestrator synthesises.
        Orchestrate = "orchestrate",
        /// Orchestrate in an evaluated loop.
        Reflect = "reflect",
    }
);

impl Mode {
    /// True for the modes that run a team's members.
    pub fn runs_a_team(self) -> bool {
        match self {
            Self::Broadcast | Self::Sequential | Self::Orchestrate | Self::Reflect => true,
            Self::Single | Self::Swarm | Self::Crew => false,
        }
    }
}

/// The mode a request asks for: a concrete [`Mode`], or `auto` (the dispatcher picks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ModeChoice {
    /// Let the dispatcher plugin pick.
    Auto,
    /// This mode.
    Mode(Mode),
}

impl ModeChoice {
    /// Every choice, `auto` first.
    pub fn all() -> impl Iterator<Item = ModeChoice> {
        std::iter::once(Self::Auto).chain(Mode::ALL.iter().copied().map(Self::Mode))
    }

    /// The choice's name as stored and typed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Mode(m) => m.as_str(),
        }
    }

    /// Parses `auto` or a mode name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(Self::Auto),
            other => Mode::parse(other).map(Self::Mode),
        }
    }

    /// Parses `auto` or a mode name; anything else is an error naming the choices.
    pub fn parse_named(s: &str) -> Result<Self, String> {
        Self::parse(s).ok_or_else(|| {
            let all: Vec<&str> = Self::all().map(Self::as_str).collect();
            format!(
                "unknown mode `{}` (one of: {})",
                crate::text::escape(s),
                all.join(", ")
            )
        })
    }

    /// The concrete mode, unless the dispatcher still has to pick.
    pub fn mode(self) -> Option<Mode> {
        match self {
            Self::Auto => None,
            Self::Mode(m) => Some(m),
        }
    }
}

impl From<Mode> for ModeChoice {
    fn from(mode: Mode) -> Self {
        Self::Mode(mode)
    }
}

impl std::fmt::Display for ModeChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ModeChoice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ModeChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A visitor, so the error is raised inside the deserializer, which then knows
        // where the value is (a config error names the line).
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = ModeChoice;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a mode name")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ModeChoice, E> {
                ModeChoice::parse(s).ok_or_else(|| {
                    let all: Vec<&str> = ModeChoice::all().map(ModeChoice::as_str).collect();
                    E::custom(format!("unknown mode `{s}` (one of: {})", all.join(", ")))
                })
            }
        }
        d.deserialize_str(Name)
    }
}

str_enum!(
    /// How a run ended, as reported.
    RunStatus {
        /// Still going (or interrupted and resumable).
        Running = "running",
        /// Finished with a usable result.
        Completed = "completed",
        /// Finished without one.
        Failed = "failed",
        /// Stopped by a person.
        Cancelled = "cancelled",
        /// A replay whose requests stopped matching the recording (`crewbox replay`,
        /// `kind = "replay"`).
        Diverged = "diverged",
    }
);

str_enum!(
    /// Why a run (or a loop inside it) stopped. Every non-success reason is marked as such.
    ExitReason {
        /// The work is done.
        GoalMet = "goal-met",
        /// An orchestrator assigned no worker (even after the nudge): its own answer
        /// stands and the run completes, but no worker ran.
        AnsweredDirectly = "answered-directly",
        /// The iteration limit was reached.
        MaxIterations = "max-iterations",
        /// Iterations stopped making progress.
        Stalled = "stalled",
        /// Too many consecutive failures.
        ErrorBudget = "error-budget",
        /// Stopped by a person.
        Cancelled = "cancelled",
        /// Paused; resumable.
        Paused = "paused",
        /// The run failed (agent error, budget, validation).
        Failed = "failed",
        /// A replayed request differed from the recorded one.
        Diverged = "diverged",
    }
);

impl ExitReason {
    /// Only `goal-met` and `answered-directly` are a success.
    pub fn is_success(self) -> bool {
        match self {
            Self::GoalMet | Self::AnsweredDirectly => true,
            Self::MaxIterations
            | Self::Stalled
            | Self::ErrorBudget
            | Self::Cancelled
            | Self::Paused
            | Self::Failed
            | Self::Diverged => false,
        }
    }
}

str_enum!(
    /// What an agent may do to the workspace: the one access level of roles, team
    /// members and role plugins. The tools each level grants are decided in one place,
    /// `agent::permissions`.
    #[derive(Default)]
    Access {
        /// Read tools only: no write, no exec.
        #[default]
        ReadOnly = "read-only",
        /// Read, write, exec and spawn.
        Full = "full",
    }
);

str_enum!(
    /// Where an agent that can write works.
    #[derive(Default)]
    Isolation {
        /// Its own git worktree at HEAD (read-only agents read the repository).
        #[default]
        Worktree = "worktree",
        /// Directly in the repository directory.
        None = "none",
    }
);

str_enum!(
    /// How a swarm's results are joined.
    #[derive(Default)]
    Strategy {
        /// Each completion is delivered as it arrives, once, in order.
        Live = "live",
        /// Delivered once ⌈n/2⌉ have finished, then each later one.
        Quorum = "quorum",
        /// Waits for all; groups equivalent answers with counts and a winner.
        Vote = "vote",
        /// Waits for all; one merged report.
        #[default]
        Merge = "merge",
        /// Waits for all or a timeout; stragglers in later waves.
        Batch = "batch",
    }
);

str_enum!(
    /// How one team worker's part ended, as the orchestrator and the report see it.
    WorkerStatus {
        /// It finished with a reply.
        Completed = "completed",
        /// It ended without a usable reply.
        Failed = "failed",
        /// It ran past the team's worker timeout and was stopped.
        TimedOut = "timed-out",
        /// It finished, but its branch conflicts with the run's integration branch:
        /// its work is kept on its own branch, not in the integration branch.
        MergeConflict = "merge-conflict",
    }
);

str_enum!(
    /// How a reflect score moved from one iteration to the next.
    Trend {
        /// Up by more than the noise band.
        Improving = "improving",
        /// Within the noise band.
        Stable = "stable",
        /// Down by more than the noise band.
        Degrading = "degrading",
    }
);

str_enum!(
    /// Where a mode decision came from.
    DecisionSource {
        /// The user (or a stored run) named the mode.
        Explicit = "explicit",
        /// The dispatcher picked it.
        Auto = "auto",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in ModeChoice::all() {
            assert_eq!(ModeChoice::parse(m.as_str()), Some(m));
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(serde_json::from_str::<ModeChoice>(&json).unwrap(), m);
        }
        assert_eq!(ModeChoice::parse("auto").and_then(ModeChoice::mode), None);
        assert!(serde_json::from_str::<ModeChoice>("\"sideways\"").is_err());
        for s in Strategy::ALL {
            assert_eq!(Strategy::parse(s.as_str()), Some(*s));
        }
        assert_eq!(Isolation::parse("none"), Some(Isolation::None));
        assert_eq!(
            serde_json::to_string(&WorkerStatus::TimedOut).unwrap(),
            "\"timed-out\""
        );
    }

    #[test]
    fn only_team_modes_run_a_team() {
        let team: Vec<Mode> = Mode::ALL
            .iter()
            .copied()
            .filter(|m| m.runs_a_team())
            .collect();
        assert_eq!(
            team,
            [
                Mode::Broadcast,
                Mode::Sequential,
                Mode::Orchestrate,
                Mode::Reflect
            ]
        );
    }
}

str_enum!(
    /// Why a dead letter (an agent that ended `error`) died, as a class an operator acts
    /// on: retry it as it is, give it more budget, fix a plugin, or fix the request.
    DeadClass {
        /// The model server or crewbox itself failed, or the process driving the run
        /// stopped: the same request may succeed later.
        Transient = "transient",
        /// A hard budget (turns, tokens, cost, time) ran out.
        Budget = "budget",
        /// A plugin (a validator) faulted.
        Plugin = "plugin",
        /// The request, the provider's configuration or the model's answer is wrong:
        /// retrying unchanged fails the same way.
        Usage = "usage",
    }
);

str_enum!(
    /// What became of a dead letter that is no longer one.
    DeadDisposition {
        /// Forgotten with `crewbox dead drop`; kept in history.
        Dropped = "dropped",
        /// Run again with `crewbox retry` (or the daemon's `retry_transient`).
        Retried = "retried",
    }
);

//! Orchestration modes as state machines over spawn, await and plugin calls.

pub mod crew;
pub mod dispatch;
pub mod execute;
pub mod journal;
pub mod model_access;
pub mod orchestrate;
pub mod orchestrate_mode;
pub mod plugins;
pub mod reflect_mode;
pub mod report;
pub mod run;
pub mod single;
pub mod spawn;
pub mod swarm;
pub mod team_modes;
pub mod validate;

use serde::{Deserialize, Serialize};

macro_rules! str_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $s:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// How a run is orchestrated.
    Mode {
        /// Let the dispatcher plugin pick.
        Auto = "auto",
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
    }
);

str_enum!(
    /// Why a run (or a loop inside it) stopped. Every non-success reason is marked as such.
    ExitReason {
        /// The work is done.
        GoalMet = "goal-met",
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
    }
);

impl ExitReason {
    /// Only `goal-met` is a success.
    pub fn is_success(self) -> bool {
        matches!(self, Self::GoalMet)
    }
}

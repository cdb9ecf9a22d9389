//! Agent states and the only transitions between them.

use serde::{Deserialize, Serialize};

/// Where an agent is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentState {
    /// Waiting for a slot.
    Queued,
    /// Its turn loop is running.
    Running,
    /// Finished on its own.
    Completed,
    /// Wrapped up after the soft turn limit; results kept.
    Steered,
    /// Stopped by a person or its run.
    Stopped,
    /// Failed (provider error, tool infrastructure failure).
    Error,
    /// A hard budget (turns, tokens, time, tool calls, cost) was hit.
    Aborted,
}

impl AgentState {
    /// Every state, for parsing and listings.
    pub const ALL: [AgentState; 7] = [
        Self::Queued,
        Self::Running,
        Self::Completed,
        Self::Steered,
        Self::Stopped,
        Self::Error,
        Self::Aborted,
    ];

    /// The state's lowercase name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Steered => "steered",
            Self::Stopped => "stopped",
            Self::Error => "error",
            Self::Aborted => "aborted",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True once the agent can change no more.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }

    /// True for endings whose result is usable (completed or steered).
    pub fn is_success(self) -> bool {
        matches!(self, Self::Completed | Self::Steered)
    }

    /// Whether `self → next` is allowed: queued → running | stopped | error;
    /// running → any terminal state; terminal states never change. The one rule: the
    /// store refuses every other transition with it.
    pub fn can_become(self, next: AgentState) -> bool {
        match self {
            Self::Queued => matches!(next, Self::Running | Self::Stopped | Self::Error),
            Self::Running => next.is_terminal(),
            Self::Completed | Self::Steered | Self::Stopped | Self::Error | Self::Aborted => false,
        }
    }
}

impl std::fmt::Display for AgentState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_transitions_exist() {
        use AgentState::*;
        assert!(Queued.can_become(Running));
        assert!(Running.can_become(Steered));
        assert!(!Queued.can_become(Completed));
        assert!(!Completed.can_become(Running));
        assert!(!Aborted.can_become(Error));
        for s in AgentState::ALL {
            assert_eq!(AgentState::parse(s.as_str()), Some(s));
        }
    }
}

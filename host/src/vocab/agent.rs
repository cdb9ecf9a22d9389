//! The words about one agent that every floor shares: where it is in its life
//! (and the only transitions between states), why it failed, which budget ran out,
//! and its counters.

use serde::{Deserialize, Serialize};

use super::DeadClass;

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

/// Why an agent did not end well: a closed set, stored in its `agent.state` event and
/// named at the head of its error text (so the report shows it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailReason {
    /// Stopped by a person or its run.
    Stopped,
    /// A hard budget ran out (which one is in the agent's outcome).
    Budget,
    /// The model call failed and trying it unchanged will not help (a rejected
    /// request, a bad configuration, an unreadable answer).
    Model,
    /// The model server could not be reached or kept failing (timeouts, 5xx, rate
    /// limits after every retry, an open circuit breaker): it may answer later.
    Unavailable,
    /// The process driving its run stopped before it ended.
    Interrupted,
    /// Replies kept being cut at the model's output token limit.
    Truncated,
    /// The model answered with nothing: no text, no tool call.
    EmptyReply,
    /// One model call took longer than `model_timeout_s` in all.
    ModelTimeout,
    /// The server's content filter or the model refused.
    Refused,
    /// crewbox itself failed around the agent (store, task).
    Internal,
    /// A replayed request differed from the recording (see `provider::replay`).
    Diverged,
}

impl FailReason {
    /// The kebab-case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stopped => "stopped",
            Self::Budget => "budget",
            Self::Model => "model-error",
            Self::Unavailable => "model-unavailable",
            Self::Interrupted => "interrupted",
            Self::Truncated => "truncated",
            Self::EmptyReply => "empty-reply",
            Self::ModelTimeout => "model-timeout",
            Self::Refused => "refused",
            Self::Internal => "internal",
            Self::Diverged => "diverged",
        }
    }
}

impl FailReason {
    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Stopped,
            Self::Budget,
            Self::Model,
            Self::Unavailable,
            Self::Interrupted,
            Self::Truncated,
            Self::EmptyReply,
            Self::Refused,
            Self::Internal,
            Self::ModelTimeout,
            Self::Diverged,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }

    /// The dead-letter class of an agent that failed for this reason.
    pub fn dead_class(self) -> DeadClass {
        match self {
            Self::Budget => DeadClass::Budget,
            Self::Unavailable
            | Self::ModelTimeout
            | Self::Interrupted
            | Self::Internal
            | Self::EmptyReply => DeadClass::Transient,
            Self::Model | Self::Truncated | Self::Refused | Self::Stopped | Self::Diverged => {
                DeadClass::Usage
            }
        }
    }
}

impl std::fmt::Display for FailReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which hard budget ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exceeded {
    /// Soft + grace turns used up.
    Turns,
    /// Token budget.
    Tokens,
    /// Wall time (`wall_time_s`).
    WallTime,
    /// Tool-call budget.
    ToolCalls,
    /// Cost budget.
    Cost,
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Turns => "turn limit (soft + grace) reached",
            Self::Tokens => "token budget exhausted",
            Self::WallTime => "wall-time budget exhausted",
            Self::ToolCalls => "tool-call budget exhausted",
            Self::Cost => "cost budget exhausted",
        })
    }
}

/// Token, turn and tool counters of an agent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentStats {
    /// Turns taken.
    pub turns: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Input tokens.
    pub tokens_in: u64,
    /// Output tokens.
    pub tokens_out: u64,
    /// Cost, when prices are configured.
    pub cost: Option<f64>,
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

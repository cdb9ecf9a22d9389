//! Budget accounting for one agent: pure, so every limit is unit-tested.

use crate::config::Quotas;
use crate::provider::Usage;
use crate::vocab::AgentStats;

pub use crate::provider::config::Prices;
pub use crate::vocab::Exceeded;

/// What the turn loop should do before starting a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TurnGate {
    /// Go on.
    Continue,
    /// First turn past the soft limit: tell the agent to wrap up, then go on.
    WrapUp,
    /// The hard limit is reached: stop.
    Stop,
}

/// Counts an agent's use against its quotas.
#[derive(Clone, Debug)]
pub struct Budget {
    quotas: Quotas,
    prices: Option<Prices>,
    /// Counters so far.
    pub stats: AgentStats,
}

impl Budget {
    /// A fresh budget.
    pub fn new(quotas: Quotas, prices: Option<Prices>) -> Self {
        Self {
            quotas,
            prices,
            stats: AgentStats::default(),
        }
    }

    /// The quotas in force.
    pub fn quotas(&self) -> &Quotas {
        &self.quotas
    }

    /// Called before turn `turn` (1-based).
    pub fn gate(&self, turn: u32) -> TurnGate {
        let soft = self.quotas.max_turns;
        if turn > soft.saturating_add(self.quotas.grace_turns) {
            TurnGate::Stop
        } else if Some(turn) == soft.checked_add(1) {
            TurnGate::WrapUp
        } else {
            TurnGate::Continue
        }
    }

    /// Charges one model call; returns the budget it broke, if any.
    pub fn charge_usage(&mut self, usage: Usage) -> Option<Exceeded> {
        // A model server's figures are its own: sums saturate (a reply claiming 2^64
        // tokens wrapped the budget's sum round to a few in a release build).
        self.stats.turns = self.stats.turns.saturating_add(1);
        self.stats.tokens_in = self.stats.tokens_in.saturating_add(usage.input);
        self.stats.tokens_out = self.stats.tokens_out.saturating_add(usage.output);
        if let Some(p) = self.prices {
            self.stats.cost = Some(self.stats.cost.unwrap_or(0.0) + p.cost(usage));
        }
        if self.stats.tokens_in.saturating_add(self.stats.tokens_out) > self.quotas.max_tokens {
            return Some(Exceeded::Tokens);
        }
        match (self.quotas.max_cost, self.stats.cost) {
            (Some(max), Some(cost)) if cost > max => Some(Exceeded::Cost),
            _ => None,
        }
    }

    /// Whether sending a request of about `input` tokens would break the token budget:
    /// checked before the request goes out, so an oversized prompt is never sent.
    pub fn refuses_request(&self, input: u64) -> Option<Exceeded> {
        let spent = self.stats.tokens_in.saturating_add(self.stats.tokens_out);
        (spent.saturating_add(input) > self.quotas.max_tokens).then_some(Exceeded::Tokens)
    }

    /// Charges one tool call, or refuses it when the budget is used up.
    pub fn charge_tool_call(&mut self) -> Result<(), Exceeded> {
        if self.stats.tool_calls >= self.quotas.max_tool_calls {
            return Err(Exceeded::ToolCalls);
        }
        self.stats.tool_calls += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas() -> Quotas {
        Quotas {
            max_turns: 3,
            grace_turns: 1,
            max_tokens: 100,
            max_tool_calls: 2,
            max_cost: Some(0.5),
            ..Quotas::default()
        }
    }

    #[test]
    fn turn_gates_soft_then_hard() {
        let b = Budget::new(quotas(), None);
        assert_eq!(b.gate(1), TurnGate::Continue);
        assert_eq!(b.gate(3), TurnGate::Continue);
        assert_eq!(b.gate(4), TurnGate::WrapUp);
        assert_eq!(b.gate(5), TurnGate::Stop);
    }

    #[test]
    fn a_request_over_the_token_budget_is_refused_before_it_is_sent() {
        let mut b = Budget::new(quotas(), None);
        assert_eq!(b.refuses_request(100), None);
        assert_eq!(b.refuses_request(101), Some(Exceeded::Tokens));
        b.charge_usage(Usage {
            input: 30,
            output: 20,
        });
        assert_eq!(b.refuses_request(50), None);
        assert_eq!(b.refuses_request(51), Some(Exceeded::Tokens));
    }

    /// A model server claiming 2^64 tokens breaks the budget: the sums saturate
    /// instead of overflowing (a panic in a debug build; in a release build the sum
    /// wrapped round to a few tokens, under any budget).
    #[test]
    fn a_reply_claiming_absurd_usage_breaks_the_budget() {
        let mut b = Budget::new(quotas(), None);
        assert_eq!(
            b.charge_usage(Usage {
                input: u64::MAX - 5,
                output: 10,
            }),
            Some(Exceeded::Tokens)
        );
        assert_eq!(b.stats.tokens_in, u64::MAX - 5);
        assert_eq!(
            b.charge_usage(Usage {
                input: 10,
                output: u64::MAX,
            }),
            Some(Exceeded::Tokens)
        );
        assert_eq!(
            (b.stats.tokens_in, b.stats.tokens_out),
            (u64::MAX, u64::MAX)
        );
        assert_eq!(b.refuses_request(1), Some(Exceeded::Tokens));
    }

    #[test]
    fn tokens_tool_calls_and_cost_are_enforced() {
        let mut b = Budget::new(quotas(), None);
        assert_eq!(
            b.charge_usage(Usage {
                input: 60,
                output: 40
            }),
            None
        );
        assert_eq!(
            b.charge_usage(Usage {
                input: 1,
                output: 0
            }),
            Some(Exceeded::Tokens)
        );
        assert!(b.charge_tool_call().is_ok());
        assert!(b.charge_tool_call().is_ok());
        assert_eq!(b.charge_tool_call(), Err(Exceeded::ToolCalls));
        assert_eq!(b.stats.tool_calls, 2);

        let prices = Prices {
            input_per_mtok: 100_000.0,
            output_per_mtok: 0.0,
        };
        let mut b = Budget::new(
            Quotas {
                max_tokens: u64::MAX,
                ..quotas()
            },
            Some(prices),
        );
        assert_eq!(
            b.charge_usage(Usage {
                input: 5,
                output: 0
            }),
            None
        ); // 0.5: not over
        assert_eq!(
            b.charge_usage(Usage {
                input: 1,
                output: 0
            }),
            Some(Exceeded::Cost)
        );
    }
}

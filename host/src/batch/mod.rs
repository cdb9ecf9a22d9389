//! Batching of spawns and the joins that deliver their results.
//!
//! The logic is pure and clock-free: [`Debouncer`] decides *when* a batch closes,
//! [`partition`] decides *how* it splits, [`GroupJoin`] decides *what* a group delivers
//! and when. Only [`Batcher`] (a tokio task) and [`deliver_with_retry`] touch time.

mod debounce;
mod deliver;
mod group;
mod swarm;
mod timer;

#[cfg(test)]
mod tests;

use std::fmt;

use crate::ids::AgentId;

pub use debounce::{Batch, Deadline, DebounceConfig, Debouncer, GroupBatch, SwarmBatch, partition};
pub use deliver::{Deliver, DeliveryFailed, RetryPolicy, deliver_with_retry};
pub use group::{
    Delivery, DeliveryKind, DeliveryMode, GroupJoin, GroupJoinConfig, JoinError, MemberCounts,
    WaveConfig,
};
pub use swarm::SwarmJoin;
pub use timer::{BatchError, Batcher, BatcherClosed, FinalizeHook, Finalized};

macro_rules! join_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Wraps an id chosen by the spawner (the engine names its groups).
            pub fn new(s: impl Into<String>) -> Self {
                Self(s.into())
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

join_id!(
    /// Names a fixed set of agents whose results are joined (all-or-nothing or waves).
    GroupId
);
join_id!(
    /// Names a swarm: agents on the same prompt joined by a delivery strategy.
    SwarmId
);

/// How a spawned agent's result is joined with others.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum JoinMode {
    /// Delivered on its own.
    Individual,
    /// Joined with the other members of the group (a group needs ≥ 2 members).
    Group(GroupId),
    /// Joined with the other members of the swarm (a swarm of 1 is still a swarm).
    Swarm(SwarmId),
}

/// One request to start an agent, as it enters the batcher. `P` is whatever the engine
/// needs to start it (task, role, permissions); the batcher never looks inside.
#[derive(Clone, Debug, PartialEq)]
pub struct Spawn<P = ()> {
    /// The agent to start; a second spawn with the same id in a batch merges.
    pub agent: AgentId,
    /// How its result is joined.
    pub join: JoinMode,
    /// What the engine needs to start it.
    pub payload: P,
}

impl<P> Spawn<P> {
    /// A spawn with the given join mode.
    pub fn new(agent: AgentId, join: JoinMode, payload: P) -> Self {
        Self {
            agent,
            join,
            payload,
        }
    }
}

//! The group join: a fixed set of members whose results are delivered all at once, or
//! progressively in straggler waves. Pure: the caller supplies the time and calls
//! [`GroupJoin::tick`] at [`GroupJoin::next_deadline`].

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use super::GroupId;
use crate::ids::AgentId;

/// How a group hands its results on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryMode {
    /// One delivery when every member has completed.
    #[default]
    AllOrNothing,
    /// Completed results go out in waves; the last completion flushes the rest at once.
    Progressive,
}

/// Straggler wave timing for progressive delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaveConfig {
    /// First wave, counted from the first completion: gathers the bulk of the group.
    pub first: Duration,
    /// Each later wave, counted from the previous one: carries the stragglers.
    pub every: Duration,
}

impl Default for WaveConfig {
    fn default() -> Self {
        Self {
            first: Duration::from_secs(30),
            every: Duration::from_secs(15),
        }
    }
}

/// Group join settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupJoinConfig {
    /// All-or-nothing (default) or progressive.
    pub mode: DeliveryMode,
    /// Wave timing (progressive only).
    pub waves: WaveConfig,
}

/// Exact member accounting of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemberCounts {
    /// Members in the group.
    pub total: usize,
    /// Members whose result has arrived.
    pub completed: usize,
    /// Members whose result has been handed out in a delivery.
    pub delivered: usize,
}

/// What kind of delivery this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryKind {
    /// All-or-nothing: every member's result.
    All,
    /// Progressive: wave `n` (from 1) of results completed since the last wave.
    Wave(u32),
    /// Progressive: the last results, sent as soon as the last member completes.
    Final,
}

/// Recorded as `All`, `Wave(N)` or `Final`.
impl std::fmt::Display for DeliveryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => f.write_str("All"),
            Self::Wave(n) => write!(f, "Wave({n})"),
            Self::Final => f.write_str("Final"),
        }
    }
}

impl std::str::FromStr for DeliveryKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "All" => Ok(Self::All),
            "Final" => Ok(Self::Final),
            _ => s
                .strip_prefix("Wave(")
                .and_then(|r| r.strip_suffix(')'))
                .and_then(|n| n.parse().ok())
                .map(Self::Wave)
                .ok_or_else(|| format!("not a delivery kind: `{s}`")),
        }
    }
}

impl serde::Serialize for DeliveryKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for DeliveryKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <String as serde::Deserialize>::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Results handed on by a group. Each member's result appears in exactly one delivery.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery<R> {
    /// The group.
    pub group: GroupId,
    /// All, a wave, or the final flush.
    pub kind: DeliveryKind,
    /// `(member, result)` in member order.
    pub results: Vec<(AgentId, R)>,
    /// Counts after this delivery.
    pub counts: MemberCounts,
}

/// A completion the group cannot accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// A group needs at least one member (the batcher only forms groups of ≥ 2).
    #[error("group {group} has no members")]
    NoMembers {
        /// The group.
        group: GroupId,
    },
    /// The same agent was listed twice as a member.
    #[error("group {group} lists member {agent} twice")]
    DuplicateMember {
        /// The group.
        group: GroupId,
        /// The repeated agent.
        agent: AgentId,
    },
    /// A result arrived from an agent that is not a member; it is not delivered here.
    #[error("agent {agent} is not a member of group {group}")]
    NotAMember {
        /// The group.
        group: GroupId,
        /// The stranger.
        agent: AgentId,
    },
    /// A member completed twice; the second result is refused so nothing is
    /// delivered twice.
    #[error("member {agent} of group {group} already completed")]
    AlreadyCompleted {
        /// The group.
        group: GroupId,
        /// The member.
        agent: AgentId,
    },
}

/// Where one member stands.
#[derive(Debug)]
enum Slot<R> {
    Running,
    /// Completed, result held until delivered.
    Held(R),
    Delivered,
}

/// The join state of one group.
#[derive(Debug)]
pub struct GroupJoin<R> {
    id: GroupId,
    config: GroupJoinConfig,
    /// Members in spawn order, which is also delivery order.
    members: Vec<AgentId>,
    slots: HashMap<AgentId, Slot<R>>,
    completed: usize,
    delivered: usize,
    waves_sent: u32,
    next_wave: Option<Instant>,
}

impl<R> GroupJoin<R> {
    /// A join over `members` (in delivery order).
    pub fn new(
        id: GroupId,
        members: impl IntoIterator<Item = AgentId>,
        config: GroupJoinConfig,
    ) -> Result<Self, JoinError> {
        let members: Vec<AgentId> = members.into_iter().collect();
        if members.is_empty() {
            return Err(JoinError::NoMembers { group: id });
        }
        let mut slots = HashMap::with_capacity(members.len());
        for m in &members {
            if slots.insert(m.clone(), Slot::Running).is_some() {
                return Err(JoinError::DuplicateMember {
                    group: id,
                    agent: m.clone(),
                });
            }
        }
        Ok(Self {
            id,
            config,
            members,
            slots,
            completed: 0,
            delivered: 0,
            waves_sent: 0,
            next_wave: None,
        })
    }

    /// The group.
    pub fn id(&self) -> &GroupId {
        &self.id
    }

    /// Exact member accounting.
    pub fn counts(&self) -> MemberCounts {
        MemberCounts {
            total: self.members.len(),
            completed: self.completed,
            delivered: self.delivered,
        }
    }

    /// Whether every member's result has been delivered.
    pub fn is_done(&self) -> bool {
        self.delivered == self.members.len()
    }

    /// When [`Self::tick`] should next be called (the next straggler wave), if ever.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next_wave
    }

    /// Records `agent`'s result at `now`. Returns a delivery when this completion
    /// releases one (the last member in either mode).
    pub fn complete(
        &mut self,
        agent: AgentId,
        result: R,
        now: Instant,
    ) -> Result<Option<Delivery<R>>, JoinError> {
        let Some(slot) = self.slots.get_mut(&agent) else {
            return Err(JoinError::NotAMember {
                group: self.id.clone(),
                agent,
            });
        };
        if !matches!(slot, Slot::Running) {
            return Err(JoinError::AlreadyCompleted {
                group: self.id.clone(),
                agent,
            });
        }
        *slot = Slot::Held(result);
        self.completed += 1;
        let all_in = self.completed == self.members.len();
        match self.config.mode {
            DeliveryMode::AllOrNothing => Ok(all_in.then(|| self.release(DeliveryKind::All))),
            DeliveryMode::Progressive if all_in => {
                self.next_wave = None;
                Ok(Some(self.release(DeliveryKind::Final)))
            }
            DeliveryMode::Progressive => {
                if self.completed == 1 {
                    self.next_wave = Some(now + self.config.waves.first);
                }
                Ok(None)
            }
        }
    }

    /// Fires a straggler wave if one is due at `now`. A wave with nothing new is
    /// skipped (no empty delivery) but the next wave is still scheduled.
    pub fn tick(&mut self, now: Instant) -> Option<Delivery<R>> {
        let due = self.next_wave.filter(|&at| now >= at)?;
        // Waves keep their cadence; if the caller was late, the next starts from now.
        let next = due + self.config.waves.every;
        self.next_wave = Some(if next > now {
            next
        } else {
            now + self.config.waves.every
        });
        let held = self.completed - self.delivered;
        if held == 0 {
            return None;
        }
        self.waves_sent += 1;
        Some(self.release(DeliveryKind::Wave(self.waves_sent)))
    }

    /// Hands out every held result, in member order.
    fn release(&mut self, kind: DeliveryKind) -> Delivery<R> {
        let mut results = Vec::new();
        for m in &self.members {
            // Every member has a slot (`new` made one each).
            let Some(slot) = self.slots.get_mut(m) else {
                continue;
            };
            if matches!(slot, Slot::Held(_))
                && let Slot::Held(r) = std::mem::replace(slot, Slot::Delivered)
            {
                results.push((m.clone(), r));
            }
        }
        self.delivered += results.len();
        Delivery {
            group: self.id.clone(),
            kind,
            results,
            counts: self.counts(),
        }
    }
}

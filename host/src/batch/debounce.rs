//! The trailing debounce with a max wait, and the partition of a finished batch.
//!
//! Both index their items by position in a table hashed with foldhash (seeded per
//! process): the agent and join ids are never cloned into a map, so closing a batch of
//! 10,000 spawns costs about what copying them does.

use std::hash::{BuildHasher, Hash};
use std::time::Duration;

use hashbrown::DefaultHashBuilder;
use hashbrown::hash_table::{Entry, HashTable};
use tokio::time::Instant;

use super::{GroupId, JoinMode, Spawn, SwarmId};

/// When the pending batch is to be finalised.
pub type Deadline = Instant;

/// Debounce timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebounceConfig {
    /// Quiet time after the last spawn before the batch closes (trailing edge).
    pub window: Duration,
    /// Longest a batch stays open after its first spawn, so a steady stream of spawns
    /// cannot starve finalisation.
    pub max_wait: Duration,
}

impl Default for DebounceConfig {
    fn default() -> Self {
        Self {
            window: Duration::from_millis(100),
            max_wait: Duration::from_secs(1),
        }
    }
}

/// Collects spawns until the batch is due. Pure: the caller supplies the time.
#[derive(Debug)]
pub struct Debouncer<P = ()> {
    config: DebounceConfig,
    pending: Vec<Spawn<P>>,
    /// Position of each agent in `pending` (hashed by its id), to merge duplicates in
    /// O(1) without a copy of the id.
    index: HashTable<usize>,
    hasher: DefaultHashBuilder,
    first_at: Option<Instant>,
    deadline: Option<Instant>,
}

impl<P> Debouncer<P> {
    /// An empty debouncer.
    pub fn new(config: DebounceConfig) -> Self {
        Self {
            config,
            pending: Vec::new(),
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            first_at: None,
            deadline: None,
        }
    }

    /// Adds a spawn received at `now`. A spawn for an agent already pending replaces it
    /// in place (latest join mode and payload win; the first arrival keeps its order).
    /// Returns the new deadline when it moved, `None` when it stays (max wait reached).
    pub fn push(&mut self, spawn: Spawn<P>, now: Instant) -> Option<Deadline> {
        let (pending, hasher) = (&self.pending, &self.hasher);
        let entry = self.index.entry(
            hasher.hash_one(&spawn.agent),
            |&at| pending[at].agent == spawn.agent,
            |&at| hasher.hash_one(&pending[at].agent),
        );
        match entry {
            Entry::Occupied(at) => self.pending[*at.get()] = spawn,
            Entry::Vacant(slot) => {
                slot.insert(self.pending.len());
                self.pending.push(spawn);
            }
        }
        let first = *self.first_at.get_or_insert(now);
        let deadline = (now + self.config.window).min(first + self.config.max_wait);
        if self.deadline == Some(deadline) {
            return None;
        }
        self.deadline = Some(deadline);
        Some(deadline)
    }

    /// When the pending batch is due, if anything is pending.
    pub fn deadline(&self) -> Option<Deadline> {
        self.deadline
    }

    /// Whether the pending batch should be finalised at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }

    /// Number of distinct agents pending.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Closes the pending batch and partitions it; the debouncer starts empty again.
    /// Taking `&mut self` makes finalisation non-re-entrant by construction.
    pub fn finalize(&mut self) -> Batch<P> {
        self.index.clear();
        self.first_at = None;
        self.deadline = None;
        partition(std::mem::take(&mut self.pending))
    }
}

/// A finalised batch, split by join mode. Every agent appears exactly once.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch<P = ()> {
    /// Groups with at least two members, in order of first appearance.
    pub groups: Vec<GroupBatch<P>>,
    /// Swarms (any size), in order of first appearance.
    pub swarms: Vec<SwarmBatch<P>>,
    /// Agents delivered alone, including the sole member of a one-member group (its
    /// `join` still names the group it asked for).
    pub individuals: Vec<Spawn<P>>,
}

/// The members of one group in a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupBatch<P = ()> {
    /// The group.
    pub id: GroupId,
    /// Its members, in arrival order.
    pub members: Vec<Spawn<P>>,
}

/// The members of one swarm in a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct SwarmBatch<P = ()> {
    /// The swarm.
    pub id: SwarmId,
    /// Its members, in arrival order.
    pub members: Vec<Spawn<P>>,
}

impl<P> Batch<P> {
    /// Total number of agents in the batch.
    pub fn len(&self) -> usize {
        self.groups.iter().map(|g| g.members.len()).sum::<usize>()
            + self.swarms.iter().map(|s| s.members.len()).sum::<usize>()
            + self.individuals.len()
    }

    /// Whether the batch holds no agent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fallback when finalisation fails: every agent delivered on its own, groups
    /// first, then swarms, then individuals.
    pub fn into_individuals(self) -> Self {
        let mut individuals = Vec::with_capacity(self.len());
        individuals.extend(self.groups.into_iter().flat_map(|g| g.members));
        individuals.extend(self.swarms.into_iter().flat_map(|s| s.members));
        individuals.extend(self.individuals);
        Self {
            groups: Vec::new(),
            swarms: Vec::new(),
            individuals,
        }
    }
}

/// Positions of items in a list, hashed by a key of theirs, so a key is looked up in
/// O(1) without storing a copy of it.
struct Positions {
    table: HashTable<usize>,
    hasher: DefaultHashBuilder,
}

impl Positions {
    fn new() -> Self {
        Self {
            table: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
        }
    }

    /// The position of the item whose key is `key` (`key_at` reads an item's key), or
    /// `None` after remembering `next` as its position: the caller pushes it there.
    fn find_or_insert<'a, K: Hash + Eq + ?Sized + 'a>(
        &mut self,
        key: &K,
        next: usize,
        key_at: impl Fn(usize) -> &'a K,
    ) -> Option<usize> {
        let hasher = &self.hasher;
        let entry = self.table.entry(
            hasher.hash_one(key),
            |&at| *key_at(at) == *key,
            |&at| hasher.hash_one(key_at(at)),
        );
        match entry {
            Entry::Occupied(at) => Some(*at.get()),
            Entry::Vacant(slot) => {
                slot.insert(next);
                None
            }
        }
    }
}

/// Splits spawns by join mode: a group needs ≥ 2 members (a lone member becomes
/// individual), a swarm needs ≥ 1. Spawns must already be free of duplicate agents.
pub fn partition<P>(spawns: Vec<Spawn<P>>) -> Batch<P> {
    let mut groups: Vec<GroupBatch<P>> = Vec::new();
    let mut swarms: Vec<SwarmBatch<P>> = Vec::new();
    let mut individuals = Vec::new();
    let (mut group_at, mut swarm_at) = (Positions::new(), Positions::new());
    for spawn in spawns {
        match &spawn.join {
            JoinMode::Individual => individuals.push(spawn),
            JoinMode::Group(id) => {
                match group_at.find_or_insert(id, groups.len(), |at| &groups[at].id) {
                    Some(at) => groups[at].members.push(spawn),
                    None => groups.push(GroupBatch {
                        id: id.clone(),
                        members: vec![spawn],
                    }),
                }
            }
            JoinMode::Swarm(id) => {
                match swarm_at.find_or_insert(id, swarms.len(), |at| &swarms[at].id) {
                    Some(at) => swarms[at].members.push(spawn),
                    None => swarms.push(SwarmBatch {
                        id: id.clone(),
                        members: vec![spawn],
                    }),
                }
            }
        }
    }
    // A lone member of a group goes out alone, after the individuals, in group order.
    let mut kept = Vec::with_capacity(groups.len());
    for group in groups {
        if group.members.len() >= 2 {
            kept.push(group);
        } else {
            individuals.extend(group.members);
        }
    }
    Batch {
        groups: kept,
        swarms,
        individuals,
    }
}

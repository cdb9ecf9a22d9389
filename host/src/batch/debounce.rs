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

/// Most spawns a debouncer keeps room for after a batch closes.
pub const KEPT_ROOM: usize = 16_384;

/// Collects spawns until the batch is due. Pure: the caller supplies the time.
#[derive(Debug)]
pub struct Debouncer<P = ()> {
    config: DebounceConfig,
    pending: Vec<Spawn<P>>,
    /// Position of each agent in `pending` with the hash of its id, to merge duplicates
    /// in O(1) without a copy of the id (the hash is kept so the table grows without
    /// hashing every id again).
    index: HashTable<(u64, usize)>,
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
        let pending = &self.pending;
        let hash = self.hasher.hash_one(&spawn.agent);
        let entry = self.index.entry(
            hash,
            |&(h, at)| h == hash && pending[at].agent == spawn.agent,
            |&(h, _)| h,
        );
        match entry {
            Entry::Occupied(at) => self.pending[at.get().1] = spawn,
            Entry::Vacant(slot) => {
                slot.insert((hash, self.pending.len()));
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

    /// Closes the pending batch and partitions it; the debouncer starts empty again,
    /// with room for a batch as large as this one (up to [`KEPT_ROOM`] spawns): one
    /// debouncer serves a batcher for its life, and growing the list and its index
    /// spawn by spawn cost as much as closing the batch. Taking `&mut self` makes
    /// finalisation non-re-entrant by construction.
    pub fn finalize(&mut self) -> Batch<P> {
        self.index.clear();
        self.first_at = None;
        self.deadline = None;
        let room = self.pending.len().min(KEPT_ROOM);
        partition(std::mem::replace(
            &mut self.pending,
            Vec::with_capacity(room),
        ))
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
/// O(1) without storing a copy of it (each entry keeps its key's hash, so the table
/// grows without hashing every key again).
struct Positions {
    table: HashTable<(u64, usize)>,
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
    /// `None` after remembering `next` as its position: the caller puts it there.
    fn find_or_insert<'a, K: Hash + Eq + ?Sized + 'a>(
        &mut self,
        key: &K,
        next: usize,
        key_at: impl Fn(usize) -> &'a K,
    ) -> Option<usize> {
        let hash = self.hasher.hash_one(key);
        let entry = self.table.entry(
            hash,
            |&(h, at)| h == hash && *key_at(at) == *key,
            |&(h, _)| h,
        );
        match entry {
            Entry::Occupied(at) => Some(at.get().1),
            Entry::Vacant(slot) => {
                slot.insert((hash, next));
                None
            }
        }
    }
}

/// The groups (or swarms) of a batch as [`partition`]'s first pass finds them: each
/// one's first member (whose id names it) and how many members it has.
struct Found {
    at: Positions,
    first: Vec<usize>,
    len: Vec<usize>,
}

impl Found {
    fn new() -> Self {
        Self {
            at: Positions::new(),
            first: Vec::new(),
            len: Vec::new(),
        }
    }

    /// Counts spawn `i` as a member of `id` (`id_of` reads the id a spawn joins);
    /// returns the index of `id` in order of first appearance.
    fn count<'a, K: Hash + Eq + ?Sized + 'a>(
        &mut self,
        i: usize,
        id: &K,
        id_of: impl Fn(usize) -> &'a K,
    ) -> usize {
        let first = &self.first;
        let found = self.at.find_or_insert(id, first.len(), |f| id_of(first[f]));
        let at = found.unwrap_or_else(|| {
            self.first.push(i);
            self.len.push(0);
            self.first.len() - 1
        });
        self.len[at] += 1;
        at
    }
}

/// Splits spawns by join mode: a group needs ≥ 2 members (a lone member becomes
/// individual), a swarm needs ≥ 1. Spawns must already be free of duplicate agents.
///
/// Two passes: the first finds each spawn's group or swarm and counts the members, the
/// second moves every spawn once into a list of its final size (growing each list as
/// members came cost more than the rest of the work).
pub fn partition<P>(spawns: Vec<Spawn<P>>) -> Batch<P> {
    /// Where a spawn goes.
    #[derive(Clone, Copy)]
    enum To {
        Alone,
        Group(usize),
        Swarm(usize),
    }
    let (mut found_groups, mut found_swarms) = (Found::new(), Found::new());
    let mut alone = 0;
    let to: Vec<To> = spawns
        .iter()
        .enumerate()
        .map(|(i, spawn)| match &spawn.join {
            JoinMode::Individual => {
                alone += 1;
                To::Alone
            }
            JoinMode::Group(id) => {
                To::Group(found_groups.count(i, id, |f| match &spawns[f].join {
                    JoinMode::Group(first) => first,
                    _ => id,
                }))
            }
            JoinMode::Swarm(id) => {
                To::Swarm(found_swarms.count(i, id, |f| match &spawns[f].join {
                    JoinMode::Swarm(first) => first,
                    _ => id,
                }))
            }
        })
        .collect();
    let Found {
        first: group_first,
        len: group_len,
        ..
    } = found_groups;
    let Found {
        first: swarm_first,
        len: swarm_len,
        ..
    } = found_swarms;
    // A lone member of a group goes out alone, after the individuals, in group order.
    let lone = group_len.iter().filter(|n| **n < 2).count();
    let mut groups: Vec<GroupBatch<P>> = Vec::with_capacity(group_len.len() - lone);
    // A group's place among the kept ones, or among the lone members.
    let mut group_slot = Vec::with_capacity(group_len.len());
    let mut lone_members: Vec<Option<Spawn<P>>> = Vec::with_capacity(lone);
    for (g, &n) in group_len.iter().enumerate() {
        let JoinMode::Group(id) = &spawns[group_first[g]].join else {
            unreachable!("a group's first member joins it")
        };
        if n >= 2 {
            group_slot.push(groups.len());
            groups.push(GroupBatch {
                id: id.clone(),
                members: Vec::with_capacity(n),
            });
        } else {
            group_slot.push(lone_members.len());
            lone_members.push(None);
        }
    }
    let mut swarms: Vec<SwarmBatch<P>> = swarm_len
        .iter()
        .enumerate()
        .map(|(w, &n)| {
            let JoinMode::Swarm(id) = &spawns[swarm_first[w]].join else {
                unreachable!("a swarm's first member joins it")
            };
            SwarmBatch {
                id: id.clone(),
                members: Vec::with_capacity(n),
            }
        })
        .collect();
    let mut individuals = Vec::with_capacity(alone + lone);
    for (spawn, to) in spawns.into_iter().zip(to) {
        match to {
            To::Alone => individuals.push(spawn),
            To::Group(g) if group_len[g] >= 2 => groups[group_slot[g]].members.push(spawn),
            To::Group(g) => lone_members[group_slot[g]] = Some(spawn),
            To::Swarm(w) => swarms[w].members.push(spawn),
        }
    }
    individuals.extend(lone_members.into_iter().flatten());
    Batch {
        groups,
        swarms,
        individuals,
    }
}

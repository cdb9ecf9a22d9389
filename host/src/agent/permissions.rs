//! Agent permissions: which tool capabilities an agent holds and how they narrow down
//! the agent tree.
//!
//! The rules, enforced here and nowhere else:
//! - a root agent holds exactly what it was configured with;
//! - a child holds `requested ∩ parent's effective set`, minus `spawn`. Because the
//!   parent's set was itself narrowed the same way, a grandchild can never hold more than
//!   any of its ancestors, whatever it asks for;
//! - `spawn` is never inherited: children never hold it, so only agents the engine
//!   creates as roots can start children through the `spawn_agent` tool;
//! - the root is at depth 0, its children at depth 1, and so on; creating an agent
//!   deeper than the limit (default [`DEFAULT_MAX_DEPTH`]) fails with
//!   [`PermissionError::TooDeep`].

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::vocab::Access;

use crate::tool::Capability;

/// The deepest an agent may sit in the tree unless configured otherwise (root = 0).
pub const DEFAULT_MAX_DEPTH: u32 = 5;

/// Every capability, in the order sets list them.
const ALL: [Capability; 5] = [
    Capability::Read,
    Capability::Write,
    Capability::Exec,
    Capability::Spawn,
    Capability::Mcp,
];

/// A set of capabilities (a 5-bit set; serialises as a list of names, e.g. `["read"]`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CapSet(u8);

impl CapSet {
    /// No capability at all.
    pub const EMPTY: CapSet = CapSet(0);

    const fn bit(cap: Capability) -> u8 {
        match cap {
            Capability::Read => 1,
            Capability::Write => 2,
            Capability::Exec => 4,
            Capability::Spawn => 8,
            Capability::Mcp => 16,
        }
    }

    /// `{read}`: no write and no exec, since a shell is not read-only.
    pub const fn read_only() -> CapSet {
        CapSet(Self::bit(Capability::Read))
    }

    /// `{read, write, exec, spawn, mcp}`.
    pub const fn full() -> CapSet {
        CapSet(0b1_1111)
    }

    /// The set holding exactly `caps`.
    pub fn of(caps: &[Capability]) -> CapSet {
        caps.iter().copied().collect()
    }

    /// Whether `cap` is in the set.
    pub const fn contains(self, cap: Capability) -> bool {
        self.0 & Self::bit(cap) != 0
    }

    /// The set plus `cap`.
    #[must_use]
    pub const fn with(self, cap: Capability) -> CapSet {
        CapSet(self.0 | Self::bit(cap))
    }

    /// The set minus `cap`.
    #[must_use]
    pub const fn without(self, cap: Capability) -> CapSet {
        CapSet(self.0 & !Self::bit(cap))
    }

    /// Capabilities in both sets.
    #[must_use]
    pub const fn intersection(self, other: CapSet) -> CapSet {
        CapSet(self.0 & other.0)
    }

    /// Whether the set holds nothing.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The capabilities in the set, in a fixed order (read, write, exec, spawn, mcp).
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        ALL.into_iter().filter(move |c| self.contains(*c))
    }
}

impl FromIterator<Capability> for CapSet {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        iter.into_iter().fold(CapSet::EMPTY, CapSet::with)
    }
}

impl std::ops::BitAnd for CapSet {
    type Output = CapSet;
    fn bitand(self, rhs: CapSet) -> CapSet {
        self.intersection(rhs)
    }
}

impl fmt::Debug for CapSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl fmt::Display for CapSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, cap) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(cap_name(cap))?;
        }
        f.write_str("}")
    }
}

/// The lowercase name a capability serialises as.
fn cap_name(cap: Capability) -> &'static str {
    match cap {
        Capability::Read => "read",
        Capability::Write => "write",
        Capability::Exec => "exec",
        Capability::Spawn => "spawn",
        Capability::Mcp => "mcp",
    }
}

impl Serialize for CapSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.iter().count()))?;
        for cap in self.iter() {
            seq.serialize_element(&cap)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for CapSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct CapSetVisitor;
        impl<'de> Visitor<'de> for CapSetVisitor {
            type Value = CapSet;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of capabilities (read, write, exec, spawn, mcp)")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CapSet, A::Error> {
                let mut set = CapSet::EMPTY;
                while let Some(cap) = seq.next_element::<Capability>()? {
                    set = set.with(cap);
                }
                Ok(set)
            }
        }
        deserializer.deserialize_seq(CapSetVisitor)
    }
}

/// The tools an access level grants — the one place access becomes capabilities:
/// read-only is [`CapSet::read_only`], full is [`CapSet::full`].
impl From<Access> for CapSet {
    fn from(access: Access) -> CapSet {
        match access {
            Access::ReadOnly => CapSet::read_only(),
            Access::Full => CapSet::full(),
        }
    }
}

/// Why an agent could not be given permissions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PermissionError {
    /// The child would sit deeper in the agent tree than allowed; the spawn is refused.
    #[error("agent tree too deep: a child at depth {depth} exceeds the limit of {max_depth}")]
    TooDeep {
        /// The depth the child would have had.
        depth: u32,
        /// The configured limit.
        max_depth: u32,
    },
}

/// An agent's effective capabilities and its depth in the agent tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permissions {
    /// What the agent may do (already narrowed by every ancestor).
    pub caps: CapSet,
    /// 0 for an agent the engine started, parent's depth + 1 for a child.
    pub depth: u32,
}

impl Permissions {
    /// A root agent's permissions: exactly what was requested, at depth 0.
    pub fn root(requested: CapSet) -> Permissions {
        Permissions {
            caps: requested,
            depth: 0,
        }
    }

    /// A child's permissions: `requested ∩ self.caps` without `spawn`, one level deeper;
    /// refused when that level exceeds `max_depth`.
    pub fn child(&self, requested: CapSet, max_depth: u32) -> Result<Permissions, PermissionError> {
        let depth = self.depth.saturating_add(1);
        if depth > max_depth {
            return Err(PermissionError::TooDeep { depth, max_depth });
        }
        Ok(Permissions {
            caps: requested.intersection(self.caps).without(Capability::Spawn),
            depth,
        })
    }

    /// Whether the agent holds `cap`.
    pub const fn allows(&self, cap: Capability) -> bool {
        self.caps.contains(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Capability::*;

    #[test]
    fn named_levels() {
        assert_eq!(CapSet::read_only(), CapSet::of(&[Read]));
        assert!(
            !CapSet::read_only().contains(Exec),
            "a shell is not read-only"
        );
        assert_eq!(CapSet::full(), CapSet::of(&[Read, Write, Exec, Spawn, Mcp]));
        assert_eq!(CapSet::from(Access::ReadOnly), CapSet::read_only());
        assert_eq!(CapSet::from(Access::Full), CapSet::full());
        let access: Access = serde_json::from_str("\"read-only\"").unwrap();
        assert_eq!(access, Access::ReadOnly);
        assert_eq!(serde_json::to_string(&Access::Full).unwrap(), "\"full\"");
    }

    #[test]
    fn serialises_as_names() {
        let set = CapSet::of(&[Exec, Read]);
        assert_eq!(serde_json::to_string(&set).unwrap(), r#"["read","exec"]"#);
        let back: CapSet = serde_json::from_str(r#"["exec","read","exec"]"#).unwrap();
        assert_eq!(back, set);
        assert!(serde_json::from_str::<CapSet>(r#"["root"]"#).is_err());
        assert_eq!(serde_json::to_string(&CapSet::EMPTY).unwrap(), "[]");
        assert_eq!(set.to_string(), "{read, exec}");
    }

    #[test]
    fn set_operations() {
        let rw = CapSet::of(&[Read, Write]);
        assert_eq!(rw & CapSet::of(&[Write, Exec]), CapSet::of(&[Write]));
        assert_eq!(rw.without(Write), CapSet::read_only());
        assert!(CapSet::EMPTY.is_empty());
        assert_eq!(
            CapSet::full().iter().collect::<Vec<_>>(),
            vec![Read, Write, Exec, Spawn, Mcp]
        );
    }

    #[test]
    fn child_is_intersection_without_spawn() {
        let root = Permissions::root(CapSet::full());
        assert!(root.allows(Spawn), "a root keeps what it was given");
        let child = root.child(CapSet::full(), DEFAULT_MAX_DEPTH).unwrap();
        assert_eq!(child.caps, CapSet::of(&[Read, Write, Exec, Mcp]));
        assert_eq!(child.depth, 1);
        let narrow = root
            .child(CapSet::of(&[Read, Spawn]), DEFAULT_MAX_DEPTH)
            .unwrap();
        assert_eq!(narrow.caps, CapSet::read_only());
    }

    #[test]
    fn grandchild_of_read_only_cannot_regain_write_or_exec() {
        let parent = Permissions::root(CapSet::read_only().with(Spawn));
        let child = parent.child(CapSet::full(), DEFAULT_MAX_DEPTH).unwrap();
        assert_eq!(child.caps, CapSet::read_only());
        let grandchild = child.child(CapSet::full(), DEFAULT_MAX_DEPTH).unwrap();
        assert_eq!(grandchild.caps, CapSet::read_only());
        assert!(!grandchild.allows(Write) && !grandchild.allows(Exec) && !grandchild.allows(Spawn));
        assert_eq!(grandchild.depth, 2);
    }

    #[test]
    fn depth_limit() {
        let mut p = Permissions::root(CapSet::full());
        for expected in 1..=DEFAULT_MAX_DEPTH {
            p = p.child(CapSet::full(), DEFAULT_MAX_DEPTH).unwrap();
            assert_eq!(p.depth, expected);
        }
        assert_eq!(
            p.child(CapSet::full(), DEFAULT_MAX_DEPTH),
            Err(PermissionError::TooDeep {
                depth: DEFAULT_MAX_DEPTH + 1,
                max_depth: DEFAULT_MAX_DEPTH
            })
        );
        assert!(
            Permissions::root(CapSet::full())
                .child(CapSet::full(), 0)
                .is_err()
        );
    }
}

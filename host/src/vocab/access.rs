//! What an agent may do: the capabilities its tools need and sets of them. The
//! rules that narrow them down the agent tree live in `agent/permissions.rs`.

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::Access;

/// What a tool may do. Permissions are sets of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    /// Read files in the workspace.
    Read,
    /// Create or change files in the workspace.
    Write,
    /// Run commands (a shell is never read-only).
    Exec,
    /// Start child agents.
    Spawn,
    /// Call tools of the MCP servers the agent was granted (`full` holds it; a
    /// read-only agent reaches only servers the user marked `read_only = true`).
    Mcp,
}

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

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

use serde::{Deserialize, Serialize};

pub use crate::vocab::{Access, CapSet, Capability};

/// The deepest an agent may sit in the tree unless configured otherwise (root = 0).
pub const DEFAULT_MAX_DEPTH: u32 = 5;

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

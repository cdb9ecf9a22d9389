//! Identifier newtypes. Ids are time-ordered (UUID v7) so they sort by creation.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A new, unique, time-ordered id.
            pub fn new() -> Self {
                Self(format!(concat!($prefix, "-{}"), uuid::Uuid::now_v7().simple()))
            }

            /// Wraps an existing id (as read from the store or the command line).
            pub fn from_string(s: impl Into<String>) -> Self {
                Self(s.into())
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id_type!(
    /// Identifies one run (one `crewbox run`, scheduled fire or resumed run).
    RunId,
    "r"
);
id_type!(
    /// Identifies one agent within a run.
    AgentId,
    "a"
);

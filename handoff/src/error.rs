//! Why a handoff was rejected, always with the field path that caused it.

use std::fmt;

/// A rejected handoff. Every variant names the offending field path (`findings[3]`,
/// `artifacts[0].url`, `(root)`) so the message can be sent back to the agent as a fix
/// prompt without further context.
#[derive(Clone, Debug, PartialEq)]
pub enum HandoffError {
    /// The input exceeds [`crate::Limits::MAX_INPUT_BYTES`]; nothing was parsed.
    InputTooLarge {
        /// Size of the input in bytes.
        bytes: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The reply holds neither a fenced JSON block nor a whole-reply JSON object.
    NoJson,
    /// The chosen text is not valid JSON.
    Syntax {
        /// 1-based line of the error inside the JSON text.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// serde_json's description of the problem.
        message: String,
    },
    /// Containers nest deeper than [`crate::Limits::MAX_DEPTH`].
    TooDeep {
        /// Path of the first container past the limit.
        path: String,
        /// The depth limit.
        limit: usize,
    },
    /// The document holds more object keys than [`crate::Limits::MAX_KEYS`] in total.
    TooManyKeys {
        /// Path of the first key past the limit.
        path: String,
        /// The key limit.
        limit: usize,
    },
    /// A required field is absent (or `null`).
    Missing {
        /// Path of the missing field.
        path: String,
    },
    /// A field has the wrong JSON type.
    WrongType {
        /// Path of the field.
        path: String,
        /// What was expected, e.g. "a string".
        expected: &'static str,
        /// What was found, e.g. "a number".
        found: &'static str,
    },
    /// A string is longer than its per-field limit (counted in characters).
    TooLong {
        /// Path of the field.
        path: String,
        /// Its length in characters.
        chars: usize,
        /// The limit in characters.
        limit: usize,
    },
    /// A string that must say something is empty or only whitespace.
    Empty {
        /// Path of the field.
        path: String,
    },
    /// A list has too few or too many entries.
    Count {
        /// Path of the list.
        path: String,
        /// How many entries it has.
        count: usize,
        /// Fewest entries allowed.
        min: usize,
        /// Most entries allowed.
        max: usize,
    },
    /// A number lies outside its allowed range.
    OutOfRange {
        /// Path of the field.
        path: String,
        /// The value found.
        value: f64,
        /// Smallest allowed value.
        min: f64,
        /// Largest allowed value.
        max: f64,
    },
    /// A value has the right type but is not acceptable (unknown status, malformed url,
    /// artifact of no recognisable shape…).
    Invalid {
        /// Path of the field.
        path: String,
        /// Why it was refused.
        reason: String,
    },
}

impl HandoffError {
    /// The field path the error refers to, if it refers to one.
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::InputTooLarge { .. } | Self::NoJson | Self::Syntax { .. } => None,
            Self::TooDeep { path, .. }
            | Self::TooManyKeys { path, .. }
            | Self::Missing { path }
            | Self::WrongType { path, .. }
            | Self::TooLong { path, .. }
            | Self::Empty { path }
            | Self::Count { path, .. }
            | Self::OutOfRange { path, .. }
            | Self::Invalid { path, .. } => Some(path),
        }
    }
}

impl fmt::Display for HandoffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InputTooLarge { bytes, limit } => {
                write!(f, "input is {bytes} bytes, more than the {limit}-byte limit")
            }
            Self::NoJson => f.write_str(
                "no handoff found: expected a fenced ```json block or a reply that is one JSON object",
            ),
            Self::Syntax { line, column, message } => {
                write!(f, "invalid JSON at line {line}, column {column}: {message}")
            }
            Self::TooDeep { path, limit } => write!(f, "depth exceeds {limit} at {path}"),
            Self::TooManyKeys { path, limit } => {
                write!(f, "more than {limit} object keys in total (at {path})")
            }
            Self::Missing { path } => write!(f, "{path}: required field is missing"),
            Self::WrongType { path, expected, found } => {
                write!(f, "{path}: expected {expected}, found {found}")
            }
            Self::TooLong { path, chars, limit } => write!(
                f,
                "{path}: string longer than {limit} characters ({chars})"
            ),
            Self::Empty { path } => write!(f, "{path}: must not be empty"),
            Self::Count { path, count, min, max } => write!(
                f,
                "{path}: {count} entries, expected between {min} and {max}"
            ),
            Self::OutOfRange { path, value, min, max } => {
                write!(f, "{path}: {value} is outside {min}..={max}")
            }
            Self::Invalid { path, reason } => write!(f, "{path}: {reason}"),
        }
    }
}

impl std::error::Error for HandoffError {}

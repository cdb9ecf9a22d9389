//! The handoff v2 types and their canonical JSON form.

use std::fmt;

use serde::Serialize;

/// A validated handoff v2 object. Build it with [`crate::parse`] or
/// [`crate::parse_json`]; serialising it with serde gives the canonical v2 JSON, which
/// parses back to an equal value.
///
/// Deliberately not `Deserialize`: the only way in is the bounded parser.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Handoff {
    /// How the work ended.
    pub status: HandoffStatus,
    /// What was done, for a person (1..=10,000 characters).
    pub summary: String,
    /// What was found or decided (1..=100 entries).
    pub findings: Vec<String>,
    /// Suggested follow-up work (0..=100 entries).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub next_steps: Vec<String>,
    /// The agent's own confidence in the result, 0..=1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Files the work touched, relative to the workspace (0..=200 entries).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Typed results: files, branches, links and notes (0..=50 entries).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
}

/// How the work behind a handoff ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoffStatus {
    /// Everything asked for was done.
    Success,
    /// Some of it was done; `findings` / `next_steps` say what is left.
    Partial,
    /// Nothing usable was produced.
    Failed,
}

impl HandoffStatus {
    /// The canonical v2 spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Partial => "partial",
            Self::Failed => "failed",
        }
    }
}

impl fmt::Display for HandoffStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One typed result of the work. Serialised with a `type` tag
/// (`{"type": "file", "path": …}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Artifact {
    /// A file in the workspace.
    File {
        /// Path, usually relative to the workspace root (≤ 4,096 characters).
        path: String,
        /// Display title (≤ 200 characters).
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Media type, e.g. `text/markdown` (≤ 255 characters).
        #[serde(skip_serializing_if = "Option::is_none")]
        mime: Option<String>,
    },
    /// A git branch holding the work.
    Branch {
        /// Branch name (≤ 256 characters, no whitespace).
        branch: String,
        /// Branch it was cut from.
        #[serde(skip_serializing_if = "Option::is_none")]
        base: Option<String>,
        /// Commits on it (≤ 100, each ≤ 256 characters).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        commits: Vec<String>,
    },
    /// A link: pull request, issue, document.
    Url {
        /// Absolute URL with a scheme (≤ 2,048 characters).
        url: String,
        /// Display title (≤ 200 characters).
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Longer description.
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// A named piece of text.
    Note {
        /// Short name (1..=200 characters).
        title: String,
        /// The text.
        value: String,
    },
}

impl Artifact {
    /// The `type` tag of this artifact.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::File { .. } => "file",
            Self::Branch { .. } => "branch",
            Self::Url { .. } => "url",
            Self::Note { .. } => "note",
        }
    }
}

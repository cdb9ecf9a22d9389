//! Handoff v2: the typed, bounded result an agent hands back (see DESIGN §5).
//!
//! An agent ends its reply with a fenced JSON block; [`parse`] picks the last one
//! ([`extract`]), reads it under hard [`Limits`] without ever building an unbounded
//! tree, coerces legacy artifact shapes into the four v2 types and validates the result
//! under the same limits. Every rejection is a [`HandoffError`] naming the field path.
//!
//! ```
//! let reply = "Done.\n```json\n{\"status\":\"success\",\"summary\":\"Fixed it\",\
//!              \"findings\":[\"off-by-one in parser\"],\
//!              \"artifacts\":[{\"branch\":\"crewbox/a-1\"}]}\n```\n";
//! let h = crewbox_handoff::parse(reply).unwrap();
//! assert_eq!(h.status, crewbox_handoff::HandoffStatus::Success);
//! assert_eq!(crewbox_handoff::parse_json(&h.to_json()).unwrap(), h);
//! ```
//!
//! The crate is also built for `wasm32-wasip2` (the handoff-schema validator plugin), so
//! it uses no filesystem, threads or heavy dependencies.

mod bounded;
mod convert;
mod error;
mod extract;
mod model;

pub use error::HandoffError;
pub use extract::extract;
pub use model::{Artifact, Handoff, HandoffStatus};

/// The hard bounds every handoff is read under. Lengths are in characters (Unicode
/// scalar values) unless the name says bytes.
#[derive(Clone, Copy, Debug)]
pub struct Limits;

impl Limits {
    /// Largest reply or JSON text accepted, in bytes.
    pub const MAX_INPUT_BYTES: usize = 1024 * 1024;
    /// Deepest nesting of objects and arrays (the root object is depth 1).
    pub const MAX_DEPTH: usize = 20;
    /// Most object keys in the whole document.
    pub const MAX_KEYS: usize = 1_000;
    /// Longest string kept; longer strings (and keys) are truncated, not rejected.
    pub const MAX_STRING_CHARS: usize = 50_000;
    /// Longest `summary`; longer is rejected.
    pub const MAX_SUMMARY_CHARS: usize = 10_000;
    /// Most `findings` (at least one is required).
    pub const MAX_FINDINGS: usize = 100;
    /// Most `next_steps`.
    pub const MAX_NEXT_STEPS: usize = 100;
    /// Most `files`.
    pub const MAX_FILES: usize = 200;
    /// Most `artifacts`.
    pub const MAX_ARTIFACTS: usize = 50;
    /// Longest file path (artifacts and `files`).
    pub const MAX_PATH_CHARS: usize = 4_096;
    /// Longest URL.
    pub const MAX_URL_CHARS: usize = 2_048;
    /// Longest artifact title.
    pub const MAX_TITLE_CHARS: usize = 200;
    /// Longest branch name (also `base`).
    pub const MAX_BRANCH_CHARS: usize = 256;
    /// Most commits on a branch artifact.
    pub const MAX_COMMITS: usize = 100;
    /// Longest commit entry (a hash, optionally with its subject).
    pub const MAX_COMMIT_CHARS: usize = 256;
    /// Longest media type.
    pub const MAX_MIME_CHARS: usize = 255;
}

/// Extracts the handoff JSON from an agent reply ([`extract`]) and parses it
/// ([`parse_json`]).
pub fn parse(reply: &str) -> Result<Handoff, HandoffError> {
    if reply.len() > Limits::MAX_INPUT_BYTES {
        return Err(HandoffError::InputTooLarge {
            bytes: reply.len(),
            limit: Limits::MAX_INPUT_BYTES,
        });
    }
    parse_json(extract(reply).ok_or(HandoffError::NoJson)?)
}

/// Parses and validates one handoff JSON text under [`Limits`].
pub fn parse_json(json: &str) -> Result<Handoff, HandoffError> {
    let handoff = convert::handoff(&bounded::read(json)?)?;
    // Coercions add a few bytes per artifact (`"type":"note"` …), so an input just
    // under the limit could yield a canonical form just over it, which would then not
    // parse back. Refuse those, so every accepted handoff round-trips.
    let bytes = handoff.canonical_len();
    if bytes > Limits::MAX_INPUT_BYTES {
        return Err(HandoffError::CanonicalTooLarge {
            bytes,
            limit: Limits::MAX_INPUT_BYTES,
        });
    }
    Ok(handoff)
}

impl Handoff {
    /// The canonical v2 JSON text; [`parse_json`] reads it back to an equal value.
    pub fn to_json(&self) -> String {
        // Only string keys and finite numbers: serialisation cannot fail, so the empty
        // fallback is never seen.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Length in bytes of [`Self::to_json`], counted without building the string.
    fn canonical_len(&self) -> usize {
        struct Count(usize);
        impl std::io::Write for Count {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        // It cannot fail (see `to_json`); if it did, the size counts as over any cap.
        match serde_json::to_writer(&mut count, self) {
            Ok(()) => count.0,
            Err(_) => usize::MAX,
        }
    }
}

#[cfg(test)]
mod tests;

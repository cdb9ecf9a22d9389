//! Reading the paths a team file names (charters, validator components): anywhere for
//! the user's own teams, beneath the repository root for a repository's, always
//! bounded and regular files only.

use std::path::{Path, PathBuf};

use super::limits::MAX_CHARTER_CHARS;
use crate::trust::read::{Confined, MAX_FILE_BYTES, ReadError, cap_chars, read_bounded};

/// Where the paths a team file names are read from.
#[derive(Clone, Copy, Debug)]
pub enum TeamFiles<'a> {
    /// The user's own (or built-in) teams: anywhere, bounded, regular files only.
    Anywhere,
    /// A repository's teams: beneath its root, bounded, regular files only.
    Confined(&'a Confined),
}

impl TeamFiles<'_> {
    /// `rel` (relative to the team file's directory) as a path the reader accepts.
    fn locate(&self, team_file: &Path, rel: &Path) -> Result<PathBuf, ReadError> {
        if rel.is_absolute() {
            return Err(ReadError::Absolute {
                path: rel.to_owned(),
            });
        }
        let dir = team_file.parent().unwrap_or(Path::new(""));
        match self {
            Self::Anywhere => Ok(dir.join(rel)),
            Self::Confined(c) => dir
                .strip_prefix(c.root())
                .map(|d| d.join(rel))
                .map_err(|_| ReadError::Escapes {
                    path: rel.to_owned(),
                }),
        }
    }

    /// Reads a charter: bounded, then cut to [`MAX_CHARTER_CHARS`]; true when cut.
    pub(super) fn read_charter(
        &self,
        team_file: &Path,
        rel: &Path,
    ) -> Result<(String, bool), ReadError> {
        let at = self.locate(team_file, rel)?;
        let bounded = match self {
            Self::Anywhere => read_bounded(&at, MAX_FILE_BYTES),
            Self::Confined(c) => c.read(&at, MAX_FILE_BYTES),
        }
        .map_err(|e| relabel(e, rel))?;
        let (mut text, cut) = bounded.into_text_cut(rel)?;
        let capped = cap_chars(&mut text, MAX_CHARTER_CHARS);
        if cut && !capped {
            text.push_str("\n[truncated]");
        }
        Ok((text, cut || capped))
    }

    /// A validator entry (`NAME[=CRITERION]`): names pass; a path of a repository team
    /// (whatever its suffix) must be a file inside the repository and becomes its
    /// canonical path (relative paths are relative to the repository root, as on the
    /// command line).
    pub(super) fn validator(&self, entry: &str) -> Result<String, ReadError> {
        let (name, criterion) = match entry.split_once('=') {
            Some((n, c)) => (n.trim(), Some(c)),
            None => (entry.trim(), None),
        };
        let Self::Confined(c) = self else {
            return Ok(entry.to_owned());
        };
        // A path, with or without `.wasm`, is a file inside the repository.
        if !crate::plugin::discover::is_path_spec(name) {
            return Ok(entry.to_owned());
        }
        let full = c.resolve_file(Path::new(name))?;
        Ok(match criterion {
            Some(crit) => format!("{}={crit}", full.display()),
            None => full.display().to_string(),
        })
    }
}

/// A read error about the located path, reported with the path as written.
fn relabel(e: ReadError, rel: &Path) -> ReadError {
    let path = rel.to_owned();
    match e {
        ReadError::Absolute { .. } => ReadError::Absolute { path },
        ReadError::Escapes { .. } => ReadError::Escapes { path },
        ReadError::Git { .. } => ReadError::Git { path },
        ReadError::NotRegular { kind, .. } => ReadError::NotRegular { path, kind },
        ReadError::TooLarge { limit, .. } => ReadError::TooLarge { path, limit },
        ReadError::NotText { .. } => ReadError::NotText { path },
        ReadError::Io { source, .. } => ReadError::Io { path, source },
    }
}

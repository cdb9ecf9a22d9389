//! Role packs other tools keep — Squad's `.squad/` (legacy `.ai-team/`) and Claude
//! Code subagents (`.claude/agents/`, `~/.claude/agents/`) — read as teams, and
//! written back.
//!
//! Imported formats are data: nothing in a pack is executed, followed or expanded.
//! Every file is read beneath its pack's directory (a symlink leaving it is refused),
//! bounded, regular files only; CRLF, a byte order mark and invalid UTF-8 are
//! tolerated with a warning; one bad file is reported and never hides the rest.
//! What a pack's members may do is decided by the user's ceiling
//! ([`super::limits::TeamPolicy`]), never by the pack.

pub mod claude;
pub mod frontmatter;
pub mod markdown;
pub mod models;
pub mod squad;
pub mod squad_write;
pub mod write;

use std::path::{Path, PathBuf};

use crate::trust::read::{Bounded, Confined, ReadError};

/// The most files read from one pack.
pub const MAX_PACK_FILES: usize = 128;
/// The deepest directory level read below a pack's root.
pub const MAX_DEPTH: usize = 4;
/// The most entries looked at in one directory.
pub const MAX_DIR_ENTRIES: usize = 4096;

/// A file's text as read: cut at the byte cap, invalid UTF-8 replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text {
    /// The text.
    pub text: String,
    /// The file was larger than the cap; `text` is its beginning.
    pub truncated: bool,
    /// The file was not valid UTF-8; invalid bytes became U+FFFD.
    pub lossy: bool,
}

impl Text {
    fn decode(b: Bounded) -> Self {
        let truncated = b.truncated;
        match String::from_utf8(b.bytes) {
            Ok(text) => Self {
                text,
                truncated,
                lossy: false,
            },
            // A cut read may end inside a character: drop the partial one.
            Err(e) if truncated && e.utf8_error().error_len().is_none() => {
                let valid = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                bytes.truncate(valid);
                Self {
                    text: String::from_utf8(bytes).unwrap_or_default(),
                    truncated,
                    lossy: false,
                }
            }
            Err(e) => Self {
                text: String::from_utf8_lossy(e.as_bytes()).into_owned(),
                truncated,
                lossy: true,
            },
        }
    }

    /// The text as a prompt takes it: without a leading byte order mark, CRLF line
    /// endings and lone carriage returns (old Mac line endings, or one a script left
    /// in a line) as LF — a `\r` is nothing a model should read, and one in a prompt
    /// can hide the text before it on a terminal. The text itself stays as read, so a
    /// pack written back keeps its line endings.
    pub fn cleaned(&self) -> String {
        let t = self.text.strip_prefix('\u{feff}').unwrap_or(&self.text);
        t.replace("\r\n", "\n").replace('\r', "\n")
    }

    /// For a file that did not read as it should: ` (it is not UTF-8 …)`, with what to
    /// do (a file of NULs and text is UTF-16, as Windows PowerShell 5 writes by
    /// default); `None` for a file that is UTF-8.
    pub fn encoding_hint(&self) -> Option<String> {
        if !self.lossy {
            return None;
        }
        let utf16 = self
            .text
            .as_bytes()
            .iter()
            .take(512)
            .filter(|&&b| b == 0)
            .count()
            >= 4;
        Some(if utf16 {
            " (it is not UTF-8 but looks like UTF-16: save it as UTF-8)".to_owned()
        } else {
            " (it is not valid UTF-8)".to_owned()
        })
    }

    /// What [`Self::cleaned`] leaves out, in words, if anything.
    fn unclean(&self) -> Option<String> {
        let crlf = self.text.contains("\r\n");
        let lone = self
            .text
            .match_indices('\r')
            .any(|(i, _)| self.text.as_bytes().get(i + 1) != Some(&b'\n'));
        let parts: Vec<&str> = [
            (self.text.starts_with('\u{feff}'), "a byte order mark"),
            (crlf, "CRLF line endings"),
            (lone, "carriage returns without a line feed"),
        ]
        .into_iter()
        .filter_map(|(has, what)| has.then_some(what))
        .collect();
        match parts.as_slice() {
            [] => None,
            [one] => Some((*one).to_owned()),
            [init @ .., last] => Some(format!("{} and {last}", init.join(", "))),
        }
    }

    /// One warning for what was cut, replaced or cleaned, naming `shown`.
    pub fn warning(&self, shown: &Path, cap: u64) -> Option<String> {
        let cut = self.cut_warning(shown, cap);
        let unclean = self.unclean().map(|what| {
            format!(
                "{} has {what} (read as LF, without the mark)",
                shown.display()
            )
        });
        match (cut, unclean) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        }
    }

    fn cut_warning(&self, shown: &Path, cap: u64) -> Option<String> {
        match (self.truncated, self.lossy) {
            (false, false) => None,
            (true, false) => Some(format!(
                "{} is larger than {cap} bytes; only its beginning is read",
                shown.display()
            )),
            (false, true) => Some(format!(
                "{} is not valid UTF-8; invalid bytes were replaced",
                shown.display()
            )),
            (true, true) => Some(format!(
                "{} is larger than {cap} bytes and not valid UTF-8; its beginning is read, invalid bytes replaced",
                shown.display()
            )),
        }
    }
}

/// What a directory entry is (symlinks are never followed when listing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else (FIFO, socket, device).
    Other,
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its name.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
}

/// What [`PackDir::list`] found in a directory.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// The first [`MAX_DIR_ENTRIES`] entries by name.
    pub entries: Vec<Entry>,
    /// Entries past those, not looked at.
    pub more: usize,
    /// Whether the directory held more entries still, not even counted (past 16 times
    /// [`MAX_DIR_ENTRIES`]).
    pub uncounted: bool,
    /// The names that are not UTF-8 (a byte that is not shown as `\xNN`), sorted.
    pub not_utf8: Vec<String>,
}

impl Listing {
    /// The warning for the entries of `shown` past the cap, if there were any.
    pub fn past_cap(&self, shown: &Path) -> Option<String> {
        (self.more > 0 || self.uncounted).then(|| {
            format!(
                "{}: more than {MAX_DIR_ENTRIES} entries; the {}{} past the first \
                 {MAX_DIR_ENTRIES} (by name) were not looked at",
                shown.display(),
                if self.uncounted { "more than " } else { "" },
                self.more
            )
        })
    }

    /// One warning per thing of `shown` that was not looked at, if any.
    pub fn warnings(&self, shown: &Path) -> Vec<String> {
        let names = self.not_utf8.iter().map(|name| {
            format!(
                "{}: not read: its name is not UTF-8",
                shown.join(name).display()
            )
        });
        self.past_cap(shown).into_iter().chain(names).collect()
    }
}

/// A pack's directory: every read confined beneath it.
#[derive(Clone, Debug)]
pub struct PackDir {
    confined: Confined,
}

impl PackDir {
    /// The pack directory `rel` of the repository `repo` is confined to, when it
    /// exists; refused when it leads outside the repository.
    pub fn in_repo(repo: &Confined, rel: &Path) -> Result<Option<Self>, ReadError> {
        match repo.dir(rel)? {
            Some(dir) => Self::at(&dir),
            None => Ok(None),
        }
    }

    /// The directory `dir` (the user's own), when it exists.
    pub fn at(dir: &Path) -> Result<Option<Self>, ReadError> {
        match Confined::new(dir) {
            Ok(confined) if confined.root().is_dir() => Ok(Some(Self { confined })),
            Ok(_) => Err(not_a_directory(dir)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(not_a_directory(dir)),
            Err(source) => Err(ReadError::Io {
                path: dir.to_owned(),
                source,
            }),
        }
    }

    /// The canonical directory.
    pub fn root(&self) -> &Path {
        self.confined.root()
    }

    /// Reads at most `cap` bytes of `rel` as text, beneath the pack.
    pub fn read(&self, rel: &Path, cap: u64) -> Result<Text, ReadError> {
        self.confined.read(rel, cap).map(Text::decode)
    }

    /// The entries of directory `rel` (`""`: the root), sorted by name; at most
    /// [`MAX_DIR_ENTRIES`] are looked at, and the listing says how many more there were
    /// and names those whose names are not UTF-8 (they are never read).
    pub fn list(&self, rel: &Path) -> Result<Listing, ReadError> {
        let mut listing = Listing::default();
        let Some(dir) = self.confined.dir(rel)? else {
            return Ok(listing);
        };
        let io = |source| ReadError::Io {
            path: rel.to_owned(),
            source,
        };
        // Names are gathered well past the cap and sorted before it applies, so which
        // entries are read does not depend on the file system's order (up to 16 times
        // the cap).
        for (seen, entry) in std::fs::read_dir(&dir).map_err(io)?.enumerate() {
            if seen == 16 * MAX_DIR_ENTRIES {
                listing.uncounted = true;
                break;
            }
            let entry = entry.map_err(io)?;
            let name = match entry.file_name().into_string() {
                Ok(name) => name,
                Err(raw) => {
                    if listing.not_utf8.len() < MAX_DIR_ENTRIES {
                        listing
                            .not_utf8
                            .push(crate::text::from_bytes(raw.as_encoded_bytes()).into_owned());
                    }
                    continue;
                }
            };
            let kind = match entry.file_type() {
                Ok(t) if t.is_symlink() => EntryKind::Symlink,
                Ok(t) if t.is_dir() => EntryKind::Dir,
                Ok(t) if t.is_file() => EntryKind::File,
                Ok(_) | Err(_) => EntryKind::Other,
            };
            listing.entries.push(Entry { name, kind });
        }
        listing.entries.sort_by(|a, b| a.name.cmp(&b.name));
        listing.not_utf8.sort();
        if listing.entries.len() > MAX_DIR_ENTRIES {
            listing.more += listing.entries.len() - MAX_DIR_ENTRIES;
            listing.entries.truncate(MAX_DIR_ENTRIES);
        }
        Ok(listing)
    }

    /// The entry of directory `rel` named `name` ignoring ASCII case (an exact match
    /// first).
    pub fn find(&self, rel: &Path, name: &str) -> Result<Option<Entry>, ReadError> {
        let entries = self.list(rel)?.entries;
        Ok(entries
            .iter()
            .find(|e| e.name == name)
            .or_else(|| entries.iter().find(|e| e.name.eq_ignore_ascii_case(name)))
            .cloned())
    }
}

fn not_a_directory(dir: &Path) -> ReadError {
    ReadError::Io {
        path: dir.to_owned(),
        source: std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory (a pack is a directory)",
        ),
    }
}

/// Squad's slug rule: lowercase, every run of characters other than `a-z0-9` one
/// `-`, none at either end (`Fact Checker` → `fact-checker`, `McManus` → `mcmanus`).
pub fn slug(name: &str) -> String {
    let lower = name.to_lowercase();
    let mut out = String::new();
    let mut dash = false;
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c);
        } else {
            dash = true;
        }
    }
    out
}

/// Why a file of a pack was refused, naming it as `shown` (its path from the
/// repository or the user's directory): a link is refused for leaving the *pack*.
pub fn refusal(e: &ReadError, shown: &Path) -> String {
    let at = shown.display();
    match e {
        ReadError::Escapes { .. } => {
            format!("`{at}` leads outside its pack (through `..` or a symlink); refused")
        }
        ReadError::NotRegular { kind, .. } => {
            format!("`{at}` is a {kind}, not a regular file; refused")
        }
        ReadError::Absolute { .. } => format!("`{at}` is an absolute path; refused"),
        ReadError::Git { .. } => format!("`{at}` is inside the repository's `.git`; refused"),
        ReadError::TooLarge { limit, .. } => format!("`{at}` is larger than {limit} bytes"),
        ReadError::NotText { .. } => format!("`{at}` is not UTF-8 text"),
        ReadError::Io { source, .. } => format!("cannot read `{at}`: {source}"),
    }
}

/// `skipped` as a note says it: how many `what` (`rows`, `files`) were skipped and why,
/// the first few by name (a pack of many bad entries stays a short note; `team show`
/// and `--json` list them all).
pub fn skipped_note(skipped: &[crate::team::file::Skipped], one: &str, many: &str) -> String {
    /// Entries named in the note.
    const NAMED: usize = 5;
    let mut note = format!(
        "{} {} skipped",
        skipped.len(),
        if skipped.len() == 1 { one } else { many }
    );
    for (i, s) in skipped.iter().take(NAMED).enumerate() {
        note.push_str(if i == 0 { ": " } else { "; " });
        note.push_str(&s.to_string());
    }
    if skipped.len() > NAMED {
        note.push_str(&format!("; and {} more", skipped.len() - NAMED));
    }
    note
}

/// `path` shown relative to `root` when it lies inside it.
pub fn shown(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_carriage_return_never_reaches_a_prompt() {
        let t = Text {
            text: "\u{feff}a\r\nthe tool is \runSubagent\r".into(),
            truncated: false,
            lossy: false,
        };
        assert_eq!(t.cleaned(), "a\nthe tool is \nunSubagent\n");
        assert_eq!(
            t.unclean().as_deref(),
            Some("a byte order mark, CRLF line endings and carriage returns without a line feed")
        );
    }

    #[test]
    fn a_skipped_note_names_the_first_five_and_counts_the_rest() {
        use crate::team::file::{Skipped, SkippedWhat};
        let skip = |n: usize| Skipped {
            what: SkippedWhat::Name(format!("m{n}")),
            reason: format!("why {n}"),
        };
        assert_eq!(
            skipped_note(&[skip(1)], "row", "rows"),
            "1 row skipped: m1: why 1"
        );
        let many: Vec<Skipped> = (1..=7).map(skip).collect();
        let note = skipped_note(&many, "row", "rows");
        assert!(
            note.starts_with("7 rows skipped: m1: why 1; m2: why 2"),
            "{note}"
        );
        assert!(note.ends_with("m5: why 5; and 2 more"), "{note}");
        assert_eq!(skipped_note(&[], "file", "files"), "0 files skipped");
    }

    #[test]
    fn slugs_follow_squads_rule() {
        assert_eq!(slug("McManus"), "mcmanus");
        assert_eq!(slug("Fact Checker"), "fact-checker");
        assert_eq!(slug("Tony Stark (Iron Man)"), "tony-stark-iron-man");
        assert_eq!(slug("  EECOM!! "), "eecom");
        assert_eq!(slug("José"), "jos");
        assert_eq!(slug("—"), "");
    }

    #[test]
    fn text_is_cut_or_replaced_never_refused() {
        let t = Text::decode(Bounded {
            bytes: b"ok \xff bad".to_vec(),
            truncated: false,
        });
        assert!(t.lossy && !t.truncated);
        assert_eq!(t.text, "ok \u{fffd} bad");
        let t = Text::decode(Bounded {
            bytes: "aé".as_bytes()[..2].to_vec(),
            truncated: true,
        });
        assert_eq!((t.text.as_str(), t.lossy, t.truncated), ("a", false, true));
        assert!(t.warning(Path::new("x.md"), 2).unwrap().contains("x.md"));
    }
}

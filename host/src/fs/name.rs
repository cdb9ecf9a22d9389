//! Names a file system may treat as `.git` or `.crewbox` although they are spelled
//! otherwise: case variants (case-insensitive and case-folding file systems), names
//! with code points HFS+ ignores, with NTFS's trailing dots and spaces or an alternate
//! data stream suffix, and the NTFS 8.3 short names. Pure functions.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// Code points HFS+ leaves out when it compares names (zero-width joiners, direction
/// marks, the byte order mark): `.g\u{200c}it` is `.git` there.
fn hfs_ignored(c: char) -> bool {
    matches!(c, '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{206a}'..='\u{206f}' | '\u{feff}')
}

/// Whether `name` is `want` (lowercase ASCII, starting with `.`) on some file system,
/// or the 8.3 short name `short` NTFS gives it.
fn same_as(name: &OsStr, want: &str, short: &str) -> bool {
    // Case-folding file systems fold UTF-8 only; other bytes are compared as they are,
    // and no byte outside ASCII can make `.git`.
    let Ok(name) = std::str::from_utf8(name.as_bytes()) else {
        return false;
    };
    // NTFS names an alternate data stream after `:`; the file is what comes before.
    let name = name.split(':').next().unwrap_or(name);
    let folded: String = name
        .chars()
        .filter(|c| !hfs_ignored(*c))
        .flat_map(char::to_lowercase)
        .collect();
    // NTFS drops trailing dots and spaces.
    let trimmed = folded.trim_end_matches(['.', ' ']);
    trimmed == want || trimmed == short
}

/// Whether a path component names git's own directory (or a worktree's `.git` file) on
/// some file system.
pub fn is_git(name: &OsStr) -> bool {
    same_as(name, ".git", "git~1")
}

/// Whether a path component names crewbox's repository directory `.crewbox` on some
/// file system.
pub fn is_crewbox(name: &OsStr) -> bool {
    same_as(name, ".crewbox", "crewbo~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(s: &str) -> bool {
        is_git(OsStr::new(s))
    }

    #[test]
    fn every_spelling_of_git_is_git() {
        for name in [
            ".git",
            ".GIT",
            ".Git",
            ".git.",
            ".git ",
            ".git. .",
            ".g\u{200c}it",
            "\u{feff}.git",
            ".git::$INDEX_ALLOCATION",
            "GIT~1",
            "git~1",
        ] {
            assert!(git(name), "{name:?}");
        }
        for name in [
            ".github",
            ".gitignore",
            "git",
            ".gi",
            "..git",
            "x.git",
            ".git2",
            "",
        ] {
            assert!(!git(name), "{name:?}");
        }
        assert!(!is_git(OsStr::from_bytes(b".git\xff")));
    }

    #[test]
    fn every_spelling_of_crewbox_is_crewbox() {
        for name in [
            ".crewbox",
            ".CrewBox",
            ".crewbox.",
            "CREWBO~1",
            ".crew\u{200d}box",
        ] {
            assert!(is_crewbox(OsStr::new(name)), "{name:?}");
        }
        for name in ["crewbox", ".crewbox-old", ".crewboxes"] {
            assert!(!is_crewbox(OsStr::new(name)), "{name:?}");
        }
    }
}

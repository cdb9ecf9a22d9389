//! Sanitisers for text an agent controls that ends up in git: commit messages and branch
//! names. Both are idempotent so re-sanitising stored values never changes them.

/// Longest commit message kept, in characters (Unicode scalar values).
pub const MAX_MESSAGE_CHARS: usize = 200;

/// Longest sanitised agent id used in a branch name, in characters (all ASCII).
pub const MAX_BRANCH_COMPONENT_CHARS: usize = 64;

/// Used when an agent id sanitises to nothing, so the branch name stays valid.
const EMPTY_COMPONENT: &str = "agent";

/// Makes agent-written text safe as a one-line commit subject.
///
/// Removes control characters (ANSI escape sequences are removed whole, so no `[31m`
/// residue survives), bidirectional overrides (they make text display differently from
/// what it is), backticks, `$`, quotes and backslashes (shell-expansion bait when the
/// subject is pasted into a terminal); turns every run of whitespace, newlines included,
/// into one space; trims; and cuts at [`MAX_MESSAGE_CHARS`] characters.
pub fn sanitize_message(s: &str) -> String {
    // A commit message leaves crewbox with its branch: no secret in it.
    let s = crate::redact::clean(s);
    let s = s.as_ref();
    let mut out = String::with_capacity(s.len().min(MAX_MESSAGE_CHARS * 4));
    let mut pending_space = false;
    let mut kept = 0usize;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            skip_escape_sequence(&mut chars);
            continue;
        }
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if c.is_control() || is_bidi_control(c) || matches!(c, '`' | '$' | '\'' | '"' | '\\') {
            continue;
        }
        if pending_space {
            if kept + 2 > MAX_MESSAGE_CHARS {
                break;
            }
            out.push(' ');
            kept += 1;
            pending_space = false;
        }
        if kept == MAX_MESSAGE_CHARS {
            break;
        }
        out.push(c);
        kept += 1;
    }
    out
}

/// Skips the rest of an ANSI escape sequence after its ESC: a CSI (`ESC [ params final`),
/// or the single character of a two-character escape.
fn skip_escape_sequence(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.peek() {
        Some('[') => {
            chars.next();
            // Parameter and intermediate bytes, then one final byte in '@'..='~'.
            while let Some(&c) = chars.peek() {
                if ('\u{20}'..='\u{3f}').contains(&c) {
                    chars.next();
                } else {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        chars.next();
                    }
                    break;
                }
            }
        }
        Some(&c) if ('\u{40}'..='\u{5f}').contains(&c) => {
            chars.next();
        }
        _ => {}
    }
}

/// Unicode bidirectional embedding/override/isolate controls ("Trojan Source").
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

/// Turns an agent id into one branch-name component made of `[A-Za-z0-9_-]`.
///
/// Every other character becomes `-`, runs of `-` collapse, leading and trailing `-` are
/// dropped, and the result is cut to `MAX_BRANCH_COMPONENT_CHARS`; an id with nothing
/// usable becomes `agent`. The result is always valid after `crewbox/` in a ref name.
pub fn sanitize_branch_component(id: &str) -> String {
    let mut out = String::with_capacity(id.len().min(MAX_BRANCH_COMPONENT_CHARS));
    for c in id.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        if out.len() == MAX_BRANCH_COMPONENT_CHARS {
            break;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out.push_str(EMPTY_COMPONENT);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn message_drops_escapes_controls_and_shell_characters() {
        assert_eq!(
            sanitize_message("\u{1b}[31mred\u{1b}[0m `rm -rf` $HOME \"q\" 'q' a\\b\u{7f}\u{0}"),
            "red rm -rf HOME q q ab"
        );
    }

    #[test]
    fn message_collapses_whitespace_and_newlines() {
        assert_eq!(
            sanitize_message("  fix:\r\n\n  the\tthing \u{a0} now  "),
            "fix: the thing now"
        );
    }

    #[test]
    fn message_drops_bidi_overrides() {
        assert_eq!(sanitize_message("a\u{202e}b\u{2066}c"), "abc");
    }

    #[test]
    fn message_truncates_on_character_boundaries() {
        let long = "é".repeat(500);
        let out = sanitize_message(&long);
        assert_eq!(out.chars().count(), MAX_MESSAGE_CHARS);
        assert!(out.chars().all(|c| c == 'é'));
    }

    #[test]
    fn message_truncation_never_ends_in_space() {
        let s = format!("{} b", "a".repeat(MAX_MESSAGE_CHARS - 1));
        assert_eq!(sanitize_message(&s), "a".repeat(MAX_MESSAGE_CHARS - 1));
    }

    #[test]
    fn branch_component_keeps_safe_ascii_only() {
        assert_eq!(sanitize_branch_component("a-0193/x y..z"), "a-0193-x-y-z");
        assert_eq!(sanitize_branch_component("../..//~^:?*["), "agent");
        assert_eq!(sanitize_branch_component("--lead_"), "lead_");
        assert_eq!(sanitize_branch_component("ünïcode"), "n-code");
        assert_eq!(sanitize_branch_component(""), "agent");
    }

    #[test]
    fn branch_component_is_cut_to_limit_without_trailing_dash() {
        let id = format!("{}-x", "a".repeat(MAX_BRANCH_COMPONENT_CHARS - 1));
        assert_eq!(
            sanitize_branch_component(&id),
            "a".repeat(MAX_BRANCH_COMPONENT_CHARS - 1)
        );
    }

    proptest! {
        #[test]
        fn message_properties(s in any::<String>()) {
            let out = sanitize_message(&s);
            prop_assert!(out.chars().count() <= MAX_MESSAGE_CHARS);
            prop_assert!(!out.chars().any(|c| c.is_control()
                || is_bidi_control(c)
                || matches!(c, '`' | '$' | '\'' | '"' | '\\')));
            prop_assert!(!out.contains('\n') && !out.contains('\r'));
            prop_assert!(!out.contains("  "));
            prop_assert!(out.chars().all(|c| c == ' ' || !c.is_whitespace()));
            prop_assert_eq!(out.trim(), out.as_str());
            // A String is valid UTF-8 by construction; check it round-trips as bytes too.
            prop_assert!(std::str::from_utf8(out.as_bytes()).is_ok());
            prop_assert_eq!(sanitize_message(&out), out);
        }

        #[test]
        fn message_keeps_plain_text(s in "[a-zA-Z0-9 .,:;!?()-]{0,300}") {
            let expected: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
            let out = sanitize_message(&s);
            prop_assert!(expected.starts_with(&out));
        }

        #[test]
        fn branch_component_properties(s in any::<String>()) {
            let out = sanitize_branch_component(&s);
            prop_assert!(!out.is_empty());
            prop_assert!(out.len() <= MAX_BRANCH_COMPONENT_CHARS);
            prop_assert!(out.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
            prop_assert_eq!(sanitize_branch_component(&out), out.clone());
            let full = format!("refs/heads/crewbox/{out}");
            prop_assert!(git2::Reference::is_valid_name(&full), "invalid ref {}", full);
        }

        #[test]
        fn branch_component_with_suffix_is_valid(s in any::<String>(), n in 0u32..1000) {
            let full = format!("refs/heads/crewbox/{}-20250101T000000Z-{n}", sanitize_branch_component(&s));
            prop_assert!(git2::Reference::is_valid_name(&full));
        }
    }
}

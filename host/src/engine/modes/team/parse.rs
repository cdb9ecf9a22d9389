//! Reading worker assignments out of an orchestrator's planning reply.
//!
//! Two forms are accepted, JSON first:
//! - a JSON array `[{"worker": "name", "task": "…"}]`, fenced or bare; the first
//!   array in the reply whose entries all have string `worker` and `task` wins;
//! - blocks: a line `@worker:NAME` (also as a list item, `- @worker:NAME`), the
//!   task on the following lines, ended by `@end` (on its own line or at the end of
//!   the task's last line), the next `@worker:` line or the end of the reply.
//!   Markers are case-insensitive; text outside blocks is ignored.
//!
//! Names are matched exactly but ignoring ASCII case against the members, after
//! stripping surrounding backticks and quotes, then against the members' display names
//! (a Squad roster's `Fact Checker` for the member `fact-checker`; one of several words
//! is read whole after `@worker:`); there is no fuzzy matching. Names that match no
//! member are returned in `unknown` so the engine can report them.
//! Several tasks for one worker are joined, in order, with a blank line.

use serde::Deserialize;

/// Tasks per member, in first-mention order, and names that matched no member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignments {
    /// `(canonical member name, task)`, one entry per member.
    pub tasks: Vec<(String, String)>,
    /// Names as written (stripped) that matched no member, first mention order.
    pub unknown: Vec<String>,
}

impl Assignments {
    /// No member got a task.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    fn add(&mut self, name: &str, task: &str, members: &Members<'_>) {
        let name = strip_name(name);
        let task = task.trim();
        if name.is_empty() {
            return;
        }
        let Some(canonical) = members.find(name) else {
            if !self.unknown.iter().any(|u| u == name) {
                self.unknown.push(name.to_owned());
            }
            return;
        };
        if task.is_empty() {
            return;
        }
        match self.tasks.iter_mut().find(|(m, _)| m == canonical) {
            Some((_, existing)) => {
                existing.push_str("\n\n");
                existing.push_str(task);
            }
            None => self.tasks.push((canonical.to_owned(), task.to_owned())),
        }
    }
}

/// The names a reply may assign to: each member's name, and the display names that
/// differ from it as `(display, name)`.
struct Members<'a> {
    names: &'a [&'a str],
    /// Longest first, so `Fact Checker Jr` is tried before `Fact Checker`.
    displays: Vec<(&'a str, &'a str)>,
}

impl<'a> Members<'a> {
    fn new(names: &'a [&'a str], displays: &'a [(&'a str, &'a str)]) -> Self {
        let mut displays: Vec<(&str, &str)> = displays
            .iter()
            .copied()
            .filter(|(d, n)| !d.trim().is_empty() && !d.eq_ignore_ascii_case(n))
            .collect();
        displays.sort_by_key(|(d, _)| std::cmp::Reverse(d.len()));
        Self { names, displays }
    }

    /// The member `name` names: a member's name first, then a display name.
    fn find(&self, name: &str) -> Option<&'a str> {
        self.names
            .iter()
            .copied()
            .find(|m| m.eq_ignore_ascii_case(name))
            .or_else(|| {
                let spaced = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
                let name = spaced(name);
                self.displays
                    .iter()
                    .find(|(d, _)| spaced(d).eq_ignore_ascii_case(&name))
                    .map(|&(_, n)| n)
            })
    }

    /// The name after `@worker:` and the rest of its line: a display name of several
    /// words when the line starts with one (quoted or not), else the first word.
    fn split<'t>(&self, rest: &'t str) -> (&'t str, &'t str) {
        let is_open = |c: char| matches!(c, '`' | '"' | '\'' | '“' | '‘');
        let is_close = |c: char| matches!(c, '`' | '"' | '\'' | '”' | '’');
        let open = rest
            .chars()
            .next()
            .filter(|&c| is_open(c))
            .map_or(0, char::len_utf8);
        for (display, _) in self.displays.iter().filter(|(d, _)| d.contains(' ')) {
            // Word by word, any run of spaces between words.
            let mut end = open;
            let matched = display.split_whitespace().enumerate().all(|(k, word)| {
                if k > 0 {
                    let gap = rest[end..].len() - rest[end..].trim_start().len();
                    if gap == 0 {
                        return false;
                    }
                    end += gap;
                }
                let hit = rest
                    .get(end..end + word.len())
                    .is_some_and(|h| h.eq_ignore_ascii_case(word));
                end += if hit { word.len() } else { 0 };
                hit
            });
            if !matched {
                continue;
            }
            if open > 0
                && let Some(close) = rest[end..].chars().next().filter(|&c| is_close(c))
            {
                end += close.len_utf8();
            }
            let after = &rest[end..];
            if after.is_empty() || after.starts_with(char::is_whitespace) {
                return (&rest[..end], after.trim_start());
            }
        }
        match rest.split_once(char::is_whitespace) {
            Some((name, first)) => (name, first),
            None => (rest, ""),
        }
    }
}

/// Parses assignments from `reply` for the given member names, also read under their
/// display names (`(display, name)`).
pub fn parse_assignments(reply: &str, members: &[&str], displays: &[(&str, &str)]) -> Assignments {
    let members = Members::new(members, displays);
    let members = &members;
    let text = reply.replace("\r\n", "\n");
    // A JSON array that gives a member a task wins; one that gives none (an example of
    // the format, `[{"worker": "name", …}]`) does not hide the blocks after it.
    let mut first_json = None;
    for entries in json_arrays(&text) {
        let mut out = Assignments::default();
        for entry in entries {
            out.add(&entry.worker, &entry.task, members);
        }
        if !out.tasks.is_empty() {
            return out;
        }
        first_json.get_or_insert(out);
    }
    let blocks = parse_blocks(&text, members);
    match first_json {
        // Neither gave a member a task: what the JSON named is reported as unknown.
        Some(json) if blocks.tasks.is_empty() && blocks.unknown.is_empty() => json,
        _ => blocks,
    }
}

#[derive(Deserialize)]
struct JsonAssignment {
    worker: String,
    task: String,
}

/// Every non-empty JSON array of assignments in `text`, in order.
fn json_arrays(text: &str) -> impl Iterator<Item = Vec<JsonAssignment>> + '_ {
    text.match_indices('[').filter_map(|(at, _)| {
        let mut stream =
            serde_json::Deserializer::from_str(&text[at..]).into_iter::<Vec<JsonAssignment>>();
        match stream.next() {
            Some(Ok(entries)) if !entries.is_empty() => Some(entries),
            _ => None,
        }
    })
}

fn parse_blocks(text: &str, members: &Members<'_>) -> Assignments {
    let mut out = Assignments::default();
    // The open block: its worker name and task lines.
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        // `- @worker:NAME` and `1. @worker:NAME`: a block in a list.
        if let Some(rest) = strip_prefix_ignore_case(strip_bullet(trimmed), "@worker:") {
            if let Some((name, lines)) = open.take() {
                out.add(&name, &lines.join("\n"), members);
            }
            // The name stands alone; anything after it on the line starts the task.
            let (name, first) = members.split(rest.trim());
            // `@worker:NAME the task @end` on one line is a whole block.
            match strip_end(first) {
                Some(task) => out.add(name, task, members),
                None => open = Some((name.to_owned(), vec![first])),
            }
        } else if let Some(last) = strip_end(trimmed) {
            // `… @end`: the text before the marker is the block's last line.
            if let Some((name, mut lines)) = open.take() {
                lines.push(last);
                out.add(&name, &lines.join("\n"), members);
            }
        } else if let Some((_, lines)) = open.as_mut() {
            lines.push(line);
        }
    }
    if let Some((name, lines)) = open {
        out.add(&name, &lines.join("\n"), members);
    }
    out
}

/// A list marker (`-`, `*`, `+`, `1.`, `1)`) and the space after it, removed.
fn strip_bullet(line: &str) -> &str {
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let rest = if digits > 0 {
        match line[digits..].strip_prefix(['.', ')']) {
            Some(rest) => rest,
            None => return line,
        }
    } else {
        match line.strip_prefix(['-', '*', '+']) {
            Some(rest) => rest,
            None => return line,
        }
    };
    match rest.strip_prefix(char::is_whitespace) {
        Some(rest) => rest.trim_start(),
        None => line,
    }
}

/// The text before an `@end` that ends the line (any case), if it does.
fn strip_end(line: &str) -> Option<&str> {
    let line = line.trim_end();
    let cut = line.len().checked_sub("@end".len())?;
    let tail = line.get(cut..)?;
    if !tail.eq_ignore_ascii_case("@end") {
        return None;
    }
    let before = &line[..cut];
    // `me@end` is an address, not a marker: the marker stands apart from the task.
    (before.is_empty() || before.ends_with(char::is_whitespace)).then(|| before.trim_end())
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Removes surrounding whitespace, backticks and quotes (`"name"`, `` `name` ``, `'name'`).
fn strip_name(name: &str) -> &str {
    name.trim()
        .trim_matches(|c| matches!(c, '`' | '"' | '\'' | '“' | '”' | '‘' | '’'))
        .trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probe 17: an example of the JSON format in the plan hid the blocks after it (no
    /// worker ran, `name` reported unknown, the run "answered directly").
    #[test]
    fn a_json_example_that_names_no_member_does_not_hide_the_blocks() {
        let reply = "Tasks below (they could also be given as JSON, e.g. \
                     `[{\"worker\": \"name\", \"task\": \"…\"}]`).\n\
                     @worker:alice\nDesign it.\n@end\n@worker:bob\nTest it.\n@end\n";
        let a = parse_assignments(reply, &["alice", "bob"], &[]);
        assert_eq!(
            a.tasks,
            [
                ("alice".to_owned(), "Design it.".to_owned()),
                ("bob".to_owned(), "Test it.".to_owned())
            ]
        );
        assert!(a.unknown.is_empty(), "{:?}", a.unknown);
        // A JSON array naming members still wins, and one naming none alone is reported.
        let json = r#"[{"worker": "bob", "task": "Test it."}] and @worker:alice x @end"#;
        let a = parse_assignments(json, &["alice", "bob"], &[]);
        assert_eq!(a.tasks, [("bob".to_owned(), "Test it.".to_owned())]);
        let a = parse_assignments(r#"[{"worker": "carol", "task": "t"}]"#, &["alice"], &[]);
        assert_eq!(a.unknown, ["carol"]);
    }
    use pretty_assertions::assert_eq;

    const MEMBERS: &[&str] = &["Alice", "bob", "carol.v2"];

    fn tasks(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
            .collect()
    }

    #[test]
    fn blocks_with_end_next_marker_and_eof() {
        let reply = "Plan:\n@worker:Alice\nWrite the parser.\nWith tests.\n@end\nsome chatter\n@worker:bob\nReview it.\n@worker:carol.v2\nDocument it.";
        let got = parse_assignments(reply, MEMBERS, &[]);
        assert_eq!(
            got,
            Assignments {
                tasks: tasks(&[
                    ("Alice", "Write the parser.\nWith tests."),
                    ("bob", "Review it."),
                    ("carol.v2", "Document it."),
                ]),
                unknown: vec![],
            }
        );
    }

    #[test]
    fn crlf_case_quotes_and_backticks() {
        let reply = "@WORKER: `alice`\r\nTask one\r\n@END\r\n@Worker:\"BOB\"\r\nTask two\r\n@end\r\n@worker:'Carol.V2'\r\nTask three\r\n";
        let got = parse_assignments(reply, MEMBERS, &[]);
        assert_eq!(
            got.tasks,
            tasks(&[
                ("Alice", "Task one"),
                ("bob", "Task two"),
                ("carol.v2", "Task three")
            ])
        );
        assert!(got.unknown.is_empty());
    }

    #[test]
    fn unknown_names_are_reported_not_dropped_silently() {
        let reply = "@worker:dave\nDo X\n@end\n@worker:alice\nDo Y\n@end\n@worker:dave\nAgain\n@worker:alicia\nNear miss\n";
        let got = parse_assignments(reply, MEMBERS, &[]);
        assert_eq!(got.tasks, tasks(&[("Alice", "Do Y")]));
        assert_eq!(got.unknown, vec!["dave".to_owned(), "alicia".to_owned()]);
    }

    #[test]
    fn several_tasks_for_one_worker_merge_in_order() {
        let reply =
            "@worker:bob\nFirst\n@end\n@worker:alice\nOther\n@end\n@worker:BOB\nSecond\n@end";
        let got = parse_assignments(reply, MEMBERS, &[]);
        assert_eq!(
            got.tasks,
            tasks(&[("bob", "First\n\nSecond"), ("Alice", "Other")])
        );
    }

    #[test]
    fn task_on_the_marker_line_is_kept() {
        let got = parse_assignments("@worker:bob fix the bug\nquickly\n@end", MEMBERS, &[]);
        assert_eq!(got.tasks, tasks(&[("bob", "fix the bug\nquickly")]));
    }

    #[test]
    fn empty_tasks_and_no_markers_give_nothing() {
        assert!(parse_assignments("@worker:bob\n@end", MEMBERS, &[]).is_empty());
        assert!(parse_assignments("I will think about it.", MEMBERS, &[]).is_empty());
        assert!(parse_assignments("", MEMBERS, &[]).is_empty());
        // `@worker:` quoted mid-sentence is not a marker.
        assert!(parse_assignments("Use the @worker:bob format.", MEMBERS, &[]).is_empty());
    }

    #[test]
    fn bulleted_blocks_and_inline_end() {
        let reply = "Plan:\n- @worker:alice\n  design it @end\n* @worker:bob test it @END\n1. @worker:carol.v2\nwrite to me@end.com\n@end";
        let got = parse_assignments(reply, MEMBERS, &[]);
        assert_eq!(
            got.tasks,
            tasks(&[
                ("Alice", "design it"),
                ("bob", "test it"),
                ("carol.v2", "write to me@end.com"),
            ])
        );
        assert_eq!(strip_bullet("-@worker:x"), "-@worker:x");
    }

    #[test]
    fn fenced_json() {
        let reply = "Here you go:\n```json\n[\n  {\"worker\": \"alice\", \"task\": \"A\"},\n  {\"worker\": \"Bob\", \"task\": \"B\"},\n  {\"worker\": \"zed\", \"task\": \"Z\"}\n]\n```\n";
        let got = parse_assignments(reply, MEMBERS, &[]);
        assert_eq!(
            got,
            Assignments {
                tasks: tasks(&[("Alice", "A"), ("bob", "B")]),
                unknown: vec!["zed".to_owned()],
            }
        );
    }

    #[test]
    fn bare_json_with_crlf_and_surrounding_text() {
        let reply = "Plan [draft]:\r\n[{\"worker\":\"bob\",\"task\":\"line1\\nline2\"},{\"worker\":\"bob\",\"task\":\"more\"}] done";
        let got = parse_assignments(reply, MEMBERS, &[]);
        assert_eq!(got.tasks, tasks(&[("bob", "line1\nline2\n\nmore")]));
    }

    #[test]
    fn json_is_preferred_over_blocks() {
        let reply =
            "@worker:alice\nblock task\n@end\n[{\"worker\": \"bob\", \"task\": \"json task\"}]";
        let got = parse_assignments(reply, MEMBERS, &[]);
        assert_eq!(got.tasks, tasks(&[("bob", "json task")]));
    }

    #[test]
    fn arrays_that_are_not_assignments_fall_back_to_blocks() {
        let reply = "Options: [1, 2]\n[]\n@worker:alice\nDo it\n@end";
        let got = parse_assignments(reply, MEMBERS, &[]);
        assert_eq!(got.tasks, tasks(&[("Alice", "Do it")]));
    }
    /// A Squad roster names members by display name (`| Claims | Fact Checker |`), and
    /// a planner routed by it writes that name: it is read whole and assigned to the
    /// member, in blocks (quoted or not, with the task on the same line or below) and in
    /// JSON; a member's own name still wins, and a name that is neither stays unknown.
    #[test]
    fn display_names_of_several_words_are_members() {
        let names = ["fact-checker", "mcmanus", "fact"];
        let displays = [
            ("Fact Checker", "fact-checker"),
            ("McManus", "mcmanus"),
            ("fact", "fact"),
        ];
        let reply = "@worker:Fact Checker check the claims @end\n\
                     - @worker:`fact  checker`\nand the dates\n@end\n\
                     @worker:MCMANUS write it @end\n@worker:Fact Checkers the word @end\n\
                     @worker:Fac Checker nobody @end";
        let got = parse_assignments(reply, &names, &displays);
        assert_eq!(
            got.tasks,
            tasks(&[
                ("fact-checker", "check the claims\n\nand the dates"),
                ("mcmanus", "write it"),
                ("fact", "Checkers the word"),
            ])
        );
        assert_eq!(got.unknown, ["Fac"]);
        let json = r#"[{"worker": "Fact Checker", "task": "t"}]"#;
        assert_eq!(
            parse_assignments(json, &names, &displays).tasks,
            tasks(&[("fact-checker", "t")])
        );
        // Without the display names, the first word is the name, as before.
        assert_eq!(
            parse_assignments("@worker:Fact Checker check @end", &names, &[]).tasks,
            tasks(&[("fact", "Checker check")])
        );
    }
}

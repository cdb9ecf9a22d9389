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
//! stripping surrounding backticks and quotes; there is no fuzzy matching. Names
//! that match no member are returned in `unknown` so the engine can report them.
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

    fn add(&mut self, name: &str, task: &str, members: &[&str]) {
        let name = strip_name(name);
        let task = task.trim();
        if name.is_empty() {
            return;
        }
        let Some(canonical) = members.iter().find(|m| m.eq_ignore_ascii_case(name)) else {
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
            None => self.tasks.push(((*canonical).to_owned(), task.to_owned())),
        }
    }
}

/// Parses assignments from `reply` for the given member names.
pub fn parse_assignments(reply: &str, members: &[&str]) -> Assignments {
    let text = reply.replace("\r\n", "\n");
    if let Some(entries) = find_json(&text) {
        let mut out = Assignments::default();
        for entry in entries {
            out.add(&entry.worker, &entry.task, members);
        }
        return out;
    }
    parse_blocks(&text, members)
}

#[derive(Deserialize)]
struct JsonAssignment {
    worker: String,
    task: String,
}

/// The first non-empty JSON array of assignments anywhere in `text`.
fn find_json(text: &str) -> Option<Vec<JsonAssignment>> {
    text.match_indices('[').find_map(|(at, _)| {
        let mut stream =
            serde_json::Deserializer::from_str(&text[at..]).into_iter::<Vec<JsonAssignment>>();
        match stream.next() {
            Some(Ok(entries)) if !entries.is_empty() => Some(entries),
            _ => None,
        }
    })
}

fn parse_blocks(text: &str, members: &[&str]) -> Assignments {
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
            let rest = rest.trim();
            let (name, first) = match rest.split_once(char::is_whitespace) {
                Some((name, first)) => (name, first),
                None => (rest, ""),
            };
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
        let got = parse_assignments(reply, MEMBERS);
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
        let got = parse_assignments(reply, MEMBERS);
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
        let got = parse_assignments(reply, MEMBERS);
        assert_eq!(got.tasks, tasks(&[("Alice", "Do Y")]));
        assert_eq!(got.unknown, vec!["dave".to_owned(), "alicia".to_owned()]);
    }

    #[test]
    fn several_tasks_for_one_worker_merge_in_order() {
        let reply =
            "@worker:bob\nFirst\n@end\n@worker:alice\nOther\n@end\n@worker:BOB\nSecond\n@end";
        let got = parse_assignments(reply, MEMBERS);
        assert_eq!(
            got.tasks,
            tasks(&[("bob", "First\n\nSecond"), ("Alice", "Other")])
        );
    }

    #[test]
    fn task_on_the_marker_line_is_kept() {
        let got = parse_assignments("@worker:bob fix the bug\nquickly\n@end", MEMBERS);
        assert_eq!(got.tasks, tasks(&[("bob", "fix the bug\nquickly")]));
    }

    #[test]
    fn empty_tasks_and_no_markers_give_nothing() {
        assert!(parse_assignments("@worker:bob\n@end", MEMBERS).is_empty());
        assert!(parse_assignments("I will think about it.", MEMBERS).is_empty());
        assert!(parse_assignments("", MEMBERS).is_empty());
        // `@worker:` quoted mid-sentence is not a marker.
        assert!(parse_assignments("Use the @worker:bob format.", MEMBERS).is_empty());
    }

    #[test]
    fn bulleted_blocks_and_inline_end() {
        let reply = "Plan:\n- @worker:alice\n  design it @end\n* @worker:bob test it @END\n1. @worker:carol.v2\nwrite to me@end.com\n@end";
        let got = parse_assignments(reply, MEMBERS);
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
        let got = parse_assignments(reply, MEMBERS);
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
        let got = parse_assignments(reply, MEMBERS);
        assert_eq!(got.tasks, tasks(&[("bob", "line1\nline2\n\nmore")]));
    }

    #[test]
    fn json_is_preferred_over_blocks() {
        let reply =
            "@worker:alice\nblock task\n@end\n[{\"worker\": \"bob\", \"task\": \"json task\"}]";
        let got = parse_assignments(reply, MEMBERS);
        assert_eq!(got.tasks, tasks(&[("bob", "json task")]));
    }

    #[test]
    fn arrays_that_are_not_assignments_fall_back_to_blocks() {
        let reply = "Options: [1, 2]\n[]\n@worker:alice\nDo it\n@end";
        let got = parse_assignments(reply, MEMBERS);
        assert_eq!(got.tasks, tasks(&[("Alice", "Do it")]));
    }
}

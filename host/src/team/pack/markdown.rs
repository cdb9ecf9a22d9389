//! Just enough Markdown for Squad's `team.md`: lines, ATX headings, the sections they
//! open and GitHub-style pipe tables, every piece carrying its byte span in the
//! original text so a writer can replace one cell and leave every other byte alone.
//!
//! # Rules
//! - Lines end at `\n`; a `\r` before it belongs to the line ending, not the text.
//! - Headings are ATX (`#` to `######`, then a space or the end of the line); fenced
//!   code (```` ``` ```` or `~~~`) hides headings and tables.
//! - A table is a line starting with `|` (after at most three spaces) followed by a
//!   separator line whose cells are all `:?-+:?`; it runs until the first line that
//!   does not start with `|`. Cells are split on pipes not escaped by `\`.

use std::ops::Range;

/// One line: its byte range without the line ending, and its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line<'a> {
    /// Where the line's text starts.
    pub start: usize,
    /// Where its text ends (before `\r\n` or `\n`).
    pub end: usize,
    /// The text, without the line ending.
    pub text: &'a str,
}

/// An ATX heading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heading {
    /// Index of its line.
    pub line: usize,
    /// 1 to 6.
    pub level: usize,
    /// Its text, trimmed, closing `#`s removed.
    pub text: String,
}

/// One table cell: the bytes between two pipes and their trimmed text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The bytes between the pipes (padding included).
    pub span: Range<usize>,
    /// The cell's text, trimmed.
    pub text: String,
}

/// One table row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// Index of its line.
    pub line: usize,
    /// Its cells, left to right.
    pub cells: Vec<Cell>,
}

/// A pipe table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// The header row.
    pub header: Row,
    /// Index of the separator line.
    pub separator: usize,
    /// The data rows, in order.
    pub rows: Vec<Row>,
}

impl Table {
    /// Whether column `col` is padded to one width on every row that has it (header
    /// included; `text` is the document the spans index).
    pub fn aligned(&self, col: usize, text: &str) -> bool {
        let mut widths = std::iter::once(&self.header)
            .chain(&self.rows)
            .filter_map(|r| r.cells.get(col))
            .map(|c| text.get(c.span.clone()).map_or(0, |t| t.chars().count()));
        let Some(first) = widths.next() else {
            return false;
        };
        let mut rows = 1;
        for w in widths {
            if w != first {
                return false;
            }
            rows += 1;
        }
        rows > 1
    }

    /// The column whose header, reduced to its words, is `name` (ignoring case).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.header
            .cells
            .iter()
            .position(|c| words(&c.text).eq_ignore_ascii_case(name))
    }

    /// Index of the table's last line.
    pub fn last_line(&self) -> usize {
        self.rows.last().map_or(self.separator, |r| r.line)
    }
}

/// A parsed document.
#[derive(Debug)]
pub struct Doc<'a> {
    /// The text.
    pub text: &'a str,
    /// Its lines.
    pub lines: Vec<Line<'a>>,
    /// Its headings, in order.
    pub headings: Vec<Heading>,
    /// Whether each line is inside fenced code.
    fenced: Vec<bool>,
}

impl<'a> Doc<'a> {
    /// Splits `text` into lines and finds its headings.
    pub fn parse(text: &'a str) -> Self {
        let lines = split_lines(text);
        let mut fenced = vec![false; lines.len()];
        let mut headings = Vec::new();
        let mut fence: Option<(char, usize)> = None;
        for (i, line) in lines.iter().enumerate() {
            let t = strip_indent(line.text);
            if let Some((ch, len)) = fence {
                fenced[i] = true;
                let run = t.chars().take_while(|c| *c == ch).count();
                if run >= len && t[run * ch.len_utf8()..].trim().is_empty() {
                    fence = None;
                }
                continue;
            }
            if let Some(open) = fence_open(t) {
                fenced[i] = true;
                fence = Some(open);
                continue;
            }
            if let Some((level, text)) = heading(t) {
                headings.push(Heading {
                    line: i,
                    level,
                    text,
                });
            }
        }
        Self {
            text,
            lines,
            headings,
            fenced,
        }
    }

    /// The line range of heading `h`'s section: from the line after it to the next
    /// heading of the same or a higher level (or the end).
    pub fn section(&self, h: usize) -> Range<usize> {
        let heading = &self.headings[h];
        let end = self.headings[h + 1..]
            .iter()
            .find(|o| o.level <= heading.level)
            .map_or(self.lines.len(), |o| o.line);
        heading.line + 1..end
    }

    /// The lines between heading `h` and the next heading of any level.
    pub fn own_lines(&self, h: usize) -> Range<usize> {
        let start = self.headings[h].line + 1;
        let end = self
            .headings
            .get(h + 1)
            .map_or(self.lines.len(), |o| o.line);
        start..end
    }

    /// The text of lines `range`, as written (line endings included but the last).
    pub fn text_of(&self, range: Range<usize>) -> &'a str {
        if range.is_empty() {
            return "";
        }
        let start = self.lines[range.start].start;
        let end = self.lines[range.end - 1].end;
        &self.text[start..end]
    }

    /// The first table starting in `range` (outside fenced code).
    pub fn table_in(&self, range: Range<usize>) -> Option<Table> {
        let end = range.end;
        let mut i = range.start;
        while i + 1 < end {
            if !self.fenced[i]
                && is_table_line(self.lines[i].text)
                && !self.fenced[i + 1]
                && is_separator(self.lines[i + 1].text)
            {
                let header = self.row(i);
                let mut rows = Vec::new();
                let mut j = i + 2;
                while j < end && !self.fenced[j] && is_table_line(self.lines[j].text) {
                    rows.push(self.row(j));
                    j += 1;
                }
                return Some(Table {
                    header,
                    separator: i + 1,
                    rows,
                });
            }
            i += 1;
        }
        None
    }

    fn row(&self, i: usize) -> Row {
        let line = self.lines[i];
        Row {
            line: i,
            cells: split_cells(line.text)
                .into_iter()
                .map(|r| Cell {
                    text: line.text[r.clone()].trim().to_owned(),
                    span: line.start + r.start..line.start + r.end,
                })
                .collect(),
        }
    }

    /// The line ending the document mostly uses (`\r\n` when most lines have it).
    pub fn line_ending(&self) -> &'static str {
        let bytes = self.text.as_bytes();
        let crlf = self
            .lines
            .iter()
            .filter(|l| bytes.get(l.end) == Some(&b'\r'))
            .count();
        if crlf * 2 > self.lines.len() {
            "\r\n"
        } else {
            "\n"
        }
    }
}

fn split_lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    while start < text.len() {
        let nl = text[start..].find('\n').map_or(text.len(), |n| start + n);
        let end = if nl > start && bytes[nl - 1] == b'\r' {
            nl - 1
        } else {
            nl
        };
        out.push(Line {
            start,
            end,
            text: &text[start..end],
        });
        start = nl + 1;
    }
    out
}

/// At most three spaces of indentation removed (and a byte order mark).
fn strip_indent(line: &str) -> &str {
    let line = line.strip_prefix('\u{feff}').unwrap_or(line);
    let spaces = line.bytes().take(3).take_while(|b| *b == b' ').count();
    &line[spaces..]
}

fn fence_open(t: &str) -> Option<(char, usize)> {
    let ch = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = t.chars().take_while(|c| *c == ch).count();
    (run >= 3).then_some((ch, run))
}

fn heading(t: &str) -> Option<(usize, String)> {
    let level = t.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &t[level..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let text = rest.trim();
    // A closing run of `#` preceded by a space is not part of the text.
    let trimmed = text.trim_end_matches('#');
    let text = if trimmed.len() < text.len() && (trimmed.is_empty() || trimmed.ends_with(' ')) {
        trimmed.trim_end()
    } else {
        text
    };
    Some((level, text.to_owned()))
}

fn is_table_line(line: &str) -> bool {
    strip_indent(line).starts_with('|')
}

fn is_separator(line: &str) -> bool {
    if !is_table_line(line) {
        return false;
    }
    let cells = split_cells(line);
    !cells.is_empty()
        && cells.iter().all(|r| {
            let c = line[r.clone()].trim();
            let inner = c.strip_prefix(':').unwrap_or(c);
            let inner = inner.strip_suffix(':').unwrap_or(inner);
            !inner.is_empty() && inner.bytes().all(|b| b == b'-')
        })
}

/// The byte ranges of a row's cells: between unescaped pipes, the leading pipe
/// required, the trailing one optional.
fn split_cells(line: &str) -> Vec<Range<usize>> {
    let offset = line.len() - strip_indent(line).len();
    let bytes = line.as_bytes();
    let mut pipes = Vec::new();
    let mut i = offset;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'|' => pipes.push(i),
            _ => {}
        }
        i += 1;
    }
    let mut cells: Vec<Range<usize>> = pipes.windows(2).map(|w| w[0] + 1..w[1]).collect();
    if let Some(&last) = pipes.last()
        && !line[last + 1..].trim().is_empty()
    {
        cells.push(last + 1..line.len());
    }
    cells
}

/// A header or heading reduced to its words: letters, digits and single spaces,
/// lowercase (`**Name** 👤` → `name`).
pub fn words(text: &str) -> String {
    let mut out = String::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&word.to_lowercase());
    }
    out
}

/// A cell's visible text: a link becomes its label, emphasis and code marks go, and
/// symbols (emoji) at either end are dropped.
pub fn plain(text: &str) -> String {
    let text = link(text).map_or(text, |(label, _)| label);
    let text: String = text
        .replace("\\|", "|")
        .chars()
        .filter(|c| !matches!(c, '*' | '`' | '~'))
        // A control character (a lone `\r` a script left in the line) is no part of a
        // name or role: a space.
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    text.trim_matches(|c: char| {
        c.is_whitespace() || c == '_' || !(c.is_alphanumeric() || c.is_ascii_punctuation())
    })
    .to_owned()
}

/// `[label](target)` at the start of a cell, as (label, target).
pub fn link(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim().strip_prefix('[')?;
    let close = rest.find("](")?;
    let label = &rest[..close];
    let after = &rest[close + 2..];
    let end = after.find(')')?;
    Some((label, after[..end].trim()))
}

/// Whether a cell is empty or a dash placeholder (`—`, `-`, `n/a`).
pub fn is_blank(text: &str) -> bool {
    matches!(
        plain(text).to_ascii_lowercase().as_str(),
        "" | "-" | "—" | "–" | "n/a" | "none"
    )
}

/// Replaces `cell`'s text by `new` inside `line`, keeping the padding: as wide as
/// before when its column is `aligned` (see [`Table::aligned`]) and `new` fits, else
/// one space either side (a compact table stays compact).
pub fn cell_replacement(original: &str, new: &str, aligned: bool) -> String {
    let width = original.chars().count();
    let lead = original.chars().take_while(|c| *c == ' ').count().min(1);
    let body = format!("{}{new}", " ".repeat(lead));
    let len = body.chars().count();
    if aligned && len < width {
        format!("{body}{}", " ".repeat(width - len))
    } else {
        format!("{body} ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const TEAM: &str = "\u{feff}# Team Roster\r\n\r\n## Coordinator\r\n\r\n| Name | Role |\r\n|---|---|\r\n| Squad | Coordinator |\r\n\r\n## Members\r\n\r\n| Name | Role | Charter | Status |\r\n| :--- | --- | --- | ---: |\r\n| McManus | Backend \\| API | `.squad/agents/mcmanus/charter.md` | ✅ Active |\r\n| Ralph | Monitor | — | 🔄 Monitor\r\n\r\n```\r\n## Not a heading\r\n| a | b |\r\n|---|---|\r\n```\r\n### Sub\r\ntext\r\n## Project Context ##\r\n- **Owner:** x\r\n";

    #[test]
    fn headings_sections_and_fences() {
        let doc = Doc::parse(TEAM);
        let texts: Vec<(usize, &str)> = doc
            .headings
            .iter()
            .map(|h| (h.level, h.text.as_str()))
            .collect();
        assert_eq!(
            texts,
            [
                (1, "Team Roster"),
                (2, "Coordinator"),
                (2, "Members"),
                (3, "Sub"),
                (2, "Project Context")
            ]
        );
        assert_eq!(doc.line_ending(), "\r\n");
        // The H1's own lines end at the next heading; its section is everything.
        assert_eq!(doc.own_lines(0), 1..2);
        assert_eq!(doc.section(0).end, doc.lines.len());
        // Members' section includes its sub-heading; its own lines stop there.
        assert!(doc.section(2).end > doc.own_lines(2).end);
        assert_eq!(doc.text_of(doc.section(4)), "- **Owner:** x");
    }

    #[test]
    fn tables_with_spans_escapes_and_a_missing_trailing_pipe() {
        let doc = Doc::parse(TEAM);
        let t = doc.table_in(doc.own_lines(2)).unwrap();
        assert_eq!(t.column("name"), Some(0));
        assert_eq!(t.column("STATUS"), Some(3));
        assert_eq!(t.column("model"), None);
        assert_eq!(t.rows.len(), 2);
        let cells: Vec<&str> = t.rows[0].cells.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            cells,
            [
                "McManus",
                "Backend \\| API",
                "`.squad/agents/mcmanus/charter.md`",
                "✅ Active"
            ]
        );
        assert_eq!(&TEAM[t.rows[0].cells[0].span.clone()], " McManus ");
        assert_eq!(t.rows[1].cells.len(), 4, "{:?}", t.rows[1]);
        assert_eq!(t.rows[1].cells[3].text, "🔄 Monitor");
        // Tables inside fenced code are not tables.
        assert!(doc.table_in(doc.own_lines(3)).is_none());
        assert!(doc.table_in(doc.own_lines(0)).is_none());
    }

    #[test]
    fn plain_text_of_cells() {
        assert_eq!(plain("**Fact Checker** 🔍"), "Fact Checker");
        assert_eq!(plain("`@copilot`"), "@copilot");
        assert_eq!(plain("[Dallas](agents/dallas/charter.md)"), "Dallas");
        assert_eq!(plain("Tony Stark (Iron Man)"), "Tony Stark (Iron Man)");
        assert_eq!(plain("✅ Active"), "Active");
        assert_eq!(plain("QA \\| Release"), "QA | Release");
        assert_eq!(
            link("[charter](.squad/agents/ripley/charter.md)"),
            Some(("charter", ".squad/agents/ripley/charter.md"))
        );
        assert!(is_blank(" — ") && is_blank("") && !is_blank("x"));
        assert_eq!(words("**Team Members** 👥"), "team members");
    }

    #[test]
    fn replacement_keeps_width_when_it_can() {
        assert_eq!(
            cell_replacement(" Tester       ", "QA", true),
            " QA           "
        );
        assert_eq!(
            cell_replacement(" Tester ", "Quality Owner", true),
            " Quality Owner "
        );
        assert_eq!(cell_replacement("x", "y", true), "y ");
        // A compact table stays compact.
        assert_eq!(
            cell_replacement(" Aspire Generalist ", "Aspire Lead", false),
            " Aspire Lead "
        );
        let text = "| Name | Role |\n|---|---|\n| A | Backend Dev |\n| Bo | QA |\n";
        let t = Doc::parse(text).table_in(0..4).unwrap();
        assert!(!t.aligned(1, text));
        let text =
            "| Name | Role        |\n|---|---|\n| A    | Backend Dev |\n| Bo   | QA          |\n";
        let t = Doc::parse(text).table_in(0..4).unwrap();
        assert!(t.aligned(0, text) && t.aligned(1, text));
    }
}

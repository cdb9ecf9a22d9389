//! A tolerant reader of YAML front matter: the top-level keys of the block between
//! the first two `---` lines of a Markdown file.
//!
//! Real agent files are often not strict YAML (unquoted `: ` inside a description,
//! duplicate keys, tabs), and a strict parser would drop the whole file. This reader
//! reads what a person meant and says, in a warning, where the text is not strict
//! YAML. It understands plain, quoted (`'…'`, `"…"`, across lines) and block (`|`,
//! `>`) scalars, flow (`[a, b]`) and block (`- a`) lists of scalars; nested mappings
//! are recognised and not read. Anchors, aliases and tags are never expanded (an
//! alias bomb costs nothing) and nothing is interpolated.

/// A top-level value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// No value (`key:` alone, `null`, `~`).
    Empty,
    /// A scalar, as text.
    Scalar(String),
    /// A list of scalars.
    List(Vec<String>),
    /// A mapping or a list of mappings: present, not read.
    Nested,
}

/// One top-level key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// Its value.
    pub value: Value,
    /// Its line in the file (1-based).
    pub line: usize,
}

/// The keys of one front matter block, in order, and where it was not strict YAML.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrontMatter {
    /// Top-level keys in file order; a duplicate key keeps its first value.
    pub entries: Vec<Entry>,
    /// One line per place the text is not strict YAML (or was not read).
    pub warnings: Vec<String>,
    /// Keys whose value may not be what the file meant: given twice, an unclosed quote
    /// or `[`, a `key:` line a quote ran over, misaligned list items, or a line that
    /// starts like the key but could not be read (`tools:Read`). A caller deciding
    /// access from a key fails closed on it.
    pub doubtful: Vec<String>,
}

impl FrontMatter {
    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.iter().find(|e| e.key == key).map(|e| &e.value)
    }

    /// Whether `key`'s value may not be what the file meant (see [`Self::doubtful`]).
    pub fn is_doubtful(&self, key: &str) -> bool {
        self.doubtful.iter().any(|d| d == key)
    }

    fn doubt(&mut self, key: &str) {
        if !self.is_doubtful(key) {
            self.doubtful.push(key.to_owned());
        }
    }
}

/// Splits a file into its front matter and body: `None` when the first line (after a
/// byte order mark) is not `---` or no closing `---` (or `...`) line follows. The
/// third value is the body's first line number (1-based).
pub fn split(text: &str) -> Option<(&str, &str, usize)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first_end = text.find('\n')?;
    if text[..first_end].trim_end() != "---" {
        return None;
    }
    let mut at = first_end + 1;
    let mut line = 2;
    while at <= text.len() {
        let end = text[at..].find('\n').map_or(text.len(), |n| at + n);
        let l = text[at..end].trim_end();
        if l == "---" || l == "..." {
            let body = if end < text.len() {
                &text[end + 1..]
            } else {
                ""
            };
            return Some((&text[first_end + 1..at], body, line + 1));
        }
        if end == text.len() {
            break;
        }
        at = end + 1;
        line += 1;
    }
    None
}

struct Lines<'a> {
    lines: Vec<&'a str>,
}

fn indent(line: &str) -> usize {
    line.chars().take_while(|c| *c == ' ' || *c == '\t').count()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// Reads the top-level keys of a front matter block (without its `---` lines).
pub fn parse(front: &str) -> FrontMatter {
    let src = Lines {
        lines: front
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect(),
    };
    let mut fm = FrontMatter::default();
    let mut seen = std::collections::HashSet::new();
    if src.lines.iter().any(|l| {
        l.chars()
            .take_while(|c| *c == ' ' || *c == '\t')
            .any(|c| c == '\t')
    }) {
        fm.warnings
            .push("indented with tabs (not YAML); read as spaces".to_owned());
    }
    let mut i = 0;
    while i < src.lines.len() {
        let line = src.lines[i];
        if is_blank_or_comment(line) {
            i += 1;
            continue;
        }
        if indent(line) > 0 {
            fm.warnings.push(format!(
                "line {}: indented line outside a key; ignored",
                i + 2
            ));
            i += 1;
            continue;
        }
        let Some((key, rest)) = key_of(line) else {
            fm.warnings
                .push(format!("line {}: not a `key: value` line; ignored", i + 2));
            // `tools:Read` is no key to YAML, but it is what the file meant to say
            // about `tools`: whoever reads that key must not take it as absent.
            if let Some(word) = leading_word(line) {
                fm.doubt(word);
            }
            i += 1;
            continue;
        };
        let line_no = i + 2;
        let warned = fm.warnings.len();
        let (value, next) = src.value(i, rest, &key, &mut fm.warnings);
        if fm.warnings[warned..].iter().any(|w| w.contains(DOUBT)) {
            fm.doubt(&key);
        }
        // A quote that runs on over lines reads a `key: value` line at the left margin
        // as part of its text (the whole block, when it is never closed): whatever that
        // line said about its key is in doubt, and a caller deciding access from the
        // key must not take it as absent.
        for (at, l) in src.lines.iter().enumerate().take(next).skip(i + 1) {
            if let Some((swallowed, _)) = key_of(l).filter(|_| indent(l) == 0) {
                fm.warnings.push(format!(
                    "line {}: `{swallowed}:` was read as part of `{key}`'s quoted value; \
                     `{swallowed}` is in doubt",
                    at + 2
                ));
                fm.doubt(&swallowed);
            }
        }
        if !seen.insert(key.clone()) {
            fm.warnings.push(format!(
                "line {line_no}: duplicate key `{key}`; the first one is used"
            ));
            fm.doubt(&key);
        } else {
            fm.entries.push(Entry {
                key,
                value,
                line: line_no,
            });
        }
        i = next;
    }
    fm
}

/// A block list item: `-` alone or followed by a space or tab.
fn is_item(line: &str) -> bool {
    let t = line.trim_start();
    t == "-" || t.starts_with("- ") || t.starts_with("-\t")
}

/// Marks a warning that leaves its key's value in doubt.
const DOUBT: &str = "read to the end of the block";

/// The word a line that is no `key: value` starts with, as a key it may have meant.
fn leading_word(line: &str) -> Option<&str> {
    let end = line
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(line.len());
    Some(&line[..end]).filter(|w| !w.is_empty() && !w.starts_with('-'))
}

/// `key: rest` (the key may be quoted); `rest` is what follows the colon.
fn key_of(line: &str) -> Option<(String, &str)> {
    if let Some(q @ ('"' | '\'')) = line.chars().next() {
        let close = line[1..].find(q)? + 1;
        let rest = line[close + 1..].strip_prefix(':')?;
        return Some((line[1..close].to_owned(), rest));
    }
    let colon = line
        .char_indices()
        .find(|&(i, c)| {
            c == ':'
                && line[i + 1..]
                    .chars()
                    .next()
                    .is_none_or(|n| n == ' ' || n == '\t')
        })?
        .0;
    let key = line[..colon].trim();
    if key.is_empty() || key.starts_with('-') || key.contains(' ') {
        return None;
    }
    Some((key.to_owned(), &line[colon + 1..]))
}

impl Lines<'_> {
    /// The value starting with `rest` on line `i`; returns it and the next line to read.
    fn value(&self, i: usize, rest: &str, key: &str, warnings: &mut Vec<String>) -> (Value, usize) {
        let line_no = i + 2;
        let rest = rest.trim();
        if let Some(c @ ('&' | '*' | '!')) = rest.chars().next() {
            warnings.push(format!(
                "line {line_no}: `{key}` starts with `{c}` (an anchor, alias or tag); not expanded, read as text"
            ));
        }
        match rest.chars().next() {
            None => self.indented_block(i, key, warnings),
            Some('|' | '>') if is_block_header(rest) => {
                let (text, next) = self.block_scalar(i, rest.starts_with('>'));
                (Value::Scalar(text), next)
            }
            Some(q @ ('"' | '\'')) => {
                let (text, next, closed) = self.quoted(i, rest, q);
                if !closed {
                    warnings.push(format!(
                        "line {line_no}: `{key}` has an unclosed quote; read to the end of the block"
                    ));
                }
                (Value::Scalar(text), next)
            }
            Some('[') => {
                let (items, next, closed) = self.flow_list(i, rest);
                if !closed {
                    warnings.push(format!(
                        "line {line_no}: `{key}` has an unclosed `[`; read to the end of the block"
                    ));
                }
                (Value::List(items), next)
            }
            Some('{') => (Value::Nested, self.skip_indented(i + 1)),
            Some(_) => {
                let mut text = strip_comment(rest).to_owned();
                let mut next = i + 1;
                // Continuation lines of a plain scalar are folded with spaces.
                while next < self.lines.len() && indent(self.lines[next]) > 0 {
                    let l = self.lines[next].trim();
                    if !l.is_empty() {
                        text.push(' ');
                        text.push_str(strip_comment(l));
                    }
                    next += 1;
                }
                if text.contains(": ") {
                    warnings.push(format!(
                        "line {line_no}: `{key}` holds an unquoted `: ` (not strict YAML); read as text"
                    ));
                }
                let value = match text.as_str() {
                    "null" | "~" | "Null" | "NULL" => Value::Empty,
                    _ => Value::Scalar(text),
                };
                (value, next)
            }
        }
    }

    /// A key with nothing after the colon: a block list, a nested mapping, or empty.
    /// The list's items may stand at the key's own column (`tools:` then `- Read`),
    /// as YAML allows and most emitters write them.
    fn indented_block(&self, i: usize, key: &str, warnings: &mut Vec<String>) -> (Value, usize) {
        let next = match self.lines[i + 1..]
            .iter()
            .position(|l| !is_blank_or_comment(l))
        {
            Some(at) if is_item(self.lines[i + 1 + at]) => self.column_items(i + 1 + at),
            _ => self.skip_indented(i + 1),
        };
        let block: Vec<&str> = self.lines[i + 1..next]
            .iter()
            .copied()
            .filter(|l| !is_blank_or_comment(l))
            .collect();
        let Some(first) = block.first() else {
            return (Value::Empty, next);
        };
        if !first.trim_start().starts_with('-') {
            return self.value_below(i, first, key, next, warnings);
        }
        let base = indent(first);
        let mut items = Vec::new();
        let mut misaligned = false;
        for l in &block {
            let t = l.trim_start();
            if is_item(l) {
                // An item at another column than the first is not YAML; it is read
                // as an item all the same, and the key's value is in doubt.
                misaligned |= indent(l) != base;
                let item = t[1..].trim();
                if key_of(item).is_some() || item.starts_with('{') {
                    return (Value::Nested, next);
                }
                items.push(unquote(strip_comment(item)));
            } else if indent(l) > base {
                // A continuation of the item above.
                if let Some(last) = items.last_mut() {
                    last.push(' ');
                    last.push_str(t);
                }
            } else {
                misaligned = true;
            }
        }
        if misaligned {
            warnings.push(format!(
                "`{key}`: list items are misaligned (not YAML); every item read anyway, {DOUBT}"
            ));
        }
        (Value::List(items), next)
    }

    /// The value of a key written on the indented lines below it (line `i`), whose first
    /// line is `first` and which end before `next`: a nested mapping when that line is
    /// a `key: value` one; else a scalar or flow list as it would read after the colon
    /// (YAML allows it there, and formatters such as Prettier put a long description or
    /// tool list on the next line). A plain scalar's lines are folded with spaces, a
    /// blank line between them kept as a line break.
    fn value_below(
        &self,
        i: usize,
        first: &str,
        key: &str,
        next: usize,
        warnings: &mut Vec<String>,
    ) -> (Value, usize) {
        let text = first.trim();
        if key_of(text).is_some() || text.starts_with('{') {
            return (Value::Nested, next);
        }
        let at = i
            + 1
            + self.lines[i + 1..next]
                .iter()
                .position(|l| !is_blank_or_comment(l))
                .unwrap_or(0);
        match text.chars().next() {
            // Read as it would be after the colon, from the line it starts on.
            Some('"' | '\'' | '[') => {
                let (value, end) = self.value(at, text, key, warnings);
                (value, end.max(next))
            }
            _ => {
                let mut out = String::new();
                let mut blank = false;
                for l in &self.lines[at..next] {
                    let t = l.trim();
                    if t.is_empty() {
                        blank = true;
                        continue;
                    }
                    if t.starts_with('#') {
                        continue;
                    }
                    if !out.is_empty() {
                        out.push(if blank { '\n' } else { ' ' });
                    }
                    blank = false;
                    out.push_str(strip_comment(t));
                }
                if out.contains(": ") {
                    warnings.push(format!(
                        "line {}: `{key}` holds an unquoted `: ` (not strict YAML); read as text",
                        at + 2
                    ));
                }
                (Value::Scalar(out), next)
            }
        }
    }

    /// The end of a block list written at column 0, starting with the item on line
    /// `from`: its items, their indented continuations, blank lines and comments.
    fn column_items(&self, from: usize) -> usize {
        let mut j = from;
        while j < self.lines.len() {
            let l = self.lines[j];
            if !(is_blank_or_comment(l) || indent(l) > 0 || is_item(l)) {
                break;
            }
            j += 1;
        }
        while j > from && self.lines[j - 1].trim().is_empty() {
            j -= 1;
        }
        j
    }

    /// The first line at or after `from` that is not indented (blank lines skipped).
    fn skip_indented(&self, from: usize) -> usize {
        let mut j = from;
        while j < self.lines.len() && (indent(self.lines[j]) > 0 || self.lines[j].trim().is_empty())
        {
            j += 1;
        }
        // Trailing blank lines belong to nobody.
        while j > from && self.lines[j - 1].trim().is_empty() {
            j -= 1;
        }
        j
    }

    fn block_scalar(&self, i: usize, folded: bool) -> (String, usize) {
        let next = self.skip_indented(i + 1);
        let body = &self.lines[i + 1..next];
        let base = body
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| indent(l))
            .min()
            .unwrap_or(0);
        let mut out = String::new();
        let mut prev_blank = true;
        for l in body {
            let text = if l.trim().is_empty() {
                ""
            } else {
                &l[l.char_indices().nth(base).map_or(l.len(), |(b, _)| b)..]
            };
            if !folded {
                out.push_str(text);
                out.push('\n');
            } else if text.is_empty() {
                out.push('\n');
                prev_blank = true;
            } else {
                if !prev_blank {
                    out.push(' ');
                }
                out.push_str(text);
                prev_blank = false;
            }
        }
        (out.trim_end().to_owned(), next)
    }

    /// A quoted scalar starting at `rest` on line `i`, possibly over several lines.
    fn quoted(&self, i: usize, rest: &str, q: char) -> (String, usize, bool) {
        let mut out = String::new();
        let mut j = i;
        let mut text = &rest[1..];
        loop {
            let mut chars = text.char_indices().peekable();
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' if q == '"' => match chars.next().map(|(_, e)| e) {
                        Some('n') => out.push('\n'),
                        Some('t') => out.push('\t'),
                        Some('"') => out.push('"'),
                        Some('\\') => out.push('\\'),
                        Some('/') => out.push('/'),
                        Some(other) => {
                            out.push('\\');
                            out.push(other);
                        }
                        None => {}
                    },
                    '\'' if q == '\'' && chars.peek().is_some_and(|(_, n)| *n == '\'') => {
                        chars.next();
                        out.push('\'');
                    }
                    c if c == q => return (out, j + 1, true),
                    c => out.push(c),
                }
            }
            j += 1;
            if j >= self.lines.len() {
                return (out, j, false);
            }
            out.push(' ');
            text = self.lines[j].trim_start();
        }
    }

    /// A flow list starting at `rest` on line `i`, possibly over several lines: a
    /// line that continues it may stand at any column (YAML reads the list to its
    /// `]`), but a `key: value` line at column 0 ends an unclosed one. Each line is
    /// scanned once.
    fn flow_list(&self, i: usize, rest: &str) -> (Vec<String>, usize, bool) {
        let mut joined = rest.to_owned();
        let mut scan = FlowScan::default();
        let mut end = scan.feed(&joined, 0);
        let mut j = i;
        while end.is_none() && j + 1 < self.lines.len() {
            let l = self.lines[j + 1];
            if indent(l) == 0 && key_of(l).is_some() {
                break;
            }
            j += 1;
            joined.push(' ');
            let from = joined.len();
            joined.push_str(l.trim());
            end = scan.feed(&joined[from..], from);
        }
        let inner = &joined[1..end.unwrap_or(joined.len())];
        let items = split_flow(inner)
            .into_iter()
            .map(|s| unquote(s.trim()))
            .filter(|s| !s.is_empty())
            .collect();
        (items, j + 1, end.is_some())
    }
}

/// Where a flow list that starts at 0 closes, found by feeding its text in pieces.
#[derive(Default)]
struct FlowScan {
    depth: usize,
    quote: Option<char>,
}

impl FlowScan {
    /// Scans `piece`, which starts at `offset` of the whole text; the index of the
    /// closing `]` in the whole text, once seen.
    fn feed(&mut self, piece: &str, offset: usize) -> Option<usize> {
        for (i, c) in piece.char_indices() {
            match (self.quote, c) {
                (Some(q), c) if c == q => self.quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => self.quote = Some(c),
                (None, '[') => self.depth += 1,
                (None, ']') => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(offset + i);
                    }
                }
                (None, _) => {}
            }
        }
        None
    }
}

fn is_block_header(rest: &str) -> bool {
    strip_comment(rest)
        .chars()
        .skip(1)
        .all(|c| matches!(c, '-' | '+') || c.is_ascii_digit())
}

fn split_flow(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[' | '{' | '(') => depth += 1,
            (None, ']' | '}' | ')') => depth = depth.saturating_sub(1),
            (None, ',') if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            (None, _) => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// A plain scalar without a trailing ` # comment`.
fn strip_comment(s: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev_space = true;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') if prev_space => quote = Some(c),
            (None, '#') if prev_space && i > 0 => return s[..i].trim_end(),
            _ => {}
        }
        prev_space = c == ' ' || c == '\t';
    }
    s.trim_end()
}

/// An item without surrounding quotes.
fn unquote(s: &str) -> String {
    let s = s.trim();
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            let inner = &s[1..s.len() - 1];
            return if q == '\'' {
                inner.replace("''", "'")
            } else {
                inner.replace("\\\"", "\"")
            };
        }
    }
    s.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn scalar(fm: &FrontMatter, key: &str) -> String {
        match fm.get(key) {
            Some(Value::Scalar(s)) => s.clone(),
            other => panic!("{key}: {other:?}"),
        }
    }

    fn list(fm: &FrontMatter, key: &str) -> Vec<String> {
        match fm.get(key) {
            Some(Value::List(l)) => l.clone(),
            other => panic!("{key}: {other:?}"),
        }
    }

    #[test]
    fn split_needs_an_opening_line_and_a_closing_one() {
        assert_eq!(
            split("\u{feff}---\r\nname: a\r\n---\r\nbody\n"),
            Some(("name: a\r\n", "body\n", 4))
        );
        assert_eq!(split("---\nname: a\n...\n"), Some(("name: a\n", "", 4)));
        assert_eq!(split("# Title\n\n---\nname: a\n---\n"), None);
        assert_eq!(split("---\nname: a\n"), None);
        assert_eq!(split("no front matter"), None);
    }

    #[test]
    fn the_shapes_real_agent_files_use() {
        let fm = parse(
            "name: code-reviewer\n\
             description: Use this agent when reviewing. Examples: <example>Context: x</example>\n\
             tools: Read, Glob, Grep, Bash(git diff:*)\n\
             model: claude-sonnet-4-6      # opus | sonnet\n\
             color: green\n\
             disallowedTools: [\"Write\", 'Edit', MultiEdit]\n\
             skills:\n  - pdca\n  - \"review\"\n\
             hooks:\n  PreToolUse:\n    - matcher: \"Write\"\n      command: \"${CLAUDE_PLUGIN_ROOT}/x.sh\"\n\
             mcpServers:\n  github:\n    command: npx\n\
             maxTurns: 15\n\
             tools: Write\n",
        );
        assert_eq!(scalar(&fm, "name"), "code-reviewer");
        assert!(scalar(&fm, "description").starts_with("Use this agent when reviewing. Examples:"));
        assert_eq!(scalar(&fm, "tools"), "Read, Glob, Grep, Bash(git diff:*)");
        assert_eq!(scalar(&fm, "model"), "claude-sonnet-4-6");
        assert_eq!(list(&fm, "disallowedTools"), ["Write", "Edit", "MultiEdit"]);
        assert_eq!(list(&fm, "skills"), ["pdca", "review"]);
        assert_eq!(fm.get("hooks"), Some(&Value::Nested));
        assert_eq!(fm.get("mcpServers"), Some(&Value::Nested));
        assert_eq!(scalar(&fm, "maxTurns"), "15");
        let keys: Vec<&str> = fm.entries.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "name",
                "description",
                "tools",
                "model",
                "color",
                "disallowedTools",
                "skills",
                "hooks",
                "mcpServers",
                "maxTurns"
            ]
        );
        assert_eq!(fm.warnings.len(), 2, "{:?}", fm.warnings);
        assert!(fm.warnings[0].contains("unquoted `: `"));
        assert!(fm.warnings[1].contains("duplicate key `tools`"));
    }

    /// Values written on the indented lines below their key, as Prettier formats a long
    /// description or tool list (they were read as a nested mapping: the role became
    /// the name, and the tools read-only, without a word).
    #[test]
    fn values_on_the_lines_below_their_key() {
        let fm = parse(
            "name: fullstack-developer\n\
             description:\n  End-to-end feature owner. Delivers complete\n  solutions.\n\n  Second paragraph.\n\
             tools:\n  Read, Write, MultiEdit, Bash\n\
             quoted:\n  \"a: b\n  c\"\n\
             flow:\n  [Read,\n   Grep]\n\
             nested:\n  key: value\n  other: 2\n\
             model: sonnet\n",
        );
        assert_eq!(
            scalar(&fm, "description"),
            "End-to-end feature owner. Delivers complete solutions.\nSecond paragraph."
        );
        assert_eq!(scalar(&fm, "tools"), "Read, Write, MultiEdit, Bash");
        assert_eq!(scalar(&fm, "quoted"), "a: b c");
        assert_eq!(list(&fm, "flow"), ["Read", "Grep"]);
        assert_eq!(fm.get("nested"), Some(&Value::Nested));
        assert_eq!(scalar(&fm, "model"), "sonnet");
        assert!(fm.warnings.is_empty(), "{:?}", fm.warnings);
        assert!(fm.doubtful.is_empty(), "{:?}", fm.doubtful);
        let fm = parse("tools:\n  \"Read, Write\nmodel: x\n");
        assert!(fm.is_doubtful("tools"), "{fm:?}");
    }

    #[test]
    fn block_scalars_quotes_and_empty_values() {
        let fm = parse(
            "description: |\n  Line one.\n\n  Line two: with colon.\n\
             summary: >-\n  Folded\n  text.\n\n  Next.\n\
             quoted: \"a \\\"b\\\"\n  c\"\n\
             single: 'it''s'\n\
             tools: []\n\
             empty:\n\
             nothing: ~\n\
             flow: [Read,\n  Grep]\n\
             alias: *ref\n",
        );
        assert_eq!(
            scalar(&fm, "description"),
            "Line one.\n\nLine two: with colon."
        );
        assert_eq!(scalar(&fm, "summary"), "Folded text.\nNext.");
        assert_eq!(scalar(&fm, "quoted"), "a \"b\" c");
        assert_eq!(scalar(&fm, "single"), "it's");
        assert_eq!(list(&fm, "tools"), Vec::<String>::new());
        assert_eq!(fm.get("empty"), Some(&Value::Empty));
        assert_eq!(fm.get("nothing"), Some(&Value::Empty));
        assert_eq!(list(&fm, "flow"), ["Read", "Grep"]);
        assert_eq!(scalar(&fm, "alias"), "*ref");
        assert_eq!(fm.warnings.len(), 1, "{:?}", fm.warnings);
    }

    #[test]
    fn lists_at_the_keys_column_and_flow_lists_across_columns() {
        let fm = parse(
            "tools:\n- Read\n- \"Bash(git diff:*)\"\n  # a comment\n\n- Grep\nmodel: opus\n\
             skills: [a,\nb, c]\nname: x\n",
        );
        assert_eq!(list(&fm, "tools"), ["Read", "Bash(git diff:*)", "Grep"]);
        assert_eq!(scalar(&fm, "model"), "opus");
        assert_eq!(list(&fm, "skills"), ["a", "b", "c"]);
        assert_eq!(scalar(&fm, "name"), "x");
        assert!(fm.warnings.is_empty(), "{:?}", fm.warnings);
        assert!(fm.doubtful.is_empty(), "{:?}", fm.doubtful);
        // An unclosed list ends at the next key line, and is in doubt.
        let fm = parse("tools: [Read, Grep\nmodel: opus\n");
        assert_eq!(list(&fm, "tools"), ["Read", "Grep"]);
        assert_eq!(scalar(&fm, "model"), "opus");
        assert_eq!(fm.doubtful, ["tools"]);
        // A quote read over lines swallows the keys at the margin it runs over: closed
        // or not, each of them is in doubt (an unclosed one puts its own key in doubt
        // too), and none is taken as absent without a word.
        for (text, doubtful) in [
            (
                "description: \"Reads code.\ntools: Read, Grep\nmodel: haiku\n",
                vec!["description", "tools", "model"],
            ),
            ("model: 'sonnet\ntools: Read\n", vec!["model", "tools"]),
            (
                "description: \"Reads\npermissionMode: plan\"\nname: x\n",
                vec!["permissionMode"],
            ),
        ] {
            let fm = parse(text);
            assert_eq!(fm.doubtful, doubtful, "{text:?}");
            assert!(fm.get("tools").is_none() && fm.get("permissionMode").is_none());
            assert!(
                fm.warnings.iter().any(|w| w.contains("quoted value")),
                "{:?}",
                fm.warnings
            );
        }
        // Lines of a quote that only look like keys when indented are its text.
        let fm = parse("description: \"one\n  tools: two\"\ntools: Read\n");
        assert!(fm.doubtful.is_empty(), "{:?}", fm.doubtful);
        assert_eq!(scalar(&fm, "tools"), "Read");
        // Misaligned items are all read (the warning says so), and in doubt.
        let fm = parse("tools:\n    - Read\n  - Bash\n");
        assert_eq!(list(&fm, "tools"), ["Read", "Bash"]);
        assert_eq!(fm.doubtful, ["tools"]);
        // Tabs are warned about.
        let fm = parse("tools:\n\t- Read\n");
        assert_eq!(list(&fm, "tools"), ["Read"]);
        assert!(
            fm.warnings.iter().any(|w| w.contains("tabs")),
            "{:?}",
            fm.warnings
        );
    }

    /// Each line is read once: a 250 KB flow list over 62,000 lines, or 40,000 keys,
    /// took 50 s and 7 s in a debug build when every line rescanned what came before.
    #[test]
    fn large_front_matter_is_read_in_one_pass() {
        let mut text = "tools: [\n".to_owned();
        for _ in 0..62_000 {
            text.push_str(" R,\n");
        }
        text.push_str(" Read]\n");
        for i in 0..40_000 {
            text.push_str(&format!("k{i}:\n"));
        }
        let t0 = std::time::Instant::now();
        let fm = parse(&text);
        assert_eq!(list(&fm, "tools").len(), 62_001);
        assert_eq!(fm.entries.len(), 40_001);
        // Generous for a debug build on a loaded machine; the quadratic reader took
        // minutes here.
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            t0.elapsed()
        );
    }

    #[test]
    fn garbage_never_panics_and_is_reported() {
        let fm = parse("  stray\n: nokey\n- item\nname: \"unclosed\nok: 1\n[x\n");
        assert!(fm.warnings.len() >= 3, "{:?}", fm.warnings);
        for text in [
            "",
            "\n\n",
            ":",
            "a:\n  - b: c\n",
            "k: [[[[",
            "k: '",
            "k: |",
            "k: >\n",
        ] {
            let _ = parse(text);
        }
    }
}

//! Finding the handoff JSON inside an agent's reply.
//!
//! Fences are recognised per line, like CommonMark: an opening line of three or more
//! backticks (or tildes) with an info string, closed by a line of at least as many of
//! the same character and nothing else. Because a JSON string cannot hold a raw line
//! break, a "```" inside a JSON string never sits alone on a line, so fences quoted
//! inside the handoff do not end the block.

/// The JSON text chosen from `reply`: the last fenced block tagged `json` (or untagged
/// and starting with `{`), else the whole reply if it is one object, else `None`.
pub fn extract(reply: &str) -> Option<&str> {
    last_fenced(reply).or_else(|| {
        let t = reply.trim();
        (t.starts_with('{') && t.ends_with('}')).then_some(t)
    })
}

/// An open fence: its character, its length, where its content starts and its tag.
struct Open {
    ch: u8,
    len: usize,
    content_start: usize,
    tagged_json: bool,
}

fn last_fenced(reply: &str) -> Option<&str> {
    let mut found = None;
    let mut open: Option<Open> = None;
    let mut offset = 0;
    for raw in reply.split_inclusive('\n') {
        let line_start = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']).trim_start();
        match &open {
            None => {
                if let Some((ch, len)) = fence_run(line) {
                    let info = line[len..].trim();
                    // CommonMark: a backtick fence's info string holds no backtick.
                    if ch == b'`' && info.contains('`') {
                        continue;
                    }
                    let lang = info.split_whitespace().next().unwrap_or("");
                    let tagged_json = ["json", "jsonc", "json5"]
                        .iter()
                        .any(|j| lang.eq_ignore_ascii_case(j));
                    if tagged_json || lang.is_empty() {
                        open = Some(Open {
                            ch,
                            len,
                            content_start: offset,
                            tagged_json,
                        });
                    } else {
                        // Another language: still a fence whose content we must skip.
                        open = Some(Open {
                            ch,
                            len,
                            content_start: usize::MAX,
                            tagged_json: false,
                        });
                    }
                }
            }
            Some(o) => {
                let closes = fence_run(line).is_some_and(|(ch, len)| {
                    ch == o.ch && len >= o.len && line[len..].trim().is_empty()
                });
                if closes {
                    if let Some(block) = candidate(reply, o, line_start) {
                        found = Some(block);
                    }
                    open = None;
                }
            }
        }
    }
    // An unclosed fence runs to the end of the reply (a truncated answer).
    if let Some(o) = &open
        && let Some(block) = candidate(reply, o, reply.len())
    {
        found = Some(block);
    }
    found
}

fn candidate<'r>(reply: &'r str, o: &Open, end: usize) -> Option<&'r str> {
    if o.content_start == usize::MAX {
        return None;
    }
    let body = reply.get(o.content_start.min(end)..end)?.trim();
    (o.tagged_json || body.starts_with('{')).then_some(body)
}

/// The fence character and run length if `line` starts with ≥ 3 backticks or tildes.
fn fence_run(line: &str) -> Option<(u8, usize)> {
    let ch = *line.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = line.bytes().take_while(|&b| b == ch).count();
    (len >= 3).then_some((ch, len))
}

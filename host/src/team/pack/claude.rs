//! Claude Code subagents: `.claude/agents/**/*.md` at the repository root (never a
//! subproject's nested `.claude/`) and the user's `~/.claude/agents/`, read as the
//! team `claude`; on a name clash the repository's file wins, member by member.
//!
//! # Mapping
//! - The front matter between the first two `---` lines is read tolerantly (see
//!   [`super::frontmatter`]); a file without front matter or without a valid `name`
//!   (`^[a-z0-9][a-z0-9-]*$`) is skipped with why — a name is never made up from
//!   the file name.
//! - role = the first sentence of `description`; charter = the body (cut at 4,000
//!   characters); `model` as written (`inherit` or absent: the run's model).
//! - Access from `tools`: absent asks for everything (full); `[]` is read-only; full
//!   when any of Write, Edit, MultiEdit, NotebookEdit or Bash (any form) remains
//!   after `disallowedTools`; `permissionMode: plan` is read-only. `Task`/`Agent`,
//!   `mcp__*` and web tools never become a capability (dropped with a note).
//! - `maxTurns` may only lower the turn limit. `hooks`, `mcpServers`, `skills` and
//!   every other field are listed as ignored; nothing is run, read or expanded
//!   (`${…}` stays text).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::frontmatter::{self, Value};
use super::{EntryKind, MAX_DEPTH, MAX_PACK_FILES, PackDir};
use crate::team::file::{
    Access, DEFAULT_WORKER_TIMEOUT, MAX_NAME_LEN, Member, Skipped, SkippedWhat, Team, TeamFormat,
    TeamSource,
};
use crate::team::limits::{MAX_CHARTER_CHARS, MAX_MEMBERS, cut_warning};
use crate::trust::read::{MAX_FILE_BYTES, cap_chars};
use crate::vocab::Mode;

/// The name of the imported team.
pub const TEAM_NAME: &str = "claude";
/// The repository's agent directory.
pub const REPO_DIR: &str = ".claude/agents";

/// The user's agent directory, `$HOME/.claude/agents`.
pub fn user_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude/agents"))
}

/// The agents of one directory (the user's or the repository's).
#[derive(Debug, Default)]
pub struct Layer {
    /// Members in file order (by path).
    pub members: Vec<Member>,
    /// Files that are not members, each with why.
    pub skipped: Vec<Skipped>,
    /// What was noticed (one line each, naming the file).
    pub warnings: Vec<String>,
    /// The directory read, and how messages name it.
    place: (PathBuf, PathBuf),
}

/// `README.md` files (any case) read beside [`MAX_PACK_FILES`] agent files: collections
/// keep one per folder, and they are no agents unless they have front matter.
const MAX_READMES: usize = 32;
/// Files not read for the limits that are named one by one (the rest are counted).
const MAX_NAMED_UNREAD: usize = 128;

/// Reads every `*.md` below `dir` (at most [`MAX_DEPTH`] levels, [`MAX_PACK_FILES`]
/// files), each beneath the directory. `shown` names the directory in messages;
/// `source` makes each member's source from its file.
pub fn read_layer(dir: &PackDir, shown: &Path, source: fn(PathBuf) -> TeamSource) -> Layer {
    let mut layer = Layer {
        place: (dir.root().to_path_buf(), shown.to_path_buf()),
        ..Layer::default()
    };
    let files = walk(dir, shown, &mut layer);
    for rel in files {
        let shown_file = shown.join(&rel);
        let skip = |reason: String| Skipped {
            what: SkippedWhat::File(shown_file.clone()),
            reason,
        };
        let text = match dir.read(&rel, MAX_FILE_BYTES) {
            Ok(t) => t,
            Err(e) => {
                layer.skipped.push(skip(super::refusal(&e, &shown_file)));
                continue;
            }
        };
        // The file's own warning names it; the parser's notes are named here.
        let unclean = text.warning(&shown_file, MAX_FILE_BYTES);
        let mut notes: Vec<String> = Vec::new();
        match parse_agent(&text.cleaned(), text.truncated, &mut notes) {
            Ok(mut m) => {
                if let Some(first) = layer.members.iter().find(|o| o.name == m.name) {
                    let first = first.file.clone().unwrap_or_default();
                    layer.skipped.push(skip(format!(
                        "name `{}` is already defined by {}",
                        m.name,
                        super::shown(dir.root(), &first).display()
                    )));
                    continue;
                }
                let file = dir.root().join(&rel);
                m.source = source(file.clone());
                m.file = Some(file);
                layer.warnings.extend(unclean);
                layer.warnings.extend(
                    notes
                        .into_iter()
                        .map(|n| format!("{}: {n}", shown_file.display())),
                );
                layer.members.push(m);
            }
            Err(reason) => layer.skipped.push(skip(format!(
                "{reason}{}",
                text.encoding_hint().unwrap_or_default()
            ))),
        }
    }
    layer
}

/// The `*.md` files below the root, by path; symlinked directories are not followed.
fn walk(dir: &PackDir, shown: &Path, layer: &mut Layer) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut readmes = 0usize;
    let mut queue: Vec<(PathBuf, usize)> = vec![(PathBuf::new(), 0)];
    let mut unread: Vec<PathBuf> = Vec::new();
    let mut more = 0usize;
    while let Some((rel, depth)) = queue.pop() {
        let listing = match dir.list(&rel) {
            Ok(l) => l,
            Err(e) => {
                layer.warnings.push(format!(
                    "{}: cannot be listed: {e}",
                    shown.join(&rel).display()
                ));
                continue;
            }
        };
        let here = shown.join(&rel);
        layer.warnings.extend(listing.past_cap(&here));
        // A name that is not UTF-8 is never read; an agent file among them is named.
        for name in &listing.not_utf8 {
            if name.to_ascii_lowercase().ends_with(".md") {
                layer.skipped.push(Skipped {
                    what: SkippedWhat::File(here.join(name)),
                    reason: "its name is not UTF-8; not read (rename it)".into(),
                });
            }
        }
        let mut subdirs = Vec::new();
        for e in listing.entries {
            let path = rel.join(&e.name);
            let is_md = Path::new(&e.name)
                .extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("md"));
            match e.kind {
                EntryKind::Dir if depth + 1 < MAX_DEPTH => subdirs.push(path),
                EntryKind::Dir => layer.warnings.push(format!(
                    "{}: deeper than {MAX_DEPTH} levels; not read",
                    shown.join(&path).display()
                )),
                EntryKind::File | EntryKind::Symlink if is_md => {
                    let readme = e.name.eq_ignore_ascii_case("readme.md");
                    if readme && readmes < MAX_READMES {
                        readmes += 1;
                        files.push(path);
                    } else if !readme && files.len() - readmes < MAX_PACK_FILES {
                        files.push(path);
                    } else {
                        more += 1;
                        if unread.len() < MAX_NAMED_UNREAD {
                            unread.push(path);
                        }
                    }
                }
                EntryKind::Symlink if !is_md => layer.skipped.push(Skipped {
                    what: SkippedWhat::File(shown.join(&path)),
                    reason: "a symlink that is not a .md file; not followed".into(),
                }),
                EntryKind::Other if is_md => layer.skipped.push(Skipped {
                    what: SkippedWhat::File(shown.join(&path)),
                    reason: "not a regular file".into(),
                }),
                EntryKind::File | EntryKind::Symlink | EntryKind::Other => {}
            }
        }
        // Depth-first in name order, so files come out sorted by path.
        for d in subdirs.into_iter().rev() {
            queue.push((d, depth + 1));
        }
    }
    if more > 0 {
        let named = if more > unread.len() {
            format!("the first {} are named in what was skipped", unread.len())
        } else {
            "each is named in what was skipped".to_owned()
        };
        layer.warnings.push(format!(
            "{}: more than {MAX_PACK_FILES} agent files; {more} were not read ({named})",
            shown.display()
        ));
        for path in unread {
            layer.skipped.push(Skipped {
                what: SkippedWhat::File(shown.join(&path)),
                reason: format!(
                    "not read: past the limit of {MAX_PACK_FILES} agent files (taken in path order)"
                ),
            });
        }
    }
    files.sort();
    files
}

/// Whether `name` is a valid subagent name: `^[a-z0-9][a-z0-9-]*$`, at most 64.
pub fn valid_agent_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.len() <= MAX_NAME_LEN
}

/// The keys crewbox acts on; every other key is reported as ignored.
const READ_KEYS: &[&str] = &[
    "name",
    "description",
    "tools",
    "disallowedTools",
    "model",
    "permissionMode",
    "maxTurns",
];

/// The keys that decide what a subagent may do.
const ACCESS_KEYS: &[&str] = &["tools", "disallowedTools", "permissionMode"];

/// The access key `key` reads as when it is not spelled as one: with invisible
/// characters (format characters such as U+200B, bidi marks, whitespace) left out, case
/// folded and `-`/`_` dropped.
fn access_look_alike(key: &str) -> Option<&'static str> {
    if ACCESS_KEYS.contains(&key) {
        return None;
    }
    let folded: String = key
        .chars()
        .filter(|&c| !(c.is_whitespace() || c == '-' || c == '_' || invisible(c)))
        .flat_map(char::to_lowercase)
        .collect();
    ACCESS_KEYS
        .iter()
        .copied()
        .find(|k| k.to_ascii_lowercase() == folded)
}

/// Whether `c` shows nothing: the format characters that occur in text (soft hyphen,
/// zero-width spaces and joiners, bidi marks, embeddings and isolates, word joiner and
/// invisible operators, the byte order mark) and the variation selectors.
fn invisible(c: char) -> bool {
    crate::text::is_invisible(c)
        || matches!(c,
            '\u{34f}' | '\u{61c}' | '\u{180b}'..='\u{180f}'
            | '\u{200c}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2065}'..='\u{206f}'
            | '\u{fe00}'..='\u{fe0f}')
}

/// `key` as it is spelled: characters that show nothing written `\uXXXX`, as are
/// controls.
fn spelled(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        if invisible(c) || crate::text::is_unsafe(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// What a tool name asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolClass {
    /// Reading or planning only.
    Read,
    /// Writing files or running commands: full access.
    Write,
    /// Never a capability (delegation, MCP, the web).
    Never,
    /// Not a tool crewbox knows.
    Unknown,
}

/// The class of a tool entry (`Bash(git diff:*)` is Bash).
pub fn classify(tool: &str) -> ToolClass {
    let base = tool.split('(').next().unwrap_or(tool).trim();
    if base.starts_with("mcp__") {
        return ToolClass::Never;
    }
    match base {
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "Bash" => ToolClass::Write,
        "Read" | "Grep" | "Glob" | "LS" | "NotebookRead" | "TodoWrite" | "TodoRead"
        | "ExitPlanMode" | "BashOutput" | "KillShell" | "KillBash" | "AskUserQuestion" => {
            ToolClass::Read
        }
        "Task" | "Agent" | "WebFetch" | "WebSearch" | "Skill" | "SlashCommand" => ToolClass::Never,
        _ => ToolClass::Unknown,
    }
}

/// The tools every subagent has when `tools` is absent, as far as access goes.
const ALL_TOOLS: &[&str] = &[
    "Read",
    "Grep",
    "Glob",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "Bash",
];

fn tool_list(v: Option<&Value>) -> Option<Vec<String>> {
    match v? {
        Value::Empty => Some(Vec::new()),
        Value::Scalar(s) => Some(
            s.split(',')
                .map(|t| t.trim().trim_matches(['"', '\'']).to_owned())
                .filter(|t| !t.is_empty())
                .collect(),
        ),
        Value::List(l) => Some(l.iter().filter(|t| !t.is_empty()).cloned().collect()),
        Value::Nested => Some(Vec::new()),
    }
}

/// The access a subagent asks for, with notes on the tools that were dropped.
pub fn requested_access(
    tools: Option<&Value>,
    disallowed: Option<&Value>,
    permission_mode: Option<&str>,
    notes: &mut Vec<String>,
) -> Access {
    let listed = tool_list(tools);
    let mut set: Vec<String> = match &listed {
        None => ALL_TOOLS.iter().map(|t| (*t).to_owned()).collect(),
        Some(l) => l.clone(),
    };
    let denied = tool_list(disallowed).unwrap_or_default();
    set.retain(|t| {
        !denied.iter().any(|d| {
            if d.contains('(') {
                d == t
            } else {
                t.split('(').next().unwrap_or(t).trim() == d
            }
        })
    });
    let never: Vec<&str> = set
        .iter()
        .filter(|t| classify(t) == ToolClass::Never)
        .map(String::as_str)
        .collect();
    if !never.is_empty() {
        notes.push(format!(
            "tools `{}` never become a crewbox capability; dropped",
            never.join("`, `")
        ));
    }
    let unknown: Vec<&str> = set
        .iter()
        .filter(|t| classify(t) == ToolClass::Unknown)
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        notes.push(format!("unknown tools `{}` ignored", unknown.join("`, `")));
    }
    let writes = set.iter().any(|t| classify(t) == ToolClass::Write);
    match permission_mode {
        Some("plan") => Access::ReadOnly,
        _ if writes => Access::Full,
        _ => Access::ReadOnly,
    }
}

/// The first sentence of a description, as a role label (at most 160 characters).
pub fn first_sentence(description: &str) -> String {
    let flat: String = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let end = flat
        .char_indices()
        .find(|&(i, c)| {
            // The full-width marks of Chinese and Japanese text end a sentence with no
            // space after them.
            matches!(c, '。' | '！' | '？' | '｡')
                || matches!(c, '.' | '!' | '?')
                    && flat[i + c.len_utf8()..]
                        .chars()
                        .next()
                        .is_none_or(|n| n == ' ')
                    && !(c == '.' && ends_with_abbreviation(&flat[..i]))
        })
        .map_or(flat.len(), |(i, c)| match c {
            '.' | '。' | '｡' => i,
            _ => i + c.len_utf8(),
        });
    let sentence = flat[..end].trim();
    if sentence.chars().count() > 160 {
        let cut: String = sentence.chars().take(159).collect();
        format!("{cut}…")
    } else {
        sentence.to_owned()
    }
}

/// Whether `text` ends with an abbreviation whose period ends no sentence (`e.g`).
fn ends_with_abbreviation(text: &str) -> bool {
    const ABBREVIATIONS: [&str; 8] = ["e.g", "i.e", "etc", "vs", "cf", "incl", "approx", "esp"];
    let word = text
        .rsplit(' ')
        .next()
        .unwrap_or(text)
        .trim_start_matches('(');
    ABBREVIATIONS.iter().any(|a| word.eq_ignore_ascii_case(a))
}

fn scalar(v: Option<&Value>) -> Option<&str> {
    match v? {
        Value::Scalar(s) => Some(s.trim()),
        Value::Empty | Value::List(_) | Value::Nested => None,
    }
}

/// One agent file as a member (source and file are set by the caller); `Err` with
/// why the file is not a member. `cut` says the file was larger than the read cap.
pub fn parse_agent(text: &str, cut: bool, notes: &mut Vec<String>) -> Result<Member, String> {
    let Some((front, body, _)) = frontmatter::split(text) else {
        let opens = text
            .strip_prefix('\u{feff}')
            .unwrap_or(text)
            .lines()
            .next()
            .is_some_and(|l| l.trim_end() == "---");
        if cut && opens {
            return Err(format!(
                "its front matter does not end within the {} KiB read (the file is larger)",
                MAX_FILE_BYTES / 1024
            ));
        }
        if opens {
            return Err(
                "its front matter opens with `---` on line 1 but no closing `---` line follows"
                    .into(),
            );
        }
        return Err("no front matter (a `---` block at the top of the file)".into());
    };
    let fm = frontmatter::parse(front);
    notes.extend(fm.warnings.iter().map(|w| format!("front matter {w}")));
    let name = match scalar(fm.get("name")) {
        Some(n) if crate::team::file::reserved_name(n) => {
            return Err(format!(
                "`name: {n}` is the name of crewbox's own {n} in team runs; rename the subagent"
            ));
        }
        Some(n) if valid_agent_name(n) => n.to_owned(),
        Some(n) => {
            return Err(format!(
                "`name: {n}` is not a valid subagent name (lowercase letters, digits and `-`)"
            ));
        }
        None if fm.get("name").is_some() => {
            return Err("an empty `name` in its front matter".into());
        }
        None => return Err("no `name` in its front matter".into()),
    };
    let role = scalar(fm.get("description"))
        .map(first_sentence)
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| name.clone());
    let model = scalar(fm.get("model"))
        .filter(|m| !m.is_empty() && !m.eq_ignore_ascii_case("inherit"))
        .map(str::to_owned);
    let mode = scalar(fm.get("permissionMode"));
    if fm.get("tools") == Some(&Value::Empty) {
        notes.push(
            "`tools` has no value: read as no tools (read-only); leave the key out for \
             every tool"
                .into(),
        );
    }
    let mut requested = requested_access(fm.get("tools"), fm.get("disallowedTools"), mode, notes);
    // A key that decides access and could not be read for certain (given twice, an
    // unclosed list, misaligned items, `tools:Read`, a mapping where a list belongs)
    // never widens it: the member asks for read-only access, as a file that lists only
    // reading tools would.
    let mut doubtful: Vec<&str> = ACCESS_KEYS
        .iter()
        .copied()
        .filter(|k| fm.is_doubtful(k) || fm.get(k) == Some(&Value::Nested))
        .collect();
    // A key that reads as one of them once invisible characters, case and `-`/`_` are
    // set aside (`\u{200b}tools`, `Tools`, `disallowed-tools`) is what the file meant
    // to say about access, though neither YAML nor Claude Code reads it so.
    for e in &fm.entries {
        if let Some(k) = access_look_alike(&e.key).filter(|k| !doubtful.contains(k)) {
            notes.push(format!(
                "line {}: key `{}` looks like `{k}` but is not spelled so",
                e.line,
                spelled(&e.key)
            ));
            doubtful.push(k);
        }
    }
    if !doubtful.is_empty() {
        notes.push(format!(
            "`{}` could not be read for certain; the member asks for read-only access rather than guess",
            doubtful.join("`, `")
        ));
        requested = Access::ReadOnly;
    }
    let mut ignored: Vec<String> = fm
        .entries
        .iter()
        .map(|e| e.key.clone())
        .filter(|k| !READ_KEYS.contains(&k.as_str()))
        .collect();
    if let Some(m) = mode.filter(|m| !matches!(*m, "plan" | "default")) {
        notes.push(format!(
            "permissionMode `{m}` never widens what crewbox grants"
        ));
        ignored.push("permissionMode".into());
    }
    let max_turns = match scalar(fm.get("maxTurns")) {
        None => None,
        Some(t) => match t.parse::<u64>() {
            Ok(0) | Err(_) => {
                notes.push(format!("maxTurns `{t}` is not a positive number; ignored"));
                None
            }
            // More turns than any limit: the run's own limit applies, as without it.
            Ok(n) => Some(u32::try_from(n).unwrap_or(u32::MAX)),
        },
    };
    let mut charter = body.trim().to_owned();
    let mut truncated = cap_chars(&mut charter, MAX_CHARTER_CHARS);
    if cut && !truncated {
        charter.push_str("\n[truncated]");
        truncated = true;
    }
    if truncated {
        notes.push(cut_warning("the body (charter)", MAX_CHARTER_CHARS));
    }
    Ok(Member {
        mcp: Vec::new(),
        role,
        display: name.clone(),
        charter: Some(charter).filter(|c| !c.is_empty()),
        charter_file: None,
        access: requested,
        requested_access: requested,
        provider: None,
        model,
        validators: Vec::new(),
        source: TeamSource::Builtin,
        file: None,
        truncated,
        ignored,
        max_turns,
        name,
    })
}

/// The team `claude` from the user's and the repository's agents: a repository file
/// wins over the user's of the same name. `Err` (a note) when neither has a member;
/// `Ok(None)` when neither directory exists.
pub fn team(
    user: Option<(Layer, PathBuf)>,
    repo: Option<(Layer, PathBuf)>,
) -> Result<Option<Team>, String> {
    let source = match (&repo, &user) {
        (Some((_, p)), _) => TeamSource::Repo(p.clone()),
        (None, Some((_, p))) => TeamSource::User(p.clone()),
        (None, None) => return Ok(None),
    };
    let mut warnings = Vec::new();
    let mut skipped = Vec::new();
    let mut members: Vec<Member> = Vec::new();
    let (repo_layer, user_layer) = (repo.map(|r| r.0), user.map(|u| u.0));
    let places: Vec<(PathBuf, PathBuf)> = [&repo_layer, &user_layer]
        .into_iter()
        .flatten()
        .map(|l| l.place.clone())
        .collect();
    // A member's file as the messages of its layer name it.
    let shown_file = |file: PathBuf| {
        places
            .iter()
            .find_map(|(root, shown)| file.strip_prefix(root).ok().map(|rel| shown.join(rel)))
            .unwrap_or(file)
    };
    for layer in [&repo_layer, &user_layer].into_iter().flatten() {
        warnings.extend(layer.warnings.iter().cloned());
        skipped.extend(layer.skipped.iter().cloned());
    }
    if let Some(l) = repo_layer {
        members.extend(l.members);
    }
    for m in user_layer.map(|l| l.members).unwrap_or_default() {
        match members.iter().find(|r| r.name == m.name) {
            Some(r) => warnings.push(format!(
                "member `{}`: the repository's {} replaces your {}",
                m.name,
                r.file.as_deref().unwrap_or(Path::new("")).display(),
                m.file.as_deref().unwrap_or(Path::new("")).display()
            )),
            None => members.push(m),
        }
    }
    if members.len() > MAX_MEMBERS {
        for m in members.drain(MAX_MEMBERS..) {
            skipped.push(Skipped {
                what: SkippedWhat::File(shown_file(m.file.unwrap_or_default())),
                reason: format!("more than {MAX_MEMBERS} members"),
            });
        }
    }
    if members.is_empty() {
        return Err(format!(
            "no Claude Code subagent crewbox can use ({}); no claude team",
            super::skipped_note(&skipped, "file", "files")
        ));
    }
    Ok(Some(Team {
        mcp: Vec::new(),
        name: TEAM_NAME.into(),
        mode: Mode::Orchestrate,
        shared_context: None,
        routing: None,
        orchestrator: None,
        evaluator: None,
        members,
        validators: Vec::new(),
        delivery: Default::default(),
        worker_timeout: DEFAULT_WORKER_TIMEOUT,
        source,
        format: TeamFormat::Claude,
        shadows: Vec::new(),
        warnings,
        skipped,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn access(tools: Option<&str>, denied: Option<&str>, mode: Option<&str>) -> Access {
        let fm = |key: &str, v: Option<&str>| {
            v.map(|v| {
                frontmatter::parse(&format!("{key}: {v}\n")).entries[0]
                    .value
                    .clone()
            })
        };
        requested_access(
            fm("tools", tools).as_ref(),
            fm("disallowedTools", denied).as_ref(),
            mode,
            &mut Vec::new(),
        )
    }

    /// The access a whole agent file asks for, and its notes.
    fn file_access(front: &str) -> (Access, Vec<String>) {
        let mut notes = Vec::new();
        let m = parse_agent(
            &format!("---\nname: a\n{front}---\nbody\n"),
            false,
            &mut notes,
        )
        .unwrap();
        (m.requested_access, notes)
    }

    /// What a file says about access is never lost to a typo: a quote left open (in
    /// any key) that runs over `tools:` or `permissionMode:`, an access key behind an
    /// invisible character or spelled in another case, and an empty `tools:` each make
    /// the member read-only, with a note that says why (probe 14: the first two asked
    /// for full access, and the agent wrote and ran commands).
    #[test]
    fn typos_around_access_keys_fail_closed_with_a_note() {
        use Access::{Full, ReadOnly};
        for (front, says) in [
            (
                "description: \"Reads code, never writes.\ntools: Read, Grep, Glob\nmodel: haiku\n",
                "`tools` could not be read for certain",
            ),
            (
                "model: 'sonnet\ntools: Read\n",
                "`tools` could not be read for certain",
            ),
            (
                "description: \"Plans.\npermissionMode: plan\n",
                "`permissionMode` could not be read for certain",
            ),
            (
                "\u{200b}tools: Read, Grep\n",
                "key `\\u200btools` looks like `tools`",
            ),
            ("Tools: Read\n", "key `Tools` looks like `tools`"),
            (
                "disallowed-tools: Bash\ntools: Read, Bash\n",
                "key `disallowed-tools` looks like `disallowedTools`",
            ),
            ("tools:\n", "`tools` has no value"),
            ("tools: ~\n", "`tools` has no value"),
        ] {
            let (access, notes) = file_access(front);
            assert_eq!(access, ReadOnly, "{front:?}: {notes:?}");
            assert!(
                notes.iter().any(|n| n.contains(says)),
                "{front:?}: {notes:?}"
            );
        }
        // Spelled right, nothing is in doubt.
        let (access, notes) = file_access("description: \"Writes.\"\ntools: Read, Edit\n");
        assert_eq!(access, Full, "{notes:?}");
        assert!(notes.is_empty(), "{notes:?}");
    }

    /// Why a file is not a member says what is wrong with it.
    #[test]
    fn skip_reasons_name_what_is_wrong() {
        let why = |text: &str| parse_agent(text, false, &mut Vec::new()).unwrap_err();
        let open = why("---\nname: a\ntools: Read\nbody\n");
        assert!(open.contains("no closing `---`"), "{open}");
        assert!(why("name: a\n").contains("no front matter"));
        let mut notes = Vec::new();
        let m = parse_agent(
            "---\nname: a\nmaxTurns: 5000000000\n---\n",
            false,
            &mut notes,
        )
        .unwrap();
        assert_eq!(m.max_turns, Some(u32::MAX));
        assert!(notes.is_empty(), "{notes:?}");
        let m = parse_agent("---\nname: a\nmaxTurns: -3\n---\n", false, &mut notes).unwrap();
        assert_eq!(m.max_turns, None);
        assert!(notes[0].contains("not a positive number"), "{notes:?}");
    }

    /// Lists as YAML writes them, and front matter that cannot be read for certain:
    /// a restriction is never lost. A `disallowedTools` list at the key's column was
    /// read as empty, so a reviewer whose file forbids writing asked for (and, as the
    /// user's own agent, got) full access.
    #[test]
    fn a_tool_restriction_is_never_lost_to_how_it_is_written() {
        use Access::{Full, ReadOnly};
        let forbid = "disallowedTools:\n- Write\n- Edit\n- MultiEdit\n- NotebookEdit\n- Bash\n";
        assert_eq!(
            file_access(forbid).0,
            ReadOnly,
            "{:?}",
            file_access(forbid).1
        );
        assert_eq!(file_access("tools:\n- Read\n- Bash\n").0, Full);
        let cases = [
            // A flow list continued at column 0 (valid YAML).
            "disallowedTools: [Write, Edit, MultiEdit,\nNotebookEdit, Bash]\n",
            // Misaligned items: not YAML; every item is read, and access is in doubt.
            "disallowedTools:\n    - Write\n    - Edit\n    - MultiEdit\n  - NotebookEdit\n  - Bash\n",
            // No space after the colon: no key to YAML, but it meant `tools`.
            "tools:Read\n",
            // A key given twice.
            "tools: Bash\ntools: Read\n",
            "disallowedTools: Bash\ndisallowedTools: Read\n",
            // Unclosed.
            "tools: [Read, Bash\n",
        ];
        for front in cases {
            let (access, notes) = file_access(front);
            assert_eq!(access, ReadOnly, "{front:?}: {notes:?}");
        }
        let (_, notes) = file_access("tools:Read\n");
        assert!(
            notes
                .iter()
                .any(|n| n.contains("could not be read for certain")),
            "{notes:?}"
        );
    }

    #[test]
    fn the_names_of_crewboxs_own_agents_are_refused() {
        let reserved = parse_agent(
            "---\nname: orchestrator\n---\nbody\n",
            false,
            &mut Vec::new(),
        );
        assert!(
            reserved
                .as_ref()
                .is_err_and(|e| e.contains("crewbox's own orchestrator")),
            "{reserved:?}"
        );
    }

    #[test]
    fn tools_to_access() {
        use Access::{Full, ReadOnly};
        let table = [
            (None, None, None, Full),
            (Some("[]"), None, None, ReadOnly),
            (Some("\"\""), None, None, ReadOnly),
            (Some("Read, Grep, Glob"), None, None, ReadOnly),
            (Some("Read, Edit"), None, None, Full),
            (Some("[Read, MultiEdit]"), None, None, Full),
            (Some("NotebookEdit"), None, None, Full),
            (Some("Read, Bash(git diff:*)"), None, None, Full),
            (Some("Read, Bash"), Some("Bash"), None, ReadOnly),
            (Some("Read, Bash(git:*)"), Some("Bash"), None, ReadOnly),
            (Some("Read, Bash"), Some("Bash(rm:*)"), None, Full),
            (
                None,
                Some("Write, Edit, MultiEdit, NotebookEdit, Bash"),
                None,
                ReadOnly,
            ),
            (None, Some("Write, Edit"), None, Full),
            (
                None,
                Some("[\"Write\", \"Edit\", \"MultiEdit\", \"NotebookEdit\"]"),
                None,
                Full,
            ),
            (Some("Write"), None, Some("plan"), ReadOnly),
            (None, None, Some("plan"), ReadOnly),
            (None, None, Some("bypassPermissions"), Full),
            (
                Some("Read, Task, Agent, WebFetch, WebSearch, mcp__github__create_pr"),
                None,
                None,
                ReadOnly,
            ),
            (Some("Read, Frobnicate"), None, None, ReadOnly),
        ];
        for (tools, denied, mode, want) in table {
            assert_eq!(
                access(tools, denied, mode),
                want,
                "{tools:?} - {denied:?} ({mode:?})"
            );
        }
    }

    #[test]
    fn dropped_tools_are_noted() {
        let mut notes = Vec::new();
        let fm = frontmatter::parse("tools: Read, Task, mcp__x__y, Zap\n");
        requested_access(fm.get("tools"), None, None, &mut notes);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("`Task`, `mcp__x__y`"), "{notes:?}");
        assert!(notes[1].contains("`Zap`"), "{notes:?}");
    }

    #[test]
    fn first_sentences() {
        assert_eq!(
            first_sentence("Reviews code for bugs. Use after every commit."),
            "Reviews code for bugs"
        );
        assert_eq!(
            first_sentence(
                "Use this agent when\n  reviewing v1.2 code! Examples: <example>x</example>"
            ),
            "Use this agent when reviewing v1.2 code!"
        );
        assert_eq!(first_sentence("No period"), "No period");
        assert_eq!(
            first_sentence("Reviews code, e.g. Rust and Go. Use it often."),
            "Reviews code, e.g. Rust and Go"
        );
        assert_eq!(first_sentence(&"x".repeat(300)).chars().count(), 160);
        assert_eq!(
            first_sentence("Python/PyTorch/ML 代码审查。检查代码质量、数值安全。"),
            "Python/PyTorch/ML 代码审查"
        );
        assert_eq!(first_sentence("本当ですか？はい。"), "本当ですか？");
    }

    #[test]
    fn a_description_and_tools_below_their_keys_and_tools_as_a_mapping() {
        let mut notes = Vec::new();
        let m = parse_agent(
            "---\nname: fullstack-developer\ndescription:\n  End-to-end feature owner. Delivers.\n\
             tools:\n  Read, Write, MultiEdit, Bash\n---\nYou build.\n",
            false,
            &mut notes,
        )
        .unwrap();
        assert_eq!(m.role, "End-to-end feature owner");
        assert_eq!(m.requested_access, Access::Full, "{notes:?}");
        // A mapping where the list belongs is not read as "no tools" in silence.
        let mut notes = Vec::new();
        let m = parse_agent(
            "---\nname: odd\ndescription: Odd.\ndisallowedTools:\n  Write: true\n---\nx\n",
            false,
            &mut notes,
        )
        .unwrap();
        assert_eq!(m.requested_access, Access::ReadOnly);
        assert!(
            notes
                .iter()
                .any(|n| n.contains("`disallowedTools` could not be read")),
            "{notes:?}"
        );
        let mut notes = Vec::new();
        let e = parse_agent("---\nname:\ndescription: x\n---\nbody", false, &mut notes);
        assert_eq!(e.unwrap_err(), "an empty `name` in its front matter");
    }

    #[test]
    fn agent_files() {
        let mut notes = Vec::new();
        let m = parse_agent(
            "\u{feff}---\r\nname: code-reviewer\r\ndescription: Reviews diffs. Also more.\r\nmodel: inherit\r\n\
             tools: Read, Grep\r\ncolor: green\r\nhooks:\r\n  Stop:\r\n    - command: rm -rf /\r\n\
             maxTurns: 7\r\npermissionMode: bypassPermissions\r\n---\r\n\r\nYou review ${HOME}.\r\n",
            false,
            &mut notes,
        )
        .unwrap();
        assert_eq!(m.name, "code-reviewer");
        assert_eq!(m.role, "Reviews diffs");
        assert_eq!(m.model, None);
        assert_eq!(m.requested_access, Access::ReadOnly);
        assert_eq!(m.charter.as_deref(), Some("You review ${HOME}."));
        assert_eq!(m.max_turns, Some(7));
        assert_eq!(m.ignored, ["color", "hooks", "permissionMode"]);
        assert!(
            notes.iter().any(|n| n.contains("never widens")),
            "{notes:?}"
        );
        for (text, why) in [
            ("no front matter\n", "no front matter"),
            ("# Title\n---\nname: x\n---\n", "no front matter"),
            ("---\ndescription: x\n---\nbody", "no `name`"),
            ("---\nname: Code_Reviewer\n---\nbody", "not a valid"),
            ("---\nname: -x\n---\n", "not a valid"),
        ] {
            let err = parse_agent(text, false, &mut Vec::new()).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
        // Front matter whose end the read cap cut off says so.
        let err =
            parse_agent("---\nname: x\ndescription: AAAA", true, &mut Vec::new()).unwrap_err();
        assert!(
            err.contains("does not end within the 256 KiB read"),
            "{err}"
        );
        let m = parse_agent(
            "---\nname: big\n---\n".to_owned().as_str(),
            true,
            &mut Vec::new(),
        )
        .unwrap();
        assert!(m.truncated);
    }
}

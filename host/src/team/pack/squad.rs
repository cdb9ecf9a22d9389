//! Squad packs: `.squad/` (legacy `.ai-team/`), chosen by the presence of `team.md`
//! (when both hold one, `.squad/` wins with a warning), read as the team `squad`.
//!
//! # Mapping
//! - The roster is the table right under a heading naming `Members` or `Roster`
//!   (any level and wording: `## Members`, `## Team Roster`, `### Members`); its
//!   columns are found by header (`Name` or `Member` needed; `Role`, `Charter`,
//!   `Status`, `Model` when present). With no such heading (PolyPilot's
//!   `# The Review Squad` + `| Member | Role | Expertise |`), the first table with a
//!   name and a `Role` column is the roster, with a warning. Other tables (Coordinator, `@copilot`, capability
//!   profiles, Project Context key/value tables) are not the roster. Row order is
//!   member order.
//! - Infrastructure rows are skipped by name, not by emoji (statuses are free text):
//!   Scribe, Ralph, the coordinator, `@` handles, humans, and rows whose status says
//!   inactive, retired, alumni and the like; each skipped row is listed with why.
//! - A member's name is the directory its Charter cell names (`agents/<dir>/…`,
//!   matched case-insensitively on disk), else Squad's slug of the display name
//!   (`McManus` → `mcmanus`, never `mc-manus`); the display name is kept. A
//!   directory with no roster row is not a member.
//! - The charter (`agents/<dir>/charter.md`) is the member's system prompt, cut at
//!   4,000 characters; `## Project Context` and `decisions.md` are the shared
//!   context and `routing.md` the routing hints (8,000 characters each at most).
//! - Model: `config.json` `agentModelOverrides.<name>`, then its `defaultModel`, then
//!   the charter's `## Model` preference, then a `Model` column (`auto`: the run's).
//!   `teamRoot`, `stateLocation` and every other path in `config.json` are never
//!   followed.
//! - Squad declares no tools, so every member asks for read-only access; what it
//!   gets is the user's pack ceiling (read-only unless raised), which raises it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::markdown::{self, Doc, Table};
use super::{Entry, EntryKind, PackDir, Text, slug};
use crate::team::file::{
    DEFAULT_WORKER_TIMEOUT, Member, Skipped, SkippedWhat, Team, TeamFormat, TeamSource, valid_name,
};
use crate::team::limits::{MAX_CHARTER_CHARS, MAX_CONTEXT_CHARS, MAX_MEMBERS, cut_warning};
use crate::trust::read::{Confined, MAX_FILE_BYTES, ReadError, cap_chars};
use crate::vocab::Mode;

/// The most bytes read from `config.json`.
const CONFIG_CAP: u64 = 64 * 1024;

/// The two layouts, in precedence order.
pub const LAYOUTS: [(&str, TeamFormat); 2] = [
    (".squad", TeamFormat::Squad),
    (".ai-team", TeamFormat::SquadLegacy),
];

/// The name of an imported Squad team.
pub const TEAM_NAME: &str = "squad";

/// Which columns of the roster mean what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Columns {
    /// `Name`.
    pub name: usize,
    /// `Role`.
    pub role: Option<usize>,
    /// `Charter`.
    pub charter: Option<usize>,
    /// `Status`.
    pub status: Option<usize>,
    /// `Model`.
    pub model: Option<usize>,
}

/// One roster row as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RosterRow {
    /// Index into the table's rows.
    pub row: usize,
    /// The name as shown.
    pub display: String,
    /// The role as shown.
    pub role: String,
    /// The member name, when the row is a member.
    pub name: Option<String>,
    /// The charter file relative to the pack (`agents/<dir>/charter.md`) when the
    /// row names one or one exists under its name.
    pub charter: Option<PathBuf>,
    /// Why the row is not a member.
    pub skip: Option<String>,
}

/// The roster table of `team.md`.
#[derive(Clone, Debug)]
pub struct Roster {
    /// The table, with its spans.
    pub table: Table,
    /// Its columns.
    pub columns: Columns,
    /// Its rows, read.
    pub rows: Vec<RosterRow>,
    /// Set when the roster was found without a Members/Roster heading.
    pub warning: Option<String>,
    /// What was not looked at in `agents/` (entries past the listing's cap, names that
    /// are not UTF-8), in words.
    pub unread: Vec<String>,
}

/// A Squad pack as found in a repository.
#[derive(Debug)]
pub struct SquadPack {
    /// `squad` or `squad-legacy`.
    pub format: TeamFormat,
    /// The pack directory relative to the repository (`.squad`).
    pub rel: PathBuf,
    /// The directory, every read beneath it.
    pub dir: PackDir,
    /// `team.md` as read.
    pub team_md: Text,
    /// What was noticed while choosing the layout.
    pub warnings: Vec<String>,
}

/// Finds the repository's Squad pack: `.squad/team.md`, else `.ai-team/team.md`.
/// `Ok(None)` when neither exists.
pub fn find(repo: &Confined) -> Result<Option<SquadPack>, ReadError> {
    let mut warnings = Vec::new();
    let mut chosen: Option<SquadPack> = None;
    // A layout that cannot be read never hides one that can: its error is a warning
    // once another is chosen, and the error only when none is.
    let mut refused: Option<ReadError> = None;
    for (rel, format) in LAYOUTS {
        match open(repo, Path::new(rel), format) {
            Ok(None) => {}
            Ok(Some(pack)) => match &chosen {
                // One directory under two names (`.squad -> .ai-team`) is one pack.
                Some(first) if first.dir.root() == pack.dir.root() => {}
                Some(first) => warnings.push(format!(
                    "both {0}/ and {rel}/ hold a team.md; {0}/ is used and {rel}/ ignored",
                    first.rel.display()
                )),
                None => chosen = Some(pack),
            },
            Err(e) => {
                warnings.push(format!("{rel}/ is ignored: {}", describe(&e)));
                refused.get_or_insert(e);
            }
        }
    }
    match (chosen, refused) {
        (Some(mut p), _) => {
            p.warnings = warnings;
            Ok(Some(p))
        }
        (None, Some(e)) => Err(e),
        (None, None) => Ok(None),
    }
}

/// The Squad pack in directory `rel` of the repository, when it holds a `team.md`.
pub fn open(
    repo: &Confined,
    rel: &Path,
    format: TeamFormat,
) -> Result<Option<SquadPack>, ReadError> {
    let Some(dir) = PackDir::in_repo(repo, rel)? else {
        return Ok(None);
    };
    let team_md = match dir.read(Path::new("team.md"), MAX_FILE_BYTES) {
        Ok(t) => t,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(relabel(e, &rel.display().to_string())),
    };
    Ok(Some(SquadPack {
        format,
        rel: rel.to_owned(),
        dir,
        team_md,
        warnings: Vec::new(),
    }))
}

/// Why a Squad layout could not be read: its directory is judged against the
/// repository, its `team.md` against the pack.
pub fn describe(e: &ReadError) -> String {
    if e.path().file_name().is_some_and(|n| n == "team.md") {
        super::refusal(e, e.path())
    } else {
        e.to_string()
    }
}

fn relabel(e: ReadError, rel: &str) -> ReadError {
    match e {
        ReadError::NotRegular { kind, .. } => ReadError::NotRegular {
            path: Path::new(rel).join("team.md"),
            kind,
        },
        ReadError::Escapes { .. } => ReadError::Escapes {
            path: Path::new(rel).join("team.md"),
        },
        other => other,
    }
}

/// Whether a heading names the roster (`Members`, `Team Roster`, …).
fn is_roster_heading(text: &str) -> bool {
    let w = markdown::words(text);
    let has = |word: &str| w.split(' ').any(|x| x == word);
    (has("members") || has("roster"))
        && !["human", "humans", "alumni", "former", "past", "retired"]
            .iter()
            .any(|x| has(x))
}

/// The roster table of a parsed `team.md`, or why there is none.
#[cfg(test)]
pub fn roster_table(doc: &Doc<'_>) -> Result<(Table, Columns), String> {
    roster_found(doc).map(|f| (f.table, f.columns))
}

/// A roster table as found: the table, its columns and, when it was found without
/// a Members/Roster heading, the warning that says so.
#[derive(Debug)]
pub struct FoundRoster {
    /// The table.
    pub table: Table,
    /// Its columns.
    pub columns: Columns,
    /// Set when no Members/Roster heading holds the roster.
    pub warning: Option<String>,
}

/// The name column of a roster table: `Name`, else `Member`.
fn name_column(table: &Table) -> Option<usize> {
    table.column("name").or_else(|| table.column("member"))
}

fn columns_of(table: &Table, name: usize) -> Columns {
    Columns {
        name,
        role: table.column("role"),
        charter: table.column("charter"),
        status: table.column("status"),
        model: table.column("model"),
    }
}

/// Whether a heading names a table that is never the roster (the coordinator,
/// humans, alumni).
fn is_other_heading(text: &str) -> bool {
    let w = markdown::words(text);
    w.split(' ').any(|x| {
        [
            "coordinator",
            "human",
            "humans",
            "alumni",
            "former",
            "past",
            "retired",
        ]
        .contains(&x)
    })
}

/// The roster of a parsed `team.md`: the table right under a Members/Roster heading;
/// when no such heading exists, the first table whose header has a name column
/// (`Name` or `Member`) and a `Role` column (outside Coordinator, human and alumni
/// sections), with a warning. `Err` says why there is none.
pub fn roster_found(doc: &Doc<'_>) -> Result<FoundRoster, String> {
    let mut seen_heading = false;
    for (h, heading) in doc.headings.iter().enumerate() {
        if !is_roster_heading(&heading.text) {
            continue;
        }
        seen_heading = true;
        let Some(table) = doc.table_in(doc.own_lines(h)) else {
            continue;
        };
        let Some(name) = name_column(&table) else {
            continue;
        };
        let columns = columns_of(&table, name);
        return Ok(FoundRoster {
            table,
            columns,
            warning: None,
        });
    }
    if seen_heading {
        return Err("its Members heading has no table with a `Name` column".into());
    }
    let mut start = 0;
    while let Some(table) = doc.table_in(start..doc.lines.len()) {
        start = table.last_line() + 1;
        let under = doc
            .headings
            .iter()
            .rev()
            .find(|h| h.line < table.header.line);
        if under.is_some_and(|h| is_other_heading(&h.text)) {
            continue;
        }
        let (Some(name), Some(_)) = (name_column(&table), table.column("role")) else {
            continue;
        };
        let columns = columns_of(&table, name);
        let header = markdown::plain(&table.header.cells[name].text);
        let warning = format!(
            "no `## Members` (or `## Roster`) heading; the first table with `{header}` and `Role` columns (line {}) is read as the roster",
            table.header.line + 1
        );
        return Ok(FoundRoster {
            table,
            columns,
            warning: Some(warning),
        });
    }
    Err(
        "it has no `## Members` (or `## Roster`) heading with a roster table, and no table with a `Name` (or `Member`) and a `Role` column"
            .into(),
    )
}

const INACTIVE: &[&str] = &[
    "inactive",
    "retired",
    "alumni",
    "alumnus",
    "archived",
    "deprecated",
    "removed",
    "dormant",
    "deactivated",
    "disabled",
    "departed",
    "former",
];

/// Why a row is not a member, judged by its name, role and status text.
fn infrastructure(display: &str, role: &str, status: &str) -> Option<String> {
    let name = display.to_lowercase();
    let status_words = markdown::words(status);
    let role_words = markdown::words(role);
    let has = |words: &str, w: &str| words.split(' ').any(|x| x == w);
    if display.starts_with('@') {
        return Some("a coding-agent handle, not a member".into());
    }
    match name.as_str() {
        "scribe" => return Some("Squad's session logger (infrastructure)".into()),
        "ralph" => return Some("Squad's work monitor (infrastructure)".into()),
        "squad" | "coordinator" => {
            return Some("the coordinator: crewbox's orchestrator plays this part".into());
        }
        _ => {}
    }
    if role_words == "coordinator" {
        return Some("the coordinator: crewbox's orchestrator plays this part".into());
    }
    if has(&status_words, "human") || has(&role_words, "human") {
        return Some("a human member".into());
    }
    if let Some(w) = INACTIVE.iter().find(|w| has(&status_words, w)) {
        return Some(format!(
            "status `{}` ({w}): not active",
            markdown::plain(status)
        ));
    }
    None
}

/// The `agents/<dir>/<file>` a Charter cell names: (dir, file), or `Err` with why
/// the cell names something else (`_alumni/`). `Ok(None)` when it names nothing.
fn charter_target(cell: &str) -> Result<Option<(String, String)>, String> {
    if markdown::is_blank(cell) {
        return Ok(None);
    }
    let target = match markdown::link(cell) {
        Some((_, t)) => t.to_owned(),
        None => cell.chars().filter(|c| *c != '`').collect::<String>(),
    };
    let parts: Vec<&str> = target
        .trim()
        .split(['/', '\\'])
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.iter().any(|p| p.eq_ignore_ascii_case("_alumni")) {
        return Err("an alumni charter (`_alumni/`)".into());
    }
    let at = parts.iter().rposition(|p| p.eq_ignore_ascii_case("agents"));
    Ok(match at {
        Some(i) if i + 3 == parts.len() && parts[i + 1] != ".." && parts[i + 2] != ".." => {
            Some((parts[i + 1].to_owned(), parts[i + 2].to_owned()))
        }
        _ => None,
    })
}

/// The entries of a pack's `agents/`, listed once, found by name as
/// [`PackDir::find`] finds them (an exact match first, then ignoring ASCII case).
struct AgentDirs {
    exact: HashMap<String, Entry>,
    folded: HashMap<String, Entry>,
    /// What the listing did not look at, in words.
    unread: Vec<String>,
}

impl AgentDirs {
    fn new(dir: &PackDir, shown: &Path) -> Self {
        let mut out = Self {
            exact: HashMap::new(),
            folded: HashMap::new(),
            unread: Vec::new(),
        };
        // Sorted by name: the first of names equal but for case wins, as in `find`.
        let listing = dir.list(Path::new("agents")).unwrap_or_default();
        out.unread = listing.warnings(&shown.join("agents"));
        for e in listing.entries {
            out.folded
                .entry(e.name.to_ascii_lowercase())
                .or_insert_with(|| e.clone());
            out.exact.insert(e.name.clone(), e);
        }
        out
    }

    fn find(&self, name: &str) -> Option<Entry> {
        self.exact
            .get(name)
            .or_else(|| self.folded.get(&name.to_ascii_lowercase()))
            .cloned()
    }
}

impl SquadPack {
    /// Where `team.md` is, for messages (relative to the repository).
    pub fn team_md_shown(&self) -> PathBuf {
        self.rel.join("team.md")
    }

    /// The roster rows of `team.md`, each resolved to a member or a reason.
    pub fn roster(&self) -> Result<Roster, String> {
        let doc = Doc::parse(&self.team_md.text);
        let FoundRoster {
            table,
            columns,
            warning,
        } = roster_found(&doc)?;
        let mut rows = Vec::with_capacity(table.rows.len());
        // Each name taken, in lowercase, with its row.
        let mut taken: HashMap<String, usize> = HashMap::new();
        // `agents/` is listed once for all rows (a row per listing made a roster of
        // thousands of rows take a minute).
        let agents = AgentDirs::new(&self.dir, &self.rel);
        for (i, row) in table.rows.iter().enumerate() {
            let cell = |c: Option<usize>| {
                c.and_then(|c| row.cells.get(c))
                    .map(|c| c.text.as_str())
                    .unwrap_or("")
            };
            let display = markdown::plain(cell(Some(columns.name)));
            let role = markdown::plain(cell(columns.role));
            let mut out = RosterRow {
                row: i,
                display: display.clone(),
                role,
                name: None,
                charter: None,
                skip: None,
            };
            if display.is_empty() {
                continue;
            }
            if let Some(why) = infrastructure(&display, &out.role, cell(columns.status)) {
                out.skip = Some(why);
                rows.push(out);
                continue;
            }
            // Rows past what a team could hold (with room for members whose charter
            // is refused later) are not resolved: the roster is bounded by the team's
            // size, not by the file's.
            if taken.len() >= 2 * MAX_MEMBERS {
                out.skip = Some(format!("more than {MAX_MEMBERS} members"));
                rows.push(out);
                continue;
            }
            match self.resolve(&agents, &display, cell(columns.charter)) {
                Ok((name, charter)) => {
                    let n = taken.len();
                    match taken.entry(name.to_ascii_lowercase()) {
                        std::collections::hash_map::Entry::Occupied(first) => {
                            out.skip = Some(format!(
                                "member name `{name}` is already taken by row {}",
                                first.get() + 1
                            ));
                        }
                        std::collections::hash_map::Entry::Vacant(slot) => {
                            slot.insert(n);
                            out.name = Some(name);
                            out.charter = charter;
                        }
                    }
                }
                Err(why) => out.skip = Some(why),
            }
            rows.push(out);
        }
        Ok(Roster {
            table,
            columns,
            rows,
            unread: agents.unread,
            warning,
        })
    }

    /// A member's name and charter file from its display name and Charter cell.
    fn resolve(
        &self,
        agents_dir: &AgentDirs,
        display: &str,
        charter_cell: &str,
    ) -> Result<(String, Option<PathBuf>), String> {
        let named = charter_target(charter_cell)?;
        let (dir_name, file) = match &named {
            Some((dir, file)) => (dir.clone(), file.clone()),
            None => (slug(display), "charter.md".to_owned()),
        };
        if dir_name.is_empty() {
            return Err("its name has no letters or digits to make a member name of".into());
        }
        let agents = Path::new("agents");
        let on_disk = agents_dir.find(&dir_name);
        let dir = match &on_disk {
            Some(e) if e.kind == EntryKind::Dir || e.kind == EntryKind::Symlink => e.name.clone(),
            _ => dir_name.clone(),
        };
        let name = if valid_name(&dir) {
            dir.clone()
        } else {
            slug(&dir)
        };
        if !valid_name(&name) {
            return Err(format!("`{dir}` cannot be a member name"));
        }
        if crate::team::file::reserved_name(&name) {
            return Err(format!(
                "member name `{name}` is the name of crewbox's own {name} in team runs; rename it"
            ));
        }
        let charter = match &on_disk {
            Some(_) => {
                let rel = agents.join(&dir);
                let found = self.dir.find(&rel, &file).ok().flatten();
                Some(rel.join(found.map_or(file, |e| e.name)))
            }
            None => named.map(|(_, f)| agents.join(&dir).join(f)),
        };
        Ok((name, charter))
    }

    /// The team: members from the roster, charters, shared context, routing and
    /// models. Rows that are not members are in `skipped`; a bad charter skips its
    /// member only. `Err` (a note) when there is no roster or it has no member.
    pub fn to_team(&self, repo_root: &Path) -> Result<Team, String> {
        let shown_md = self.team_md_shown();
        let mut warnings = self.warnings.clone();
        warnings.extend(self.team_md.warning(&shown_md, MAX_FILE_BYTES));
        let roster = self.roster().map_err(|why| {
            format!(
                "{} has no roster: {why}{}; no squad team",
                shown_md.display(),
                self.team_md.encoding_hint().unwrap_or_default()
            )
        })?;
        if let Some(w) = &roster.warning {
            warnings.push(format!("{}: {w}", shown_md.display()));
        }
        warnings.extend(roster.unread.iter().cloned());
        let config = SquadConfig::read(&self.dir, &self.rel, &mut warnings);
        let mut skipped = Vec::new();
        let mut members = Vec::new();
        for row in &roster.rows {
            let skip = |reason: String| Skipped {
                what: SkippedWhat::Name(row.display.clone()),
                reason,
            };
            let Some(name) = &row.name else {
                skipped.push(skip(row.skip.clone().unwrap_or_default()));
                continue;
            };
            if members.len() == MAX_MEMBERS {
                skipped.push(skip(format!("more than {MAX_MEMBERS} members")));
                continue;
            }
            let (charter, truncated, file) = match &row.charter {
                None => (None, false, None),
                Some(rel) => match self.charter(rel, name, &mut warnings) {
                    Ok(Some((text, cut))) => (Some(text), cut, Some(self.dir.root().join(rel))),
                    Ok(None) => (None, false, None),
                    Err(why) => {
                        skipped.push(skip(why));
                        continue;
                    }
                },
            };
            let model_cell = roster
                .columns
                .model
                .and_then(|c| roster.table.rows[row.row].cells.get(c))
                .map(|c| markdown::plain(&c.text));
            let model = config
                .model_for(name)
                .or_else(|| charter.as_deref().and_then(charter_model))
                .or_else(|| model_cell.and_then(|m| model_value(&m)));
            let source_path = file.clone().unwrap_or_else(|| repo_root.join(&shown_md));
            members.push(Member {
                mcp: Vec::new(),
                name: name.clone(),
                role: if row.role.is_empty() {
                    row.display.clone()
                } else {
                    row.role.clone()
                },
                charter,
                charter_file: row.charter.clone(),
                // Squad declares no tools: a member asks for nothing more than
                // reading; the user's pack ceiling is what it is granted.
                access: crate::vocab::Access::ReadOnly,
                requested_access: crate::vocab::Access::ReadOnly,
                provider: None,
                model,
                validators: Vec::new(),
                display: row.display.clone(),
                source: TeamSource::Repo(source_path),
                file,
                truncated,
                ignored: Vec::new(),
                max_turns: None,
            });
        }
        if members.is_empty() {
            return Err(format!(
                "{} lists no member crewbox can run ({}); no squad team",
                shown_md.display(),
                super::skipped_note(&skipped, "row", "rows")
            ));
        }
        let shared_context = self.shared_context(&mut warnings);
        let routing = self
            .optional_text("routing.md", &mut warnings)
            .map(|mut t| {
                if cap_chars(&mut t, MAX_CONTEXT_CHARS) {
                    warnings.push(cut_warning(
                        &format!("{}", self.rel.join("routing.md").display()),
                        MAX_CONTEXT_CHARS,
                    ));
                }
                t
            });
        Ok(Team {
            mcp: Vec::new(),
            name: TEAM_NAME.into(),
            mode: Mode::Orchestrate,
            shared_context,
            routing,
            orchestrator: None,
            evaluator: None,
            members,
            validators: Vec::new(),
            delivery: Default::default(),
            worker_timeout: DEFAULT_WORKER_TIMEOUT,
            source: TeamSource::Repo(repo_root.join(&shown_md)),
            format: self.format,
            shadows: Vec::new(),
            warnings,
            skipped,
        })
    }

    /// A charter, cut at the cap: `Ok(None)` when the file does not exist (a
    /// warning), `Err` when it was refused (its member is skipped).
    pub(super) fn charter(
        &self,
        rel: &Path,
        member: &str,
        warnings: &mut Vec<String>,
    ) -> Result<Option<(String, bool)>, String> {
        let shown = self.rel.join(rel);
        let read = match self.dir.read(rel, MAX_FILE_BYTES) {
            Ok(t) => t,
            Err(e) if e.is_not_found() => {
                warnings.push(format!(
                    "member `{member}`: charter {} does not exist; the member has none",
                    shown.display()
                ));
                return Ok(None);
            }
            Err(e) => {
                return Err(format!(
                    "its charter was refused: {}",
                    super::refusal(&e, &shown)
                ));
            }
        };
        warnings.extend(read.warning(&shown, MAX_FILE_BYTES));
        let mut text = read.cleaned();
        let mut cut = cap_chars(&mut text, MAX_CHARTER_CHARS);
        if read.truncated && !cut {
            text.push_str("\n[truncated]");
            cut = true;
        }
        if cut {
            warnings.push(cut_warning(
                &format!("member `{member}`: charter {}", shown.display()),
                MAX_CHARTER_CHARS,
            ));
        }
        Ok(Some((text, cut)))
    }

    /// A file of the pack that may be absent: its text, or None (a warning when it
    /// exists but cannot be read).
    fn optional_text(&self, file: &str, warnings: &mut Vec<String>) -> Option<String> {
        let shown = self.rel.join(file);
        match self.dir.read(Path::new(file), MAX_FILE_BYTES) {
            Ok(t) => {
                warnings.extend(t.warning(&shown, MAX_FILE_BYTES));
                Some(t.cleaned()).filter(|t| !t.trim().is_empty())
            }
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                warnings.push(format!(
                    "{} is ignored: {}",
                    shown.display(),
                    super::refusal(&e, &shown)
                ));
                None
            }
        }
    }

    /// `## Project Context` of `team.md` and `decisions.md`, together at most
    /// [`MAX_CONTEXT_CHARS`].
    fn shared_context(&self, warnings: &mut Vec<String>) -> Option<String> {
        // As a prompt takes it (no byte order mark, no carriage return), as every other
        // Squad file that reaches one.
        let cleaned = self.team_md.cleaned();
        let doc = Doc::parse(&cleaned);
        let mut parts = Vec::new();
        if let Some(h) = doc
            .headings
            .iter()
            .position(|h| markdown::words(&h.text) == "project context")
        {
            let body = doc.text_of(doc.section(h)).trim();
            if !body.is_empty() {
                parts.push(format!("## Project Context\n{body}"));
            }
        }
        if let Some(d) = self.optional_text("decisions.md", warnings) {
            let head = format!(
                "## Decisions ({})\n",
                self.rel.join("decisions.md").display()
            );
            // Squad appends decisions: when they do not all fit, the newest are kept.
            let used: usize = parts.iter().map(|p| p.chars().count() + 2).sum();
            let room = MAX_CONTEXT_CHARS.saturating_sub(used + head.chars().count());
            let (kept, dropped) = newest(d.trim(), room);
            if dropped > 0 {
                warnings.push(format!(
                    "{}: the oldest {dropped} characters of decisions were left out (the shared \
                     context holds {MAX_CONTEXT_CHARS}); the newest are kept",
                    self.rel.join("decisions.md").display()
                ));
            }
            parts.push(format!("{head}{kept}"));
        }
        if parts.is_empty() {
            return None;
        }
        let mut text = parts.join("\n\n");
        if cap_chars(&mut text, MAX_CONTEXT_CHARS) {
            warnings.push(cut_warning(
                "the shared context (Project Context and decisions.md)",
                MAX_CONTEXT_CHARS,
            ));
        }
        Some(text)
    }
}

/// The end of `text` that fits in `room` characters with a note of what was left out
/// before it, starting at a heading or a line when it can; and how many characters
/// were left out.
fn newest(text: &str, room: usize) -> (String, usize) {
    let total = text.chars().count();
    if total <= room {
        return (text.to_owned(), 0);
    }
    const NOTE: &str = "[older decisions left out]\n";
    let keep = room.saturating_sub(NOTE.len());
    let from = text
        .char_indices()
        .nth(total - keep)
        .map_or(text.len(), |(at, _)| at);
    let tail = &text[from..];
    // From the first heading in what is kept, else from its first whole line.
    let start = tail
        .match_indices("\n#")
        .next()
        .or_else(|| tail.match_indices('\n').next())
        .map_or(0, |(at, _)| at + 1);
    let kept = &tail[start..];
    let dropped = total - kept.chars().count();
    (format!("{NOTE}{kept}"), dropped)
}

/// A model value as written: `auto`, `inherit`, `default` and placeholders mean the
/// run's model.
fn model_value(v: &str) -> Option<String> {
    let v = markdown::plain(v);
    let lower = v.to_ascii_lowercase();
    if markdown::is_blank(&v) || matches!(lower.as_str(), "auto" | "inherit" | "default") {
        return None;
    }
    Some(v).filter(|v| v.len() <= 128 && !v.contains(char::is_whitespace))
}

/// The charter's `## Model` preference (`- **Preferred:** claude-sonnet-4.6`).
pub fn charter_model(charter: &str) -> Option<String> {
    let doc = Doc::parse(charter);
    let h = doc
        .headings
        .iter()
        .position(|h| markdown::words(&h.text) == "model")?;
    let body = doc.text_of(doc.own_lines(h));
    body.lines().find_map(|l| {
        let plain: String = l.chars().filter(|c| *c != '*').collect();
        let t = plain.trim_start_matches(['-', ' ']).trim();
        let rest = t
            .strip_prefix("Preferred")
            .or_else(|| t.strip_prefix("preferred"))?;
        let value = rest.trim_start_matches([':', ' ']).trim();
        model_value(value.split_whitespace().next().unwrap_or(""))
    })
}

/// What crewbox reads of `config.json`: the model choices. Everything else is
/// ignored; paths in it are never followed.
#[derive(Debug, Default)]
struct SquadConfig {
    default_model: Option<String>,
    overrides: Vec<(String, String)>,
}

impl SquadConfig {
    fn read(dir: &PackDir, rel: &Path, warnings: &mut Vec<String>) -> Self {
        let shown = rel.join("config.json");
        let text = match dir.read(Path::new("config.json"), CONFIG_CAP) {
            Ok(t) if t.truncated => {
                warnings.push(format!(
                    "{} is larger than {CONFIG_CAP} bytes; ignored",
                    shown.display()
                ));
                return Self::default();
            }
            Ok(t) => t.text,
            Err(e) if e.is_not_found() => return Self::default(),
            Err(e) => {
                warnings.push(format!("{} is ignored: {e}", shown.display()));
                return Self::default();
            }
        };
        let value: serde_json::Value =
            match serde_json::from_str(text.trim_start_matches('\u{feff}')) {
                Ok(v) => v,
                Err(e) => {
                    warnings.push(format!("{} is not JSON ({e}); ignored", shown.display()));
                    return Self::default();
                }
            };
        let Some(obj) = value.as_object() else {
            warnings.push(format!("{} is not a JSON object; ignored", shown.display()));
            return Self::default();
        };
        for (key, v) in obj {
            let pathish = v.as_str().is_some_and(|s| {
                s.starts_with(['/', '.', '~']) || s.contains(":\\") || s.contains('/')
            });
            if matches!(key.as_str(), "teamRoot" | "stateLocation") || pathish {
                warnings.push(format!(
                    "{}: `{key}` names a path; crewbox never follows it (only this repository's {}/ is read)",
                    shown.display(),
                    rel.display()
                ));
            }
        }
        let default_model = obj
            .get("defaultModel")
            .and_then(|v| v.as_str())
            .and_then(model_value);
        let overrides = obj
            .get("agentModelOverrides")
            .and_then(|v| v.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), model_value(v.as_str()?)?)))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            default_model,
            overrides,
        }
    }

    fn model_for(&self, member: &str) -> Option<String> {
        self.overrides
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(member))
            .map(|(_, m)| m.clone())
            .or_else(|| self.default_model.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn roster_headings_and_tables() {
        for (text, ok) in [
            ("## Members\n\n| Name | Role |\n|--|--|\n| A | x |\n", true),
            (
                "# Team\n### Team Members 👥\n| **Name** | Role |\n|--|--|\n| A | x |\n",
                true,
            ),
            ("## Roster\n| Name |\n| --- |\n| A |\n", true),
            (
                "# Team Roster\n\n## Coordinator\n| Name | Role |\n|--|--|\n| Squad | C |\n",
                false,
            ),
            (
                "## Human Members\n| Name | Role |\n|--|--|\n| Ann | PM |\n",
                false,
            ),
            ("## Members\n| Agent | Role |\n|--|--|\n| A | x |\n", false),
            (
                "## Members\n\nno table\n## Other\n| Name |\n|--|\n| A |\n",
                false,
            ),
            ("", false),
        ] {
            let doc = Doc::parse(text);
            assert_eq!(roster_table(&doc).is_ok(), ok, "{text}");
        }
    }

    #[test]
    fn infrastructure_is_judged_by_name_and_words_not_emoji() {
        let skip = |d: &str, r: &str, s: &str| infrastructure(d, r, s).is_some();
        assert!(skip("Scribe", "Session Logger", "📋 Silent"));
        assert!(skip("scribe", "Scribe", "Active"));
        assert!(skip("Ralph", "Work Monitor", "Active"));
        assert!(skip("@copilot", "Coding Agent", "🤖 Coding Agent"));
        assert!(skip("Squad", "Coordinator", ""));
        assert!(skip("Fischer", "Coordinator", ""));
        assert!(skip("Ann", "PM", "👤 Human"));
        assert!(skip("Ann", "PM", "Human"));
        assert!(skip("Old", "Dev", "🚫 Inactive"));
        assert!(skip("Old", "Dev", "Retired"));
        assert!(skip("Old", "Dev", "💤 Dormant (v1+)"));
        assert!(!skip("Fact Checker", "Verification", "🔍 Reviewer"));
        assert!(!skip("Rai", "RAI Reviewer", "🛡️ RAI"));
        assert!(!skip("Dallas", "Lead", "Active"));
        assert!(!skip("Dallas", "Lead", ""));
    }

    #[test]
    fn charter_cells() {
        let t = |c: &str| charter_target(c);
        assert_eq!(
            t("`.squad/agents/flight/charter.md`"),
            Ok(Some(("flight".into(), "charter.md".into())))
        );
        assert_eq!(
            t("[agents/dallas/charter.md](agents/dallas/charter.md)"),
            Ok(Some(("dallas".into(), "charter.md".into())))
        );
        assert_eq!(
            t("[charter](.squad/agents/Rai/charter.md)"),
            Ok(Some(("Rai".into(), "charter.md".into())))
        );
        assert_eq!(
            t(".ai-team\\agents\\x\\charter.md"),
            Ok(Some(("x".into(), "charter.md".into())))
        );
        assert_eq!(t("—"), Ok(None));
        assert_eq!(t("copilot-instructions.md"), Ok(None));
        assert_eq!(t("../../etc/passwd"), Ok(None));
        assert_eq!(t("agents/../x.md"), Ok(None));
        assert!(t(".squad/agents/_alumni/rabin/charter.md").is_err());
    }

    #[test]
    fn model_preferences() {
        let charter = "# X\n\n## Model\n\n- **Preferred:** claude-sonnet-4.6\n- **Rationale:** x\n";
        assert_eq!(charter_model(charter).as_deref(), Some("claude-sonnet-4.6"));
        assert_eq!(charter_model("## Model\n\nPreferred: auto\n"), None);
        assert_eq!(charter_model("## Model\n"), None);
        assert_eq!(charter_model("no model"), None);
        assert_eq!(model_value("—"), None);
        assert_eq!(
            model_value("`claude-haiku-4.5`").as_deref(),
            Some("claude-haiku-4.5")
        );
    }
    /// Decisions that do not fit keep the newest (Squad appends them), from a heading.
    #[test]
    fn the_newest_decisions_are_kept() {
        let text = "# Decisions\n\n### 2025-01-01: old\nA.\n\n### 2025-06-01: new\nB.";
        assert_eq!(newest(text, 200), (text.to_owned(), 0));
        let (kept, dropped) = newest(text, 50);
        assert_eq!(kept, "[older decisions left out]\n### 2025-06-01: new\nB.");
        assert_eq!(dropped, text.len() - "### 2025-06-01: new\nB.".len());
        assert_eq!(newest("é".repeat(50).as_str(), 0).1, 50);
    }
}

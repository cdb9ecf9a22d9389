//! Writing a team back into a Squad pack, in place.
//!
//! # Rules
//! - Only what changed is written: a roster row's Name or Role cell when the
//!   member's display name or role differs from what importing that row gives, a
//!   charter file when the member's charter differs from what importing it gives.
//!   Every other byte of `team.md` stays — other sections and tables, untouched
//!   rows, line endings, the final newline.
//! - A member with no roster row gets a new row (in the style of the existing ones)
//!   after the last row, and a charter at `agents/<name>/charter.md`.
//! - Nothing is deleted or renamed: a roster row the team lacks stays, and so do
//!   agent directories, `history*.md`, `_alumni/`, `casting/`, `log/` and decisions
//!   files, which are never written at all.
//! - Text that was cut on import (it ends with the `[truncated]` marker) is never
//!   written back: the export is refused and says which member and file.
//! - Writes are atomic and confined to the pack directory ([`super::write`]);
//!   exporting an unchanged imported team writes nothing.

use std::path::{Path, PathBuf};

use super::markdown::{self, Doc};
use super::squad::{Roster, SquadPack};
use crate::team::file::{Member, Team};

/// The marker a cut text ends with.
const TRUNCATED: &str = "[truncated]";

/// One file to write, relative to the pack directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileWrite {
    /// The target.
    pub rel: PathBuf,
    /// Its new bytes.
    pub bytes: Vec<u8>,
}

/// What an export to Squad would do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Files to write, charters first and `team.md` last.
    pub writes: Vec<FileWrite>,
    /// What was left as it is, and why (one line each).
    pub notes: Vec<String>,
}

/// How the existing roster writes its charter cells.
struct CellStyle {
    /// Text before `agents/` (`.squad/`).
    prefix: String,
    /// Wrapped in backticks.
    code: bool,
    /// Written as a Markdown link.
    link: bool,
    /// The status cell of an active member.
    status: String,
}

/// Plans writing `team` into `pack` (None: the directory holds no `team.md` yet;
/// `rel` is then where it goes, relative to the repository). `Err` refuses the whole
/// export with the reason.
pub fn plan(team: &Team, pack: Option<&SquadPack>, rel: &Path) -> Result<Plan, String> {
    let Some(pack) = pack else {
        return plan_new(team, rel);
    };
    let shown = pack.team_md_shown();
    if pack.team_md.truncated || pack.team_md.lossy {
        return Err(format!(
            "{} is larger than the read limit or not valid UTF-8; refusing to rewrite it",
            shown.display()
        ));
    }
    let roster = pack
        .roster()
        .map_err(|why| format!("{} has no roster to edit: {why}", shown.display()))?;
    let text = pack.team_md.text.as_str();
    let doc = Doc::parse(text);
    let eol = doc.line_ending();
    let style = style_of(&roster, text, &pack.rel);
    let mut plan = Plan::default();
    let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut new_rows: Vec<String> = Vec::new();
    for m in &team.members {
        let row = roster.rows.iter().find(|r| {
            r.name
                .as_deref()
                .is_some_and(|n| n.eq_ignore_ascii_case(&m.name))
                || (r.name.is_none() && super::slug(&r.display) == m.name.to_ascii_lowercase())
        });
        let Some(row) = row else {
            let charter_rel = Path::new("agents").join(&m.name).join("charter.md");
            if let Some(c) = &m.charter {
                refuse_cut(m, c, &pack.rel.join(&charter_rel))?;
                if pack.dir.read(&charter_rel, 1).is_ok() {
                    return Err(format!(
                        "member `{}` has no roster row, but {} already exists; refusing to overwrite it",
                        m.name,
                        pack.rel.join(&charter_rel).display()
                    ));
                }
                plan.writes.push(FileWrite {
                    rel: charter_rel,
                    bytes: with_final_newline(c, "\n").into_bytes(),
                });
            }
            new_rows.push(new_row(&roster, m, &style));
            continue;
        };
        if row.name.is_none() {
            plan.notes.push(format!(
                "member `{}`: roster row `{}` is not a member ({}); left as it is",
                m.name,
                row.display,
                row.skip.as_deref().unwrap_or("skipped")
            ));
            continue;
        }
        let cells = &roster.table.rows[row.row].cells;
        let imported_role = if row.role.is_empty() {
            row.display.clone()
        } else {
            row.role.clone()
        };
        if m.role != imported_role {
            match roster.columns.role.and_then(|c| cells.get(c)) {
                Some(cell) => edits.push((
                    cell.span.clone(),
                    markdown::cell_replacement(
                        &text[cell.span.clone()],
                        &escape(&m.role),
                        roster
                            .columns
                            .role
                            .is_some_and(|c| roster.table.aligned(c, text)),
                    ),
                )),
                None => plan.notes.push(format!(
                    "member `{}`: the roster has no Role column; its role is not written",
                    m.name
                )),
            }
        }
        if m.display != row.display && !m.display.eq_ignore_ascii_case(&m.name) {
            let cell = &cells[roster.columns.name];
            edits.push((
                cell.span.clone(),
                markdown::cell_replacement(
                    &text[cell.span.clone()],
                    &escape(&m.display),
                    roster.table.aligned(roster.columns.name, text),
                ),
            ));
        }
        let charter_rel = row
            .charter
            .clone()
            .unwrap_or_else(|| Path::new("agents").join(&m.name).join("charter.md"));
        let current = pack
            .charter(&charter_rel, &m.name, &mut Vec::new())
            .map_err(|why| format!("member `{}`: {why}", m.name))?;
        match (&m.charter, current) {
            (Some(new), Some((old, _))) if same_text(new, &old) => {}
            (Some(new), old) => {
                refuse_cut(m, new, &pack.rel.join(&charter_rel))?;
                let (old_eol, old_final) = match pack
                    .dir
                    .read(&charter_rel, crate::trust::read::MAX_FILE_BYTES)
                {
                    Ok(t) => (Doc::parse(&t.text).line_ending(), t.text.ends_with('\n')),
                    Err(_) => ("\n", true),
                };
                let mut body = new.replace("\r\n", "\n");
                if old_eol == "\r\n" {
                    body = body.replace('\n', "\r\n");
                }
                if old_final || old.is_none() {
                    body = with_final_newline(&body, old_eol);
                }
                plan.writes.push(FileWrite {
                    rel: charter_rel,
                    bytes: body.into_bytes(),
                });
            }
            (None, Some(_)) => plan.notes.push(format!(
                "member `{}` has no charter; {} is left as it is",
                m.name,
                pack.rel.join(&charter_rel).display()
            )),
            (None, None) => {}
        }
    }
    for r in &roster.rows {
        let in_team = r
            .name
            .as_deref()
            .is_some_and(|n| team.members.iter().any(|m| m.name.eq_ignore_ascii_case(n)));
        if r.name.is_some() && !in_team {
            plan.notes.push(format!(
                "roster row `{}` is not in team `{}`; left as it is (export never deletes)",
                r.display, team.name
            ));
        }
    }
    if !new_rows.is_empty() {
        let last = &doc.lines[roster.table.last_line()];
        let at = last.end;
        let line_end_len = text[at..].find('\n').map_or(0, |n| n + 1);
        let insert_at = at + line_end_len;
        let mut inserted = String::new();
        if line_end_len == 0 {
            inserted.push_str(eol);
        }
        for (i, row) in new_rows.iter().enumerate() {
            inserted.push_str(row);
            if i + 1 < new_rows.len() || line_end_len > 0 {
                inserted.push_str(eol);
            }
        }
        edits.push((insert_at..insert_at, inserted));
    }
    if !edits.is_empty() {
        edits.sort_by_key(|(r, _)| r.start);
        let mut out = String::with_capacity(text.len() + 256);
        let mut at = 0;
        for (range, replacement) in &edits {
            out.push_str(&text[at..range.start]);
            out.push_str(replacement);
            at = range.end;
        }
        out.push_str(&text[at..]);
        if out != text {
            plan.writes.push(FileWrite {
                rel: PathBuf::from("team.md"),
                bytes: out.into_bytes(),
            });
        }
    }
    Ok(plan)
}

/// Whether two charters say the same: line endings and trailing whitespace aside.
fn same_text(a: &str, b: &str) -> bool {
    a.replace("\r\n", "\n").trim_end() == b.replace("\r\n", "\n").trim_end()
}

fn refuse_cut(m: &Member, text: &str, file: &Path) -> Result<(), String> {
    if text.trim_end().ends_with(TRUNCATED) {
        return Err(format!(
            "member `{}`: its charter ends with the `{TRUNCATED}` marker — it was cut when it was \
             imported — so writing it to {} would lose text; refusing (edit the full charter \
             there, or remove the marker to write exactly this text)",
            m.name,
            file.display()
        ));
    }
    Ok(())
}

fn with_final_newline(text: &str, eol: &str) -> String {
    if text.ends_with('\n') {
        text.to_owned()
    } else {
        format!("{text}{eol}")
    }
}

/// A cell's text: one line, pipes escaped.
fn escape(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn style_of(roster: &Roster, text: &str, rel: &Path) -> CellStyle {
    let default = CellStyle {
        prefix: format!("{}/", rel.display()),
        code: true,
        link: false,
        status: "✅ Active".into(),
    };
    let member_rows: Vec<&super::squad::RosterRow> =
        roster.rows.iter().filter(|r| r.name.is_some()).collect();
    let Some(first) = member_rows.first() else {
        return default;
    };
    let cells = &roster.table.rows[first.row].cells;
    let status = roster
        .columns
        .status
        .and_then(|c| cells.get(c))
        .map(|c| c.text.clone())
        .unwrap_or(default.status);
    let Some(cell) = roster.columns.charter.and_then(|c| cells.get(c)) else {
        return CellStyle { status, ..default };
    };
    let raw = text[cell.span.clone()].trim();
    let link = markdown::link(raw);
    let target = link.map_or(raw.trim_matches('`'), |(_, t)| t);
    let prefix = target
        .find("agents/")
        .map_or(default.prefix.clone(), |i| target[..i].to_owned());
    CellStyle {
        prefix,
        code: raw.starts_with('`'),
        link: link.is_some(),
        status,
    }
}

fn new_row(roster: &Roster, m: &Member, style: &CellStyle) -> String {
    let path = format!("{}agents/{}/charter.md", style.prefix, m.name);
    let charter = if style.link {
        format!("[{path}]({path})")
    } else if style.code {
        format!("`{path}`")
    } else {
        path
    };
    let c = &roster.columns;
    let cells: Vec<String> = (0..roster.table.header.cells.len())
        .map(|i| {
            if i == c.name {
                escape(&m.display)
            } else if Some(i) == c.role {
                escape(&m.role)
            } else if Some(i) == c.charter {
                charter.clone()
            } else if Some(i) == c.status {
                style.status.clone()
            } else if Some(i) == c.model {
                m.model.clone().unwrap_or_else(|| "auto".into())
            } else {
                String::new()
            }
        })
        .collect();
    format!("| {} |", cells.join(" | "))
}

/// A new pack: `team.md` with a Members table, and one charter per member.
fn plan_new(team: &Team, rel: &Path) -> Result<Plan, String> {
    let mut plan = Plan::default();
    let mut md = format!(
        "# Squad Team\n\n> Exported by crewbox from team `{}`.\n\n## Members\n\n\
         | Name | Role | Charter | Status |\n|------|------|---------|--------|\n",
        team.name
    );
    for m in &team.members {
        let charter_rel = Path::new("agents").join(&m.name).join("charter.md");
        if let Some(c) = &m.charter {
            refuse_cut(m, c, &rel.join(&charter_rel))?;
            plan.writes.push(FileWrite {
                rel: charter_rel.clone(),
                bytes: with_final_newline(c, "\n").into_bytes(),
            });
        }
        md.push_str(&format!(
            "| {} | {} | `{}/{}` | ✅ Active |\n",
            escape(&m.display),
            escape(&m.role),
            rel.display(),
            charter_rel.display()
        ));
    }
    plan.writes.push(FileWrite {
        rel: PathBuf::from("team.md"),
        bytes: md.into_bytes(),
    });
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_one_line_with_pipes_escaped() {
        assert_eq!(escape("QA | Release\nlead"), "QA \\| Release lead");
    }

    #[test]
    fn cut_text_is_refused() {
        let m = Member {
            mcp: Vec::new(),
            name: "a".into(),
            role: "r".into(),
            charter: None,
            charter_file: None,
            access: crate::vocab::Access::ReadOnly,
            requested_access: crate::vocab::Access::ReadOnly,
            provider: None,
            model: None,
            validators: Vec::new(),
            display: "A".into(),
            source: crate::team::TeamSource::Builtin,
            file: None,
            truncated: true,
            ignored: Vec::new(),
            max_turns: None,
        };
        let err = refuse_cut(
            &m,
            "text\n[truncated]\n",
            Path::new(".squad/agents/a/charter.md"),
        )
        .unwrap_err();
        assert!(
            err.contains("member `a`") && err.contains(".squad/agents/a/charter.md"),
            "{err}"
        );
        assert!(refuse_cut(&m, "fine", Path::new("x")).is_ok());
    }
}

//! Pack fixtures, written for these tests. Each reproduces a shape found in real
//! repositories' `.squad/team.md`, `.ai-team/team.md`, `.squad/config.json` and
//! `.claude/agents/*.md` files:
//!
//! - Squad: a title and tagline, a `## Coordinator` table before the roster, the
//!   `## Members` table (`Name | Role | Charter | Status`) with backticked charter
//!   paths and emoji statuses, Scribe and Ralph rows, a `## Coding Agent` section
//!   with an HTML comment, an `@copilot` table and `### Capabilities` lists, a
//!   `## Project Context` list with bold keys, an `## Issue Source` key/value table;
//!   display names that are not their directory (`McManus`, `Fact Checker`,
//!   `EECOM`), a human row, a retired row and an `_alumni/` charter.
//! - Legacy `.ai-team/`: `## Roster`, a `Field | Value` Project Context table before
//!   it, plain (unquoted) charter paths, a row with `🚫 Inactive`.
//! - Variants: link-style charter cells (`[charter](.squad/agents/x/charter.md)` and
//!   `[agents/x/charter.md](agents/x/charter.md)`), a padded table with a `Model`
//!   column, a charter path whose case differs from the directory, a row without a
//!   trailing pipe, a roster without Charter or Status columns.
//! - `config.json`: `version`, `defaultModel`, `agentModelOverrides`, `teamRoot`.
//! - Claude: `tools` as a comma string, a block list and a flow list;
//!   `disallowedTools`; `model` as an alias, a full id with a trailing comment, and
//!   `inherit`; `color`, `effort`, `memory`, `skills`; `permissionMode: plan`;
//!   `hooks` and `mcpServers` with `${…}` variables; `maxTurns`; a description with
//!   unquoted colons and `<example>` blocks, and a folded (`>`) one; CRLF with a
//!   byte order mark; a file whose heading comes before its `---` block; a
//!   `README.md` without front matter; agents in a subdirectory.

use std::path::Path;

use super::Fx;

/// The standard `.squad/` pack (LF line endings).
pub const SQUAD_TEAM_MD: &str = "# Squad Team

> Orbit — a tiny test project.

## Coordinator

| Name | Role | Notes |
|------|------|-------|
| Squad | Coordinator | Routes work, enforces handoffs. |

## Members

| Name | Role | Charter | Status |
|------|------|---------|--------|
| Flight | Lead | `.squad/agents/flight/charter.md` | ✅ Active |
| McManus | Backend Dev | `.squad/agents/mcmanus/charter.md` | ✅ Active |
| Fact Checker | Verification | `.squad/agents/fact-checker/charter.md` | 🔍 Reviewer |
| EECOM | Core Dev | `.squad/agents/eecom/charter.md` | 🟢 Active |
| Dana Reyes | Product Owner | — | 👤 Human |
| Kobayashi | Release | `.squad/agents/_alumni/kobayashi/charter.md` | 🔴 Retired |
| Scribe | Session Logger | `.squad/agents/scribe/charter.md` | 📋 Silent |
| Ralph | Work Monitor | — | 🔄 Monitor |

## Coding Agent

<!-- copilot-auto-assign: false -->

| Name | Role | Charter | Status |
|------|------|---------|--------|
| @copilot | Coding Agent | — | 🤖 Coding Agent |

### Capabilities

**🟢 Good fit:**
- Small fixes

## Project Context

- **Owner:** Test Owner
- **Stack:** Rust, SQLite
- **Created:** 2026-01-01

## Issue Source

| Field | Value |
|-------|-------|
| **Repository** | example/orbit |
";

/// Writes the standard pack at `.squad/` of `work`, with charters, a config, a
/// decisions file, an orphan agent directory, a history-only directory, alumni,
/// casting and a log.
pub fn squad(work: &Path) {
    let w = |rel: &str, text: &str| {
        Fx::write(work, rel, text);
    };
    w(".squad/team.md", SQUAD_TEAM_MD);
    w(
        ".squad/agents/flight/charter.md",
        "# Flight — Lead\n\n> Decides scope.\n\n## What I Own\n\n- Architecture\n",
    );
    w(
        ".squad/agents/mcmanus/charter.md",
        "# McManus — Backend Dev\n\nOwns the storage layer.\n\n## Model\n\n- **Preferred:** claude-haiku-4.5\n",
    );
    w(
        ".squad/agents/fact-checker/charter.md",
        "# Fact Checker\n\nChecks every claim.\n\n## Model\n\nPreferred: auto\n",
    );
    w(
        ".squad/agents/eecom/charter.md",
        "# EECOM\n\nCore runtime.\n",
    );
    w(
        ".squad/agents/scribe/charter.md",
        "# Scribe\n\nLogs sessions.\n",
    );
    w(
        ".squad/agents/eecom/history.md",
        "# History\n\n- did things\n",
    );
    w(
        ".squad/agents/hockney/history.md",
        "# Hockney's history, no charter\n",
    );
    w(
        ".squad/agents/ghost/charter.md",
        "# Ghost\n\nNo roster row names me.\n",
    );
    w(
        ".squad/agents/_alumni/kobayashi/charter.md",
        "# Kobayashi\n\nRetired.\n",
    );
    w(
        ".squad/casting/registry.json",
        "{\"universe\": \"apollo\"}\n",
    );
    w(".squad/log/2026-01-01.md", "# Session log\n");
    w(
        ".squad/config.json",
        "{\n  \"version\": 1,\n  \"defaultModel\": \"claude-sonnet-4.6\",\n  \"agentModelOverrides\": {\n    \"eecom\": \"claude-opus-4.6\"\n  },\n  \"teamRoot\": \"C:\\\\temp\\\\elsewhere\"\n}\n",
    );
    w(
        ".squad/decisions.md",
        "# Decisions\n\n### 2026-01-02: Use SQLite\n**By:** Flight\nWe store state in SQLite.\n",
    );
    w(
        ".squad/routing.md",
        "# Routing\n\n| Work Type | Agent |\n|---|---|\n| Storage | McManus |\n",
    );
}

/// The legacy `.ai-team/` layout.
pub const LEGACY_TEAM_MD: &str = "# Squad Team

## Project Context

| Field | Value |
|-------|-------|
| **Project** | Dungeon — a text game |
| **Stack** | C# |

## Roster

| Name | Role | Charter | Status |
|------|------|---------|--------|
| Coulson | Lead | .ai-team/agents/coulson/charter.md | ✅ Active |
| Romanoff | QA Engineer | .ai-team/agents/romanoff/charter.md | ✅ Active |
| Fitz | DevOps | .ai-team/agents/fitz/charter.md | 🚫 Inactive |
| Scribe | Session Logger | .ai-team/agents/scribe/charter.md | ✅ Active |

## Role Updates

| Agent | Previous Role | New Role |
|-------|---------------|----------|
| Romanoff | Tester | QA Engineer |
";

/// Writes the legacy pack at `.ai-team/`.
pub fn legacy(work: &Path) {
    Fx::write(work, ".ai-team/team.md", LEGACY_TEAM_MD);
    Fx::write(
        work,
        ".ai-team/agents/coulson/charter.md",
        "# Coulson\n\nLeads.\n",
    );
    Fx::write(
        work,
        ".ai-team/agents/romanoff/charter.md",
        "# Romanoff\n\nTests.\n",
    );
}

/// Link-style charter cells, a padded table with a Model column, a directory whose
/// case differs from the cell, and a row without a trailing pipe.
pub const VARIANTS_TEAM_MD: &str = "# Squad Team

## Members

| Name    | Role              | Charter                                      | Model             | Status    |
| ------- | ----------------- | -------------------------------------------- | ----------------- | --------- |
| Dallas  | Lead              | [agents/dallas/charter.md](agents/dallas/charter.md) | claude-opus-4.6   | ✅ Active |
| Ripley  | Backend Dev       | [charter](.squad/agents/ripley/charter.md)   | —                 | 🟢 Active |
| Rai     | RAI Reviewer      | .squad/agents/Rai/charter.md                 | gpt-5.4           | 🛡️ RAI    |
| Tony Stark (Iron Man) | Armor | — | auto | Active
";

/// Writes the variants pack at `.squad/`.
pub fn variants(work: &Path) {
    Fx::write(work, ".squad/team.md", VARIANTS_TEAM_MD);
    Fx::write(
        work,
        ".squad/agents/dallas/charter.md",
        "# Dallas\n\nLeads.\n",
    );
    Fx::write(
        work,
        ".squad/agents/ripley/charter.md",
        "# Ripley\n\nBuilds.\n",
    );
    Fx::write(
        work,
        ".squad/agents/rai/charter.md",
        "# Rai\n\nReviews for harm.\n",
    );
    Fx::write(
        work,
        ".squad/agents/tony-stark-iron-man/charter.md",
        "# Tony\n\nArmor.\n",
    );
}

/// A roster without Charter or Status columns (members found by slug).
pub const NO_CHARTER_COLUMN_MD: &str = "# Squad Team

## Project Context
- Project: temp

## Members
| Name | Role | Focus | Emoji |
| --- | --- | --- | --- |
| Keyser | Installation Engineer | Environment setup | ⚙️ |
| Redfoot | Simulation Engineer | Sim wrappers | 🔧 |
| Scribe | Session Logger | Decisions | 📋 |
";

/// The Claude Code agents of the repository (`.claude/agents/`).
pub fn claude(work: &Path) {
    let w = |rel: &str, text: &str| {
        Fx::write(work, rel, text);
    };
    w(
        ".claude/agents/code-reviewer.md",
        "---\nname: code-reviewer\ndescription: Use this agent when you need a review of recent changes. \
         Examples: <example>Context: the user wrote a parser. user: 'review it' assistant: 'I will use \
         the code-reviewer agent'</example>\ntools: Read, Grep, Glob\nmodel: sonnet\ncolor: green\n---\n\n\
         You are a careful reviewer. Report findings by severity.\n",
    );
    w(
        ".claude/agents/planner.md",
        "---\nname: planner\ndescription: >\n  Plans work in small steps.\n  Never edits.\ntools:\n  - Read\n  - Write\n\
         permissionMode: plan\neffort: high\nmemory: project\n---\nYou plan.\n",
    );
    w(
        ".claude/agents/fixer.md",
        "---\nname: fixer\ndescription: Fixes failing tests. Runs them first.\nmodel: claude-sonnet-4-6      # opus | sonnet\n\
         maxTurns: 4\nskills:\n  - testing\nhooks:\n  PostToolUse:\n    - matcher: \"Write|Edit\"\n      hooks:\n\
         \x20       - type: command\n          command: \"${CLAUDE_PLUGIN_ROOT}/hooks/pwn.sh\"\n\
         mcpServers:\n  github:\n    command: npx\n    args: [\"@modelcontextprotocol/server-github\"]\n---\n\
         You fix tests. Keep ${HOME} and $(whoami) as text.\n",
    );
    // CRLF with a byte order mark, a flow list of disallowed tools, `inherit`.
    w(
        ".claude/agents/doc-writer.md",
        "\u{feff}---\r\nname: doc-writer\r\ndescription: \"Writes docs: guides, references.\"\r\nmodel: inherit\r\n\
         disallowedTools: [\"Write\", \"Edit\", \"MultiEdit\", \"NotebookEdit\"]\r\n---\r\n\r\nYou write docs.\r\n",
    );
    w(
        ".claude/agents/data/db-expert.md",
        "---\nname: db-expert\ndescription: Knows SQL\ntools: Read, Bash(psql:*), Task, WebFetch, mcp__pg__query\n---\nSQL.\n",
    );
    w(
        ".claude/agents/README.md",
        "# Our agents\n\nSee the files here.\n",
    );
    w(
        ".claude/agents/heading-first.md",
        "# Security Auditor\n\n---\nname: security-auditor\ndescription: audits\n---\nAudit.\n",
    );
    w(
        ".claude/agents/bad-name.md",
        "---\nname: Bad_Name\ndescription: x\n---\nx\n",
    );
    w(
        ".claude/agents/no-name.md",
        "---\ndescription: Missing a name.\ntools: Read\n---\nx\n",
    );
    w(
        ".claude/agents/zz-duplicate.md",
        "---\nname: planner\ndescription: A second planner.\n---\nDuplicate.\n",
    );
    // A subproject's agents are never read.
    w(
        "tools/sub/.claude/agents/sub-agent.md",
        "---\nname: sub-agent\ndescription: from a subproject\n---\nNo.\n",
    );
}

/// The user's own agents (`~/.claude/agents/`).
pub fn user_claude(home: &Path) {
    Fx::write(
        home,
        ".claude/agents/code-reviewer.md",
        "---\nname: code-reviewer\ndescription: My own reviewer.\n---\nMine.\n",
    );
    Fx::write(
        home,
        ".claude/agents/helper.md",
        "---\nname: helper\ndescription: Helps with anything.\n---\nI help.\n",
    );
}

/// PolyPilot's shape of a Squad sample: an H1 title, a tagline and the roster
/// table right under it (`Member | Role | Expertise`), no Members heading.
pub const REVIEW_SQUAD_MD: &str = "# The Review Squad

A small crew that reviews pull requests before a human does.

| Member | Role | Expertise |
|--------|------|-----------|
| Ada | Lead Reviewer | Architecture, API design |
| Linus | Security Reviewer | Auth, input handling |
| Grace | Test Reviewer | Coverage, flaky tests |
| Scribe | Session Logger | Notes |

## Working agreement

- Every finding names a file and a line.
";

/// Squad's test-fixture shape of a team.md whose table has no Members heading
/// (`Name | Role | Status`), after a prose paragraph.
pub const NO_HEADING_STATUS_MD: &str = "# Team

This roster has no Members heading; the parser should handle this gracefully.

| Name | Role | Status |
|------|------|--------|
| Keaton | Lead | ✅ Active |
| Hockney | Tester | 💤 Dormant |
| Ralph | Work Monitor | 🔄 Monitor |
| @copilot | Coding Agent | 🤖 Coding Agent |
| Fenster | Frontend | ✅ Active |
";

/// Squad's large-team fixture shape: 20 members under `## Members`, no Charter
/// column.
pub fn twenty_members_md() -> String {
    let mut md = String::from(
        "# Squad Team\n\n## Members\n\n| Name | Role | Status |\n|------|------|--------|\n",
    );
    for i in 1..=20 {
        md.push_str(&format!("| Agent {i:02} | Role {i} | ✅ Active |\n"));
    }
    md
}

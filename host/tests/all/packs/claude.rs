//! Reading Claude Code subagents: tolerant front matter, the tools → access table,
//! skipped files, ignored fields, and the user's agents under the repository's.

use std::os::unix::ffi::OsStrExt as _;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::fixtures;
use super::{Fx, member, names, skipped, warnings};

#[test]
fn agents_become_members_with_roles_models_and_requested_access() {
    let fx = Fx::new(fixtures::claude);
    fx.trust(&["--pack-access", "full"]);
    let t = fx.show("claude");
    assert_eq!(t["format"], "claude");
    assert_eq!(t["mode"], "orchestrate");
    assert_eq!(t["source"], "repo");
    // File order (by path); the subdirectory's agent is read, the subproject's not.
    assert_eq!(
        names(&t),
        [
            "code-reviewer",
            "db-expert",
            "doc-writer",
            "fixer",
            "planner"
        ]
    );
    let review = member(&t, "code-reviewer");
    assert_eq!(
        review["role"],
        "Use this agent when you need a review of recent changes"
    );
    assert_eq!(review["model"], "sonnet");
    assert_eq!(review["requested_access"], "read-only");
    assert_eq!(review["ignored"], json!(["color"]));
    assert_eq!(review["source"], "repo");
    assert!(
        review["file"]
            .as_str()
            .unwrap()
            .ends_with(".claude/agents/code-reviewer.md")
    );
    // A trailing comment is no part of the model; `inherit` is the run's.
    let fixer = member(&t, "fixer");
    assert_eq!(fixer["model"], "claude-sonnet-4-6");
    assert_eq!(fixer["role"], "Fixes failing tests");
    assert_eq!(fixer["requested_access"], "full", "no `tools`: everything");
    assert_eq!(
        fixer["access"], "full",
        "the user raised this repository's ceiling"
    );
    assert_eq!(fixer["max_turns"], 4);
    assert_eq!(fixer["ignored"], json!(["skills", "hooks", "mcpServers"]));
    let doc = member(&t, "doc-writer");
    assert_eq!(doc["model"], json!(null));
    assert_eq!(doc["role"], "Writes docs: guides, references");
    assert_eq!(
        doc["requested_access"], "full",
        "Bash remains after disallowedTools"
    );
    assert_eq!(doc["charter_chars"], "You write docs.".len());
    // permissionMode: plan is read-only even with Write listed.
    let planner = member(&t, "planner");
    assert_eq!(planner["requested_access"], "read-only");
    assert_eq!(planner["role"], "Plans work in small steps");
    assert_eq!(planner["ignored"], json!(["effort", "memory"]));
    // Task, WebFetch and MCP tools never become a capability; Bash(psql:*) is full.
    let db = member(&t, "db-expert");
    assert_eq!(db["requested_access"], "full");
    let w = warnings(&t);
    assert!(
        w.iter().any(|w| w.contains("data/db-expert.md")
            && w.contains(
                "`Task`, `WebFetch`, `mcp__pg__query` never become a crewbox capability"
            )),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|w| w.contains("code-reviewer.md") && w.contains("unquoted `: `")),
        "the description is not strict YAML, and still read: {w:?}"
    );
}

#[test]
fn files_without_front_matter_or_a_valid_name_are_skipped_with_why() {
    let fx = Fx::new(fixtures::claude);
    let t = fx.show("claude");
    let skip = skipped(&t);
    let reason = |file: &str| {
        skip.iter()
            .find(|(f, _)| f.ends_with(file))
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("{file} not skipped: {skip:?}"))
    };
    assert!(reason("README.md").contains("no front matter"));
    assert!(reason("heading-first.md").contains("no front matter"));
    assert!(reason("bad-name.md").contains("`name: Bad_Name` is not a valid"));
    assert!(reason("no-name.md").contains("no `name`"));
    assert!(reason("zz-duplicate.md").contains("`planner` is already defined by planner.md"));
    assert_eq!(skip.len(), 5, "{skip:?}");
    // A name is never made up from a file name.
    assert!(!names(&t).iter().any(|n| n == "no-name" || n == "bad-name"));
    assert!(!names(&t).iter().any(|n| n == "sub-agent"));
}

#[test]
fn the_users_agents_join_and_the_repositorys_win_by_name() {
    let fx = Fx::new(fixtures::claude);
    fixtures::user_claude(&fx.home());
    let t = fx.show("claude");
    assert_eq!(t["source"], "repo");
    assert_eq!(
        names(&t),
        [
            "code-reviewer",
            "db-expert",
            "doc-writer",
            "fixer",
            "planner",
            "helper"
        ]
    );
    let review = member(&t, "code-reviewer");
    assert_eq!(review["source"], "repo");
    assert!(
        review["role"]
            .as_str()
            .unwrap()
            .starts_with("Use this agent")
    );
    assert!(
        warnings(&t)
            .iter()
            .any(|w| w.contains("member `code-reviewer`: the repository's")),
        "{:?}",
        warnings(&t)
    );
    // The user's own agent gets what it asks for, even in an untrusted repository.
    let helper = member(&t, "helper");
    assert_eq!(helper["source"], "user");
    assert_eq!(
        (
            helper["requested_access"].as_str(),
            helper["access"].as_str()
        ),
        (Some("full"), Some("full"))
    );
    assert_eq!(member(&t, "fixer")["access"], "read-only");
    // Without repository agents the team is the user's.
    std::fs::remove_dir_all(fx.repo().join(".claude")).unwrap();
    let t = fx.show("claude");
    assert_eq!(t["source"], "user");
    assert_eq!(names(&t), ["code-reviewer", "helper"]);
    assert_eq!(member(&t, "code-reviewer")["role"], "My own reviewer");
}

#[test]
fn no_usable_subagent_names_each_skipped_file_and_why() {
    let fx = Fx::new(|work| {
        Fx::write(work, ".claude/agents/README.md", "# Agents\n\nNotes.\n");
        Fx::write(
            work,
            ".claude/agents/no-name.md",
            "---\ndescription: Reviews code.\n---\nYou review.\n",
        );
        Fx::write(
            work,
            ".claude/agents/bad.md",
            "---\nname: Bad_Name\ndescription: x\n---\nbody\n",
        );
    });
    for args in [&["team", "list"][..], &["team", "show", "claude"][..]] {
        let out = fx.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("3 files skipped: "), "{args:?}: {stderr}");
        for (file, why) in [
            (".claude/agents/README.md", "no front matter"),
            (".claude/agents/no-name.md", "no `name`"),
            (".claude/agents/bad.md", "`name: Bad_Name` is not a valid"),
        ] {
            let line = stderr
                .split("; ")
                .find(|p| p.contains(file))
                .unwrap_or_else(|| panic!("{file} not named: {stderr}"));
            assert!(line.contains(why), "{file}: {why}: {stderr}");
        }
    }
}

/// The user's own reviewer whose file forbids writing, with the list at the key's
/// column as YAML emitters write it: it asks for (and gets) read-only access. Its
/// list was read as empty, so it asked for — and, as the user's own agent, got —
/// full access, and wrote files and ran commands in a run. A file with CRLF line
/// endings and a byte order mark reaches the prompt without either, with a warning.
#[test]
fn a_users_agent_that_forbids_writing_in_a_column_list_is_read_only() {
    let fx = Fx::new(|_| {});
    Fx::write(
        &fx.home(),
        ".claude/agents/safe-reviewer.md",
        "\u{feff}---\r\nname: safe-reviewer\r\ndescription: Read-only reviewer, e.g. for diffs. Never edits.\r\n\
         disallowedTools:\r\n- Write\r\n- Edit\r\n- MultiEdit\r\n- NotebookEdit\r\n- Bash\r\n---\r\n\
         You review code.\r\nNever modify anything.\r\n",
    );
    let t = fx.show("claude");
    let m = member(&t, "safe-reviewer");
    assert_eq!(
        (m["requested_access"].as_str(), m["access"].as_str()),
        (Some("read-only"), Some("read-only")),
        "{t:#}"
    );
    assert_eq!(m["role"], "Read-only reviewer, e.g. for diffs");
    // "You review code.\nNever modify anything.": no `\r` counted.
    assert_eq!(m["charter_chars"], 39, "{m:#}");
    assert!(
        warnings(&t)
            .iter()
            .any(|w| w.contains("safe-reviewer.md has a byte order mark and CRLF")),
        "{:?}",
        warnings(&t)
    );
    assert!(
        !warnings(&t)
            .iter()
            .any(|w| w.contains("not a `key: value`")),
        "{:?}",
        warnings(&t)
    );
}

/// A typo near an access key, in files as people mistype them, leaves the member
/// read-only in a repository whose packs may ask for full access (probe 14: a quote
/// left open in `description` swallowed `tools: Read, Grep, Glob`, and the member got
/// write and exec); a file whose name is not UTF-8 is named, not silently unread; a
/// bad file's encoding is part of why it was skipped, and a file's warning names it
/// once.
#[test]
fn typos_in_access_keys_never_widen_and_unread_files_are_named() {
    let fx = Fx::new(|work| {
        Fx::write(
            work,
            ".claude/agents/reader.md",
            "---\nname: reader\ndescription: \"Reads code, never writes.\ntools: Read, Grep, Glob\n\
             model: haiku\n---\nYou read.\n",
        );
        Fx::write(
            work,
            ".claude/agents/zw.md",
            "---\nname: zw\ndescription: Reviews.\n\u{200b}tools: Read, Grep\n---\nYou review.\n",
        );
        Fx::write(
            work,
            ".claude/agents/open.md",
            "---\nname: open\ndescription: never closed\n",
        );
        Fx::write(
            work,
            ".claude/agents/crlf.md",
            "---\r\nname: crlf\r\ntools: Read\r\n---\r\nYou.\r\n",
        );
        let utf16: Vec<u8> = "\u{feff}---\nname: wide\n---\nx\n"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        std::fs::write(work.join(".claude/agents/wide.md"), utf16).unwrap();
        let latin1 = std::ffi::OsStr::from_bytes(b"caf\xe9.md");
        std::fs::write(
            work.join(".claude/agents").join(latin1),
            "---\nname: cafe\n---\nx\n",
        )
        .unwrap();
    });
    fx.trust(&["--pack-access", "full"]);
    let t = fx.show("claude");
    assert_eq!(names(&t), ["crlf", "reader", "zw"], "{t:#}");
    for name in ["reader", "zw"] {
        let m = member(&t, name);
        assert_eq!(
            (m["requested_access"].as_str(), m["access"].as_str()),
            (Some("read-only"), Some("read-only")),
            "{name}: {t:#}"
        );
    }
    let warned = warnings(&t);
    for says in [
        "reader.md: front matter line 4: `tools:` was read as part of `description`'s quoted value",
        "reader.md: `tools` could not be read for certain",
        "zw.md: line 4: key `\\u200btools` looks like `tools`",
    ] {
        assert!(
            warned.iter().any(|w| w.contains(says)),
            "{says:?} in {warned:#?}"
        );
    }
    assert!(
        warned
            .iter()
            .any(|w| w.starts_with(".claude/agents/crlf.md has CRLF line endings")),
        "the file is named once: {warned:#?}"
    );
    let skips = skipped(&t);
    let reason = |file: &str| {
        skips
            .iter()
            .find(|(what, _)| what.ends_with(file))
            .map(|(_, why)| why.clone())
            .unwrap_or_else(|| panic!("{file} not in {skips:?}"))
    };
    assert!(reason("open.md").contains("no closing `---`"), "{skips:?}");
    assert!(reason("wide.md").contains("looks like UTF-16"), "{skips:?}");
    assert!(
        reason("caf\\xe9.md").contains("its name is not UTF-8"),
        "{skips:?}"
    );
}

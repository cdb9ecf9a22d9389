//! Write-back: `team export` to a crewbox file and back into the Squad pack, in place,
//! changing only what changed and never losing, deleting or following anything.

use pretty_assertions::assert_eq;

use super::fixtures;
use super::{Fx, member, names, snapshot, text, tree_hash};

fn export(fx: &Fx, args: &[&str]) -> std::process::Output {
    let mut all = vec!["team", "export"];
    all.extend(args);
    fx.run(&all)
}

#[test]
fn exporting_an_unchanged_imported_team_writes_nothing() {
    for crlf in [false, true] {
        let fx = Fx::new(|work| {
            fixtures::squad(work);
            if crlf {
                // CRLF, a byte order mark and no final newline.
                let md = format!(
                    "\u{feff}{}",
                    fixtures::SQUAD_TEAM_MD.trim_end().replace('\n', "\r\n")
                );
                Fx::write(work, ".squad/team.md", &md);
                Fx::write(
                    work,
                    ".squad/agents/eecom/charter.md",
                    "# EECOM\r\n\r\nCore runtime.",
                );
            }
        });
        let before = snapshot(&fx.repo());
        let hash = tree_hash(&fx.repo());
        let out = export(&fx, &["squad", "--format", "squad"]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("nothing changed in .squad"),
            "{}",
            text(&out)
        );
        assert_eq!(tree_hash(&fx.repo()), hash);
        assert_eq!(
            snapshot(&fx.repo()),
            before,
            "no file rewritten, not even in place"
        );
    }
}

#[test]
fn the_round_trip_edits_one_row_and_one_charter_in_place() {
    let fx = Fx::new(fixtures::squad);
    fx.trust(&[]);
    let pack_before = snapshot(&fx.repo().join(".squad"));
    // Imported pack → crewbox file; the native team now shadows the pack.
    let out = export(&fx, &["squad", "--format", "crewbox"]);
    assert!(out.status.success(), "{}", text(&out));
    let file = fx.repo().join(".crewbox/teams/squad.toml");
    let toml = std::fs::read_to_string(&file).unwrap();
    assert!(toml.contains("display = \"McManus\""), "{toml}");
    assert!(
        toml.contains("access = \"read-only\""),
        "granted, not requested: {toml}"
    );
    assert!(
        toml.contains("model = \"claude-sonnet-4-6\""),
        "an id a provider takes: {toml}"
    );
    let t = fx.show("squad");
    assert_eq!(t["format"], "crewbox");
    assert_eq!(names(&t), ["flight", "mcmanus", "fact-checker", "eecom"]);
    assert_eq!(member(&t, "mcmanus")["display"], "McManus");
    let again = export(&fx, &["squad", "--format", "crewbox"]);
    assert_eq!(
        again.status.code(),
        Some(2),
        "never replaced without --force"
    );
    // Exporting the native copy back changes nothing yet.
    let out = export(&fx, &["squad", "--format", "squad", "--dir", ".squad"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(snapshot(&fx.repo().join(".squad")), pack_before);
    // One role and one charter edited, one member added, one removed.
    let edited = toml
        .replace(
            "role = \"Verification\"",
            "role = \"Devil's Advocate | QA\"",
        )
        .replace("Core runtime.", "Core runtime and the event loop.");
    let edited = remove_member(&edited, "flight");
    std::fs::write(
        &file,
        format!(
            "{edited}\n[[members]]\nname = \"vox\"\ndisplay = \"VOX\"\nrole = \"Shell\"\ncharter = \"# VOX\\n\\nThe REPL.\\n\"\n"
        ),
    )
    .unwrap();
    let out = export(&fx, &["squad", "--format", "squad", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["written"],
        serde_json::json!([
            ".squad/agents/eecom/charter.md",
            ".squad/agents/vox/charter.md",
            ".squad/team.md"
        ])
    );
    assert!(
        report["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("roster row `Flight` is not in team")),
        "{report:#}"
    );
    let after = snapshot(&fx.repo().join(".squad"));
    let changed: Vec<String> = after
        .iter()
        .filter(|(p, b, _)| !pack_before.iter().any(|(q, c, _)| q == p && c == b))
        .map(|(p, _, _)| p.display().to_string())
        .collect();
    assert_eq!(
        changed,
        [
            "agents/eecom/charter.md",
            "agents/vox/charter.md",
            "team.md"
        ]
    );
    // Nothing was deleted: every file before is still there.
    for (p, _, _) in &pack_before {
        assert!(
            fx.repo().join(".squad").join(p).exists(),
            "{} was deleted",
            p.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(fx.repo().join(".squad/agents/eecom/charter.md")).unwrap(),
        "# EECOM\n\nCore runtime and the event loop.\n"
    );
    // team.md: exactly one row changed and one added; every other line as before.
    let old = fixtures::SQUAD_TEAM_MD;
    let new = std::fs::read_to_string(fx.repo().join(".squad/team.md")).unwrap();
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) =
        (old.lines().collect(), new.lines().collect());
    assert_eq!(new_lines.len(), old_lines.len() + 1);
    let ralph = old_lines
        .iter()
        .position(|l| l.starts_with("| Ralph "))
        .unwrap();
    for (i, line) in old_lines.iter().enumerate() {
        let j = if i > ralph { i + 1 } else { i };
        if line.starts_with("| Fact Checker ") {
            assert_eq!(
                new_lines[j],
                "| Fact Checker | Devil's Advocate \\| QA | `.squad/agents/fact-checker/charter.md` | 🔍 Reviewer |"
            );
        } else {
            assert_eq!(new_lines[j], *line, "line {i}");
        }
    }
    assert_eq!(
        new_lines[ralph + 1],
        "| VOX | Shell | `.squad/agents/vox/charter.md` | ✅ Active |"
    );
    assert!(new.ends_with("| **Repository** | example/orbit |\n"));
    // The pack reads back with the edits, and exporting again writes nothing.
    std::fs::remove_file(&file).unwrap();
    let t = fx.show("squad");
    assert_eq!(t["format"], "squad");
    assert_eq!(member(&t, "fact-checker")["role"], "Devil's Advocate | QA");
    assert_eq!(member(&t, "vox")["display"], "VOX");
    let hash = tree_hash(&fx.repo());
    let out = export(&fx, &["squad", "--format", "squad"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(tree_hash(&fx.repo()), hash);
}

/// The TOML without the `[[members]]` entry of `name` (not the last one).
fn remove_member(toml: &str, name: &str) -> String {
    toml.split_inclusive("[[members]]\n")
        .filter(|block| !block.starts_with(&format!("name = \"{name}\"")))
        .collect()
}

#[test]
fn cut_text_is_never_written_back() {
    let fx = Fx::new(|work| {
        fixtures::squad(work);
        Fx::write(
            work,
            ".squad/agents/flight/charter.md",
            &format!("# Flight\n\n{}\nEND\n", "x".repeat(5_000)),
        );
    });
    let t = fx.show("squad");
    assert_eq!(member(&t, "flight")["truncated"], true);
    let out = export(&fx, &["squad", "--format", "crewbox"]);
    assert!(out.status.success(), "{}", text(&out));
    let file = fx.repo().join(".crewbox/teams/squad.toml");
    // Unchanged, the cut charter is no change: nothing is written.
    let hash = tree_hash(&fx.repo().join(".squad"));
    let out = export(&fx, &["squad", "--format", "squad"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(tree_hash(&fx.repo().join(".squad")), hash);
    // Edited but still ending with the marker: refused, naming member and file.
    let toml = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, toml.replacen("# Flight", "# Flight, edited", 1)).unwrap();
    let out = export(&fx, &["squad", "--format", "squad"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("member `flight`")
            && err.contains("[truncated]")
            && err.contains(".squad/agents/flight/charter.md"),
        "{err}"
    );
    assert_eq!(
        tree_hash(&fx.repo().join(".squad")),
        hash,
        "nothing was written"
    );
    assert!(
        std::fs::read_to_string(fx.repo().join(".squad/agents/flight/charter.md"))
            .unwrap()
            .ends_with("END\n")
    );
}

#[test]
fn exports_stay_inside_and_never_write_through_links() {
    let fx = Fx::new(fixtures::squad);
    let outside = fx.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    for dir in ["../outside", "/tmp", ".squad/../../outside"] {
        let out = export(&fx, &["squad", "--format", "crewbox", "--dir", dir]);
        assert_eq!(out.status.code(), Some(2), "{dir}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("inside the repository")
                || String::from_utf8_lossy(&out.stderr).contains("outside the repository"),
            "{}",
            text(&out)
        );
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    // A charter that is a link (to a file outside the pack): the export is refused
    // and the link's target keeps its bytes.
    let victim = outside.join("victim.md");
    std::fs::write(&victim, "KEEP").unwrap();
    let charter = fx.repo().join(".squad/agents/eecom/charter.md");
    std::fs::remove_file(&charter).unwrap();
    std::os::unix::fs::symlink(&victim, &charter).unwrap();
    let toml = "mode = \"orchestrate\"\n[[members]]\nname = \"eecom\"\ndisplay = \"EECOM\"\n\
                role = \"Core Dev\"\ncharter = \"PWNED\"\n";
    Fx::write(&fx.repo(), ".crewbox/teams/squad.toml", toml);
    let out = export(&fx, &["squad", "--format", "squad"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("eecom"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "KEEP");
    // An agent directory that is a link out of the pack: refused, nothing written.
    std::fs::remove_file(&charter).unwrap();
    std::fs::remove_dir_all(fx.repo().join(".squad/agents/eecom")).unwrap();
    std::os::unix::fs::symlink(&outside, fx.repo().join(".squad/agents/eecom")).unwrap();
    let out = export(&fx, &["squad", "--format", "squad"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!outside.join("charter.md").exists());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "KEEP");
}

#[test]
fn a_team_without_a_pack_is_exported_as_a_new_one() {
    let fx = Fx::new(fixtures::claude);
    let out = export(&fx, &["claude", "--format", "squad", "--dir", "team-pack"]);
    assert!(out.status.success(), "{}", text(&out));
    let md = std::fs::read_to_string(fx.repo().join("team-pack/team.md")).unwrap();
    assert!(
        md.contains("| code-reviewer | Use this agent when you need a review of recent changes | `team-pack/agents/code-reviewer/charter.md` | ✅ Active |"),
        "{md}"
    );
    assert!(fx.repo().join("team-pack/agents/fixer/charter.md").exists());
    // It reads back as a Squad pack would (moved to .squad).
    std::fs::rename(fx.repo().join("team-pack"), fx.repo().join(".squad")).unwrap();
    let t = fx.show("squad");
    assert_eq!(names(&t).len(), 5, "{t:#}");
}

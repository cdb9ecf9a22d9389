//! Reading Squad packs: roster shapes, skipped rows, display names and slugs, the
//! legacy layout, both directories, models, shared context and empty rosters.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::fixtures::{self, NO_CHARTER_COLUMN_MD};
use super::{Fx, member, names, skipped, text, warnings};

#[test]
fn the_roster_table_is_the_team_and_everything_else_is_not() {
    let fx = Fx::new(fixtures::squad);
    let t = fx.show("squad");
    assert_eq!(t["format"], "squad");
    assert_eq!(t["mode"], "orchestrate");
    assert_eq!(t["source"], "repo");
    assert_eq!(
        t["path"],
        json!(fx.repo().canonicalize().unwrap().join(".squad/team.md"))
    );
    // Roster order; the Coordinator, @copilot and Issue Source tables are not rows;
    // `ghost/` (no row), `hockney/` (history only) and `_alumni/` are not members.
    assert_eq!(names(&t), ["flight", "mcmanus", "fact-checker", "eecom"]);
    assert_eq!(
        skipped(&t),
        [
            ("Dana Reyes".to_owned(), "a human member".to_owned()),
            (
                "Kobayashi".to_owned(),
                "status `Retired` (retired): not active".to_owned()
            ),
            (
                "Scribe".to_owned(),
                "Squad's session logger (infrastructure)".to_owned()
            ),
            (
                "Ralph".to_owned(),
                "Squad's work monitor (infrastructure)".to_owned()
            ),
        ]
    );
    // Display names are kept; names are directories, never kebab-cased displays.
    let mc = member(&t, "mcmanus");
    assert_eq!(mc["display"], "McManus");
    assert_eq!(mc["role"], "Backend Dev");
    assert_eq!(mc["source"], "repo");
    assert_eq!(
        mc["file"],
        json!(
            fx.repo()
                .canonicalize()
                .unwrap()
                .join(".squad/agents/mcmanus/charter.md")
        )
    );
    assert_eq!(
        mc["requested_access"], "read-only",
        "Squad declares no tools"
    );
    assert_eq!(mc["access"], "read-only");
    assert_eq!(mc["truncated"], false);
    assert_eq!(mc["charter_chars"], 94);
    assert_eq!(member(&t, "fact-checker")["display"], "Fact Checker");
    assert_eq!(member(&t, "eecom")["display"], "EECOM");
    let w = warnings(&t);
    assert!(
        w.iter()
            .any(|w| w.contains("`teamRoot`") && w.contains("never follows")),
        "{w:?}"
    );
}

#[test]
fn models_come_from_config_then_the_charter() {
    let fx = Fx::new(fixtures::squad);
    fx.trust(&[]);
    let t = fx.show("squad");
    // agentModelOverrides, then defaultModel (which beats the charter's preference).
    assert_eq!(member(&t, "eecom")["model"], "claude-opus-4.6");
    assert_eq!(member(&t, "mcmanus")["model"], "claude-sonnet-4.6");
    // Without a config the charter's `## Model` preference applies; `auto` is none.
    std::fs::remove_file(fx.repo().join(".squad/config.json")).unwrap();
    let t = fx.show("squad");
    assert_eq!(member(&t, "mcmanus")["model"], "claude-haiku-4.5");
    assert_eq!(member(&t, "fact-checker")["model"], json!(null));
    assert_eq!(member(&t, "flight")["model"], json!(null));
    // An untrusted repository chooses no model.
    let out = fx.run(&["trust", "--revoke"]);
    assert!(out.status.success());
    let t = fx.show("squad");
    assert_eq!(member(&t, "mcmanus")["model"], json!(null));
}

#[test]
fn shared_context_and_routing_come_from_the_pack() {
    let fx = Fx::new(fixtures::squad);
    // The crewbox export shows the team's texts as crewbox reads them.
    let team = exported(&fx);
    let ctx = team["shared_context"].as_str().unwrap();
    assert!(
        ctx.starts_with("## Project Context\n- **Owner:** Test Owner"),
        "{ctx}"
    );
    assert!(
        ctx.contains("## Decisions (.squad/decisions.md)\n# Decisions"),
        "{ctx}"
    );
    assert!(
        !ctx.contains("Issue Source"),
        "the next section is not context: {ctx}"
    );
    assert!(
        team["routing"]
            .as_str()
            .unwrap()
            .contains("| Storage | McManus |")
    );
}

#[test]
fn the_legacy_layout_and_both_directories() {
    let fx = Fx::new(fixtures::legacy);
    let t = fx.show("squad");
    assert_eq!(t["format"], "squad-legacy");
    assert_eq!(names(&t), ["coulson", "romanoff"]);
    assert_eq!(member(&t, "romanoff")["role"], "QA Engineer");
    let skip = skipped(&t);
    assert_eq!(skip[0].0, "Fitz");
    assert!(skip[0].1.contains("inactive"), "{skip:?}");
    assert_eq!(skip[1].0, "Scribe");
    // With both, `.squad/` wins and says so.
    fixtures::squad(&fx.repo());
    let t = fx.show("squad");
    assert_eq!(t["format"], "squad");
    assert_eq!(names(&t)[0], "flight");
    assert!(
        warnings(&t)
            .iter()
            .any(|w| w.contains("both .squad/ and .ai-team/") && w.contains(".ai-team/ ignored")),
        "{:?}",
        warnings(&t)
    );
}

#[test]
fn roster_variants_links_case_models_and_missing_columns() {
    let fx = Fx::new(fixtures::variants);
    fx.trust(&[]);
    let t = fx.show("squad");
    assert_eq!(
        names(&t),
        ["dallas", "ripley", "rai", "tony-stark-iron-man"]
    );
    assert_eq!(member(&t, "dallas")["charter_chars"], 17);
    assert_eq!(member(&t, "ripley")["charter_chars"], 18);
    // `.squad/agents/Rai/charter.md` is the directory `rai/` on disk.
    let rai = member(&t, "rai");
    assert_eq!(rai["display"], "Rai");
    assert_eq!(rai["charter_chars"], 25);
    // The Model column, when nothing else names one; `—` and `auto` are none.
    assert_eq!(member(&t, "dallas")["model"], "claude-opus-4.6");
    assert_eq!(rai["model"], "gpt-5.4");
    assert_eq!(member(&t, "ripley")["model"], json!(null));
    let tony = member(&t, "tony-stark-iron-man");
    assert_eq!(tony["display"], "Tony Stark (Iron Man)");
    assert_eq!(tony["model"], json!(null));
    assert_eq!(tony["charter_chars"], 15, "found by its slug");
    // A roster without Charter or Status columns: members by slug, Scribe skipped.
    Fx::write(&fx.repo(), ".squad/team.md", NO_CHARTER_COLUMN_MD);
    Fx::write(&fx.repo(), ".squad/agents/keyser/charter.md", "# Keyser\n");
    let t = fx.show("squad");
    assert_eq!(names(&t), ["keyser", "redfoot"]);
    assert_eq!(member(&t, "keyser")["charter_chars"], 9);
    assert_eq!(member(&t, "redfoot")["charter_chars"], 0);
    assert_eq!(member(&t, "redfoot")["file"], json!(null));
}

#[test]
fn an_empty_or_broken_roster_is_no_team_and_a_note_and_hides_nothing_else() {
    for (team_md, why) in [
        (
            "# Squad Team\n\n## Members\n\n| Name | Role | Charter | Status |\n|---|---|---|---|\n",
            "lists no member",
        ),
        (
            "# Squad Team\n\n## Members\n\n| Name | Role | Charter | Status |\n|---|---|---|---|\n| Scribe | Logger | — | 📋 |\n",
            // The note says why each row is not a member.
            "lists no member crewbox can run (1 row skipped: Scribe: ",
        ),
        ("# Squad Team\n\n## Members\n\nnobody yet\n", "no table"),
        ("# Just notes\n\nNo roster here.\n", "no `## Members`"),
        ("", "no `## Members`"),
        ("| Name |\n|---|\n| Orphan table |\n", "no `## Members`"),
    ] {
        let fx = Fx::new(|work| {
            Fx::write(work, ".squad/team.md", team_md);
            fixtures::claude(work);
        });
        let out = fx.run(&["team", "list", "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let teams: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(teams, ["claude"], "{team_md}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("note: .squad/team.md") && stderr.contains(why),
            "{team_md}: {stderr}"
        );
        let show = fx.run(&["team", "show", "squad"]);
        assert_eq!(show.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&show.stderr).contains("team `squad` could not be loaded"),
            "{}",
            text(&show)
        );
    }
}

#[test]
fn crlf_bom_and_invalid_utf8_are_read_with_warnings() {
    let fx = Fx::new(|work| {
        fixtures::squad(work);
        let crlf = format!("\u{feff}{}", fixtures::SQUAD_TEAM_MD.replace('\n', "\r\n"));
        Fx::write(work, ".squad/team.md", &crlf);
        let mut bytes = b"# EECOM\r\n\r\nCore \xff\xfe runtime.\r\n".to_vec();
        bytes.extend_from_slice(b"\r\n");
        std::fs::write(work.join(".squad/agents/eecom/charter.md"), bytes).unwrap();
    });
    let t = fx.show("squad");
    assert_eq!(names(&t), ["flight", "mcmanus", "fact-checker", "eecom"]);
    assert_eq!(member(&t, "mcmanus")["role"], "Backend Dev");
    // Neither a `\r` nor the mark reaches a prompt; each file says what it had.
    // "# EECOM\n\nCore \u{fffd}\u{fffd} runtime.\n\n": no `\r` counted (31 with them).
    assert_eq!(member(&t, "eecom")["charter_chars"], 27, "{t:#}");
    assert!(
        warnings(&t)
            .iter()
            .any(|w| w.contains(".squad/team.md has a byte order mark and CRLF line endings")),
        "{:?}",
        warnings(&t)
    );
    assert!(
        warnings(&t)
            .iter()
            .any(|w| w.contains(".squad/agents/eecom/charter.md is not valid UTF-8")),
        "{:?}",
        warnings(&t)
    );
}

#[test]
fn a_native_team_of_the_same_name_wins_with_a_note() {
    let fx = Fx::new(|work| {
        fixtures::squad(work);
        Fx::write(
            work,
            ".crewbox/teams/squad.toml",
            "mode = \"broadcast\"\n[[members]]\nname = \"solo\"\n",
        );
    });
    let t = fx.show("squad");
    assert_eq!(t["format"], "crewbox");
    assert_eq!(names(&t), ["solo"]);
    assert_eq!(t["shadows"][0]["source"], "repo");
    assert!(
        t["shadows"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with(".squad/team.md"),
        "{t:#}"
    );
    assert!(
        warnings(&t)
            .iter()
            .any(|w| w.contains("shadows the imported squad pack")),
        "{:?}",
        warnings(&t)
    );
    let list = fx.run(&["team", "list"]);
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        listed.contains("crewbox") && listed.contains("(shadows repo"),
        "{listed}"
    );
}

#[test]
fn a_roster_without_a_members_heading_is_the_first_name_and_role_table() {
    // PolyPilot: `# The Review Squad` then `| Member | Role | Expertise |`.
    let fx = Fx::new(|work| {
        Fx::write(work, ".squad/team.md", fixtures::REVIEW_SQUAD_MD);
        Fx::write(work, ".squad/agents/ada/charter.md", "# Ada\n\nReview.\n");
    });
    let t = fx.show("squad");
    assert_eq!(names(&t), ["ada", "linus", "grace"]);
    assert_eq!(member(&t, "linus")["role"], "Security Reviewer");
    assert_eq!(member(&t, "ada")["charter_chars"], 15);
    assert_eq!(
        skipped(&t),
        [(
            "Scribe".to_owned(),
            "Squad's session logger (infrastructure)".to_owned()
        )]
    );
    let w = warnings(&t);
    assert!(
        w.iter()
            .any(|w| w.starts_with(".squad/team.md: no `## Members`")
                && w.contains("`Member` and `Role`")
                && w.contains("line 5")),
        "{w:?}"
    );
    // Squad's `| Name | Role | Status |` with no heading: infrastructure rules apply.
    let fx = Fx::new(|work| {
        Fx::write(work, ".squad/team.md", fixtures::NO_HEADING_STATUS_MD);
    });
    let t = fx.show("squad");
    assert_eq!(names(&t), ["keaton", "fenster"]);
    let why: Vec<String> = skipped(&t).into_iter().map(|(n, _)| n).collect();
    assert_eq!(why, ["Hockney", "Ralph", "@copilot"]);
    assert!(
        warnings(&t).iter().any(|w| w.contains("`Name` and `Role`")),
        "{:?}",
        warnings(&t)
    );
    // A Coordinator table before it is not the roster.
    let fx = Fx::new(|work| {
        Fx::write(
            work,
            ".squad/team.md",
            "# T\n\n## Coordinator\n\n| Name | Role |\n|--|--|\n| Squad | Coordinator |\n\n## Crew\n\n| Name | Role |\n|--|--|\n| Bo | Dev |\n",
        );
    });
    assert_eq!(names(&fx.show("squad")), ["bo"]);
}

#[test]
fn twenty_members_without_a_charter_column_are_all_members() {
    let fx = Fx::new(|work| {
        Fx::write(work, ".squad/team.md", &fixtures::twenty_members_md());
    });
    let t = fx.show("squad");
    let n = names(&t);
    assert_eq!(n.len(), 20, "{n:?}");
    assert_eq!(n[0], "agent-01");
    assert_eq!(n[19], "agent-20");
    assert_eq!(member(&t, "agent-07")["role"], "Role 7");
    assert_eq!(member(&t, "agent-07")["file"], serde_json::Value::Null);
    assert!(skipped(&t).is_empty());
    assert!(
        !warnings(&t).iter().any(|w| w.contains("no `## Members`")),
        "it has the heading"
    );
}

#[test]
fn squad_members_ask_for_read_only_and_the_users_ceiling_raises_them() {
    let fx = Fx::new(fixtures::squad);
    fx.trust(&[]);
    let t = fx.show("squad");
    let mc = member(&t, "mcmanus");
    assert_eq!(
        (mc["requested_access"].as_str(), mc["access"].as_str()),
        (Some("read-only"), Some("read-only"))
    );
    assert!(
        !warnings(&t).iter().any(|w| w.contains("capped")),
        "nothing asked was refused: {:?}",
        warnings(&t)
    );
    fx.user_config("[packs]\nmax_access = \"full\"\n");
    let mc = member(&fx.show("squad"), "mcmanus").clone();
    assert_eq!(
        (mc["requested_access"].as_str(), mc["access"].as_str()),
        (Some("read-only"), Some("full"))
    );
    fx.user_config("");
    fx.trust(&["--pack-access", "full"]);
    assert_eq!(member(&fx.show("squad"), "flight")["access"], "full");
}

/// A carriage return without a line feed in `team.md`'s Project Context reaches no
/// prompt (probe 14: it reached every worker's, while the warning said it was read
/// as LF), as in every other Squad file.
#[test]
fn a_lone_carriage_return_in_project_context_reaches_no_prompt() {
    let fx = Fx::new(|work| {
        fixtures::squad(work);
        let md = fixtures::SQUAD_TEAM_MD.replace(
            "- **Owner:** Test Owner",
            "- **Owner:** Test Owner\rHIDDEN-BY-CR",
        );
        assert_ne!(md, fixtures::SQUAD_TEAM_MD);
        Fx::write(work, ".squad/team.md", &md);
    });
    let team = exported(&fx);
    let ctx = team["shared_context"].as_str().unwrap();
    assert!(
        ctx.contains("- **Owner:** Test Owner\nHIDDEN-BY-CR"),
        "{ctx:?}"
    );
    assert!(!ctx.contains('\r'), "{ctx:?}");
}

/// `team show` says why a member gets another access than it asks for: Squad's members
/// ask for read-only (Squad declares no tools), and a raised ceiling gives them full.
#[test]
fn team_show_says_a_ceiling_gave_more_than_asked() {
    let fx = Fx::new(fixtures::squad);
    fx.trust(&[]);
    let out = fx.run(&["team", "show", "squad"]);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(shown.contains("read-only"), "{shown}");
    assert!(!shown.contains("your ceiling"), "{shown}");
    fx.user_config("[packs]\nmax_access = \"full\"\n");
    let out = fx.run(&["team", "show", "squad"]);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        shown.contains("full (your ceiling; asks read-only)"),
        "{shown}"
    );
}

/// The squad team as `team export squad --format crewbox` writes it: the team's texts
/// as crewbox reads them.
fn exported(fx: &Fx) -> toml::Value {
    let out = fx.run(&["team", "export", "squad", "--format", "crewbox"]);
    assert!(out.status.success(), "{}", text(&out));
    let toml = std::fs::read_to_string(fx.repo().join(".crewbox/teams/squad.toml")).unwrap();
    toml::from_str(&toml).unwrap()
}

//! Hostile packs: links out of the pack, FIFOs, huge and numerous files, deep trees.
//! Each is refused or capped with a message naming the file; one bad file never
//! hides the rest, and nothing outside the pack is read.

use pretty_assertions::assert_eq;

use super::fixtures;
use super::{Fx, member, names, skipped, text, warnings};

const CANARY: &str = "CANARY-PACK-SECRET-5d1e";

fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn no_canary(out: &std::process::Output) {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(CANARY), "the canary leaked: {all}");
}

#[test]
fn links_out_of_the_pack_and_fifos_skip_their_member_only() {
    let fx = Fx::new(|work| {
        fixtures::squad(work);
        fixtures::claude(work);
        let outside = work.parent().unwrap().join("secret.md");
        std::fs::write(&outside, CANARY).unwrap();
        std::fs::write(work.join("inside-repo.md"), CANARY).unwrap();
        let link = |target: &std::path::Path, at: &str| {
            let at = work.join(at);
            let _ = std::fs::remove_file(&at);
            std::os::unix::fs::symlink(target, at).unwrap();
        };
        // Out of the repository, and out of the pack but inside the repository.
        link(&outside, ".squad/agents/mcmanus/charter.md");
        link(
            std::path::Path::new("../../../inside-repo.md"),
            ".squad/agents/eecom/charter.md",
        );
        link(&outside, ".claude/agents/leak.md");
        mkfifo(&work.join(".squad/agents/flight/charter.md.fifo"));
        std::fs::remove_file(work.join(".squad/agents/flight/charter.md")).unwrap();
        std::fs::rename(
            work.join(".squad/agents/flight/charter.md.fifo"),
            work.join(".squad/agents/flight/charter.md"),
        )
        .unwrap();
        mkfifo(&work.join(".claude/agents/pipe.md"));
    });
    let out = fx.run(&["team", "show", "squad", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    no_canary(&out);
    let t: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(names(&t), ["fact-checker"], "the rest still load");
    let skip = skipped(&t);
    let reason = |who: &str| skip.iter().find(|(n, _)| n == who).unwrap().1.clone();
    for who in ["McManus", "EECOM"] {
        let r = reason(who);
        assert!(
            r.contains("refused") && r.contains("leads outside"),
            "{who}: {r}"
        );
        assert!(r.contains(".squad/agents/"), "names the file: {r}");
    }
    assert!(reason("Flight").contains("FIFO"), "{skip:?}");
    let out = fx.run(&["team", "show", "claude", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    no_canary(&out);
    let t: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(names(&t).len(), 5);
    let skip = skipped(&t);
    let leak = skip.iter().find(|(f, _)| f.ends_with("leak.md")).unwrap();
    assert!(leak.1.contains("leads outside"), "{leak:?}");
    let pipe = skip.iter().find(|(f, _)| f.ends_with("pipe.md")).unwrap();
    assert!(pipe.1.contains("not a regular file"), "{pipe:?}");
}

#[test]
fn pack_directories_that_lead_outside_are_refused() {
    let fx = Fx::new(|work| {
        let elsewhere = work.parent().unwrap().join("elsewhere");
        fixtures::squad(&elsewhere);
        fixtures::claude(&elsewhere);
        std::os::unix::fs::symlink(elsewhere.join(".squad"), work.join(".squad")).unwrap();
        std::fs::create_dir_all(work.join(".claude")).unwrap();
        std::os::unix::fs::symlink(
            elsewhere.join(".claude/agents"),
            work.join(".claude/agents"),
        )
        .unwrap();
        Fx::write(
            work,
            ".crewbox/teams/ok.toml",
            "mode = \"broadcast\"\n[[members]]\nname = \"a\"\n",
        );
    });
    let out = fx.run(&["team", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "only the native team: {list:#}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(".squad") && err.contains("leads outside the repository"),
        "{err}"
    );
    assert!(
        err.contains(".claude/agents") && err.matches("leads outside").count() >= 2,
        "{err}"
    );
}

#[test]
fn huge_and_numerous_files_are_capped_with_warnings() {
    let fx = Fx::new(|work| {
        fixtures::squad(work);
        // team.md over the read cap: the roster at its top still loads.
        let mut md = fixtures::SQUAD_TEAM_MD.to_owned();
        md.push_str(&"filler line\n".repeat(30_000));
        Fx::write(work, ".squad/team.md", &md);
        Fx::write(
            work,
            ".squad/agents/flight/charter.md",
            &format!("# Flight\n{}END", "é".repeat(300_000)),
        );
        Fx::write(work, ".squad/decisions.md", &"- a decision\n".repeat(2_000));
        for i in 0..200 {
            Fx::write(
                work,
                &format!(".claude/agents/a{i:03}.md"),
                &format!("---\nname: agent-{i:03}\ndescription: Number {i}.\n---\nBody {i}.\n"),
            );
        }
        Fx::write(
            work,
            ".claude/agents/1/2/3/4/5/deep.md",
            "---\nname: deep\n---\ntoo deep\n",
        );
        // A collection's folder READMEs take none of the 128 agent files' places.
        Fx::write(work, ".claude/agents/README.md", "# Agents\n");
        Fx::write(work, ".claude/agents/1/Readme.md", "# More\n");
    });
    let t = fx.show("squad");
    assert_eq!(names(&t), ["flight", "mcmanus", "fact-checker", "eecom"]);
    let w = warnings(&t);
    assert!(
        w.iter()
            .any(|w| w.contains(".squad/team.md is larger than")),
        "{w:?}"
    );
    let flight = member(&t, "flight");
    assert_eq!(flight["truncated"], true);
    assert_eq!(flight["charter_chars"], 4_000 + "\n[truncated]".len());
    // The newest decisions (Squad appends them) are kept, the oldest left out.
    assert!(
        w.iter()
            .any(|w| w.contains(".squad/decisions.md: the oldest")
                && w.contains("the newest are kept")),
        "{w:?}"
    );
    let c = fx.show("claude");
    assert_eq!(c["members"].as_array().unwrap().len(), 64);
    let w = warnings(&c);
    assert!(
        w.iter().any(|w| w.contains("more than 128 agent files")),
        "{w:?}"
    );
    assert!(
        w.iter().any(|w| w.contains("deeper than 4 levels")),
        "{w:?}"
    );
    let over: Vec<String> = skipped(&c)
        .into_iter()
        .filter(|(_, r)| r.contains("more than 64 members"))
        .map(|(f, _)| f)
        .collect();
    assert_eq!(over.len(), 128 - 64);
    // Named as every other skipped file is, from the repository's root.
    assert!(
        over.iter().all(|f| f.starts_with(".claude/agents/a")),
        "{over:?}"
    );
    // The 72 files past the limit are each named (they were only counted).
    let unread: Vec<String> = skipped(&c)
        .into_iter()
        .filter(|(_, r)| r.contains("past the limit of 128 agent files"))
        .map(|(f, _)| f)
        .collect();
    assert_eq!(unread.len(), 200 - 128, "{unread:?}");
    assert_eq!(unread[0], ".claude/agents/a128.md");
    for readme in [".claude/agents/README.md", ".claude/agents/1/Readme.md"] {
        assert!(
            skipped(&c)
                .iter()
                .any(|(f, r)| f == readme && r.contains("no front matter")),
            "{readme}: {:?}",
            skipped(&c)
        );
    }
}

/// A `.squad/team.md` that cannot be read (a link to the legacy pack's, a FIFO) no
/// longer hides a valid `.ai-team/` pack: it is ignored with a warning that names the
/// pack as the boundary it leaves (it said "the repository"). And `.squad` as a link
/// to `.ai-team` is one pack, not "both hold a team.md".
#[test]
fn an_unreadable_squad_team_md_never_hides_the_legacy_pack() {
    let fx = Fx::new(|work| {
        fixtures::legacy(work);
        std::fs::create_dir_all(work.join(".squad")).unwrap();
        std::os::unix::fs::symlink("../.ai-team/team.md", work.join(".squad/team.md")).unwrap();
    });
    let t = fx.show("squad");
    assert_eq!(t["format"], "squad-legacy", "{t:#}");
    assert_eq!(names(&t), ["coulson", "romanoff"]);
    assert!(
        warnings(&t)
            .iter()
            .any(|w| w.contains(".squad/ is ignored") && w.contains("leads outside its pack")),
        "{:?}",
        warnings(&t)
    );
    let squad = fx.repo().join(".squad");
    std::fs::remove_file(squad.join("team.md")).unwrap();
    mkfifo(&squad.join("team.md"));
    assert_eq!(names(&fx.show("squad")), ["coulson", "romanoff"]);
    std::fs::remove_dir_all(&squad).unwrap();
    std::os::unix::fs::symlink(".ai-team", &squad).unwrap();
    let t = fx.show("squad");
    assert_eq!(t["format"], "squad", "{t:#}");
    assert!(
        !warnings(&t).iter().any(|w| w.contains("both")),
        "{:?}",
        warnings(&t)
    );
}

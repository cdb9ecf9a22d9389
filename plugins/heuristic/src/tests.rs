use super::*;
use crewbox_plugin_sdk::{DispatchRequest, Dispatcher, Mode};

fn reason(prompt: &str) -> Reason {
    decide(prompt).reason
}

fn has_signal(d: &Decision, name: &str) -> bool {
    d.signals.iter().any(|s| s.name == name)
}

fn long_steps(verb: &str) -> String {
    let mut p = format!("Please {verb} the importer described below.\n");
    for i in 1..=4 {
        p.push_str(&format!(
            "{i}. Step {i}: handle the next record format carefully.\n"
        ));
    }
    while p.chars().count() <= LONG_PROMPT_CHARS {
        p.push_str("More context about the records and their quirks goes here. ");
    }
    p
}

#[test]
fn plan_keywords_pick_crew() {
    for p in [
        "Plan the login flow",
        "design a cache",
        "Outline the steps",
        "write a PROPOSAL",
        "architecting the store",
    ] {
        let d = decide(p);
        assert_eq!(
            (d.mode, d.reason),
            (Mode::Crew, Reason::PlanRequested),
            "{p}"
        );
    }
}

#[test]
fn review_keywords_pick_crew() {
    for p in [
        "Review my change",
        "please AUDIT the deps",
        "verify the fix",
        "it verifies input",
        "critique this",
    ] {
        let d = decide(p);
        assert_eq!(
            (d.mode, d.reason),
            (Mode::Crew, Reason::ReviewRequested),
            "{p}"
        );
    }
}

#[test]
fn plan_wins_over_review() {
    assert_eq!(
        reason("review and plan the migration"),
        Reason::PlanRequested
    );
}

#[test]
fn refactor_with_tests_picks_crew() {
    let d = decide("Refactor the parser and keep the tests green");
    assert_eq!((d.mode, d.reason), (Mode::Crew, Reason::RefactorWithTests));
    assert_eq!(
        reason("migrate the db layer, add coverage"),
        Reason::RefactorWithTests
    );
}

#[test]
fn refactor_across_files_picks_crew() {
    let d = decide("restructure src/a.rs and src/b.rs");
    assert_eq!((d.mode, d.reason), (Mode::Crew, Reason::RefactorMultiFile));
}

#[test]
fn refactor_alone_is_single() {
    assert_eq!(reason("refactor src/a.rs"), Reason::DefaultSingle);
}

#[test]
fn review_beats_refactor() {
    assert_eq!(
        reason("review the refactor of the tests"),
        Reason::ReviewRequested
    );
}

#[test]
fn implementation_across_files_picks_crew() {
    let d = decide("Implement the cache in src/cache.rs and wire it into src/main.rs.");
    assert_eq!(
        (d.mode, d.reason),
        (Mode::Crew, Reason::MultiFileImplementation)
    );
    assert!(has_signal(&d, "paths"));
}

#[test]
fn implementation_in_one_file_is_single() {
    assert_eq!(
        reason("Implement the cache in src/cache.rs"),
        Reason::DefaultSingle
    );
}

#[test]
fn long_stepwise_implementation_picks_crew() {
    let d = decide(&long_steps("build"));
    assert_eq!(
        (d.mode, d.reason),
        (Mode::Crew, Reason::LongStepwiseImplementation)
    );
    assert!(has_signal(&d, "steps") && has_signal(&d, "long"));
}

#[test]
fn long_stepwise_needs_length_steps_and_implement() {
    let short = "Build it:\n1. a\n2. b\n3. c\n";
    assert_eq!(reason(short), Reason::DefaultSingle);
    let no_verb = long_steps("handle").replace("Please handle", "Please consider");
    assert_eq!(reason(&no_verb), Reason::DefaultSingle);
    let two_steps: String = long_steps("build")
        .lines()
        .filter(|l| !l.starts_with(['3', '4']))
        .collect::<Vec<_>>()
        .join("\n");
    let two_steps = format!("{two_steps}{}", " padding".repeat(120));
    assert_eq!(reason(&two_steps), Reason::DefaultSingle);
}

#[test]
fn parallel_keywords_pick_swarm() {
    for p in [
        "compare these two approaches",
        "Benchmark the sorters",
        "run them in parallel",
        "do both simultaneously",
        "try three ideas at the same time",
    ] {
        let d = decide(p);
        assert_eq!(
            (d.mode, d.reason),
            (Mode::Swarm, Reason::ParallelRequested),
            "{p}"
        );
    }
}

#[test]
fn crew_rules_beat_parallel() {
    assert_eq!(
        reason("compare and review the two drafts"),
        Reason::ReviewRequested
    );
    assert_eq!(
        reason("implement src/a.rs and src/b.rs in parallel"),
        Reason::MultiFileImplementation
    );
}

#[test]
fn phrases_need_consecutive_words() {
    assert_eq!(
        reason("at the time we met, the same"),
        Reason::DefaultSingle
    );
    assert_eq!(
        reason("the same   time, AT\tthe same time"),
        Reason::ParallelRequested
    );
}

#[test]
fn plain_prompt_is_single() {
    let d = decide("fix the typo in the readme");
    assert_eq!((d.mode, d.reason), (Mode::Single, Reason::DefaultSingle));
    assert!(d.signals.is_empty());
}

#[test]
fn keywords_are_whole_words() {
    // "latest" contains "test", "address" contains "add", "planet" contains "plan".
    let s = Scan::new("the latest address on planet preview contests; rebuild, unplanned");
    assert_eq!(s.test, None);
    assert_eq!(s.implement, None);
    assert_eq!(s.plan, None);
    assert_eq!(s.review, None);
    assert_eq!(Scan::new("testing").test, Some("testing"));
    assert_eq!(Scan::new("(add)").implement, Some("add"));
}

#[test]
fn keywords_are_case_insensitive() {
    let s = Scan::new("REFACTOR with Tests");
    assert_eq!((s.refactor, s.test), (Some("refactor"), Some("tests")));
}

#[test]
fn paths_need_a_slash_or_tilde_and_an_extension() {
    assert_eq!(
        path_tokens("src/main.rs lib.rs src/bin ~/notes.md"),
        ["src/main.rs", "~/notes.md"]
    );
    assert_eq!(
        path_tokens("a/b.toolong7 a/b.sixsix a/b.c"),
        ["a/b.sixsix", "a/b.c"]
    );
    assert!(path_tokens("./src ../lib v1.2/x").is_empty());
}

#[test]
fn urls_are_not_paths() {
    assert!(path_tokens("see https://example.com/a.html and http://x.org/b.js").is_empty());
    assert_eq!(
        reason("implement https://x.io/a.rs and https://x.io/b.rs"),
        Reason::DefaultSingle
    );
}

#[test]
fn trailing_and_wrapping_punctuation_is_stripped() {
    assert_eq!(
        path_tokens("edit (src/a.rs), `src/b.rs`; src/c.rs."),
        ["src/a.rs", "src/b.rs", "src/c.rs"]
    );
}

#[test]
fn duplicate_paths_are_not_distinct() {
    assert_eq!(path_tokens("src/a.rs src/a.rs, src/a.rs."), ["src/a.rs"]);
    assert_eq!(
        reason("implement src/a.rs then fix src/a.rs."),
        Reason::DefaultSingle
    );
    assert_eq!(
        reason("add ~/x.rs and ~/y.rs"),
        Reason::MultiFileImplementation
    );
}

#[test]
fn step_lines_count_numbers_and_bullets() {
    let text =
        "intro\n1. one\n2) two\n  - three\n* four\n-flag\n12.5 percent\n**bold**\n10. ten\n-\n";
    assert_eq!(step_lines(text), 5);
}

#[test]
fn signals_report_what_was_seen() {
    let d = decide("Refactor src/a.rs and src/b.rs, then add tests");
    let names: Vec<&str> = d.signals.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["refactor", "test", "implement", "paths"]);
    assert!(d.signals[3].detail.contains("src/a.rs, src/b.rs"));
}

#[test]
fn reason_codes_are_stable() {
    let all = [
        (Reason::PlanRequested, "plan-requested"),
        (Reason::ReviewRequested, "review-requested"),
        (Reason::RefactorWithTests, "refactor-with-tests"),
        (Reason::RefactorMultiFile, "refactor-multi-file"),
        (Reason::MultiFileImplementation, "multi-file-implementation"),
        (
            Reason::LongStepwiseImplementation,
            "long-stepwise-implementation",
        ),
        (Reason::ParallelRequested, "parallel-requested"),
        (Reason::DefaultSingle, "default-single"),
    ];
    for (r, code) in all {
        assert_eq!(r.as_str(), code);
    }
}

fn request(prompt: &str, modes: Vec<Mode>) -> DispatchRequest {
    DispatchRequest {
        prompt: prompt.into(),
        team: None,
        available_modes: modes,
    }
}

#[test]
fn export_passes_the_decision_through() {
    let d = <Heuristic as Dispatcher>::decide(request("review it", vec![Mode::Single, Mode::Crew]));
    assert_eq!(
        (d.mode, d.reason.as_str()),
        (Mode::Crew, "review-requested")
    );
    let d = <Heuristic as Dispatcher>::decide(request("review it", Vec::new()));
    assert_eq!(d.mode, Mode::Crew);
}

#[test]
fn export_falls_back_to_single_when_mode_is_not_offered() {
    let d =
        <Heuristic as Dispatcher>::decide(request("compare them", vec![Mode::Single, Mode::Crew]));
    assert_eq!(
        (d.mode, d.reason.as_str()),
        (Mode::Single, "mode-unavailable")
    );
    assert!(
        d.signals
            .iter()
            .any(|s| s.name == "unavailable" && s.detail.contains("swarm"))
    );
}

//! Property tests: the parser never panics, and canonical JSON round-trips.

// A test that cannot unwrap fails with the message; product code never does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crewbox_handoff::{Artifact, Handoff, HandoffStatus, parse, parse_json};
use proptest::prelude::*;
use serde_json::Value;

/// Arbitrary JSON values, deeper and wider than the limits allow.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(24, 256, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("status".to_owned()),
                    Just("summary".to_owned()),
                    Just("findings".to_owned()),
                    Just("artifacts".to_owned()),
                    Just("type".to_owned()),
                    Just("path".to_owned()),
                    Just("url".to_owned()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..8
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn text(max: usize) -> impl Strategy<Value = String> {
    // Non-blank, any Unicode.
    prop::string::string_regex(&format!("\\PC{{0,{max}}}"))
        .unwrap()
        .prop_filter("not blank", |s| !s.trim().is_empty())
}

fn word(max: usize) -> impl Strategy<Value = String> {
    prop::string::string_regex(&format!("[A-Za-z0-9_./-]{{1,{max}}}")).unwrap()
}

fn opt_title() -> impl Strategy<Value = Option<String>> {
    prop::option::of(text(40))
}

fn artifact() -> impl Strategy<Value = Artifact> {
    prop_oneof![
        (
            word(60),
            opt_title(),
            prop::option::of(Just("text/plain".to_owned()))
        )
            .prop_map(|(path, title, mime)| Artifact::File { path, title, mime }),
        (
            word(40),
            prop::option::of(word(20)),
            prop::collection::vec("[0-9a-f]{7,40}", 0..4)
        )
            .prop_map(|(branch, base, commits)| Artifact::Branch {
                branch,
                base,
                commits
            }),
        (word(60), opt_title(), prop::option::of(text(80))).prop_map(|(p, title, description)| {
            Artifact::Url {
                url: format!("https://example.test/{p}"),
                title,
                description,
            }
        }),
        (text(40), text(200)).prop_map(|(title, value)| Artifact::Note { title, value }),
    ]
}

fn handoff() -> impl Strategy<Value = Handoff> {
    (
        prop_oneof![
            Just(HandoffStatus::Success),
            Just(HandoffStatus::Partial),
            Just(HandoffStatus::Failed)
        ],
        text(300),
        prop::collection::vec(text(80), 1..6),
        prop::collection::vec(text(80), 0..4),
        prop::option::of(0.0f64..=1.0),
        prop::collection::vec(word(80), 0..5),
        prop::collection::vec(artifact(), 0..6),
    )
        .prop_map(
            |(status, summary, findings, next_steps, confidence, files, artifacts)| Handoff {
                status,
                summary,
                findings,
                next_steps,
                confidence,
                files,
                artifacts,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_panics_on_arbitrary_strings(s in "\\PC*") {
        let _ = parse(&s);
        let _ = parse_json(&s);
    }

    #[test]
    fn never_panics_on_fenced_noise(s in "(```(json)?\r?\n|[{}\\[\\]\",:]|[a-z ]|\r?\n)*") {
        let _ = parse(&s);
    }

    #[test]
    fn never_panics_on_arbitrary_json(v in json_value()) {
        let text = v.to_string();
        let _ = parse_json(&text);
        let _ = parse(&format!("reply\n```json\n{text}\n```\n"));
    }

    #[test]
    fn canonical_json_round_trips(h in handoff()) {
        let json = h.to_json();
        prop_assert_eq!(parse_json(&json).unwrap(), h.clone());
        let reply = format!("Done.\n```json\n{}\n```\n", serde_json::to_string_pretty(&h).unwrap());
        prop_assert_eq!(parse(&reply).unwrap(), h);
    }
}

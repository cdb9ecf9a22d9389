//! Unit tests: every bound at its edge and one past it, extraction, coercions.

use serde_json::{Value, json};

use crate::*;

fn base() -> Value {
    json!({"status": "success", "summary": "did it", "findings": ["one"]})
}

fn with(key: &str, v: Value) -> String {
    let mut h = base();
    h[key] = v;
    h.to_string()
}

fn err(json: &str) -> HandoffError {
    parse_json(json).expect_err("should be rejected")
}

fn artifacts(v: Value) -> Result<Vec<Artifact>, HandoffError> {
    parse_json(&with("artifacts", v)).map(|h| h.artifacts)
}

fn one_artifact(v: Value) -> Artifact {
    let mut a = artifacts(json!([v])).expect("artifact accepted");
    assert_eq!(a.len(), 1);
    a.remove(0)
}

fn nested(depth: usize) -> String {
    // `depth` containers including the root object.
    let inner = "[".repeat(depth - 1) + &"]".repeat(depth - 1);
    format!(r#"{{"status":"success","summary":"s","findings":["f"],"x":{inner}}}"#)
        .replace(r#""x":}"#, r#""x":null}"#)
}

#[test]
fn minimal_handoff_parses_and_serialises_canonically() {
    let h = parse_json(&base().to_string()).unwrap();
    assert_eq!(h.status, HandoffStatus::Success);
    assert_eq!(h.findings, vec!["one".to_owned()]);
    assert_eq!(
        h.to_json(),
        r#"{"status":"success","summary":"did it","findings":["one"]}"#
    );
}

#[test]
fn full_handoff_round_trips() {
    let json = json!({
        "status": "partial", "summary": "half", "findings": ["a", "b"],
        "next_steps": ["c"], "confidence": 0.75, "files": ["src/lib.rs"],
        "artifacts": [
            {"type": "file", "path": "a.md", "title": "A", "mime": "text/markdown"},
            {"type": "branch", "branch": "crewbox/a1", "base": "main", "commits": ["abc123"]},
            {"type": "url", "url": "https://x.test/pr/1", "title": "PR", "description": "d"},
            {"type": "note", "title": "t", "value": "v"}
        ]
    });
    let h = parse_json(&json.to_string()).unwrap();
    assert_eq!(h.artifacts.len(), 4);
    assert_eq!(serde_json::from_str::<Value>(&h.to_json()).unwrap(), json);
    assert_eq!(parse_json(&h.to_json()).unwrap(), h);
}

// ---- global bounds ----

#[test]
fn input_size_at_limit_and_past_it() {
    let pad = |n: usize| {
        let head = base().to_string();
        let fill = n - head.len();
        format!("{}{}", " ".repeat(fill), head)
    };
    let at = pad(Limits::MAX_INPUT_BYTES);
    assert_eq!(at.len(), Limits::MAX_INPUT_BYTES);
    assert!(parse_json(&at).is_ok());
    let past = pad(Limits::MAX_INPUT_BYTES + 1);
    assert_eq!(
        err(&past),
        HandoffError::InputTooLarge {
            bytes: Limits::MAX_INPUT_BYTES + 1,
            limit: Limits::MAX_INPUT_BYTES
        }
    );
    assert!(matches!(
        parse(&past),
        Err(HandoffError::InputTooLarge { .. })
    ));
}

#[test]
fn depth_at_limit_and_past_it() {
    assert!(parse_json(&nested(Limits::MAX_DEPTH)).is_ok());
    let e = err(&nested(Limits::MAX_DEPTH + 1));
    let path = format!("x{}", "[0]".repeat(Limits::MAX_DEPTH - 1));
    assert_eq!(e, HandoffError::TooDeep { path, limit: 20 });
}

#[test]
fn depth_error_names_the_path() {
    let deep = format!(
        r#"{{"artifacts":[{{"x":{}{}}}]}}"#,
        "[".repeat(30),
        "]".repeat(30)
    );
    let e = err(&deep);
    assert!(
        e.to_string()
            .starts_with("depth exceeds 20 at artifacts[0].x[0]"),
        "{e}"
    );
}

#[test]
fn hostile_depth_far_beyond_serde_recursion_limit_is_a_depth_error() {
    let deep = "[".repeat(100_000);
    assert!(matches!(err(&deep), HandoffError::TooDeep { .. }));
    let deep_obj = r#"{"a":"#.repeat(10_000);
    assert!(matches!(err(&deep_obj), HandoffError::TooDeep { .. }));
}

#[test]
fn key_count_at_limit_and_past_it() {
    let doc = |extra: usize| {
        let mut m = base();
        for i in 0..extra {
            m[format!("k{i}")] = json!(i);
        }
        m.to_string()
    };
    assert!(parse_json(&doc(Limits::MAX_KEYS - 3)).is_ok());
    let e = err(&doc(Limits::MAX_KEYS - 2));
    assert!(
        matches!(e, HandoffError::TooManyKeys { limit: 1000, .. }),
        "{e}"
    );
}

#[test]
fn keys_are_counted_across_nested_objects() {
    let items: Vec<Value> = (0..500).map(|i| json!({"a": i, "b": i})).collect();
    let e = err(&with("x", Value::Array(items)));
    assert!(e.to_string().contains("x[498]"), "{e}");
}

#[test]
fn long_strings_are_truncated_at_a_char_boundary() {
    let at = "é".repeat(Limits::MAX_STRING_CHARS);
    let h = parse_json(&with("findings", json!([at]))).unwrap();
    assert_eq!(h.findings[0], at);
    let past = "é".repeat(Limits::MAX_STRING_CHARS) + "🦀";
    let h = parse_json(&with("findings", json!([past]))).unwrap();
    assert_eq!(h.findings[0].chars().count(), Limits::MAX_STRING_CHARS);
    assert!(h.findings[0].chars().all(|c| c == 'é'));
}

#[test]
fn syntax_errors_carry_a_position() {
    let e = err("{\n  \"status\": }");
    assert!(
        matches!(
            e,
            HandoffError::Syntax {
                line: 2,
                column: 13,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(matches!(
        err(&(base().to_string() + "x")),
        HandoffError::Syntax { .. }
    ));
}

// ---- field bounds ----

#[test]
fn summary_at_limit_and_past_it() {
    let at = "s".repeat(Limits::MAX_SUMMARY_CHARS);
    assert!(parse_json(&with("summary", json!(at))).is_ok());
    let e = err(&with("summary", json!(at.clone() + "s")));
    assert_eq!(
        e.to_string(),
        "summary: string longer than 10000 characters (10001)"
    );
}

#[test]
fn summary_is_required_and_not_blank() {
    let mut h = base();
    h.as_object_mut().unwrap().remove("summary");
    assert_eq!(
        err(&h.to_string()),
        HandoffError::Missing {
            path: "summary".into()
        }
    );
    assert_eq!(
        err(&with("summary", json!(" \n"))),
        HandoffError::Empty {
            path: "summary".into()
        }
    );
    assert!(matches!(
        err(&with("summary", json!(3))),
        HandoffError::WrongType { .. }
    ));
}

#[test]
fn findings_count_bounds() {
    assert!(matches!(
        err(&with("findings", json!([]))),
        HandoffError::Count {
            count: 0,
            min: 1,
            max: 100,
            ..
        }
    ));
    let at: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
    assert!(parse_json(&with("findings", json!(at))).is_ok());
    let past: Vec<String> = (0..101).map(|i| format!("f{i}")).collect();
    assert_eq!(
        err(&with("findings", json!(past))).to_string(),
        "findings: 101 entries, expected between 1 and 100"
    );
}

#[test]
fn findings_entries_are_checked_with_their_index() {
    let e = err(&with("findings", json!(["a", "b", "c", 4])));
    assert_eq!(
        e.to_string(),
        "findings[3]: expected a string, found a number"
    );
    let e = err(&with("findings", json!(["a", " "])));
    assert_eq!(e.path(), Some("findings[1]"));
}

#[test]
fn files_count_and_path_bounds() {
    let at: Vec<String> = (0..200).map(|i| format!("f{i}.rs")).collect();
    assert!(parse_json(&with("files", json!(at))).is_ok());
    let past: Vec<String> = (0..201).map(|i| format!("f{i}.rs")).collect();
    assert!(matches!(
        err(&with("files", json!(past))),
        HandoffError::Count { count: 201, .. }
    ));
    let long = "p".repeat(Limits::MAX_PATH_CHARS);
    assert!(parse_json(&with("files", json!([long]))).is_ok());
    let e = err(&with("files", json!([long.clone() + "p"])));
    assert_eq!(
        e.to_string(),
        "files[0]: string longer than 4096 characters (4097)"
    );
}

#[test]
fn next_steps_bounds_and_alias() {
    let past: Vec<String> = (0..101).map(|i| format!("s{i}")).collect();
    assert!(matches!(
        err(&with("next_steps", json!(past))),
        HandoffError::Count { .. }
    ));
    let h = parse_json(&with("nextSteps", json!(["later"]))).unwrap();
    assert_eq!(h.next_steps, vec!["later".to_owned()]);
}

#[test]
fn confidence_bounds_and_type() {
    for ok in [0.0, 1.0, 0.5] {
        assert_eq!(
            parse_json(&with("confidence", json!(ok)))
                .unwrap()
                .confidence,
            Some(ok)
        );
    }
    assert_eq!(
        parse_json(&with("confidence", json!(1)))
            .unwrap()
            .confidence,
        Some(1.0)
    );
    for bad in [-0.001, 1.000_001, 2.0] {
        assert!(matches!(
            err(&with("confidence", json!(bad))),
            HandoffError::OutOfRange { .. }
        ));
    }
    let e = err(&with("confidence", json!("0.9")));
    assert_eq!(
        e.to_string(),
        "confidence: expected a number between 0 and 1, found a string"
    );
    assert_eq!(
        parse_json(&with("confidence", Value::Null))
            .unwrap()
            .confidence,
        None
    );
}

#[test]
fn status_values() {
    for (s, want) in [
        ("success", HandoffStatus::Success),
        ("partial", HandoffStatus::Partial),
        ("failed", HandoffStatus::Failed),
    ] {
        assert_eq!(
            parse_json(&with("status", json!(s))).unwrap().status,
            want,
            "{s}"
        );
    }
    for bad in [
        "meh",
        "done",
        "completed",
        "ok",
        "error",
        "Success",
        " failed ",
    ] {
        let e = err(&with("status", json!(bad)));
        assert_eq!(
            e.to_string(),
            format!(
                "status: unknown status {bad:?}; the schema allows \"success\", \"partial\" or \"failed\""
            ),
            "{bad}"
        );
    }
}

#[test]
fn root_must_be_an_object() {
    assert_eq!(
        err("[1]").to_string(),
        "(root): expected a JSON object, found an array"
    );
}

#[test]
fn artifacts_count_at_limit_and_past_it() {
    let a = |n: usize| {
        json!(
            (0..n)
                .map(|i| json!({"type":"note","title":"t","value":i.to_string()}))
                .collect::<Vec<_>>()
        )
    };
    assert_eq!(artifacts(a(50)).unwrap().len(), 50);
    assert!(matches!(
        artifacts(a(51)),
        Err(HandoffError::Count {
            count: 51,
            max: 50,
            ..
        })
    ));
}

#[test]
fn artifact_field_limits_at_edge_and_past_it() {
    let cases: [(&str, Value, Value, &str); 5] = [
        (
            "path",
            json!({"type":"file","path":"p".repeat(4096)}),
            json!({"type":"file","path":"p".repeat(4097)}),
            "artifacts[0].path: string longer than 4096 characters (4097)",
        ),
        (
            "url",
            json!({"type":"url","url":format!("https://{}", "u".repeat(2040))}),
            json!({"type":"url","url":format!("https://{}", "u".repeat(2041))}),
            "artifacts[0].url: string longer than 2048 characters (2049)",
        ),
        (
            "title",
            json!({"type":"url","url":"https://x","title":"t".repeat(200)}),
            json!({"type":"url","url":"https://x","title":"t".repeat(201)}),
            "artifacts[0].title: string longer than 200 characters (201)",
        ),
        (
            "branch",
            json!({"type":"branch","branch":"b".repeat(256)}),
            json!({"type":"branch","branch":"b".repeat(257)}),
            "artifacts[0].branch: string longer than 256 characters (257)",
        ),
        (
            "commits",
            json!({"type":"branch","branch":"b","commits":vec!["c"; 100]}),
            json!({"type":"branch","branch":"b","commits":vec!["c"; 101]}),
            "artifacts[0].commits: 101 entries, expected between 0 and 100",
        ),
    ];
    for (name, at, past, msg) in cases {
        assert!(artifacts(json!([at])).is_ok(), "{name} at the limit");
        assert_eq!(
            artifacts(json!([past])).unwrap_err().to_string(),
            msg,
            "{name}"
        );
    }
}

#[test]
fn note_title_is_required_to_have_text() {
    let e = artifacts(json!([{"type":"note","title":" ","value":"v"}])).unwrap_err();
    assert_eq!(
        e,
        HandoffError::Empty {
            path: "artifacts[0].title".into()
        }
    );
}

#[test]
fn malformed_urls_and_branches_are_refused() {
    let e = artifacts(json!([{"type":"url","url":"not a url"}])).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("artifacts[0].url: not an absolute URL"),
        "{e}"
    );
    let e = artifacts(json!([{"type":"branch","branch":"has space"}])).unwrap_err();
    assert_eq!(e.path(), Some("artifacts[0].branch"));
}

// ---- legacy coercions ----

#[test]
fn legacy_shapes_without_type_are_inferred() {
    assert_eq!(
        one_artifact(json!({"path": "src/a.rs"})),
        Artifact::File {
            path: "src/a.rs".into(),
            title: None,
            mime: None
        }
    );
    assert_eq!(
        one_artifact(json!({"branch": "feat", "base": "main"})),
        Artifact::Branch {
            branch: "feat".into(),
            base: Some("main".into()),
            commits: vec![]
        }
    );
    for key in ["url", "href", "link"] {
        assert_eq!(
            one_artifact(json!({key: "https://e.test", "title": "E"})),
            Artifact::Url {
                url: "https://e.test".into(),
                title: Some("E".into()),
                description: None
            },
            "{key}"
        );
    }
    assert_eq!(
        one_artifact(json!({"title": "Decision", "value": "use X"})),
        Artifact::Note {
            title: "Decision".into(),
            value: "use X".into()
        }
    );
}

#[test]
fn legacy_kind_names_are_coerced() {
    assert_eq!(
        one_artifact(json!({"kind": "pr", "url": "https://gh.test/pull/3", "title": "PR #3"})),
        Artifact::Url {
            url: "https://gh.test/pull/3".into(),
            title: Some("PR #3".into()),
            description: None
        }
    );
    assert_eq!(
        one_artifact(json!({"kind": "link", "href": "https://a.test"})),
        Artifact::Url {
            url: "https://a.test".into(),
            title: None,
            description: None
        }
    );
    assert_eq!(
        one_artifact(json!({"kind": "commit", "branch": "feat", "sha": "abc123"})),
        Artifact::Branch {
            branch: "feat".into(),
            base: None,
            commits: vec!["abc123".into()]
        }
    );
    assert_eq!(
        one_artifact(json!({"kind": "commit", "sha": "abc123"})),
        Artifact::Note {
            title: "commit".into(),
            value: "abc123".into()
        }
    );
    assert_eq!(
        one_artifact(json!({"type": "diff", "file": "x.patch", "mime_type": "text/x-diff"})),
        Artifact::File {
            path: "x.patch".into(),
            title: None,
            mime: Some("text/x-diff".into())
        }
    );
    assert_eq!(
        one_artifact(json!({"kind": "decision", "text": "ship it"})),
        Artifact::Note {
            title: "decision".into(),
            value: "ship it".into()
        }
    );
    assert_eq!(
        one_artifact(json!({"type": "screenshot", "path": "s.png"})),
        Artifact::File {
            path: "s.png".into(),
            title: None,
            mime: None
        }
    );
}

#[test]
fn legacy_plain_strings_become_url_file_or_note() {
    assert_eq!(
        one_artifact(json!("https://x.test/a b")),
        Artifact::Note {
            title: "note".into(),
            value: "https://x.test/a b".into()
        }
    );
    assert_eq!(
        one_artifact(json!(" https://x.test/a ")),
        Artifact::Url {
            url: "https://x.test/a".into(),
            title: None,
            description: None
        }
    );
    assert_eq!(
        one_artifact(json!("docs/plan.md")),
        Artifact::File {
            path: "docs/plan.md".into(),
            title: None,
            mime: None
        }
    );
    assert_eq!(
        one_artifact(json!("remember to rerun")),
        Artifact::Note {
            title: "note".into(),
            value: "remember to rerun".into()
        }
    );
}

#[test]
fn legacy_coercions_keep_the_same_bounds() {
    let e = artifacts(json!([{"href": format!("https://{}", "u".repeat(3000))}])).unwrap_err();
    assert!(
        matches!(e, HandoffError::TooLong { limit: 2048, .. }),
        "{e}"
    );
    let e = artifacts(json!(["p/".repeat(2100)])).unwrap_err();
    assert!(
        matches!(e, HandoffError::TooLong { limit: 4096, .. }),
        "{e}"
    );
    let e = artifacts(json!([{"kind": "pr", "url": "https://x", "title": "t".repeat(201)}]))
        .unwrap_err();
    assert!(matches!(e, HandoffError::TooLong { limit: 200, .. }), "{e}");
    let e = artifacts(json!([{"branch": "b".repeat(257)}])).unwrap_err();
    assert!(matches!(e, HandoffError::TooLong { limit: 256, .. }), "{e}");
}

#[test]
fn unrecognisable_artifacts_are_rejected_with_a_reason() {
    let e = artifacts(json!([{"weird": 1}])).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("artifacts[0]: cannot tell the artifact type"),
        "{e}"
    );
    let e = artifacts(json!([{"type": "file"}])).unwrap_err();
    assert_eq!(
        e,
        HandoffError::Missing {
            path: "artifacts[0].path".into()
        }
    );
    let e = artifacts(json!([7])).unwrap_err();
    assert!(matches!(e, HandoffError::WrongType { .. }));
}

#[test]
fn lone_strings_and_object_files_are_accepted() {
    let h = parse_json(&with("findings", json!("just one"))).unwrap();
    assert_eq!(h.findings, vec!["just one".to_owned()]);
    let h = parse_json(&with("files", json!([{"path": "a.rs"}, "b.rs"]))).unwrap();
    assert_eq!(h.files, vec!["a.rs".to_owned(), "b.rs".to_owned()]);
}

// ---- extraction ----

const H1: &str = r#"{"status":"success","summary":"first","findings":["a"]}"#;
const H2: &str = r#"{"status":"failed","summary":"second","findings":["b"]}"#;

#[test]
fn last_fenced_block_wins() {
    let reply = format!("Plan:\n```json\n{H1}\n```\nthen\n```json\n{H2}\n```\nbye");
    assert_eq!(extract(&reply), Some(H2));
    assert_eq!(parse(&reply).unwrap().summary, "second");
}

#[test]
fn untagged_fence_counts_only_when_it_holds_an_object() {
    let reply = format!("```\n{H1}\n```\n```\nls -la\n```\n");
    assert_eq!(extract(&reply), Some(H1));
    let reply = format!("```json\n{H1}\n```\n```rust\nfn main() {{}}\n```\n");
    assert_eq!(extract(&reply), Some(H1));
}

#[test]
fn fences_inside_json_strings_do_not_end_the_block() {
    let inner = r#"{"status":"success","summary":"use ```json fences``` like\n```\nthis","findings":["x"]}"#;
    let reply = format!("text\n```json\n{inner}\n```\n");
    assert_eq!(extract(&reply), Some(inner));
    assert!(parse(&reply).unwrap().summary.contains("```json"));
}

#[test]
fn longer_fences_wrap_shorter_ones() {
    let reply = format!("````json\n{H1}\n```\n````\n");
    assert_eq!(extract(&reply), Some(format!("{H1}\n```").as_str()));
}

#[test]
fn whole_reply_object_is_used_without_fences() {
    assert_eq!(extract(&format!("  \n{H1}\n ")), Some(H1));
    assert_eq!(extract("no json here"), None);
    assert_eq!(parse("no json here"), Err(HandoffError::NoJson));
}

#[test]
fn crlf_replies_are_handled() {
    let reply = format!(
        "intro\r\n```json\r\n{}\r\n```\r\n",
        H1.replace(',', ",\r\n")
    );
    let h = parse(&reply).unwrap();
    assert_eq!(h.summary, "first");
}

#[test]
fn unclosed_final_fence_runs_to_the_end() {
    let reply = format!("```json\n{H1}\n");
    assert_eq!(extract(&reply), Some(H1));
}

#[test]
fn unicode_text_survives() {
    let json = r#"{"status":"success","summary":"修正 🦀 ünïcödé","findings":["ø"],"artifacts":[{"type":"note","title":"名前","value":"値"}]}"#;
    let h = parse(&format!("```JSON\n{json}\n```")).unwrap();
    assert_eq!(h.summary, "修正 🦀 ünïcödé");
    assert_eq!(parse_json(&h.to_json()).unwrap(), h);
}

#[test]
fn hostile_key_paths_are_shortened() {
    let key = "k\"".repeat(1000);
    let json = format!(r#"{{"{}":{}}}"#, key.replace('"', "\\\""), "[".repeat(25));
    let e = err(&json);
    assert!(e.to_string().len() < 300, "{e}");
}

/// Found in review, not by the fuzzer (its inputs stay small): coercing 50 plain-string
/// artifacts adds ~40 bytes each, so a near-limit input produced canonical JSON over
/// the limit that `parse_json` then refused to read back.
#[test]
fn regression_canonical_form_of_near_limit_input_fits_the_limit() {
    let arts: Vec<Value> = (0..50).map(|i| json!(format!("note number {i}"))).collect();
    let doc = |last: usize| {
        let mut findings = vec!["f".repeat(49_000); 21];
        findings.push("f".repeat(last));
        let mut h = base();
        h["artifacts"] = Value::Array(arts.clone());
        h["findings"] = json!(findings);
        h.to_string()
    };
    let fill = Limits::MAX_INPUT_BYTES - doc(0).len();
    let at_limit = doc(fill);
    assert_eq!(at_limit.len(), Limits::MAX_INPUT_BYTES);
    let e = err(&at_limit);
    assert!(matches!(e, HandoffError::CanonicalTooLarge { .. }), "{e}");

    // Shrink by the coercion overhead and it is accepted, and round-trips.
    let overhead = parse_json(&doc(1)).unwrap().to_json().len() - doc(1).len();
    let fits = doc(fill - overhead);
    let h = parse_json(&fits).unwrap();
    assert_eq!(h.to_json().len(), Limits::MAX_INPUT_BYTES);
    assert_eq!(parse_json(&h.to_json()).unwrap(), h);
}

use super::*;

const GOOD: &str = "Done.\n```json\n{\"status\":\"partial\",\"summary\":\"Fixed the parser\",\"findings\":[\"off-by-one\"]}\n```\n";

fn result(v: &Verdict, c: Criterion) -> &CriterionResult {
    v.results
        .iter()
        .find(|r| r.criterion == c.as_str())
        .unwrap()
}

#[test]
fn a_valid_handoff_passes_the_defaults() {
    let v = check(GOOD, &Criterion::DEFAULT);
    assert!(v.passed, "{v:?}");
    assert_eq!(v.fix_prompt, None);
    assert_eq!(
        result(&v, Criterion::Valid).detail,
        "valid v2 handoff, status partial"
    );
}

#[test]
fn the_whole_reply_may_be_the_object() {
    let v = check(
        "{\"status\":\"success\",\"summary\":\"s\",\"findings\":[\"f\"]}",
        &Criterion::ALL,
    );
    assert!(v.passed, "{v:?}");
}

#[test]
fn the_last_fenced_block_is_the_handoff() {
    let reply = format!("{GOOD}\nLater:\n```json\n{{\"status\":\"success\"}}\n```\n");
    let v = check(&reply, &Criterion::DEFAULT);
    assert!(result(&v, Criterion::Present).passed);
    let valid = result(&v, Criterion::Valid);
    assert!(!valid.passed);
    assert!(
        valid.detail.starts_with("rejected: ") && valid.detail.contains("summary"),
        "{}",
        valid.detail
    );
}

#[test]
fn a_missing_handoff_fails_both_defaults_with_a_fix_prompt() {
    let v = check("All done, trust me.", &Criterion::DEFAULT);
    assert!(!v.passed);
    assert!(!result(&v, Criterion::Present).passed);
    assert!(!result(&v, Criterion::Valid).passed);
    let fix = v.fix_prompt.unwrap();
    assert!(
        fix.contains("no fenced JSON block") && fix.contains("```json"),
        "{fix}"
    );
}

#[test]
fn bounds_are_enforced() {
    let findings = vec!["\"x\""; 101].join(",");
    let reply = format!(
        "```json\n{{\"status\":\"success\",\"summary\":\"s\",\"findings\":[{findings}]}}\n```"
    );
    let v = check(&reply, &[Criterion::Valid]);
    assert!(!v.passed);
    assert!(
        v.results[0].detail.contains("findings"),
        "{}",
        v.results[0].detail
    );
}

#[test]
fn success_criterion_reads_the_status() {
    let v = check(GOOD, &[Criterion::Success]);
    assert_eq!(v.results[0].detail, "status is partial, not success");
    assert!(!v.passed);
    assert!(!check("nothing", &[Criterion::Success]).passed);
}

#[test]
fn criteria_parse_and_reject_unknown_names() {
    assert_eq!(criteria_for(&[]).unwrap(), Criterion::DEFAULT);
    assert_eq!(
        criteria_for(&["handoff-success".into()]).unwrap(),
        [Criterion::Success]
    );
    let err = criteria_for(&["handoff-pretty".into()]).unwrap_err();
    assert!(
        err.contains("handoff-pretty") && err.contains("handoff-valid"),
        "{err}"
    );
}

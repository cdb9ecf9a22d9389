//! The built-in `reviewer` crew role: reads the executor's diff (read-only) and
//! ends with `VERDICT: PASS` or `VERDICT: FAIL`.

use crewbox_plugin_sdk::{Access, Outcome, Role, RoleContext, RoleSpec};

/// Turns the reviewer may take to read around the diff.
pub const TURN_LIMIT: u32 = 10;

/// The finding reported when a reply has no verdict line.
pub const MISSING_VERDICT: &str =
    "the review ended without a `VERDICT: PASS` or `VERDICT: FAIL` line, so it counts as a fail";

/// The exported role.
pub struct Reviewer;

impl Role for Reviewer {
    fn spec() -> RoleSpec {
        RoleSpec {
            name: "reviewer".into(),
            description: "Reviews the executor's diff against the request and passes or fails it; never edits files."
                .into(),
            access: Access::ReadOnly,
            model_hint: None,
            turn_limit: Some(TURN_LIMIT),
        }
    }

    fn prompt(context: RoleContext) -> String {
        prompt(&context)
    }

    fn interpret(_context: RoleContext, output: String) -> Outcome {
        interpret(&output)
    }
}

/// The reviewer's prompt: the request, the plan if any, and the diff to judge.
pub fn prompt(context: &RoleContext) -> String {
    let mut p = String::from(
        "You are the reviewer of a crew. Judge whether the change below does what the request \
         asks, correctly and completely. You may read the repository; you cannot edit files or \
         run commands.\n\n",
    );
    p.push_str("## Request\n");
    p.push_str(context.request.trim());
    p.push('\n');
    if let Some(plan) = context
        .plan
        .as_deref()
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        p.push_str("\n## Plan\n");
        p.push_str(plan);
        p.push('\n');
    }
    p.push_str("\n## Diff\n");
    match context
        .diff
        .as_deref()
        .map(str::trim_end)
        .filter(|d| !d.trim().is_empty())
    {
        Some(diff) => {
            p.push_str("```diff\n");
            p.push_str(diff);
            p.push_str("\n```\n");
        }
        None => p.push_str("(the executor made no changes)\n"),
    }
    p.push_str(
        "\n## Answer with\nEach problem the executor must fix as a line starting with `- `. \
         End your reply with exactly one line `VERDICT: PASS` or `VERDICT: FAIL`.\n",
    );
    p
}

/// A verdict line's word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewVerdict {
    /// The change is accepted.
    Pass,
    /// The change must be revised.
    Fail,
}

/// Reads `VERDICT: PASS|FAIL` from one line (case-insensitive, markdown emphasis
/// and trailing punctuation allowed); the verdict word must stand alone.
pub fn verdict_line(line: &str) -> Option<ReviewVerdict> {
    let decor = ['*', '_', '`', '#', '>', ' ', '\t'];
    let line = line.trim().trim_matches(decor);
    let (head, tail) = line.split_at_checked(7)?;
    if !head.eq_ignore_ascii_case("verdict") {
        return None;
    }
    let word = tail.trim_start_matches(decor).strip_prefix(':')?;
    let word = word
        .trim_matches(decor)
        .trim_end_matches(['.', '!'])
        .trim_matches(decor);
    if word.eq_ignore_ascii_case("pass") {
        Some(ReviewVerdict::Pass)
    } else if word.eq_ignore_ascii_case("fail") {
        Some(ReviewVerdict::Fail)
    } else {
        None
    }
}

/// Reads the review: the last verdict line wins; no verdict line is a fail.
pub fn interpret(output: &str) -> Outcome {
    let last = output
        .lines()
        .enumerate()
        .filter_map(|(i, line)| verdict_line(line).map(|v| (i, v)))
        .last();
    let findings = || output.lines().filter_map(finding).collect::<Vec<String>>();
    match last {
        Some((index, ReviewVerdict::Pass)) => {
            let summary: Vec<&str> = output
                .lines()
                .enumerate()
                .filter(|&(i, _)| i != index)
                .map(|(_, line)| line)
                .collect();
            let summary = summary.join("\n").trim().to_string();
            Outcome::Pass(if summary.is_empty() {
                "PASS".into()
            } else {
                summary
            })
        }
        Some((_, ReviewVerdict::Fail)) => {
            let mut found = findings();
            if found.is_empty() {
                found.push(fallback_finding(output));
            }
            Outcome::Fail(found)
        }
        None => {
            let mut found = vec![MISSING_VERDICT.to_string()];
            found.extend(findings());
            Outcome::Fail(found)
        }
    }
}

/// The text of a `- finding` line.
fn finding(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("- ")?;
    let text = rest.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// A fail without bullets: the reply's prose (minus verdict lines) is the finding.
fn fallback_finding(output: &str) -> String {
    let prose: Vec<&str> = output
        .lines()
        .filter(|l| verdict_line(l).is_none() && !l.trim().is_empty())
        .map(str::trim)
        .collect();
    if prose.is_empty() {
        "the reviewer failed the change without saying why".to_string()
    } else {
        prose.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(diff: Option<&str>) -> RoleContext {
        RoleContext {
            request: "Add a --json flag".into(),
            task: "Review the change".into(),
            plan: Some("1. Parse the flag".into()),
            diff: diff.map(str::to_string),
            findings: Vec::new(),
            revision: 0,
        }
    }

    #[test]
    fn spec_is_read_only() {
        let spec = <Reviewer as Role>::spec();
        assert_eq!(
            (spec.name.as_str(), spec.access),
            ("reviewer", Access::ReadOnly)
        );
    }

    #[test]
    fn prompt_carries_the_diff_and_the_verdict_format() {
        let p = prompt(&context(Some("+++ b/src/cli.rs\n+json: bool,\n")));
        assert!(p.contains("## Request\nAdd a --json flag\n"));
        assert!(p.contains("```diff\n+++ b/src/cli.rs\n+json: bool,\n```"));
        assert!(p.contains("`VERDICT: PASS` or `VERDICT: FAIL`") && p.contains("`- `"));
        assert!(prompt(&context(None)).contains("(the executor made no changes)"));
        assert!(prompt(&context(Some("  \n"))).contains("(the executor made no changes)"));
    }

    #[test]
    fn verdict_lines_are_strict_about_the_word() {
        assert_eq!(verdict_line("VERDICT: PASS"), Some(ReviewVerdict::Pass));
        assert_eq!(verdict_line("  verdict:fail. "), Some(ReviewVerdict::Fail));
        assert_eq!(
            verdict_line("**Verdict:** **PASS**"),
            Some(ReviewVerdict::Pass)
        );
        assert_eq!(verdict_line("VERDICT: PASSED"), None);
        assert_eq!(verdict_line("VERDICT: PASS with nits"), None);
        assert_eq!(verdict_line("VERDICT PASS"), None);
        assert_eq!(verdict_line("The verdict: pass"), None);
        assert_eq!(verdict_line("VERDICTS: PASS"), None);
        assert_eq!(verdict_line("vérdict"), None);
    }

    #[test]
    fn pass_keeps_the_rest_as_summary() {
        let out = interpret("Looks good; tests cover the flag.\n\nVERDICT: PASS\n");
        assert_eq!(
            out,
            Outcome::Pass("Looks good; tests cover the flag.".into())
        );
        assert_eq!(interpret("verdict: pass"), Outcome::Pass("PASS".into()));
    }

    #[test]
    fn fail_collects_bullets() {
        let out = interpret(
            "Problems:\n- no test for --json\n  - exit code is 0 on error \nVERDICT: FAIL",
        );
        assert_eq!(
            out,
            Outcome::Fail(vec![
                "no test for --json".into(),
                "exit code is 0 on error".into()
            ])
        );
    }

    #[test]
    fn fail_without_bullets_uses_the_prose() {
        assert_eq!(
            interpret("The flag is ignored.\nVERDICT: FAIL"),
            Outcome::Fail(vec!["The flag is ignored.".into()])
        );
        assert_eq!(
            interpret("VERDICT: FAIL"),
            Outcome::Fail(vec![
                "the reviewer failed the change without saying why".into()
            ])
        );
    }

    #[test]
    fn last_verdict_line_wins() {
        assert!(matches!(
            interpret("VERDICT: FAIL\n- x\nOn reflection it is fine.\nVERDICT: PASS"),
            Outcome::Pass(_)
        ));
        assert!(matches!(
            interpret("VERDICT: PASS\n- but x is broken\nVERDICT: FAIL"),
            Outcome::Fail(_)
        ));
    }

    #[test]
    fn missing_verdict_is_a_fail_that_says_so() {
        let out = interpret("I think it passes.\n- minor nit");
        assert_eq!(
            out,
            Outcome::Fail(vec![MISSING_VERDICT.into(), "minor nit".into()])
        );
        // "PASS" in prose is not a verdict.
        assert!(matches!(interpret("PASS"), Outcome::Fail(_)));
    }
}

crewbox_plugin_sdk::export_role!(Reviewer);

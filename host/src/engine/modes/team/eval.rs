//! Reading an evaluator's reply and deciding whether the goal is met.
//!
//! The evaluator writes `SCORE:` and `RATIONALE:` lines (any case, optionally
//! wrapped in Markdown emphasis). A score may be `0.8`, `.8`, `8/10` or `80%` and is
//! clamped to `0..=1`; a missing or unreadable score counts as 0.5 (0.4 beside a
//! [`NEEDS_ITERATION_SENTINEL`]) and sets [`Evaluation::score_defaulted`] so the
//! engine can warn. The sentinels [`COMPLETE_SENTINEL`] and
//! [`NEEDS_ITERATION_SENTINEL`] count only on a line of their own, in any case;
//! quoted inside a sentence they mean nothing.

use std::sync::LazyLock;

use regex::Regex;

/// A line with only this says the work is done.
pub const COMPLETE_SENTINEL: &str = "[[GROUP_REFLECT_COMPLETE]]";
/// A line with only this says another iteration is needed.
pub const NEEDS_ITERATION_SENTINEL: &str = "[[NEEDS_ITERATION]]";
/// Score at or above which the goal is met, unless configured otherwise.
pub const DEFAULT_THRESHOLD: f64 = 0.9;
/// The score assumed when the evaluator gave none that can be read.
pub const FALLBACK_SCORE: f64 = 0.5;
/// The score of a self-evaluation that asks for another iteration without a score.
pub const NEEDS_ITERATION_SCORE: f64 = 0.4;

/// One evaluation of an iteration's synthesis.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// In `0..=1`.
    pub score: f64,
    /// True when no readable score was found and [`FALLBACK_SCORE`] was used.
    pub score_defaulted: bool,
    /// The evaluator's reasons, if it gave any.
    pub rationale: Option<String>,
    /// [`COMPLETE_SENTINEL`] stood on a line of its own.
    pub complete: bool,
    /// [`NEEDS_ITERATION_SENTINEL`] stood on a line of its own.
    pub needs_iteration: bool,
}

/// A literal pattern, so it always compiles (`None` would only read no score).
static SCORE_VALUE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[+-]?(\d*\.?\d+)\s*(%|/\s*(\d*\.?\d+))?").ok());

/// Reads a score written `0.8`, `.8`, `8/10` or `80%`, clamped to `0..=1`.
pub fn parse_score(text: &str) -> Option<f64> {
    let text = text.trim().trim_start_matches(['*', '_', '`']).trim();
    let caps = SCORE_VALUE.as_ref()?.captures(text)?;
    let mut value: f64 = caps.get(1)?.as_str().parse().ok()?;
    if text.starts_with('-') {
        value = -value;
    }
    let value = match (caps.get(2).map(|m| m.as_str()), caps.get(3)) {
        (Some("%"), _) => value / 100.0,
        (Some(_), Some(den)) => {
            let den: f64 = den.as_str().parse().ok()?;
            if den <= 0.0 {
                return None;
            }
            value / den
        }
        _ => value,
    };
    value.is_finite().then(|| value.clamp(0.0, 1.0))
}

/// True when `sentinel` stands alone on a line (surrounding whitespace allowed, any
/// case).
pub fn has_sentinel(text: &str, sentinel: &str) -> bool {
    text.lines().any(|line| is_sentinel(line, sentinel))
}

fn is_sentinel(line: &str, sentinel: &str) -> bool {
    line.trim().eq_ignore_ascii_case(sentinel)
}

/// The value after `KEY:` if `line` is such a line, ignoring case and Markdown emphasis.
fn keyed<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let line = line.trim().trim_start_matches(['*', '_', '#', '-', ' ']);
    let head = line.get(..key.len())?;
    if !head.eq_ignore_ascii_case(key) {
        return None;
    }
    let rest = line[key.len()..].trim_start_matches(['*', '_']);
    let rest = rest.strip_prefix(':')?;
    Some(rest.trim_start_matches(['*', '_']).trim())
}

/// Reads an evaluator reply.
pub fn parse_evaluation(reply: &str) -> Evaluation {
    let text = reply.replace("\r\n", "\n");
    let score = text
        .lines()
        .find_map(|line| keyed(line, "score"))
        .and_then(parse_score);
    let mut rationale: Option<Vec<&str>> = None;
    for line in text.lines() {
        if let Some(first) = keyed(line, "rationale") {
            rationale = Some(vec![first]);
            continue;
        }
        let is_other = keyed(line, "score").is_some()
            || is_sentinel(line, COMPLETE_SENTINEL)
            || is_sentinel(line, NEEDS_ITERATION_SENTINEL);
        if let Some(lines) = rationale.as_mut()
            && !is_other
        {
            lines.push(line);
        }
    }
    let rationale = rationale
        .map(|lines| lines.join("\n").trim().to_owned())
        .filter(|r| !r.is_empty());
    let complete = has_sentinel(&text, COMPLETE_SENTINEL);
    let needs_iteration = has_sentinel(&text, NEEDS_ITERATION_SENTINEL);
    // The seed's self-evaluation: "needs another iteration" is a 0.4.
    let assumed = if needs_iteration && !complete {
        NEEDS_ITERATION_SCORE
    } else {
        FALLBACK_SCORE
    };
    Evaluation {
        score: score.unwrap_or(assumed),
        score_defaulted: score.is_none(),
        rationale,
        complete,
        needs_iteration,
    }
}

/// The goal is met at `score >= threshold` or on the complete sentinel, and only
/// once every worker has been dispatched at least once. A reply carrying both
/// sentinels contradicts itself, so its complete sentinel does not count.
pub fn goal_met(eval: &Evaluation, threshold: f64, all_dispatched: bool) -> bool {
    let by_sentinel = eval.complete && !eval.needs_iteration;
    all_dispatched && (eval.score >= threshold || by_sentinel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn score_forms() {
        assert_eq!(parse_score("0.8"), Some(0.8));
        assert_eq!(parse_score(".8"), Some(0.8));
        assert_eq!(parse_score("8/10"), Some(0.8));
        assert_eq!(parse_score("8 / 10"), Some(0.8));
        assert_eq!(parse_score("80%"), Some(0.8));
        assert_eq!(parse_score("1"), Some(1.0));
        assert_eq!(parse_score("0.85 (good)"), Some(0.85));
        assert_eq!(parse_score("**0.7**"), Some(0.7));
    }

    #[test]
    fn scores_are_clamped() {
        assert_eq!(parse_score("1.5"), Some(1.0));
        assert_eq!(parse_score("120%"), Some(1.0));
        assert_eq!(parse_score("11/10"), Some(1.0));
        assert_eq!(parse_score("-0.2"), Some(0.0));
    }

    #[test]
    fn unreadable_scores() {
        assert_eq!(parse_score("high"), None);
        assert_eq!(parse_score(""), None);
        assert_eq!(parse_score("5/0"), None);
    }

    #[test]
    fn full_reply() {
        let reply = "Looks solid.\r\nScore: 8/10\r\nrationale: Tests pass.\r\nOne gap: docs.\r\n";
        assert_eq!(
            parse_evaluation(reply),
            Evaluation {
                score: 0.8,
                score_defaulted: false,
                rationale: Some("Tests pass.\nOne gap: docs.".into()),
                complete: false,
                needs_iteration: false,
            }
        );
    }

    #[test]
    fn markdown_keys_and_sentinel_lines() {
        let reply = "**SCORE:** 95%\n**Rationale:** done\n  [[GROUP_REFLECT_COMPLETE]]  \n";
        let eval = parse_evaluation(reply);
        assert_eq!(eval.score, 0.95);
        assert_eq!(eval.rationale.as_deref(), Some("done"));
        assert!(eval.complete);
        assert!(!eval.needs_iteration);
    }

    #[test]
    fn missing_score_defaults_with_a_warning() {
        let eval = parse_evaluation("RATIONALE: no idea");
        assert_eq!((eval.score, eval.score_defaulted), (0.5, true));
        let eval = parse_evaluation("SCORE: excellent");
        assert_eq!((eval.score, eval.score_defaulted), (0.5, true));
        // `score` inside a sentence is not a score line.
        let eval = parse_evaluation("My score: would be 0.9 but SCORE is hard");
        assert!(eval.score_defaulted);
    }

    #[test]
    fn sentinels_ignore_case_and_needs_iteration_scores_point_four() {
        let eval = parse_evaluation("done\n[[group_reflect_complete]]\n");
        assert!(eval.complete);
        let eval = parse_evaluation("more to do\n  [[Needs_Iteration]]");
        assert!(eval.needs_iteration);
        assert_eq!((eval.score, eval.score_defaulted), (0.4, true));
        // A score that was given wins.
        assert_eq!(
            parse_evaluation("SCORE: 0.7\n[[NEEDS_ITERATION]]").score,
            0.7
        );
    }

    #[test]
    fn sentinel_inside_a_sentence_does_not_count() {
        let reply = "SCORE: 0.4\nI will not write [[GROUP_REFLECT_COMPLETE]] yet.\nAlso not `[[NEEDS_ITERATION]]`.";
        let eval = parse_evaluation(reply);
        assert!(!eval.complete);
        assert!(!eval.needs_iteration);
        assert!(has_sentinel(
            "x\n\t[[NEEDS_ITERATION]]\t\ny",
            NEEDS_ITERATION_SENTINEL
        ));
    }

    fn eval(score: f64, complete: bool, needs_iteration: bool) -> Evaluation {
        Evaluation {
            score,
            score_defaulted: false,
            rationale: None,
            complete,
            needs_iteration,
        }
    }

    #[test]
    fn goal_rules() {
        assert!(goal_met(&eval(0.9, false, false), DEFAULT_THRESHOLD, true));
        assert!(!goal_met(
            &eval(0.89, false, false),
            DEFAULT_THRESHOLD,
            true
        ));
        assert!(goal_met(&eval(0.1, true, false), DEFAULT_THRESHOLD, true));
        // Not before every worker has run once.
        assert!(!goal_met(&eval(1.0, true, false), DEFAULT_THRESHOLD, false));
        // Contradictory sentinels: only the score can meet the goal.
        assert!(!goal_met(&eval(0.5, true, true), DEFAULT_THRESHOLD, true));
        assert!(goal_met(&eval(0.95, true, true), DEFAULT_THRESHOLD, true));
        assert!(goal_met(&eval(0.7, false, false), 0.7, true));
    }
}

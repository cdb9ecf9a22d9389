//! The terminal renderings of the dispatch histogram (`crewbox history`): aligned text
//! rows with bars, and JSON.

use crewbox::Mode;
use crewbox::text::escape;
use crewbox::types::DispatchHistogram;
use serde_json::{Map, Value, json};

/// Width of the longest bar in the text rendering.
const BAR_WIDTH: u64 = 30;

/// `{ "total", "by_kind", "by_source", "auto_by_kind" }` with name → count objects.
pub fn json(h: &DispatchHistogram) -> Value {
    let modes = |rows: &[(Mode, u64)]| -> Value {
        Value::Object(
            rows.iter()
                .map(|(m, n)| (m.as_str().to_owned(), json!(n)))
                .collect::<Map<_, _>>(),
        )
    };
    let sources: Map<_, _> = h
        .by_source
        .iter()
        .map(|(s, n)| (s.clone(), json!(n)))
        .collect();
    json!({
        "total": h.total,
        "by_kind": modes(&h.by_kind),
        "by_source": sources,
        "auto_by_kind": modes(&h.auto_by_kind),
    })
}

/// Aligned rows with bars scaled to the total, one section per breakdown.
pub fn text(h: &DispatchHistogram) -> String {
    let mut out = format!("dispatch decisions: {}\n", h.total);
    if h.total == 0 {
        return out;
    }
    // Each section's percentages are of what it counts: auto picks of the auto
    // decisions, not of all of them.
    let auto_total: u64 = h.auto_by_kind.iter().map(|(_, n)| n).sum();
    let sections: [Section<'_>; 3] = [
        ("by mode", named(&h.by_kind), h.total),
        (
            "by source",
            h.by_source.iter().map(|(s, n)| (s.as_str(), *n)).collect(),
            h.total,
        ),
        (
            "auto picks by mode (of the auto decisions)",
            named(&h.auto_by_kind),
            auto_total,
        ),
    ];
    let name_width = sections
        .iter()
        .flat_map(|(_, rows, _)| rows.iter().map(|(s, _)| s.chars().count()))
        .max()
        .unwrap_or(0);
    let count_width = h.total.to_string().len();
    for (title, rows, of) in sections {
        out.push('\n');
        out.push_str(title);
        out.push('\n');
        if rows.is_empty() {
            out.push_str("  (none)\n");
        }
        for (name, n) in rows {
            // A source is whatever the store holds (a dispatcher may name it).
            let name = escape(name);
            let bar = (n * BAR_WIDTH).div_ceil(of.max(1)) as usize;
            let pct = n as f64 * 100.0 / of.max(1) as f64;
            out.push_str(&format!(
                "  {name:<name_width$}  {n:>count_width$}  {pct:>5.1}%  {}\n",
                "█".repeat(bar)
            ));
        }
    }
    out
}

/// A titled block of rows, with the count its percentages are of.
type Section<'a> = (&'a str, Vec<(&'a str, u64)>, u64);

fn named(rows: &[(Mode, u64)]) -> Vec<(&'static str, u64)> {
    rows.iter().map(|(m, n)| (m.as_str(), *n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(
        total: u64,
        by_kind: &[(Mode, u64)],
        by_source: &[(&str, u64)],
        auto: &[(Mode, u64)],
    ) -> DispatchHistogram {
        DispatchHistogram {
            total,
            by_kind: by_kind.to_vec(),
            by_source: by_source
                .iter()
                .map(|(s, n)| ((*s).to_owned(), *n))
                .collect(),
            auto_by_kind: auto.to_vec(),
        }
    }

    #[test]
    fn json_names_counts() {
        let h = hist(
            5,
            &[(Mode::Single, 3), (Mode::Swarm, 1), (Mode::Crew, 1)],
            &[("explicit", 2), ("auto", 3)],
            &[(Mode::Single, 2), (Mode::Swarm, 1)],
        );
        assert_eq!(
            json(&h),
            json!({
                "total": 5,
                "by_kind": {"single": 3, "swarm": 1, "crew": 1},
                "by_source": {"explicit": 2, "auto": 3},
                "auto_by_kind": {"single": 2, "swarm": 1},
            })
        );
        assert_eq!(
            text(&DispatchHistogram::default()),
            "dispatch decisions: 0\n"
        );
    }

    #[test]
    fn text_rows_are_aligned_with_proportional_bars() {
        let h = hist(
            4,
            &[(Mode::Single, 3), (Mode::Orchestrate, 1)],
            &[("explicit", 3), ("auto", 1)],
            &[(Mode::Orchestrate, 1)],
        );
        let text = text(&h);
        let single = text.lines().find(|l| l.contains("single")).unwrap();
        let orch = text.lines().find(|l| l.contains("orchestrate")).unwrap();
        // The count column starts at the same place whatever the name's length.
        assert_eq!(single.find('3'), orch.find('1'));
        assert_eq!(single.matches('█').count(), 23);
        assert_eq!(orch.matches('█').count(), 8);
        assert!(text.contains("auto picks by mode (of the auto decisions)\n  orchestrate"));
        // The one auto decision picked orchestrate: all of the auto picks.
        let pick = text
            .lines()
            .filter(|l| l.contains("orchestrate"))
            .nth(1)
            .unwrap();
        assert!(pick.contains("100.0%"), "{text}");
    }
}

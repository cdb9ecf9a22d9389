//! The dispatch histogram behind `crewbox history`: how often each mode ran, how often
//! the user named it versus the dispatcher picking it.

use serde_json::{Map, Value, json};

use crate::store::DispatchRecord;
use crate::vocab::{DecisionSource, Mode};

/// Width of the longest bar in the text rendering.
const BAR_WIDTH: u64 = 30;

/// Counts over the stored dispatch decisions. Entries with a zero count are left out;
/// modes keep their declaration order so output is stable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DispatchHistogram {
    /// Every decision.
    pub total: u64,
    /// Decisions per chosen mode.
    pub by_kind: Vec<(Mode, u64)>,
    /// Decisions per source (`explicit`, `auto`, then any other stored value).
    pub by_source: Vec<(String, u64)>,
    /// Modes the dispatcher picked on its own.
    pub auto_by_kind: Vec<(Mode, u64)>,
}

/// Aggregates decisions into a histogram; order of the input does not matter.
pub fn histogram(records: &[DispatchRecord]) -> DispatchHistogram {
    let mut by_kind = vec![0u64; Mode::ALL.len()];
    let mut auto_by_kind = vec![0u64; Mode::ALL.len()];
    let mut sources: Vec<(String, u64)> = vec![
        (DecisionSource::Explicit.as_str().to_owned(), 0),
        (DecisionSource::Auto.as_str().to_owned(), 0),
    ];
    for r in records {
        let k = mode_index(r.kind);
        by_kind[k] += 1;
        if r.source == DecisionSource::Auto.as_str() {
            auto_by_kind[k] += 1;
        }
        match sources.iter_mut().find(|(s, _)| *s == r.source) {
            Some((_, n)) => *n += 1,
            None => sources.push((r.source.clone(), 1)),
        }
    }
    // Unknown sources (written by a newer crewbox) sort after the two known ones.
    sources[2..].sort();
    sources.retain(|(_, n)| *n > 0);
    DispatchHistogram {
        total: records.len() as u64,
        by_kind: nonzero(&by_kind),
        by_source: sources,
        auto_by_kind: nonzero(&auto_by_kind),
    }
}

fn mode_index(mode: Mode) -> usize {
    Mode::ALL.iter().position(|m| *m == mode).unwrap_or(0)
}

fn nonzero(counts: &[u64]) -> Vec<(Mode, u64)> {
    Mode::ALL
        .iter()
        .zip(counts)
        .filter(|(_, n)| **n > 0)
        .map(|(m, n)| (*m, *n))
        .collect()
}

impl DispatchHistogram {
    /// `{ "total", "by_kind", "by_source", "auto_by_kind" }` with name → count objects.
    pub fn to_json(&self) -> Value {
        let modes = |rows: &[(Mode, u64)]| -> Value {
            Value::Object(
                rows.iter()
                    .map(|(m, n)| (m.as_str().to_owned(), json!(n)))
                    .collect::<Map<_, _>>(),
            )
        };
        let sources: Map<_, _> = self
            .by_source
            .iter()
            .map(|(s, n)| (s.clone(), json!(n)))
            .collect();
        json!({
            "total": self.total,
            "by_kind": modes(&self.by_kind),
            "by_source": sources,
            "auto_by_kind": modes(&self.auto_by_kind),
        })
    }

    /// Aligned rows with bars scaled to the total, one section per breakdown.
    pub fn render_text(&self) -> String {
        let mut out = format!("dispatch decisions: {}\n", self.total);
        if self.total == 0 {
            return out;
        }
        // Each section's percentages are of what it counts: auto picks of the auto
        // decisions, not of all of them.
        let auto_total: u64 = self.auto_by_kind.iter().map(|(_, n)| n).sum();
        let sections: [Section<'_>; 3] = [
            ("by mode", named(&self.by_kind), self.total),
            (
                "by source",
                self.by_source
                    .iter()
                    .map(|(s, n)| (s.as_str(), *n))
                    .collect(),
                self.total,
            ),
            (
                "auto picks by mode (of the auto decisions)",
                named(&self.auto_by_kind),
                auto_total,
            ),
        ];
        let name_width = sections
            .iter()
            .flat_map(|(_, rows, _)| rows.iter().map(|(s, _)| s.chars().count()))
            .max()
            .unwrap_or(0);
        let count_width = self.total.to_string().len();
        for (title, rows, of) in sections {
            out.push('\n');
            out.push_str(title);
            out.push('\n');
            if rows.is_empty() {
                out.push_str("  (none)\n");
            }
            for (name, n) in rows {
                // A source is whatever the store holds (a dispatcher may name it).
                let name = crate::text::escape(name);
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
}

/// A titled block of rows, with the count its percentages are of.
type Section<'a> = (&'a str, Vec<(&'a str, u64)>, u64);

fn named(rows: &[(Mode, u64)]) -> Vec<(&'static str, u64)> {
    rows.iter().map(|(m, n)| (m.as_str(), *n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: Mode, source: &str) -> DispatchRecord {
        DispatchRecord {
            run_id: None,
            at: 0,
            kind,
            source: source.into(),
            prompt_len: 10,
            reason: "r".into(),
        }
    }

    #[test]
    fn counts_by_kind_source_and_auto_picks() {
        let records = vec![
            rec(Mode::Single, "explicit"),
            rec(Mode::Swarm, "auto"),
            rec(Mode::Single, "auto"),
            rec(Mode::Crew, "explicit"),
            rec(Mode::Single, "auto"),
        ];
        let h = histogram(&records);
        assert_eq!(h.total, 5);
        assert_eq!(
            h.by_kind,
            vec![(Mode::Single, 3), (Mode::Swarm, 1), (Mode::Crew, 1)]
        );
        assert_eq!(
            h.by_source,
            vec![("explicit".to_owned(), 2), ("auto".to_owned(), 3)]
        );
        assert_eq!(h.auto_by_kind, vec![(Mode::Single, 2), (Mode::Swarm, 1)]);
        assert_eq!(
            h.to_json(),
            json!({
                "total": 5,
                "by_kind": {"single": 3, "swarm": 1, "crew": 1},
                "by_source": {"explicit": 2, "auto": 3},
                "auto_by_kind": {"single": 2, "swarm": 1},
            })
        );
    }

    #[test]
    fn empty_history_and_unknown_sources() {
        let h = histogram(&[]);
        assert_eq!(h.total, 0);
        assert!(h.by_kind.is_empty() && h.by_source.is_empty());
        assert_eq!(h.render_text(), "dispatch decisions: 0\n");

        let h = histogram(&[rec(Mode::Reflect, "zeta"), rec(Mode::Reflect, "api")]);
        assert_eq!(
            h.by_source,
            vec![("api".to_owned(), 1), ("zeta".to_owned(), 1)]
        );
        assert!(h.auto_by_kind.is_empty());
    }

    #[test]
    fn text_rows_are_aligned_with_proportional_bars() {
        let mut records = vec![rec(Mode::Single, "explicit"); 3];
        records.push(rec(Mode::Orchestrate, "auto"));
        let text = histogram(&records).render_text();
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

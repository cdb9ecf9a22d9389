//! The dispatch histogram behind `crewbox history`: how often each mode ran, how often
//! the user named it versus the dispatcher picking it. The binary renders it.

use crate::store::DispatchRecord;
use crate::vocab::{DecisionSource, Mode};

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
    }

    #[test]
    fn empty_history_and_unknown_sources() {
        let h = histogram(&[]);
        assert_eq!(h.total, 0);
        assert!(h.by_kind.is_empty() && h.by_source.is_empty());

        let h = histogram(&[rec(Mode::Reflect, "zeta"), rec(Mode::Reflect, "api")]);
        assert_eq!(
            h.by_source,
            vec![("api".to_owned(), 1), ("zeta".to_owned(), 1)]
        );
        assert!(h.auto_by_kind.is_empty());
    }
}

//! How the library's typed answers look on a terminal: text and JSON renderings the
//! read commands print.

pub mod history;
pub mod tree;

/// `s` in at most `n` characters: cut with a trailing `…` when longer.
pub fn fit(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Rows of cells as lines: each column but the last padded to its widest cell (in
/// characters), columns two spaces apart, each line indented by `indent`.
pub fn columns(rows: &[Vec<String>], indent: &str) -> Vec<String> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|r| {
            let mut line = indent.to_owned();
            for (c, cell) in r.iter().enumerate() {
                if c + 1 == r.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    let pad = width[c] - cell.chars().count() + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            line
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_cuts_by_characters_with_a_mark() {
        assert_eq!(fit("short", 8), "short");
        assert_eq!(fit("exactly8", 8), "exactly8");
        assert_eq!(fit("much too long", 8), "much to…");
        assert_eq!(fit("ééééééééé", 4), "ééé…");
    }

    #[test]
    fn columns_pad_to_the_widest_cell_but_not_the_last() {
        let rows = vec![
            vec!["a".to_owned(), "long role".into(), "x".into()],
            vec!["longer name".to_owned(), "r".into(), "yy".into()],
        ];
        assert_eq!(
            columns(&rows, "  "),
            [
                "  a            long role  x",
                "  longer name  r          yy"
            ]
        );
    }
}

//! One pass over a prompt: keywords by category, path-like tokens and step lines.

use crewbox_plugin_sdk::Signal;

const REVIEW: &[&str] = &[
    "review", "audit", "validate", "verify", "verifies", "inspect", "critique",
];
const PARALLEL: &[&str] = &[
    "compare",
    "comparison",
    "comparing",
    "benchmark",
    "in parallel",
    "parallel",
    "parallelly",
    "simultaneously",
    "at the same time",
];
const PLAN: &[&str] = &[
    "plan",
    "design",
    "architecture",
    "architect",
    "architecting",
    "propose",
    "proposal",
    "outline",
    "outlining",
];
const IMPLEMENT: &[&str] = &[
    "implement",
    "build",
    "create",
    "write",
    "add",
    "develop",
    "developing",
];
const REFACTOR: &[&str] = &[
    "refactor",
    "restructure",
    "restructuring",
    "reorganise",
    "reorganize",
    "migrate",
    "migrating",
    "migration",
];
const TEST: &[&str] = &[
    "test",
    "tests",
    "testing",
    "spec",
    "specs",
    "specification",
    "coverage",
];

/// What a prompt contains, as far as the rules care.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// The first review keyword found, if any.
    pub review: Option<&'static str>,
    /// The first parallel keyword or phrase found, if any.
    pub parallel: Option<&'static str>,
    /// The first plan keyword found, if any.
    pub plan: Option<&'static str>,
    /// The first implement keyword found, if any.
    pub implement: Option<&'static str>,
    /// The first refactor keyword found, if any.
    pub refactor: Option<&'static str>,
    /// The first test keyword found, if any.
    pub test: Option<&'static str>,
    /// Distinct path-like tokens, in order of first appearance.
    pub paths: Vec<String>,
    /// Number of numbered or bulleted lines.
    pub steps: usize,
    /// Length of the prompt in characters.
    pub chars: usize,
}

impl Scan {
    /// Scans `prompt` once.
    pub fn new(prompt: &str) -> Self {
        let words = words(prompt);
        let find =
            |table: &[&'static str]| table.iter().copied().find(|k| contains_phrase(&words, k));
        Self {
            review: find(REVIEW),
            parallel: find(PARALLEL),
            plan: find(PLAN),
            implement: find(IMPLEMENT),
            refactor: find(REFACTOR),
            test: find(TEST),
            paths: path_tokens(prompt),
            steps: step_lines(prompt),
            chars: prompt.chars().count(),
        }
    }

    /// The observations as dispatch signals, in a fixed order.
    pub fn signals(&self) -> Vec<Signal> {
        let mut out = Vec::new();
        let keywords = [
            ("plan", self.plan),
            ("review", self.review),
            ("refactor", self.refactor),
            ("test", self.test),
            ("implement", self.implement),
            ("parallel", self.parallel),
        ];
        for (name, hit) in keywords {
            if let Some(keyword) = hit {
                out.push(Signal::new(name, format!("keyword `{keyword}`")));
            }
        }
        if !self.paths.is_empty() {
            out.push(Signal::new(
                "paths",
                format!("{} distinct: {}", self.paths.len(), self.paths.join(", ")),
            ));
        }
        if self.steps > 0 {
            out.push(Signal::new("steps", format!("{} step lines", self.steps)));
        }
        if self.chars > crate::LONG_PROMPT_CHARS {
            out.push(Signal::new("long", format!("{} characters", self.chars)));
        }
        out
    }
}

/// Lower-cased runs of letters and digits; everything else separates words.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// True if the words of `phrase` occur consecutively in `words`.
fn contains_phrase(words: &[String], phrase: &str) -> bool {
    let parts: Vec<&str> = phrase.split(' ').collect();
    words
        .windows(parts.len())
        .any(|w| w.iter().zip(&parts).all(|(a, b)| a == b))
}

/// Distinct path-like tokens in order of first appearance.
///
/// A token is path-like if, with surrounding punctuation stripped, it contains `/`
/// or starts with `~`, is not a URL, and ends in `.ext` of 1–6 word characters.
pub fn path_tokens(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in text.split_whitespace() {
        let token = raw
            .trim_start_matches(['(', '[', '{', '<', '"', '\'', '`'])
            .trim_end_matches([
                '.', ',', ';', ':', '!', '?', ')', ']', '}', '>', '"', '\'', '`',
            ]);
        if is_path_like(token) && !out.iter().any(|p| p == token) {
            out.push(token.to_string());
        }
    }
    out
}

fn is_path_like(token: &str) -> bool {
    if token.contains("://") || !(token.contains('/') || token.starts_with('~')) {
        return false;
    }
    let Some((stem, ext)) = token.rsplit_once('.') else {
        return false;
    };
    let ext_ok =
        (1..=6).contains(&ext.len()) && ext.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    // `ext` cannot contain `/` (see `ext_ok`), so the dot is in the last component
    // and `./src` or `../lib` are not mistaken for extensions.
    ext_ok && !stem.is_empty()
}

/// Lines that start (after indentation) with `1.`/`1)` style numbers or `-`/`*` bullets.
pub fn step_lines(text: &str) -> usize {
    text.lines()
        .filter(|line| is_step(line.trim_start()))
        .count()
}

fn is_step(line: &str) -> bool {
    let followed_by_space = |rest: &str| rest.is_empty() || rest.starts_with(char::is_whitespace);
    if let Some(rest) = line.strip_prefix(['-', '*']) {
        return followed_by_space(rest) && !rest.trim().is_empty();
    }
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 3 {
        return false;
    }
    let rest = &line[digits..];
    match rest.strip_prefix(['.', ')']) {
        Some(after) => followed_by_space(after) && !after.trim().is_empty(),
        None => false,
    }
}

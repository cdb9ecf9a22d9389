//! Hand-written secret scanners (no regex engine: it would triple the component).
//!
//! Scanners return positions and rules only; the matched text never leaves this
//! module, so a verdict cannot leak what it found.

/// A kind of secret the scanner recognises.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// A PEM `-----BEGIN … PRIVATE KEY-----` block.
    PrivateKey,
    /// An AWS access key id (`AKIA`/`ASIA` + 16).
    AwsAccessKey,
    /// A GitHub token (`ghp_` and friends, or `github_pat_`).
    GithubToken,
    /// A GitLab personal access token (`glpat-`).
    GitlabToken,
    /// A Slack token (`xoxb-` and friends).
    SlackToken,
    /// A random-looking value assigned to a secret-sounding name.
    HighEntropyAssignment,
}

impl Rule {
    /// Every rule, in reporting order.
    pub const ALL: [Rule; 6] = [
        Rule::PrivateKey,
        Rule::AwsAccessKey,
        Rule::GithubToken,
        Rule::GitlabToken,
        Rule::SlackToken,
        Rule::HighEntropyAssignment,
    ];

    /// The rule's name, which is also the criterion that checks it.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::PrivateKey => "private-key",
            Rule::AwsAccessKey => "aws-access-key",
            Rule::GithubToken => "github-token",
            Rule::GitlabToken => "gitlab-token",
            Rule::SlackToken => "slack-token",
            Rule::HighEntropyAssignment => "high-entropy-assignment",
        }
    }

    /// Parses a rule name.
    pub fn parse(name: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// Minimum length of a value before its entropy is considered.
pub const MIN_SECRET_LEN: usize = 16;

/// Shannon entropy (bits per character) above which a value looks random.
pub const ENTROPY_THRESHOLD: f64 = 3.5;

/// Name fragments (lower-cased, `_`/`-` removed) that mark an assignment as a secret.
const SECRET_NAMES: &[&str] = &[
    "apikey",
    "secret",
    "token",
    "password",
    "passwd",
    "accesskey",
    "privatekey",
];

/// A scanner for one rule over one line.
type LineCheck = fn(&str) -> bool;

/// The rules that fire on one line, each at most once.
pub fn scan_line(line: &str) -> Vec<Rule> {
    let mut hits = Vec::new();
    let checks: [(Rule, LineCheck); 6] = [
        (Rule::PrivateKey, has_private_key_header),
        (Rule::AwsAccessKey, has_aws_key),
        (Rule::GithubToken, has_github_token),
        (Rule::GitlabToken, has_gitlab_token),
        (Rule::SlackToken, has_slack_token),
        (Rule::HighEntropyAssignment, has_high_entropy_assignment),
    ];
    for (rule, check) in checks {
        if check(line) {
            hits.push(rule);
        }
    }
    hits
}

/// `(1-based line, rule)` for every hit in `text`.
pub fn scan_text(text: &str) -> Vec<(u32, Rule)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
        out.extend(scan_line(line).into_iter().map(|r| (n, r)));
    }
    out
}

/// One added line of a unified diff, with its line number in the new file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedLine<'a> {
    /// The new file's path (without the `b/` prefix).
    pub path: &'a str,
    /// 1-based line number in the new file.
    pub line: u32,
    /// The line's text without the leading `+`.
    pub text: &'a str,
}

/// The added lines of a unified diff (git style `+++ b/path`, `@@ -a,b +c,d @@`).
///
/// Hunk line counts are tracked, so content that happens to start with `+++` or
/// `---` inside a hunk is not mistaken for a file header.
pub fn added_lines(diff: &str) -> Vec<AddedLine<'_>> {
    let mut out = Vec::new();
    let mut path: Option<&str> = None;
    let mut hunk: Option<Hunk> = None;
    for line in diff.lines() {
        if let Some(h) = hunk.as_mut().filter(|h| h.old_left > 0 || h.new_left > 0) {
            match line.as_bytes().first() {
                Some(b'+') => {
                    if let Some(p) = path {
                        out.push(AddedLine {
                            path: p,
                            line: h.next,
                            text: &line[1..],
                        });
                    }
                    h.next += 1;
                    h.new_left = h.new_left.saturating_sub(1);
                }
                Some(b'-') => h.old_left = h.old_left.saturating_sub(1),
                Some(b'\\') => {}
                _ => {
                    h.next += 1;
                    h.old_left = h.old_left.saturating_sub(1);
                    h.new_left = h.new_left.saturating_sub(1);
                }
            }
            continue;
        }
        hunk = None;
        if let Some(target) = line.strip_prefix("+++ ") {
            let target = target.split('\t').next().unwrap_or(target).trim_end();
            path = match target {
                "/dev/null" => None,
                t => Some(t.strip_prefix("b/").unwrap_or(t)),
            };
        } else if let Some(header) = line.strip_prefix("@@ ") {
            hunk = Hunk::parse(header);
        } else if line.starts_with("diff --git ") {
            path = None;
        }
    }
    out
}

/// Where a hunk is in the new file and how many lines it has left.
struct Hunk {
    next: u32,
    old_left: u32,
    new_left: u32,
}

impl Hunk {
    /// Parses the rest of a hunk header, `-a,b +c,d @@ …`.
    fn parse(header: &str) -> Option<Hunk> {
        let mut parts = header.split_whitespace();
        let old = parts.next()?.strip_prefix('-')?;
        let new = parts.next()?.strip_prefix('+')?;
        let range = |r: &str| -> Option<(u32, u32)> {
            match r.split_once(',') {
                Some((start, len)) => Some((start.parse().ok()?, len.parse().ok()?)),
                None => Some((r.parse().ok()?, 1)),
            }
        };
        let (_, old_len) = range(old)?;
        let (new_start, new_len) = range(new)?;
        Some(Hunk {
            next: new_start,
            old_left: old_len,
            new_left: new_len,
        })
    }
}

fn has_private_key_header(line: &str) -> bool {
    let mut rest = line;
    while let Some(i) = rest.find("-----BEGIN ") {
        let after = &rest[i + "-----BEGIN ".len()..];
        if let Some(end) = after.find("-----")
            && after[..end].ends_with("PRIVATE KEY")
        {
            return true;
        }
        rest = after;
    }
    false
}

/// Byte offsets where `prefix` starts a token (not preceded by a word character).
fn token_starts<'a>(line: &'a str, prefix: &'a str) -> impl Iterator<Item = usize> + 'a {
    line.match_indices(prefix)
        .map(|(i, _)| i)
        .filter(move |&i| {
            !line[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Length of the run of bytes satisfying `allowed` at the start of `s`.
fn run_len(s: &str, allowed: impl Fn(u8) -> bool) -> usize {
    s.bytes().take_while(|&b| allowed(b)).count()
}

fn has_aws_key(line: &str) -> bool {
    ["AKIA", "ASIA"].iter().any(|prefix| {
        token_starts(line, prefix).any(|i| {
            let body = &line[i + 4..];
            let n = run_len(body, |b| b.is_ascii_uppercase() || b.is_ascii_digit());
            // Exactly 16: a longer run is some other identifier.
            n == 16 && !body[n..].starts_with(|c: char| c.is_ascii_alphanumeric())
        })
    })
}

fn has_github_token(line: &str) -> bool {
    let classic = ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]
        .iter()
        .any(|prefix| {
            token_starts(line, prefix)
                .any(|i| run_len(&line[i + 4..], |b| b.is_ascii_alphanumeric()) >= 36)
        });
    classic
        || token_starts(line, "github_pat_").any(|i| {
            run_len(&line[i + "github_pat_".len()..], |b| {
                b.is_ascii_alphanumeric() || b == b'_'
            }) >= 22
        })
}

fn has_gitlab_token(line: &str) -> bool {
    token_starts(line, "glpat-").any(|i| {
        run_len(&line[i + 6..], |b| {
            b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
        }) >= 20
    })
}

fn has_slack_token(line: &str) -> bool {
    token_starts(line, "xox").any(|i| {
        let rest = &line[i + 3..];
        let mut bytes = rest.bytes();
        matches!(bytes.next(), Some(b'a' | b'b' | b'p' | b'o' | b'r' | b's'))
            && bytes.next() == Some(b'-')
            && run_len(&rest[2..], |b| b.is_ascii_alphanumeric() || b == b'-') >= 10
    })
}

/// Shannon entropy of `s` in bits per character.
pub fn shannon_entropy(s: &str) -> f64 {
    let mut counts: Vec<(char, u32)> = Vec::new();
    let mut total = 0u32;
    for c in s.chars() {
        total += 1;
        match counts.iter_mut().find(|(k, _)| *k == c) {
            Some((_, n)) => *n += 1,
            None => counts.push((c, 1)),
        }
    }
    if total == 0 {
        return 0.0;
    }
    let total = f64::from(total);
    counts
        .iter()
        .map(|&(_, n)| {
            let p = f64::from(n) / total;
            -p * p.log2()
        })
        .sum()
}

/// True if some `name = value` / `name: value` / `name => value` on the line gives a
/// secret-sounding name a long, random-looking literal.
fn has_high_entropy_assignment(line: &str) -> bool {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let op_len = match b {
            b'=' if bytes.get(i + 1) == Some(&b'>') => 2,
            b'=' if matches!(bytes.get(i + 1), Some(b'=')) => continue,
            b'=' if i > 0 && matches!(bytes[i - 1], b'=' | b'!' | b'<' | b'>') => continue,
            b'=' | b':' => 1,
            _ => continue,
        };
        let name = assigned_name(&line[..i]);
        if name.is_empty() || !is_secret_name(name) {
            continue;
        }
        if let Some(value) = assigned_value(&line[i + op_len..])
            && value.chars().count() >= MIN_SECRET_LEN
            && shannon_entropy(value) >= ENTROPY_THRESHOLD
        {
            return true;
        }
    }
    false
}

/// The identifier just before an assignment operator, quotes and spaces skipped.
fn assigned_name(before: &str) -> &str {
    let trimmed = before
        .trim_end()
        .trim_end_matches(['"', '\'', '`', ':'])
        .trim_end();
    let start = trimmed
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    &trimmed[start..]
}

fn is_secret_name(name: &str) -> bool {
    let folded: String = name
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    // Only the last dotted component names the value (`self.token`, `cfg.api_key`).
    let last = folded.rsplit('.').next().unwrap_or(&folded);
    SECRET_NAMES.iter().any(|s| last.contains(s))
}

/// The literal assigned: a quoted string, or a bare run up to whitespace or `,;`.
///
/// Values that are code or placeholders (`env("X")`, `${X}`, `<token>`) are skipped.
fn assigned_value(after: &str) -> Option<&str> {
    let after = after.trim_start();
    let quote = after
        .chars()
        .next()
        .filter(|c| matches!(c, '"' | '\'' | '`'));
    let value = match quote {
        Some(q) => {
            let body = &after[1..];
            &body[..body.find(q)?]
        }
        None => {
            let end = after
                .find(|c: char| c.is_whitespace() || c == ',' || c == ';')
                .unwrap_or(after.len());
            &after[..end]
        }
    };
    let looks_like_code = value.chars().any(|c| {
        c.is_whitespace() || matches!(c, '(' | ')' | '{' | '}' | '$' | '<' | '>' | '[' | ']' | '%')
    });
    (!value.is_empty() && !looks_like_code).then_some(value)
}

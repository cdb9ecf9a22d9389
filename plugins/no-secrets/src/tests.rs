// Secrets are assembled at run time so this file itself never trips a scanner.

use super::scan::{Rule, added_lines, scan_line, scan_text, shannon_entropy};
use super::*;

fn aws() -> String {
    ["AKIA", "IOSFODNN7EXAMPLE"].concat()
}

fn ghp() -> String {
    format!("{}{}", "ghp_", "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A")
}

fn random_value() -> String {
    ["q8Zr", "T2vN", "x9Lw", "P4sK", "m7Yc"].concat()
}

fn pem_header() -> String {
    format!("-----BEGIN {} PRIVATE KEY-----", "RSA")
}

#[test]
fn private_key_blocks_are_found() {
    assert_eq!(scan_line(&pem_header()), [Rule::PrivateKey]);
    assert_eq!(
        scan_line(&format!("-----BEGIN {}-----", "OPENSSH PRIVATE KEY")),
        [Rule::PrivateKey]
    );
    assert!(scan_line("-----BEGIN PUBLIC KEY-----").is_empty());
    assert!(scan_line("-----BEGIN CERTIFICATE-----").is_empty());
}

#[test]
fn aws_keys_need_exactly_sixteen_upper_alphanumerics() {
    assert_eq!(scan_line(&format!("key = {}", aws())), [Rule::AwsAccessKey]);
    assert_eq!(
        scan_line(&format!("ASIA{}", "ABCDEFGHIJKLMNOP")),
        [Rule::AwsAccessKey]
    );
    assert!(
        scan_line(&format!("{}X", aws())).is_empty(),
        "17 characters is not a key"
    );
    assert!(
        scan_line(&format!("x{}", aws())).is_empty(),
        "must start a token"
    );
    assert!(
        scan_line("AKIAabcdefghijklmnop").is_empty(),
        "lower case is not a key"
    );
}

#[test]
fn forge_and_chat_tokens_are_found() {
    assert_eq!(scan_line(&ghp()), [Rule::GithubToken]);
    for p in ["gho_", "ghu_", "ghs_", "ghr_"] {
        assert_eq!(
            scan_line(&format!("{p}{}", "A1".repeat(18))),
            [Rule::GithubToken],
            "{p}"
        );
    }
    assert!(
        scan_line(&format!("ghp_{}", "A1".repeat(10))).is_empty(),
        "too short"
    );
    assert_eq!(
        scan_line(&format!("github_pat_{}", "11AB_cd".repeat(6))),
        [Rule::GithubToken]
    );
    assert_eq!(
        scan_line(&format!("glpat-{}", "xY_z-12345".repeat(2))),
        [Rule::GitlabToken]
    );
    assert!(scan_line("glpat-short").is_empty());
    for kind in ['a', 'b', 'p', 'o', 'r', 's'] {
        assert_eq!(
            scan_line(&format!("xox{kind}-1234567890-abcdef")),
            [Rule::SlackToken],
            "{kind}"
        );
    }
    assert!(scan_line("xoxz-1234567890-abcdef").is_empty());
}

#[test]
fn high_entropy_values_assigned_to_secret_names_are_found() {
    let v = random_value();
    for line in [
        format!("api_key = \"{v}\""),
        format!("APIKEY={v}"),
        format!("  \"client_secret\": \"{v}\","),
        format!("DB_PASSWORD: {v}"),
        format!("self.auth_token = '{v}';"),
        format!("'access_key' => '{v}'"),
    ] {
        assert_eq!(scan_line(&line), [Rule::HighEntropyAssignment], "{line}");
    }
}

#[test]
fn low_entropy_short_or_computed_values_are_not_flagged() {
    let v = random_value();
    for line in [
        "password = \"aaaaaaaaaaaaaaaaaaaa\"".to_string(),
        "api_key = \"your-api-key-here\"".to_string(),
        "token = \"q8ZrT2vN\"".to_string(),
        "token = std::env::var(\"TOKEN\")".to_string(),
        "secret = ${SECRET_FROM_VAULT_X9}".to_string(),
        "tokenizer == Tokenizer4567890123".to_string(),
        format!("username = \"{v}\""),
        format!("if token != \"{v}\" {{"),
    ] {
        assert!(scan_line(&line).is_empty(), "{line}");
    }
}

#[test]
fn entropy_is_shannon_bits_per_char() {
    assert_eq!(shannon_entropy(""), 0.0);
    assert_eq!(shannon_entropy("aaaa"), 0.0);
    assert!((shannon_entropy("abcd") - 2.0).abs() < 1e-9);
    assert!(shannon_entropy(&random_value()) > scan::ENTROPY_THRESHOLD);
}

#[test]
fn text_scan_reports_one_based_lines() {
    let text = format!(
        "fn main() {{}}\n\nconst K: &str = \"{}\";\n{}\n",
        aws(),
        pem_header()
    );
    assert_eq!(
        scan_text(&text),
        [(3, Rule::AwsAccessKey), (4, Rule::PrivateKey)]
    );
}

const DIFF: &str = "\
diff --git a/src/a.rs b/src/a.rs
index 1111111..2222222 100644
--- a/src/a.rs
+++ b/src/a.rs
@@ -1,3 +1,4 @@ fn main
 one
-two
+TWO
+++ added line that looks like a header
 three
@@ -10,2 +11,2 @@
 ten
--- removed line that looks like a header
+eleven
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
diff --git a/new.md b/new.md
new file mode 100644
--- /dev/null
+++ b/new.md
@@ -0,0 +1,2 @@
+hello
+world
\\ No newline at end of file
";

#[test]
fn diff_added_lines_carry_new_file_line_numbers() {
    let got: Vec<(&str, u32, &str)> = added_lines(DIFF)
        .iter()
        .map(|a| (a.path, a.line, a.text))
        .collect();
    assert_eq!(
        got,
        [
            ("src/a.rs", 2, "TWO"),
            ("src/a.rs", 3, "++ added line that looks like a header"),
            ("src/a.rs", 12, "eleven"),
            ("new.md", 1, "hello"),
            ("new.md", 2, "world"),
        ]
    );
}

#[test]
fn findings_merge_files_and_diff_without_duplicates() {
    let file = format!("a\n{}\n", ghp());
    let diff = format!(
        "--- a/c.txt\n+++ b/c.txt\n@@ -0,0 +1,2 @@\n+a\n+{}\n--- a/d.txt\n+++ b/d.txt\n@@ -4,0 +5 @@\n+x={}\n",
        ghp(),
        aws()
    );
    let findings = find_secrets(&[("c.txt".into(), file)], &diff);
    let got: Vec<(&str, u32, Rule)> = findings
        .iter()
        .map(|f| (f.path.as_str(), f.line, f.rule))
        .collect();
    assert_eq!(
        got,
        [
            ("c.txt", 2, Rule::GithubToken),
            ("d.txt", 5, Rule::AwsAccessKey)
        ]
    );
}

#[test]
fn verdict_names_path_line_and_rule_but_never_the_secret() {
    let secrets = [aws(), ghp(), random_value()];
    let file = format!(
        "{}\nid={}\napi_key=\"{}\"\n",
        pem_header(),
        secrets[0],
        secrets[2]
    );
    let diff = format!("+++ b/x.env\n@@ -0,0 +1 @@\n+T={}\n", secrets[1]);
    let findings = find_secrets(&[("cfg/app.toml".into(), file)], &diff);
    let v = verdict(&findings, &Rule::ALL);
    assert!(!v.passed);
    let rendered = format!("{v:?}");
    for s in &secrets {
        assert!(
            !rendered.contains(s.as_str()),
            "verdict leaks a secret: {rendered}"
        );
    }
    let by_rule = |r: Rule| {
        v.results
            .iter()
            .find(|c| c.criterion == r.as_str())
            .unwrap()
    };
    assert_eq!(by_rule(Rule::PrivateKey).detail, "found at cfg/app.toml:1");
    assert_eq!(
        by_rule(Rule::AwsAccessKey).detail,
        "found at cfg/app.toml:2"
    );
    assert_eq!(
        by_rule(Rule::HighEntropyAssignment).detail,
        "found at cfg/app.toml:3"
    );
    assert_eq!(by_rule(Rule::GithubToken).detail, "found at x.env:1");
    assert!(by_rule(Rule::SlackToken).passed);
    assert!(v.fix_prompt.unwrap().contains("x.env:1 (github-token)"));
}

#[test]
fn clean_changes_pass() {
    let v = verdict(
        &find_secrets(&[("a.rs".into(), "fn main() {}\n".into())], ""),
        &Rule::ALL,
    );
    assert!(v.passed);
    assert_eq!(v.results.len(), 6);
    assert_eq!(v.fix_prompt, None);
}

#[test]
fn long_lists_are_summarised() {
    let text = format!("{}\n", aws()).repeat(25);
    let v = verdict(
        &find_secrets(&[("k".into(), text)], ""),
        &[Rule::AwsAccessKey],
    );
    assert!(
        v.results[0].detail.ends_with("and 5 more"),
        "{}",
        v.results[0].detail
    );
}

#[test]
fn criteria_select_rules_and_reject_unknown_names() {
    assert_eq!(rules_for(&[]).unwrap(), Rule::ALL);
    assert_eq!(
        rules_for(&["slack-token".into()]).unwrap(),
        [Rule::SlackToken]
    );
    let err = rules_for(&["no-passwords".into()]).unwrap_err();
    assert!(
        err.contains("no-passwords") && err.contains("private-key"),
        "{err}"
    );
}

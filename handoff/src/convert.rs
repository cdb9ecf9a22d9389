//! From a bounded JSON tree to a [`Handoff`]: field checks and legacy coercions.
//!
//! Legacy shapes are turned into the four v2 artifact types *before* validation, so a
//! coerced artifact meets exactly the same limits as a native one. The coercions:
//!
//! | input | becomes |
//! |---|---|
//! | `type` absent, `kind` present | `kind` is read as the type |
//! | type `file` `path` `document` `doc` `image` `diff` `patch` `log` `report` | `file` |
//! | type `branch` `git_branch` | `branch` |
//! | type `commit` / `commits` with a `branch` | `branch` whose `commits` hold `sha`/`hash`/`commit` |
//! | type `commit` without a branch | `note` titled `commit` |
//! | type `url` `link` `pr` `pull_request` `issue` `web` `website` | `url` |
//! | type `note` `text` `comment` `message` | `note` |
//! | no or another type: key `path`/`file`/`filename`/`file_path` | `file` |
//! | … key `branch` | `branch` |
//! | … key `url`/`href`/`link` | `url` |
//! | … key `value`/`text`/`content`/`body`/`note` | `note` (title: `title`/`name`/`label`, else the unknown type name, else `note`) |
//! | a string `scheme://…` without whitespace | `url` |
//! | a string without whitespace containing `/` or `.` | `file` |
//! | any other string | `note` titled `note` |
//!
//! Field aliases: file `title`/`name`, `mime`/`mime_type`/`mimeType`/`media_type`/
//! `content_type`; branch `branch`/`ref`, `base`/`base_branch`; url `description`/`desc`.
//! Top level: `nextSteps` for `next_steps`; `findings` / `next_steps` given as one string
//! become a one-entry list; `files` entries may be `{"path": …}` objects. `status` is
//! one of the schema's values exactly (`success`, `partial`, `failed`); any other
//! (`done`, `ok`, `Success`) is rejected naming the allowed values. `null` means absent;
//! empty optional titles are dropped. Unknown keys are ignored (they still count
//! towards the key limit).

use serde_json::{Map, Value};

use crate::{Artifact, Handoff, HandoffError, HandoffStatus, Limits};

type Result<T> = std::result::Result<T, HandoffError>;
type Obj = Map<String, Value>;

/// Converts the root of a bounded tree into a handoff.
pub(crate) fn handoff(root: &Value) -> Result<Handoff> {
    let obj = root.as_object().ok_or_else(|| HandoffError::WrongType {
        path: "(root)".to_owned(),
        expected: "a JSON object",
        found: type_name(root),
    })?;
    let status = status(obj)?;
    let summary = summary(obj)?;
    let findings = match pick(obj, &["findings"]) {
        Some((key, v)) => string_list(v, key, 1, Limits::MAX_FINDINGS)?,
        None => {
            return Err(HandoffError::Missing {
                path: "findings".to_owned(),
            });
        }
    };
    let next_steps = match pick(obj, &["next_steps", "nextSteps"]) {
        Some((key, v)) => string_list(v, key, 0, Limits::MAX_NEXT_STEPS)?,
        None => Vec::new(),
    };
    let confidence = match pick(obj, &["confidence"]) {
        Some((key, v)) => Some(confidence(v, key)?),
        None => None,
    };
    let files = match pick(obj, &["files"]) {
        Some((key, v)) => files(v, key)?,
        None => Vec::new(),
    };
    let artifacts = match pick(obj, &["artifacts"]) {
        Some((key, v)) => {
            let items = list(v, key, 0, Limits::MAX_ARTIFACTS)?;
            items
                .iter()
                .enumerate()
                .map(|(i, v)| artifact(v, &format!("{key}[{i}]")))
                .collect::<Result<_>>()?
        }
        None => Vec::new(),
    };
    Ok(Handoff {
        status,
        summary,
        findings,
        next_steps,
        confidence,
        files,
        artifacts,
    })
}

fn status(obj: &Obj) -> Result<HandoffStatus> {
    let Some((key, v)) = pick(obj, &["status"]) else {
        return Err(HandoffError::Missing {
            path: "status".to_owned(),
        });
    };
    let s = string(v, key)?;
    // The schema's values only (`done`, `ok`, `completed` are not among them): a
    // status crewbox guessed at would decide the run's outcome on a word it invented.
    match s {
        "success" => Ok(HandoffStatus::Success),
        "partial" => Ok(HandoffStatus::Partial),
        "failed" => Ok(HandoffStatus::Failed),
        _ => Err(HandoffError::Invalid {
            path: key.to_owned(),
            reason: format!(
                "unknown status {:?}; the schema allows \"success\", \"partial\" or \"failed\"",
                s.chars().take(40).collect::<String>()
            ),
        }),
    }
}

fn summary(obj: &Obj) -> Result<String> {
    let Some((key, v)) = pick(obj, &["summary"]) else {
        return Err(HandoffError::Missing {
            path: "summary".to_owned(),
        });
    };
    let s = string(v, key)?;
    non_blank(s, key)?;
    max_chars(s, key, Limits::MAX_SUMMARY_CHARS)?;
    Ok(s.to_owned())
}

fn confidence(v: &Value, path: &str) -> Result<f64> {
    let Some(x) = v.as_f64() else {
        return Err(HandoffError::WrongType {
            path: path.to_owned(),
            expected: "a number between 0 and 1",
            found: type_name(v),
        });
    };
    if !(0.0..=1.0).contains(&x) {
        return Err(HandoffError::OutOfRange {
            path: path.to_owned(),
            value: x,
            min: 0.0,
            max: 1.0,
        });
    }
    Ok(x)
}

fn files(v: &Value, path: &str) -> Result<Vec<String>> {
    let items = list(v, path, 0, Limits::MAX_FILES)?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("{path}[{i}]");
            match item {
                Value::Object(o) => match pick(o, &["path", "file"]) {
                    Some((key, p)) => file_path(string(p, &sub(&at, key))?, &sub(&at, key)),
                    None => Err(HandoffError::Missing {
                        path: sub(&at, "path"),
                    }),
                },
                other => file_path(string(other, &at)?, &at),
            }
        })
        .collect()
}

/// Reads a list of non-blank strings; a lone string is a one-entry list.
fn string_list(v: &Value, path: &str, min: usize, max: usize) -> Result<Vec<String>> {
    if let Value::String(s) = v {
        non_blank(s, path)?;
        return Ok(vec![s.clone()]);
    }
    let items = list(v, path, min, max)?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("{path}[{i}]");
            let s = string(item, &at)?;
            non_blank(s, &at)?;
            Ok(s.to_owned())
        })
        .collect()
}

fn list<'v>(v: &'v Value, path: &str, min: usize, max: usize) -> Result<&'v Vec<Value>> {
    let items = v.as_array().ok_or_else(|| HandoffError::WrongType {
        path: path.to_owned(),
        expected: "an array",
        found: type_name(v),
    })?;
    if items.len() < min || items.len() > max {
        return Err(HandoffError::Count {
            path: path.to_owned(),
            count: items.len(),
            min,
            max,
        });
    }
    Ok(items)
}

/// One artifact, native or legacy.
fn artifact(v: &Value, path: &str) -> Result<Artifact> {
    match v {
        Value::String(s) => artifact_from_string(s, path),
        Value::Object(o) => artifact_from_object(o, path),
        other => Err(HandoffError::WrongType {
            path: path.to_owned(),
            expected: "an object or a string",
            found: type_name(other),
        }),
    }
}

fn artifact_from_string(s: &str, path: &str) -> Result<Artifact> {
    let t = s.trim();
    non_blank(t, path)?;
    let one_word = !t.chars().any(char::is_whitespace);
    if one_word && has_scheme(t) {
        url_artifact(t, None, None, path)
    } else if one_word && (t.contains('/') || t.contains('.')) {
        Ok(Artifact::File {
            path: file_path(t, path)?,
            title: None,
            mime: None,
        })
    } else {
        note_artifact("note", s, path)
    }
}

/// Which of the four types an object becomes.
#[derive(Clone, Copy)]
enum Shape {
    File,
    Branch,
    Commit,
    Url,
    Note,
}

const FILE_KEYS: &[&str] = &["path", "file", "filename", "file_path"];
const BRANCH_KEYS: &[&str] = &["branch", "ref"];
const URL_KEYS: &[&str] = &["url", "href", "link"];
const VALUE_KEYS: &[&str] = &["value", "text", "content", "body", "note", "message"];
const TITLE_KEYS: &[&str] = &["title", "name", "label"];

fn artifact_from_object(o: &Obj, path: &str) -> Result<Artifact> {
    let tag = match pick(o, &["type", "kind"]) {
        Some((key, v)) => Some(string(v, &sub(path, key))?.trim().to_ascii_lowercase()),
        None => None,
    };
    let by_tag =
        tag.as_deref().and_then(|t| match t {
            "file" | "path" | "document" | "doc" | "image" | "diff" | "patch" | "log"
            | "report" => Some(Shape::File),
            "branch" | "git_branch" => Some(Shape::Branch),
            "commit" | "commits" => Some(Shape::Commit),
            "url" | "link" | "pr" | "pull_request" | "pull-request" | "issue" | "web"
            | "website" => Some(Shape::Url),
            "note" | "text" | "comment" | "message" => Some(Shape::Note),
            _ => None,
        });
    let shape = match by_tag {
        Some(s) => s,
        None if pick(o, FILE_KEYS).is_some() => Shape::File,
        None if pick(o, &["branch"]).is_some() => Shape::Branch,
        None if pick(o, URL_KEYS).is_some() => Shape::Url,
        None if pick(o, VALUE_KEYS).is_some() => Shape::Note,
        None => {
            return Err(HandoffError::Invalid {
                path: path.to_owned(),
                reason: "cannot tell the artifact type; give \"type\": file, branch, url or note"
                    .to_owned(),
            });
        }
    };
    match shape {
        Shape::File => {
            let (key, p) = required(o, FILE_KEYS, path)?;
            Ok(Artifact::File {
                path: file_path(p, &sub(path, key))?,
                title: title(o, path)?,
                mime: optional(
                    o,
                    &[
                        "mime",
                        "mime_type",
                        "mimeType",
                        "media_type",
                        "content_type",
                    ],
                    path,
                    Limits::MAX_MIME_CHARS,
                )?,
            })
        }
        Shape::Branch => branch_artifact(o, path, false),
        Shape::Commit if pick(o, BRANCH_KEYS).is_some() => branch_artifact(o, path, true),
        Shape::Commit => {
            let (key, v) = required(o, &["sha", "hash", "commit", "message"], path)?;
            non_blank(v, &sub(path, key))?;
            note_artifact("commit", v, path)
        }
        Shape::Url => {
            let (key, u) = required(o, URL_KEYS, path)?;
            let description =
                optional(o, &["description", "desc"], path, Limits::MAX_STRING_CHARS)?;
            url_artifact(u, title(o, path)?, description, &sub(path, key))
        }
        Shape::Note => {
            let (key, v) = required(o, VALUE_KEYS, path)?;
            let value_path = sub(path, key);
            let title = match pick(o, TITLE_KEYS) {
                Some((k, t)) => {
                    let t = string(t, &sub(path, k))?;
                    non_blank(t, &sub(path, k))?;
                    t.to_owned()
                }
                // A legacy `{"kind": "decision", "text": …}` keeps its kind as the title.
                None => match tag.as_deref() {
                    Some(t) if by_tag.is_none() && !t.is_empty() => t.to_owned(),
                    _ => "note".to_owned(),
                },
            };
            max_chars(&title, &sub(path, "title"), Limits::MAX_TITLE_CHARS)?;
            non_blank(v, &value_path)?;
            Ok(Artifact::Note {
                title,
                value: v.to_owned(),
            })
        }
    }
}

fn branch_artifact(o: &Obj, path: &str, from_commit: bool) -> Result<Artifact> {
    let (key, b) = required(o, BRANCH_KEYS, path)?;
    let branch = branch_name(b, &sub(path, key))?;
    let base = match pick(o, &["base", "base_branch"]) {
        Some((k, v)) => Some(branch_name(string(v, &sub(path, k))?, &sub(path, k))?),
        None => None,
    };
    let mut commits = match pick(o, &["commits"]) {
        Some((k, v)) => {
            let at = sub(path, k);
            string_list(v, &at, 0, Limits::MAX_COMMITS)?
                .into_iter()
                .enumerate()
                .map(|(i, c)| commit(&c, &format!("{at}[{i}]")))
                .collect::<Result<Vec<_>>>()?
        }
        None => Vec::new(),
    };
    if from_commit && let Some((k, v)) = pick(o, &["sha", "hash", "commit"]) {
        let at = sub(path, k);
        commits.push(commit(string(v, &at)?, &at)?);
        if commits.len() > Limits::MAX_COMMITS {
            return Err(HandoffError::Count {
                path: sub(path, "commits"),
                count: commits.len(),
                min: 0,
                max: Limits::MAX_COMMITS,
            });
        }
    }
    Ok(Artifact::Branch {
        branch,
        base,
        commits,
    })
}

fn url_artifact(
    u: &str,
    title: Option<String>,
    description: Option<String>,
    path: &str,
) -> Result<Artifact> {
    let url = u.trim();
    non_blank(url, path)?;
    max_chars(url, path, Limits::MAX_URL_CHARS)?;
    if !has_scheme(url) || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(HandoffError::Invalid {
            path: path.to_owned(),
            reason: "not an absolute URL (scheme://…, no whitespace)".to_owned(),
        });
    }
    Ok(Artifact::Url {
        url: url.to_owned(),
        title,
        description,
    })
}

fn note_artifact(title: &str, value: &str, path: &str) -> Result<Artifact> {
    non_blank(value, &sub(path, "value"))?;
    Ok(Artifact::Note {
        title: title.to_owned(),
        value: value.to_owned(),
    })
}

fn title(o: &Obj, path: &str) -> Result<Option<String>> {
    optional(o, &["title", "name"], path, Limits::MAX_TITLE_CHARS)
}

/// An optional string field; blank means absent.
fn optional(o: &Obj, names: &[&'static str], path: &str, limit: usize) -> Result<Option<String>> {
    let Some((key, v)) = pick(o, names) else {
        return Ok(None);
    };
    let at = sub(path, key);
    let s = string(v, &at)?;
    if s.trim().is_empty() {
        return Ok(None);
    }
    max_chars(s, &at, limit)?;
    Ok(Some(s.to_owned()))
}

fn required<'o>(o: &'o Obj, names: &[&'static str], path: &str) -> Result<(&'o str, &'o str)> {
    match pick(o, names) {
        Some((key, v)) => Ok((key, string(v, &sub(path, key))?)),
        None => Err(HandoffError::Missing {
            path: sub(path, names[0]),
        }),
    }
}

fn file_path(p: &str, path: &str) -> Result<String> {
    let p = p.trim();
    non_blank(p, path)?;
    max_chars(p, path, Limits::MAX_PATH_CHARS)?;
    if p.chars().any(char::is_control) {
        return Err(HandoffError::Invalid {
            path: path.to_owned(),
            reason: "paths cannot contain control characters".to_owned(),
        });
    }
    Ok(p.to_owned())
}

fn branch_name(b: &str, path: &str) -> Result<String> {
    let b = b.trim();
    non_blank(b, path)?;
    max_chars(b, path, Limits::MAX_BRANCH_CHARS)?;
    if b.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(HandoffError::Invalid {
            path: path.to_owned(),
            reason: "branch names cannot contain whitespace or control characters".to_owned(),
        });
    }
    Ok(b.to_owned())
}

fn commit(c: &str, path: &str) -> Result<String> {
    let c = c.trim();
    non_blank(c, path)?;
    max_chars(c, path, Limits::MAX_COMMIT_CHARS)?;
    Ok(c.to_owned())
}

fn has_scheme(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once("://") else {
        return false;
    };
    let mut chars = scheme.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
}

/// The first of `names` present with a non-null value, with the key actually used.
fn pick<'o>(o: &'o Obj, names: &[&'static str]) -> Option<(&'static str, &'o Value)> {
    names
        .iter()
        .find_map(|&n| o.get(n).filter(|v| !v.is_null()).map(|v| (n, v)))
}

fn string<'v>(v: &'v Value, path: &str) -> Result<&'v str> {
    v.as_str().ok_or_else(|| HandoffError::WrongType {
        path: path.to_owned(),
        expected: "a string",
        found: type_name(v),
    })
}

fn non_blank(s: &str, path: &str) -> Result<()> {
    if s.trim().is_empty() {
        return Err(HandoffError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(())
}

fn max_chars(s: &str, path: &str, limit: usize) -> Result<()> {
    // Byte length bounds char count from above; count only when it might matter.
    if s.len() > limit {
        let chars = s.chars().count();
        if chars > limit {
            return Err(HandoffError::TooLong {
                path: path.to_owned(),
                chars,
                limit,
            });
        }
    }
    Ok(())
}

fn sub(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

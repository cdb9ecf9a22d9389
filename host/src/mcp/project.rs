//! A repository's `.mcp.json` (Claude Code's project format): parsed, never started
//! unless the repository is trusted and the user approved the server by name
//! (`crewbox trust --mcp NAME`). An approval is bound to the server's definition as it
//! was: a definition that changed since is not approved until approved again. A
//! repository server never replaces a user server of the same name.
//!
//! ```json
//! {"mcpServers": {
//!   "docs": {"command": "npx", "args": ["-y", "docs-mcp"], "env": {"TOKEN": "${DOCS_TOKEN}"}},
//!   "api":  {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}}
//! }}
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::config::{ServerFile, ServerSource, check_server};
use super::{McpServer, McpSettings};
use crate::sandbox::env::Secrets;

/// The file, relative to the repository root.
pub const FILE: &str = ".mcp.json";

/// What became of one repository server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RepoServerState {
    /// Ignored: the repository is not trusted.
    Untrusted,
    /// Ignored: the user has not approved it (`crewbox trust --mcp NAME`).
    NotApproved,
    /// Ignored: approved, but its definition changed since.
    Changed,
    /// Ignored: a user server has the same name (the user's wins).
    Shadowed,
    /// Ignored: the definition cannot be used (see `error`).
    Invalid,
    /// Approved: agents may be granted it.
    Approved,
}

impl RepoServerState {
    /// How `crewbox config` says it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Untrusted => "ignored: the repository is not trusted",
            Self::NotApproved => "ignored: not approved (crewbox trust --mcp NAME)",
            Self::Changed => "ignored: changed since you approved it (crewbox trust --mcp NAME)",
            Self::Shadowed => "ignored: one of your own servers has this name",
            Self::Invalid => "ignored: not a usable definition",
            Self::Approved => "approved",
        }
    }
}

/// One server of `.mcp.json`, and its state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RepoServer {
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: RepoServerState,
    /// The sha256 of its definition (what an approval records).
    pub digest: String,
    /// Why an invalid one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The servers of a `.mcp.json` text: name, raw definition and its digest.
pub fn parse(text: &str) -> Result<Vec<(String, Value, String)>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("{FILE}: {e}"))?;
    let Some(servers) = doc.get("mcpServers").and_then(Value::as_object) else {
        return Ok(Vec::new());
    };
    Ok(servers
        .iter()
        .map(|(name, def)| {
            use sha2::Digest;
            let canonical = serde_json::to_string(def).unwrap_or_default();
            let digest = crate::text::hex(&sha2::Sha256::digest(canonical.as_bytes()));
            (name.clone(), def.clone(), digest)
        })
        .collect())
}

/// Reads a variable for a definition: its value (None: unset), or why it may not be
/// read (it is, or holds, a provider's key).
type Lookup<'a> = &'a dyn Fn(&str) -> Result<Option<String>, String>;

/// `${VAR}` and `${VAR:-default}` in `s`, from `env`.
fn expand(s: &str, env: Lookup<'_>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[i..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let (var, default) = match inner.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (inner, None),
        };
        out.push_str(&env(var)?.or(default.map(str::to_owned)).unwrap_or_default());
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// How a repository's definition reads the environment (`get`): as it is, except a variable a
/// provider reads its key from, or whose value holds such a key (`keys`), which is
/// refused by name — a repository's file never decides where a key goes.
fn lookup<'a>(
    keys: &'a Secrets,
    get: impl Fn(&str) -> Option<String> + 'a,
) -> impl Fn(&str) -> Result<Option<String>, String> + 'a {
    move |var: &str| {
        let value = get(var);
        if keys.is_secret(var, value.as_deref().unwrap_or_default()) {
            Err(format!(
                "`${{{}}}` is a model provider's key (or holds one): crewbox never gives a \
                 provider key to a repository's MCP server",
                crate::text::escape(var)
            ))
        } else {
            Ok(value)
        }
    }
}

/// A header value that is exactly `${VAR}` (or `Bearer ${VAR}` for Authorization):
/// the variable; crewbox keeps only variable names, never header values.
fn header_var(value: &str) -> Option<&str> {
    let v = value.strip_prefix("${")?.strip_suffix('}')?;
    (!v.contains(['{', '}', ':'])).then_some(v)
}

/// One definition in crewbox's terms.
fn to_server_file(def: &Value, env: Lookup<'_>) -> Result<ServerFile, String> {
    let str_list = |k: &str| -> Result<Vec<String>, String> {
        def.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|s| expand(s, env))
                    .collect()
            })
            .unwrap_or(Ok(Vec::new()))
    };
    let str_map = |k: &str| -> BTreeMap<String, String> {
        def.get(k)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let kind = def.get("type").and_then(Value::as_str).unwrap_or("stdio");
    match kind {
        "stdio" => Ok(ServerFile {
            command: def
                .get("command")
                .and_then(Value::as_str)
                .map(|c| expand(c, env))
                .transpose()?,
            args: str_list("args")?,
            env: str_map("env")
                .into_iter()
                .map(|(k, v)| Ok((k, expand(&v, env)?)))
                .collect::<Result<_, String>>()?,
            ..ServerFile::default()
        }),
        "http" | "streamable-http" => {
            let mut f = ServerFile {
                url: def
                    .get("url")
                    .and_then(Value::as_str)
                    .map(|u| expand(u, env))
                    .transpose()?,
                ..ServerFile::default()
            };
            for (h, v) in str_map("headers") {
                if h.eq_ignore_ascii_case("authorization")
                    && let Some(var) = v.strip_prefix("Bearer ").and_then(header_var)
                {
                    env(var)?;
                    f.bearer_token_env = Some(var.to_owned());
                } else if let Some(var) = header_var(&v) {
                    env(var)?;
                    f.headers.insert(h, var.to_owned());
                } else {
                    return Err(format!(
                        "header `{h}` must be `${{VAR}}` (or `Bearer ${{VAR}}`): crewbox keeps \
                         header values out of files"
                    ));
                }
            }
            Ok(f)
        }
        other => Err(format!(
            "transport `{other}` is not supported (stdio or http)"
        )),
    }
}

/// Reads the repository's `.mcp.json` and adds the servers the user approved to
/// `settings` (only when `trusted`); returns every server with its state.
/// `approved` maps a name to the digest the user approved; `keys` are the providers'
/// keys, which no definition may read.
pub fn apply(
    root: &Path,
    trusted: bool,
    approved: &BTreeMap<String, String>,
    keys: &Secrets,
    settings: &mut McpSettings,
) -> Vec<RepoServer> {
    let Ok(confined) = crate::trust::read::Confined::new(root) else {
        return Vec::new();
    };
    let text = match confined
        .read(Path::new(FILE), crate::trust::read::MAX_FILE_BYTES)
        .and_then(|b| b.into_text(&root.join(FILE), crate::trust::read::MAX_FILE_BYTES))
    {
        Ok(t) => t,
        Err(e) if e.is_not_found() => return Vec::new(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the repository's {FILE}");
            return Vec::new();
        }
    };
    let parsed = match parse(&text) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "the repository's {FILE} is not valid");
            return Vec::new();
        }
    };
    let env = lookup(keys, |v| std::env::var(v).ok());
    let mut out = Vec::new();
    for (name, def, digest) in parsed {
        let mut error = None;
        let state = if !trusted {
            RepoServerState::Untrusted
        } else if settings.servers.contains_key(&name) {
            RepoServerState::Shadowed
        } else {
            match approved.get(&name) {
                None => RepoServerState::NotApproved,
                Some(d) if *d != digest => RepoServerState::Changed,
                Some(_) => match to_server_file(&def, &env).and_then(|f| {
                    check_server(&name, &f, ServerSource::Repository).map_err(|e| e.message)
                }) {
                    Ok(server) => {
                        settings.servers.insert(name.clone(), server);
                        RepoServerState::Approved
                    }
                    Err(e) => {
                        error = Some(e);
                        RepoServerState::Invalid
                    }
                },
            }
        };
        out.push(RepoServer {
            name,
            state,
            digest,
            error,
        });
    }
    out
}

/// The server a definition would be (for `crewbox trust --mcp`, before approving).
pub fn preview(name: &str, def: &Value, keys: &Secrets) -> Result<McpServer, String> {
    let f = to_server_file(def, &lookup(keys, |v| std::env::var(v).ok()))?;
    check_server(name, &f, ServerSource::Repository).map_err(|e| e.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_format() {
        let text = r#"{"mcpServers": {
            "a": {"command": "x", "args": ["--home=${HOME_X:-/d}"], "env": {"T": "${TOK}"}},
            "b": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${API}", "X-K": "${K}"}},
            "c": {"type": "http", "url": "https://h", "headers": {"X": "literal"}}
        }}"#;
        let p = parse(text).unwrap();
        assert_eq!(p.len(), 3);
        let env = |v: &str| Ok((v == "TOK").then(|| "t0k".to_owned()));
        let a = to_server_file(&p[0].1, &env).unwrap();
        assert_eq!(a.args, ["--home=/d"]);
        assert_eq!(a.env["T"], "t0k");
        let b = to_server_file(&p[1].1, &env).unwrap();
        assert_eq!(b.bearer_token_env.as_deref(), Some("API"));
        assert_eq!(b.headers["X-K"], "K");
        assert!(to_server_file(&p[2].1, &env).is_err());
    }

    #[test]
    fn states() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE),
            r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}, "u": {"command": "z"}}}"#,
        )
        .unwrap();
        let mut settings = McpSettings::default();
        settings.servers.insert(
            "u".into(),
            check_server(
                "u",
                &ServerFile {
                    command: Some("mine".into()),
                    ..ServerFile::default()
                },
                ServerSource::User,
            )
            .unwrap(),
        );
        let none = Secrets::default();
        let untrusted = apply(
            dir.path(),
            false,
            &BTreeMap::new(),
            &none,
            &mut settings.clone(),
        );
        assert!(
            untrusted
                .iter()
                .all(|s| s.state == RepoServerState::Untrusted)
        );
        let digest_a = parse(&std::fs::read_to_string(dir.path().join(FILE)).unwrap()).unwrap()[0]
            .2
            .clone();
        let approved = BTreeMap::from([
            ("a".to_owned(), digest_a),
            ("b".to_owned(), "old".to_owned()),
            ("u".to_owned(), "x".to_owned()),
        ]);
        let states = apply(dir.path(), true, &approved, &none, &mut settings);
        let by: BTreeMap<_, _> = states.iter().map(|s| (s.name.as_str(), s.state)).collect();
        assert_eq!(by["a"], RepoServerState::Approved);
        assert_eq!(by["b"], RepoServerState::Changed);
        assert_eq!(by["u"], RepoServerState::Shadowed);
        assert_eq!(settings.servers["a"].source, ServerSource::Repository);
        assert_eq!(settings.servers["u"].source, ServerSource::User);
    }

    /// A definition may not read a provider's key, by its variable or by a variable
    /// holding it, in any field: the definition is refused naming the variable, and the
    /// key appears nowhere in the error.
    #[test]
    fn a_provider_key_is_never_read_into_a_definition() {
        let host = |v: &str| match v {
            "OPENAI_API_KEY" => Some("sk-test-SECRET123".to_owned()),
            "COPY" => Some("Bearer sk-test-SECRET123".to_owned()),
            "FINE" => Some("fine-value".to_owned()),
            _ => None,
        };
        let keys = Secrets::new(["OPENAI_API_KEY"], host);
        let env = lookup(&keys, host);
        for def in [
            r#"{"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${OPENAI_API_KEY}"}}"#,
            r#"{"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-K": "${COPY}"}}"#,
            r#"{"type": "http", "url": "http://127.0.0.1:1/mcp?k=${OPENAI_API_KEY}"}"#,
            r#"{"command": "x", "args": ["${OPENAI_API_KEY}"]}"#,
            r#"{"command": "x", "env": {"K": "${COPY}"}}"#,
            r#"{"command": "${OPENAI_API_KEY}"}"#,
        ] {
            let def: Value = serde_json::from_str(def).unwrap();
            let e = to_server_file(&def, &env).unwrap_err();
            assert!(
                e.contains("is a model provider's key") && !e.contains("SECRET123"),
                "{def}: {e}"
            );
        }
        let fine: Value =
            serde_json::from_str(r#"{"command": "x", "args": ["${FINE}", "${UNSET:-d}"]}"#)
                .unwrap();
        assert_eq!(
            to_server_file(&fine, &env).unwrap().args,
            ["fine-value", "d"]
        );
        // The refusal names the variable and says why.
        let e = env("COPY").unwrap_err();
        assert!(e.contains("`${COPY}`") && e.contains("provider"), "{e}");
    }
}

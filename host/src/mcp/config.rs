//! `[mcp]` of the user's config: the servers agents may be granted, checked at load.
//!
//! ```toml
//! [mcp]
//! default = ["memory"]            # servers every agent of a run gets (default none)
//!
//! [mcp.servers.memory]            # stdio: started inside the agent's process sandbox
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-memory"]
//! env = { MEMORY_FILE_PATH = "/tmp/memory.json" }   # values given here
//! pass_env = ["NODE_OPTIONS"]     # host variables passed as they are
//! network = false                 # default: no network
//!
//! [mcp.servers.github]            # streamable HTTP: reached by crewbox itself
//! url = "https://api.githubcopilot.com/mcp/"
//! bearer_token_env = "GITHUB_TOKEN"
//! headers = { "X-Team" = "TEAM_HEADER_VAR" }   # header = the variable holding its value
//! read_only = true                # read-only agents may use it too
//! ```
//!
//! Only the user's own config defines servers: a repository's `.crewbox/config.toml` is
//! an allowlist that has no `mcp` key, and a repository's `.mcp.json` is a separate,
//! approval-gated source (see `mcp::project`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Startup timeout when none is set (seconds).
pub const DEFAULT_STARTUP_TIMEOUT_S: u64 = 10;
/// Call timeout when none is set (seconds).
pub const DEFAULT_CALL_TIMEOUT_S: u64 = 60;
/// The longest either timeout may be (seconds).
pub const MAX_TIMEOUT_S: u64 = 3600;

/// `[mcp]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpFile {
    /// Servers every agent of a run is granted.
    #[serde(default)]
    pub default: Vec<String>,
    /// `[mcp.servers.NAME]`.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerFile>,
}

/// One `[mcp.servers.NAME]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerFile {
    /// stdio: the program.
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: variables set for it (name = value).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: host variables passed to it as they are.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// HTTP: the streamable HTTP endpoint.
    pub url: Option<String>,
    /// HTTP: header name = the environment variable that holds its value.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// HTTP: the variable holding a bearer token (`Authorization: Bearer …`).
    pub bearer_token_env: Option<String>,
    /// Seconds to wait for the server to start and answer `initialize`.
    pub startup_timeout_s: Option<u64>,
    /// Seconds one tool call may take.
    pub call_timeout_s: Option<u64>,
    /// stdio: whether the server shares the host's network (default false).
    pub network: Option<bool>,
    /// Whether read-only agents may be given its tools (default false).
    pub read_only: Option<bool>,
    /// Only these tools are offered (default: all).
    pub enabled_tools: Option<Vec<String>>,
    /// These tools are never offered.
    #[serde(default)]
    pub disabled_tools: Vec<String>,
}

/// Where a server's definition came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerSource {
    /// The user's config.
    User,
    /// The repository's `.mcp.json`, approved by the user with `crewbox trust --mcp`.
    Repository,
}

impl ServerSource {
    /// Its name in listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Repository => "repository",
        }
    }
}

/// How a server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A process crewbox starts in the sandbox, speaking on its stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it.
        env: Vec<(String, String)>,
        /// Host variables passed as they are.
        pass_env: Vec<String>,
    },
    /// A streamable HTTP endpoint crewbox connects to.
    Http {
        /// The endpoint.
        url: String,
        /// Header name and the variable holding its value (never the value).
        headers: Vec<(String, String)>,
        /// The variable holding a bearer token.
        bearer_token_env: Option<String>,
    },
}

/// Which of a server's tools are offered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// Only these (None: all).
    pub enabled: Option<Vec<String>>,
    /// Never these.
    pub disabled: Vec<String>,
}

impl ToolFilter {
    /// Whether tool `name` is offered.
    pub fn allows(&self, name: &str) -> bool {
        self.enabled
            .as_ref()
            .is_none_or(|e| e.iter().any(|t| t == name))
            && !self.disabled.iter().any(|t| t == name)
    }
}

/// One server, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServer {
    /// Its name (`mcp__NAME__TOOL`).
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// How long it may take to start and answer `initialize`.
    pub startup_timeout: Duration,
    /// How long one call may take.
    pub call_timeout: Duration,
    /// stdio: whether it shares the host's network.
    pub network: bool,
    /// Whether read-only agents may use it.
    pub read_only: bool,
    /// Which tools are offered.
    pub tools: ToolFilter,
    /// Where it was defined.
    pub source: ServerSource,
}

impl McpServer {
    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }

    /// A one-line summary without secrets: what it runs or reaches, the names of the
    /// variables it is given (never their values) and which variable each header comes
    /// from; any key the redactor knows is masked.
    pub fn summary(&self) -> String {
        let mut s = match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                pass_env,
            } => {
                let mut s = format!("stdio `{command}");
                for a in args {
                    s.push(' ');
                    s.push_str(a);
                }
                s.push('`');
                let names: Vec<&str> = env
                    .iter()
                    .map(|(k, _)| k.as_str())
                    .chain(pass_env.iter().map(String::as_str))
                    .collect();
                if !names.is_empty() {
                    s.push_str(&format!(", env {}", names.join(" ")));
                }
                if self.network {
                    s.push_str(", network");
                }
                s
            }
            Transport::Http {
                url,
                headers,
                bearer_token_env,
            } => {
                let mut s = format!("http {url}");
                if let Some(var) = bearer_token_env {
                    s.push_str(&format!(", bearer token from ${var}"));
                }
                for (h, var) in headers {
                    s.push_str(&format!(", header {h} from ${var}"));
                }
                s
            }
        };
        if self.read_only {
            s.push_str(", read-only");
        }
        crate::redact::clean_owned(s)
    }
}

/// The servers a process knows: the user's, and those of the repository the user
/// approved; plus the default grant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct McpSettings {
    /// By name.
    pub servers: BTreeMap<String, McpServer>,
    /// `[mcp] default`.
    pub default: Vec<String>,
}

/// Why a server definition was refused (`key` is below `mcp.servers.NAME`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerError {
    /// The key, e.g. `mcp.servers.x.url`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

/// Whether `name` may name a server: letters, digits, `-` and `_`, no `__` (the
/// separator of `mcp__SERVER__TOOL`), at most 32 characters.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !name.contains("__")
        && !name.starts_with('_')
        && !name.ends_with('_')
}

fn env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn timeout(key: String, v: Option<u64>, default: u64) -> Result<Duration, ServerError> {
    match v.unwrap_or(default) {
        s @ 1..=MAX_TIMEOUT_S => Ok(Duration::from_secs(s)),
        s => Err(ServerError {
            key,
            message: format!("{s} is outside the allowed range: 1..={MAX_TIMEOUT_S} seconds"),
        }),
    }
}

/// Checks one server as written and turns it into an [`McpServer`].
pub fn check_server(
    name: &str,
    f: &ServerFile,
    source: ServerSource,
) -> Result<McpServer, ServerError> {
    let key = |k: &str| format!("mcp.servers.{name}.{k}");
    let err = |k: &str, m: String| ServerError {
        key: key(k),
        message: m,
    };
    if !valid_server_name(name) {
        return Err(ServerError {
            key: format!("mcp.servers.{name}"),
            message: "a server name is 1 to 32 letters, digits, `-` or `_`, without `__` and \
                      not starting or ending with `_`"
                .into(),
        });
    }
    let transport = match (&f.command, &f.url) {
        (Some(_), Some(_)) => {
            return Err(err(
                "url",
                "set either `command` (stdio) or `url` (streamable HTTP), not both".into(),
            ));
        }
        (None, None) => {
            return Err(ServerError {
                key: format!("mcp.servers.{name}"),
                message: "set `command` (a stdio server) or `url` (a streamable HTTP server)"
                    .into(),
            });
        }
        (Some(command), None) => {
            if command.trim().is_empty() {
                return Err(err("command", "must not be empty".into()));
            }
            if !f.headers.is_empty() || f.bearer_token_env.is_some() {
                return Err(err(
                    "headers",
                    "headers and `bearer_token_env` are for `url` servers".into(),
                ));
            }
            for n in f.env.keys().chain(&f.pass_env) {
                if !env_name(n) {
                    return Err(err(
                        "env",
                        format!("`{n}` is not a variable name (letters, digits, `_`)"),
                    ));
                }
            }
            Transport::Stdio {
                command: command.clone(),
                args: f.args.clone(),
                env: f.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                pass_env: f.pass_env.clone(),
            }
        }
        (None, Some(url)) => {
            let parsed = reqwest::Url::parse(url)
                .map_err(|e| err("url", format!("`{url}` is not a URL: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(err("url", format!("`{url}` is not an http(s) URL")));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(err(
                    "url",
                    "credentials do not belong in the URL: use `bearer_token_env` or `headers`"
                        .into(),
                ));
            }
            if !f.args.is_empty() || !f.env.is_empty() || !f.pass_env.is_empty() {
                return Err(err(
                    "args",
                    "`args`, `env` and `pass_env` are for `command` servers".into(),
                ));
            }
            if f.network.is_some() {
                return Err(err(
                    "network",
                    "`network` is for `command` servers (crewbox itself reaches a `url` server)"
                        .into(),
                ));
            }
            for (h, var) in &f.headers {
                if reqwest::header::HeaderName::from_bytes(h.as_bytes()).is_err() {
                    return Err(err("headers", format!("`{h}` is not a header name")));
                }
                if !env_name(var) {
                    return Err(err(
                        "headers",
                        format!(
                            "the value of `{h}` names the environment variable holding it; \
                             `{var}` is not a variable name"
                        ),
                    ));
                }
            }
            if let Some(v) = &f.bearer_token_env
                && !env_name(v)
            {
                return Err(err(
                    "bearer_token_env",
                    format!("`{v}` is not a variable name"),
                ));
            }
            Transport::Http {
                url: url.clone(),
                headers: f
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                bearer_token_env: f.bearer_token_env.clone(),
            }
        }
    };
    Ok(McpServer {
        name: name.to_owned(),
        transport,
        startup_timeout: timeout(
            key("startup_timeout_s"),
            f.startup_timeout_s,
            DEFAULT_STARTUP_TIMEOUT_S,
        )?,
        call_timeout: timeout(
            key("call_timeout_s"),
            f.call_timeout_s,
            DEFAULT_CALL_TIMEOUT_S,
        )?,
        network: f.network.unwrap_or(false),
        read_only: f.read_only.unwrap_or(false),
        tools: ToolFilter {
            enabled: f.enabled_tools.clone(),
            disabled: f.disabled_tools.clone(),
        },
        source,
    })
}

/// Checks `[mcp]`: every server, and a default naming only servers defined here.
pub fn check(f: &McpFile) -> Result<McpSettings, ServerError> {
    let mut servers = BTreeMap::new();
    for (name, s) in &f.servers {
        servers.insert(name.clone(), check_server(name, s, ServerSource::User)?);
    }
    for d in &f.default {
        if !servers.contains_key(d) {
            return Err(ServerError {
                key: "mcp.default".into(),
                message: format!("`{d}` is not one of your [mcp.servers.NAME]"),
            });
        }
    }
    Ok(McpSettings {
        servers,
        default: f.default.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpSettings, ServerError> {
        let f: McpFile = toml::from_str(text).unwrap();
        check(&f)
    }

    #[test]
    fn stdio_and_http_servers() {
        let s = parse(
            "default = [\"a\"]\n[servers.a]\ncommand = \"npx\"\nargs = [\"x\"]\n\
             env = { K = \"v\" }\n[servers.b]\nurl = \"https://h/mcp\"\n\
             bearer_token_env = \"TOK\"\nread_only = true\ncall_timeout_s = 5\n",
        )
        .unwrap();
        assert_eq!(s.default, ["a"]);
        let a = &s.servers["a"];
        assert_eq!(a.kind(), "stdio");
        assert!(!a.network && !a.read_only);
        assert_eq!(a.startup_timeout, Duration::from_secs(10));
        let b = &s.servers["b"];
        assert_eq!(b.kind(), "http");
        assert_eq!(b.call_timeout, Duration::from_secs(5));
        assert!(b.read_only);
    }

    #[test]
    fn refusals_name_the_key() {
        let cases = [
            ("[servers.a]\n", "mcp.servers.a"),
            (
                "[servers.a]\ncommand = \"x\"\nurl = \"http://h\"\n",
                "mcp.servers.a.url",
            ),
            ("[servers.a__b]\ncommand = \"x\"\n", "mcp.servers.a__b"),
            (
                "[servers.a]\ncommand = \"x\"\ncall_timeout_s = 0\n",
                "mcp.servers.a.call_timeout_s",
            ),
            ("[servers.a]\nurl = \"ftp://h\"\n", "mcp.servers.a.url"),
            (
                "[servers.a]\nurl = \"https://u:p@h\"\n",
                "mcp.servers.a.url",
            ),
            (
                "[servers.a]\nurl = \"https://h\"\nnetwork = true\n",
                "mcp.servers.a.network",
            ),
            (
                "[servers.a]\nurl = \"https://h\"\nheaders = { X = \"not a var\" }\n",
                "mcp.servers.a.headers",
            ),
            ("default = [\"zz\"]\n", "mcp.default"),
        ];
        for (text, key) in cases {
            assert_eq!(parse(text).unwrap_err().key, key, "{text}");
        }
        assert!(toml::from_str::<McpFile>("[servers.a]\ncomand = \"x\"\n").is_err());
    }

    #[test]
    fn tool_filter() {
        let f = ToolFilter {
            enabled: Some(vec!["a".into(), "b".into()]),
            disabled: vec!["b".into()],
        };
        assert!(f.allows("a") && !f.allows("b") && !f.allows("c"));
        assert!(ToolFilter::default().allows("x"));
    }
}

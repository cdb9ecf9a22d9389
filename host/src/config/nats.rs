//! `executor` and `[nats]` of the user's config: where agents execute and how this
//! machine reaches the NATS server. User-only (they name servers and credentials), see
//! `trust/rules.rs`; a repository's `.crewbox/config.toml` can set neither.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Where a run's agents execute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// In this process.
    #[default]
    Local,
    /// As tasks on NATS JetStream, run by `crewbox worker` processes.
    Nats,
}

impl ExecutorKind {
    /// The name as written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Nats => "nats",
        }
    }
}

/// `[nats]` as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsFile {
    /// The server, `nats://host:4222` (`tls://` for TLS).
    pub url: Option<String>,
    /// The git remote of the repository that workers clone and push to (default `origin`).
    pub remote: Option<String>,
    /// The pool tasks are published to / a worker serves (default `default`).
    pub pool: Option<String>,
    /// A NATS `.creds` file (JWT and nkey seed).
    pub creds_file: Option<PathBuf>,
    /// A user name (with `password_env`).
    pub user: Option<String>,
    /// The environment variable holding the password.
    pub password_env: Option<String>,
    /// The environment variable holding a token.
    pub token_env: Option<String>,
    /// A CA certificate (PEM) the server's certificate must chain to.
    pub ca_file: Option<PathBuf>,
    /// A client certificate (PEM), with `key_file`.
    pub cert_file: Option<PathBuf>,
    /// The client certificate's key (PEM).
    pub key_file: Option<PathBuf>,
    /// Refuse a connection without TLS.
    pub require_tls: Option<bool>,
    /// Seconds a worker holds a task before it is redelivered without a heartbeat
    /// (default 30; heartbeats go every third of it).
    pub ack_wait_s: Option<u64>,
    /// Git remote URLs (prefixes) a worker accepts tasks for; empty: none.
    #[serde(default)]
    pub allow_remotes: Vec<String>,
}

/// `[nats]`, resolved (relative paths against the config file's directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsSettings {
    /// The server URL, when configured.
    pub url: Option<String>,
    /// The repository's git remote for workers.
    pub remote: String,
    /// The pool.
    pub pool: String,
    /// A `.creds` file.
    pub creds_file: Option<PathBuf>,
    /// User name.
    pub user: Option<String>,
    /// Variable holding the password.
    pub password_env: Option<String>,
    /// Variable holding a token.
    pub token_env: Option<String>,
    /// CA certificate.
    pub ca_file: Option<PathBuf>,
    /// Client certificate.
    pub cert_file: Option<PathBuf>,
    /// Client key.
    pub key_file: Option<PathBuf>,
    /// TLS required.
    pub require_tls: bool,
    /// How long a task may go without a heartbeat before it is redelivered.
    pub ack_wait: Duration,
    /// Remote URL prefixes a worker serves.
    pub allow_remotes: Vec<String>,
}

impl Default for NatsSettings {
    fn default() -> Self {
        Self {
            url: None,
            remote: "origin".into(),
            pool: "default".into(),
            creds_file: None,
            user: None,
            password_env: None,
            token_env: None,
            ca_file: None,
            cert_file: None,
            key_file: None,
            require_tls: false,
            ack_wait: Duration::from_secs(30),
            allow_remotes: Vec::new(),
        }
    }
}

impl NatsSettings {
    /// Applies the user's `[nats]`, paths relative to `dir`.
    pub(crate) fn apply(&mut self, f: NatsFile, dir: &Path) {
        let abs = |p: PathBuf| if p.is_absolute() { p } else { dir.join(p) };
        if let Some(u) = f.url {
            self.url = Some(u);
        }
        if let Some(r) = f.remote {
            self.remote = r;
        }
        if let Some(p) = f.pool {
            self.pool = p;
        }
        self.creds_file = f.creds_file.map(abs).or(self.creds_file.take());
        self.user = f.user.or(self.user.take());
        self.password_env = f.password_env.or(self.password_env.take());
        self.token_env = f.token_env.or(self.token_env.take());
        self.ca_file = f.ca_file.map(abs).or(self.ca_file.take());
        self.cert_file = f.cert_file.map(abs).or(self.cert_file.take());
        self.key_file = f.key_file.map(abs).or(self.key_file.take());
        if let Some(t) = f.require_tls {
            self.require_tls = t;
        }
        if let Some(s) = f.ack_wait_s {
            self.ack_wait = Duration::from_secs(s.clamp(1, 3600));
        }
        if !f.allow_remotes.is_empty() {
            self.allow_remotes = f.allow_remotes;
        }
    }
}

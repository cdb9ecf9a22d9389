//! Scale-out: a run's agents executed by `crewbox worker` processes on other machines,
//! through NATS JetStream.
//!
//! - [`task`]: the wire contract (versioned, bounded, no secrets).
//! - [`streams`]: the streams and consumers, with explicit limits.
//! - [`coordinator`]: [`NatsExecutor`], the engine's executor that publishes agents as
//!   tasks and records what comes back in the local store.
//! - [`worker`]: the worker loop, running tasks with the same local executor.
//! - [`git`]: the git remote both sides meet at (base commits, result branches).
//!
//! Delivery: a worker acks a task only once its result is stored on the server (the
//! result's PubAck); the coordinator acks a result only once it is committed to SQLite;
//! results and events are stored idempotently (store/remote.rs), so at-least-once
//! delivery records everything exactly once.

pub mod coordinator;
pub mod git;
mod readers;
pub mod streams;
pub mod task;
pub mod url;
pub mod worker;
mod worker_error;

pub use worker_error::WorkerError;

pub(crate) use coordinator::OverNats;

impl From<RemoteError> for crate::engine::EngineError {
    fn from(e: RemoteError) -> Self {
        Self::Remote(Box::new(e))
    }
}

use crate::config::NatsSettings;

/// Why scale-out could not do something.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// An allowed remote that is no URL (an empty one would allow everything).
    #[error("{origin}: {source}")]
    AllowRemote {
        /// `--allow-remote` or `[nats] allow_remotes`.
        origin: &'static str,
        /// What is wrong with it.
        source: url::RemoteUrlError,
    },
    /// `executor = "nats"` or a worker without a server.
    #[error("no NATS server configured: set `[nats] url` in your config or pass --nats URL")]
    NoUrl,
    /// The connection failed.
    #[error("cannot connect to NATS at {url}: {detail}")]
    Connect {
        /// The server.
        url: String,
        /// Why.
        detail: String,
    },
    /// A credential option is unusable.
    #[error("[nats] {key}: {detail}")]
    Credentials {
        /// The config key.
        key: &'static str,
        /// Why.
        detail: String,
    },
    /// A stream or consumer could not be created or read.
    #[error("JetStream stream {stream}: {detail}")]
    Stream {
        /// The stream.
        stream: &'static str,
        /// Why.
        detail: String,
    },
    /// Publishing failed (the stream is full, the server is gone …).
    #[error("publishing to {subject}: {detail}")]
    Publish {
        /// The subject.
        subject: String,
        /// Why.
        detail: String,
    },
    /// A git operation against the remote failed.
    #[error(transparent)]
    Git(#[from] git::GitError),
    /// A message was refused.
    #[error(transparent)]
    Wire(#[from] task::WireError),
    /// A pool name is not a subject token.
    #[error("pool `{0}` must be 1..=128 of [A-Za-z0-9_-]")]
    Pool(String),
}

/// Connects to the server `settings` (or `url`) name, with its credentials and TLS
/// options — all from the user's config; secrets come from the variables it names.
pub async fn connect(
    settings: &NatsSettings,
    url: Option<&str>,
    name: &str,
) -> Result<async_nats::Client, RemoteError> {
    let url = url
        .map(str::to_owned)
        .or_else(|| settings.url.clone())
        .ok_or(RemoteError::NoUrl)?;
    let env = |key: &'static str, var: &str| {
        std::env::var(var).map_err(|_| RemoteError::Credentials {
            key,
            detail: format!("environment variable {var} is not set"),
        })
    };
    let mut opts = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(std::time::Duration::from_secs(10));
    if let Some(path) = &settings.creds_file {
        opts = opts
            .credentials_file(path)
            .await
            .map_err(|e| RemoteError::Credentials {
                key: "creds_file",
                detail: format!("{}: {e}", path.display()),
            })?;
    }
    if let Some(user) = &settings.user {
        let var = settings
            .password_env
            .as_deref()
            .ok_or(RemoteError::Credentials {
                key: "user",
                detail: "needs `password_env`, the variable holding the password".into(),
            })?;
        let password = env("password_env", var)?;
        crate::redact::register(&password);
        opts = opts.user_and_password(user.clone(), password);
    }
    if let Some(var) = &settings.token_env {
        let token = env("token_env", var)?;
        crate::redact::register(&token);
        opts = opts.token(token);
    }
    if let Some(ca) = &settings.ca_file {
        opts = opts.add_root_certificates(ca.clone());
    }
    match (&settings.cert_file, &settings.key_file) {
        (Some(c), Some(k)) => opts = opts.add_client_certificate(c.clone(), k.clone()),
        (None, None) => {}
        _ => {
            return Err(RemoteError::Credentials {
                key: "cert_file",
                detail: "`cert_file` and `key_file` go together".into(),
            });
        }
    }
    if settings.require_tls {
        opts = opts.require_tls(true);
    }
    tokio::time::timeout(
        std::time::Duration::from_secs(15),
        opts.connect(url.as_str()),
    )
    .await
    .map_err(|_| RemoteError::Connect {
        url: url.clone(),
        detail: "timed out".into(),
    })?
    .map_err(|e| RemoteError::Connect {
        url,
        detail: e.to_string(),
    })
}

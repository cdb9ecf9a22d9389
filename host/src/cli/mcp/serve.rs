//! `crewbox mcp serve [--http ADDR --token-env VAR [--allow-remote]] [--log-file FILE]`:
//! crewbox as an MCP server of one repository (`--repo`, else the working
//! directory's), under the CLI's rules. stdout carries only protocol messages; logs
//! go to stderr or `--log-file`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use super::super::{Context, Exit};
use crewbox::mcp_server::{HttpOptions, Server, serve_http};

/// Arguments of `crewbox mcp serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Serve streamable HTTP on this address (loopback unless --allow-remote) instead
    /// of stdio; the endpoint is `/mcp`.
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<SocketAddr>,
    /// With --http: the environment variable holding the bearer token clients must
    /// send (`Authorization: Bearer <token>`, at least 16 characters).
    #[arg(long, value_name = "VAR", requires = "http")]
    pub token_env: Option<String>,
    /// With --http: allow a non-loopback address.
    #[arg(long, requires = "http")]
    pub allow_remote: bool,
    /// Let clients ask for the network for agents' commands (`run` with
    /// `network: true`); without it such a run is refused.
    #[arg(long)]
    pub allow_network: bool,
    /// Write logs to this file (appended) instead of stderr.
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
}

/// Sends this process's stderr (logs, warnings) to `path`, appended.
fn log_to(path: &Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot open the log file {}", path.display()))?;
    // fd 2 is replaced atomically (dup2), through rustix's safe wrapper.
    rustix::stdio::dup2_stderr(&file)
        .map_err(std::io::Error::from)
        .with_context(|| format!("cannot log to {}", path.display()))
}

/// Serves until the client disconnects (stdio: then until the runs it started end)
/// or a signal (runs in flight are left resumable).
pub async fn run(ctx: Context, args: ServeArgs) -> anyhow::Result<Exit> {
    if let Some(path) = &args.log_file {
        log_to(path)?;
    }
    let opts = args.http.map(|addr| HttpOptions {
        addr,
        allow_remote: args.allow_remote,
        token_env: args.token_env.clone(),
    });
    if let Some(opts) = &opts
        && let Err(e) = opts.check()
    {
        errln!("crewbox: {e}");
        return Ok(Exit::Usage);
    }
    let shutdown = CancellationToken::new();
    let server = Server::open_with(ctx, shutdown.clone(), args.allow_network).await?;
    if server.engine().sandbox().is_off() {
        errln!("crewbox: {}", server.engine().sandbox().off_warning());
    }
    let mut terminate = super::super::signals::Terminate::install();
    let signals = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            terminate.recv().await;
            shutdown.cancel();
        }
    });
    let result = match &opts {
        Some(opts) => serve_http(server.clone(), opts, shutdown.clone())
            .await
            .map_err(anyhow::Error::from),
        None => {
            let served = tokio::select! {
                r = server.serve_stdio() => r.map_err(anyhow::Error::from),
                () = shutdown.cancelled() => Ok(()),
            };
            if !server.runs().is_empty() && !shutdown.is_cancelled() {
                errln!(
                    "crewbox: the client disconnected; {} run(s) it started go on until they end \
                     (SIGTERM leaves them resumable)",
                    server.runs().len()
                );
            }
            served
        }
    };
    // Runs in flight end, or are left resumable by a signal.
    tokio::select! {
        () = server.runs().drained() => {}
        () = shutdown.cancelled() => server.runs().drained().await,
    }
    signals.abort();
    result.map(|()| Exit::Ok)
}

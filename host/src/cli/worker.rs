//! `crewbox worker`: serves a pool of agent tasks from NATS JetStream until SIGINT or
//! SIGTERM (tasks in progress finish first), then prints what it did.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use super::{Exit, GlobalArgs};
use crewbox::serve_worker as serve;
use crewbox::types::WorkerOptions;

/// `crewbox worker` arguments.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The NATS server [default: `[nats] url` in your config].
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// The pool to serve [default: `[nats] pool`, else `default`].
    #[arg(long)]
    pub pool: Option<String>,
    /// Tasks run at once.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub slots: u16,
    /// This worker's name, recorded for every agent it runs [default: HOST-PID].
    #[arg(long)]
    pub name: Option<String>,
    /// Serve repositories whose git remote URL starts with this (repeatable; adds to
    /// `[nats] allow_remotes`). A worker serves no remote unless allowed.
    #[arg(long = "allow-remote", value_name = "PREFIX")]
    pub allow_remotes: Vec<String>,
    /// The script for tasks that name the `scripted` provider.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

/// Runs the worker until a signal.
pub async fn run(g: &GlobalArgs, args: WorkerArgs) -> anyhow::Result<Exit> {
    let shutdown = CancellationToken::new();
    let mut terminate = super::signals::Terminate::install();
    let signals = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            terminate.recv().await;
            shutdown.cancel();
        }
    });
    let opts = WorkerOptions {
        url: args.nats,
        pool: args.pool,
        slots: usize::from(args.slots),
        name: args.name,
        state_base: g.state_dir.clone(),
        allow_remotes: args.allow_remotes,
        script: args.script.map(|p| std::path::absolute(&p).unwrap_or(p)),
    };
    let stats = serve(opts, shutdown).await;
    signals.abort();
    let stats = stats?;
    errln!(
        "crewbox worker stopped: {} run, {} already done, {} refused",
        stats.ran,
        stats.skipped,
        stats.refused
    );
    Ok(Exit::Ok)
}

//! `crewbox retry AGENT`: runs a dead letter again inside its run, from its last stored
//! conversation (or from its task with `--fresh`), at its run's base, optionally with
//! another provider, model or turn limit; the run then finishes as if the first attempt
//! had succeeded (see `engine/retry.rs`).

use tokio_util::sync::CancellationToken;

use super::{Context, Exit};
use crewbox::types::RetryOverrides;

/// Arguments of `crewbox retry`.
#[derive(Debug, Clone, clap::Args)]
pub struct RetryArgs {
    /// The dead agent (id, unique prefix or tail; see `crewbox dead`).
    pub agent: String,
    /// Another of your providers for the new attempt [default: the one that failed].
    #[arg(long)]
    pub provider: Option<String>,
    /// Another model for the new attempt.
    #[arg(long, value_parser = super::run::parse_model)]
    pub model: Option<String>,
    /// The new attempt's turn limit.
    #[arg(long)]
    pub max_turns: Option<u32>,
    /// Start from the agent's task instead of its last conversation.
    #[arg(long)]
    pub fresh: bool,
    /// Print the run's report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where the run's agents execute [default: `executor` in your config].
    #[arg(long, value_enum)]
    pub executor: Option<super::choices::ExecutorChoice>,
}

/// Retries the agent and prints its run's report.
pub async fn run(ctx: Context, args: RetryArgs) -> anyhow::Result<Exit> {
    let ctx = match args.executor {
        Some(e) => ctx.with_executor(e.into()),
        None => ctx,
    };
    let agent = match ctx.agent_record(&args.agent).await {
        Ok(a) => a,
        Err(e) if e.is_usage() => {
            errln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
        Err(e) => return Err(e.into()),
    };
    let overrides = RetryOverrides {
        provider: args.provider,
        model: args.model,
        max_turns: args.max_turns,
        fresh: args.fresh,
    };
    let shutdown = CancellationToken::new();
    let engine = super::context::engine(&ctx, shutdown.clone()).await?;
    if !args.json {
        errln!(
            "crewbox: retrying agent {} ({}) in run {}",
            agent.id,
            agent.name,
            agent.run_id
        );
    }
    let report = match super::run::drive(
        &engine,
        &shutdown,
        args.json,
        engine.retry(&agent.id, &overrides),
    )
    .await?
    {
        Ok(report) => report,
        Err(code) => return Ok(code),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{}", report.render_text());
    }
    Ok(Exit::of_report(&report))
}

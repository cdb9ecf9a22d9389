//! `crewbox run "PROMPT"`.

use std::path::PathBuf;

use tokio_util::sync::CancellationToken;

use crewbox::{Engine, EngineError, ErrorClass, Isolation, ModeChoice, RunRequest, Strategy};

use super::{Context, Exit, progress};

/// Arguments of `crewbox run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// What the agents should do.
    pub prompt: String,
    /// Orchestration mode [default: from config, else auto].
    #[arg(long, value_parser = parse_mode)]
    pub mode: Option<ModeChoice>,
    /// Provider name from your config ([providers.NAME]) or `anthropic`/`openai` [default:
    /// `default_provider`, else the vendor whose API key is set].
    #[arg(long)]
    pub provider: Option<String>,
    /// Model to use instead of the provider's configured one.
    #[arg(long, value_parser = parse_model)]
    pub model: Option<String>,
    /// Use the scripted provider with this script file.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Where agents execute [default: `executor` in your config, else local].
    #[arg(long, value_enum)]
    pub executor: Option<super::choices::ExecutorChoice>,
    /// Run this validator after each writing agent, and after every member of a team
    /// (`NAME[=CRITERION]`, a built-in name or a `.wasm` path); repeat for several
    /// validators or criteria.
    #[arg(long = "validator", value_name = "NAME[=CRITERION]")]
    pub validators: Vec<String>,
    /// Most validator fix rounds per agent (0..=10; its quotas hold across them).
    #[arg(long, default_value_t = crewbox::DEFAULT_FIX_ROUNDS,
          value_parser = clap::value_parser!(u32).range(0..=crewbox::MAX_FIX_ROUNDS as i64))]
    pub max_fix_rounds: u32,
    /// Where writing agents work.
    #[arg(long, value_parser = parse_isolation, default_value = "worktree")]
    pub isolation: Isolation,
    /// Swarm size (2..=5).
    #[arg(long, value_parser = clap::value_parser!(u32).range(2..=5))]
    pub swarm_size: Option<u32>,
    /// How swarm results are joined: live, quorum, vote, merge or batch.
    #[arg(long, value_parser = parse_strategy)]
    pub strategy: Option<Strategy>,
    /// Crew: most executor revisions after a FAIL review (0..=3).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=3))]
    pub max_revisions: u32,
    /// A handoff listing `next_steps` starts a follow-up agent on the previous agent's branch.
    #[arg(long)]
    pub chain: bool,
    /// Most follow-up agents in a chain.
    #[arg(long, default_value_t = 3)]
    pub chain_depth: u32,
    /// Run this team (`.crewbox/teams/NAME.toml`); the mode defaults to the team's.
    #[arg(long, value_name = "NAME")]
    pub team: Option<String>,
    /// Reflect: most iterations of the loop.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_iterations: u32,
    /// Let agents' commands use the network (by default they have none, not even the
    /// host's loopback); `[sandbox] network` in your config does the same for every run.
    #[arg(long)]
    pub network: bool,
    /// Make every agent read-only (no write, no exec), whatever its team or pack asks.
    #[arg(long)]
    pub read_only: bool,
    /// Give the run's agents the tools of this MCP server (one of your
    /// `[mcp.servers.NAME]`); repeat for several. `[mcp] default` adds to these.
    #[arg(long = "mcp", value_name = "NAME")]
    pub mcp: Vec<String>,
    /// Lower `[quotas] max_turns` for this run's agents (never raises it).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
    /// Print one JSON object (the run report) and no progress.
    #[arg(long)]
    pub json: bool,
}

fn parse_isolation(s: &str) -> Result<Isolation, String> {
    Isolation::parse(s).ok_or_else(|| format!("unknown isolation `{s}` (worktree or none)"))
}

fn parse_strategy(s: &str) -> Result<Strategy, String> {
    Strategy::parse(s)
        .ok_or_else(|| format!("unknown strategy `{s}` (live, quorum, vote, merge or batch)"))
}

/// A model name as given on the command line: 1 to 256 characters, no whitespace or
/// control characters (it is printed in listings and sent to servers as it is).
pub fn parse_model(s: &str) -> Result<String, String> {
    crewbox::check_model_name(s)
        .map(|()| s.to_owned())
        .map_err(str::to_owned)
}

/// Parses `auto` or a mode name for clap.
pub fn parse_mode(s: &str) -> Result<ModeChoice, String> {
    ModeChoice::parse_named(s)
}

/// Runs the prompt and prints the report.
pub async fn run(ctx: Context, args: RunArgs) -> anyhow::Result<Exit> {
    let ctx = match args.executor {
        Some(e) => ctx.with_executor(e.into()),
        None => ctx,
    };
    let shutdown = CancellationToken::new();
    let engine = super::context::engine(&ctx, shutdown.clone()).await?;
    let req = RunRequest {
        prompt: args.prompt,
        mode: args.mode,
        provider: args.provider,
        model: args.model,
        // Stored absolute, so `crewbox resume` finds it from any directory.
        script: args.script.map(|p| std::path::absolute(&p).unwrap_or(p)),
        validators: args.validators,
        max_fix_rounds: Some(args.max_fix_rounds),
        isolation: Some(args.isolation),
        swarm_size: args.swarm_size,
        strategy: args.strategy,
        max_revisions: Some(args.max_revisions),
        chain: args.chain,
        chain_depth: Some(args.chain_depth),
        team: args.team,
        max_iterations: Some(args.max_iterations),
        network: args.network,
        read_only: args.read_only,
        mcp: args.mcp,
        max_turns: args.max_turns,
        base: None,
    };
    let report = match drive(&engine, &shutdown, args.json, engine.run(req)).await? {
        Ok(report) => report,
        Err(exit) => return Ok(exit),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        out!("{}", report.render_text());
    }
    Ok(Exit::of_report(&report))
}

/// Drives a run (new or resumed) with progress on a terminal and Ctrl-C handling;
/// engine refusals become an exit code with the message on stderr.
pub(super) async fn drive<T>(
    engine: &Engine,
    shutdown: &CancellationToken,
    json: bool,
    run: impl std::future::Future<Output = Result<T, EngineError>>,
) -> anyhow::Result<Result<T, Exit>> {
    let show_progress = !json && crate::text::stderr_is_terminal();
    let progress = show_progress.then(|| progress::spawn(engine, shutdown.child_token()));
    let mut terminate = super::signals::Terminate::install();
    let signals = tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            terminate.recv().await;
            shutdown.cancel();
        }
    });
    let result = run.await;
    signals.abort();
    if let Some(p) = progress {
        p.finish().await;
    }
    match result {
        Ok(r) => Ok(Ok(r)),
        Err(e) => {
            errln!("crewbox: {e}");
            Ok(Err(match e.class() {
                ErrorClass::Usage => Exit::Usage,
                ErrorClass::PluginFault => Exit::PluginFault,
                ErrorClass::Interrupted => Exit::Interrupted,
            }))
        }
    }
}

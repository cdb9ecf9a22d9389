//! One file per subcommand. Each parses its own arguments (clap `Args`) and returns an
//! [`Exit`] code; `main` maps errors to codes. Configuration is two-phase: raw
//! arguments are checked first, then turned into a [`Context`] (paths, config, store).
//!
//! Everything a command prints goes through `out!`/`outln!` (stdout) and `errln!`
//! (stderr), which write through [`crate::text`]'s escaping sink: text a model, a
//! plugin, a worker or a repository wrote cannot drive the terminal, in text or JSON
//! output alike. A stdout write error is returned (never a panic), and `main` treats a
//! closed pipe as success.

/// Writes to stdout like `print!`, through the escaping sink, returning a write error
/// to the caller with `?` (a closed pipe ends the command, successfully, instead of
/// panicking).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(crate::text::stdout(), $($arg)*)?
    }};
}

/// Writes a line to stdout like `println!`; see `out!`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(crate::text::stdout(), $($arg)*)?
    }};
}

/// Writes a line to stderr like `errln!`, through the escaping sink (a closed
/// stderr is ignored, not a panic).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(crate::text::stderr(), $($arg)*);
    }};
}

pub mod audit;
pub mod branches;
mod choices;
pub mod completions;
pub mod config;
mod context;
pub mod control;
pub mod daemon;
pub mod dead;
pub mod demo;
pub mod dispatch;
pub mod events;
pub mod export;
pub mod health;
mod health_provider;
pub mod history;
pub mod init;
pub mod mcp;
pub mod plugin;
mod progress;
mod render;
pub mod replay;
pub mod resume;
pub mod retry;
pub mod run;
pub mod schedule;
pub mod send;
mod signals;
pub mod status;
pub mod team;
pub mod top;
pub mod tree;
pub mod trust;
pub mod validate;
pub mod worker;
pub mod worktree;

use clap::{Parser, Subcommand};

pub use context::{Context, GlobalArgs};

pub mod handoff;

/// Process exit codes shared by every subcommand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// A check or verdict failed (the command itself worked).
    CheckFailed = 1,
    /// Usage or configuration error.
    Usage = 2,
    /// A plugin faulted (trap, deadline, limit).
    PluginFault = 3,
    /// Interrupted by a signal; the run is left resumable.
    Interrupted = 130,
}

impl Exit {
    /// The exit code of a finished run: 0 when it completed, 3 when a plugin fault
    /// decided it, else 1.
    pub fn of_report(report: &crewbox::RunReport) -> Self {
        if report.status == crewbox::RunStatus::Completed {
            Exit::Ok
        } else if report.faulted() {
            Exit::PluginFault
        } else {
            Exit::CheckFailed
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e as u8)
    }
}

/// crewbox runs crews of AI coding agents on a git repository, autonomously and safely.
#[derive(Debug, Parser)]
#[command(name = "crewbox", version, about, propagate_version = true)]
pub struct Cli {
    /// Options every subcommand takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run agents on a prompt.
    Run(run::RunArgs),
    /// Create a throwaway repository with a failing test and let the built-in scripted
    /// model fix it through the real tools.
    Demo(demo::DemoArgs),
    /// Show recent runs, or one run's report.
    Status(status::StatusArgs),
    /// Print stored events as NDJSON.
    Events(events::EventsArgs),
    /// Show the agent tree of a run (text, Mermaid or JSON).
    Tree(tree::TreeArgs),
    /// Show a histogram of the dispatch decisions.
    History(history::HistoryArgs),
    /// Send a message to a running agent (delivered before its next model call).
    Steer(control::SteerArgs),
    /// Stop a running agent or run.
    Stop(control::StopArgs),
    /// Finish runs a crash or a signal left unfinished (stored steps are not re-run).
    Resume(resume::ResumeArgs),
    /// List dead letters: agents that failed and were not retried (`dead drop`: forget
    /// them).
    Dead(dead::DeadArgs),
    /// Run a dead letter again in its run, from its last conversation; its run then
    /// finishes with the new result.
    Retry(retry::RetryArgs),
    /// Re-run a recorded run in a scratch state, answering model calls from its
    /// recording (tools really run), and report whether it matched.
    Replay(replay::ReplayArgs),
    /// Write a run's recording (every model exchange) as a cassette file.
    Export(export::ExportArgs),
    /// Print the audit chain of decisions (`audit verify`: check every link).
    Audit(audit::AuditArgs),
    /// Send a message to a team's running reflect loop (read at its next iteration).
    Send(send::SendArgs),
    /// List, inspect and check WebAssembly plugins.
    Plugin(plugin::PluginArgs),
    /// Ask the dispatcher a run would ask which mode a prompt would run in.
    Dispatch(dispatch::DispatchArgs),
    /// Run one validator on an agent output.
    Validate(validate::ValidateArgs),
    /// Check handoff files.
    Handoff(handoff::HandoffArgs),
    /// List or prune agent worktrees.
    Worktree(worktree::WorktreeArgs),
    /// List crewbox's branches (`crewbox/…`); `--prune` removes merged ones.
    Branches(branches::BranchesArgs),
    /// List teams or show one.
    Team(team::TeamArgs),
    /// Add, list and manage scheduled jobs.
    Schedule(schedule::ScheduleArgs),
    /// Fire scheduled jobs until stopped (SIGTERM/SIGINT).
    Daemon(daemon::DaemonArgs),
    /// A live dashboard of runs, agents, events and schedules, with steer, stop,
    /// message and resume (works beside any running crewbox).
    Top(top::TopArgs),
    /// Show scheduler, circuit breaker, agent and store health.
    Health(health::HealthArgs),
    /// Trust this repository (its config and plugins apply), list or revoke trust.
    Trust(trust::TrustArgs),
    /// Show the configuration in force: each value with its source, and every
    /// repository setting that was ignored and why.
    Config(config::ConfigArgs),
    /// List MCP servers, show a server's tools, call one tool.
    Mcp(mcp::McpArgs),
    /// Write a commented .crewbox/config.toml and an example team.
    Init(init::InitArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Run agent tasks from a NATS JetStream pool (scale-out; see "Running on many
    /// machines" in the README).
    Worker(worker::WorkerArgs),
}

impl Command {
    /// Whether the command's output is for programs (JSON, NDJSON, a daemon's log):
    /// then no notice is shown beside it.
    pub fn machine_output(&self) -> bool {
        match self {
            Self::Run(a) => a.json,
            Self::Demo(a) => a.json,
            Self::Status(a) => a.json,
            Self::Tree(a) => a.format() == tree::TreeFormat::Json,
            Self::History(a) => a.json,
            Self::Resume(a) => a.json,
            Self::Dead(a) => a.json(),
            Self::Retry(a) => a.json,
            Self::Replay(a) => a.json,
            Self::Export(a) => a.json,
            Self::Audit(a) => a.json(),
            Self::Health(a) => a.json,
            Self::Team(a) => a.command.json(),
            Self::Worktree(a) => a.command.json(),
            Self::Schedule(a) => a.command.json(),
            Self::Trust(a) => a.json,
            Self::Branches(a) => a.json,
            Self::Config(a) => a.json,
            Self::Mcp(a) => a.command.json(),
            Self::Events(_) | Self::Daemon(_) | Self::Worker(_) => true,
            Self::Steer(a) => a.json,
            Self::Stop(a) => a.json,
            Self::Send(a) => a.json,
            Self::Dispatch(a) => a.json(),
            Self::Plugin(_)
            | Self::Validate(_)
            | Self::Handoff(_)
            | Self::Init(_)
            | Self::Top(_) => false,
            Self::Completions(_) => true,
        }
    }
}

/// Prints what the command line parser said and returns its exit code. Help and the
/// version are crewbox's own text; an error quotes the arguments, which are written
/// escaped like every other text crewbox prints (probe 18: `--mode $'\e]52;c;…\a'`
/// reached the terminal raw, a clipboard write), and without colours.
fn usage_error(e: &clap::Error) -> std::process::ExitCode {
    use clap::error::ErrorKind;
    use std::io::Write as _;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
    } else {
        let _ = write!(crate::text::stderr(), "{}", e.render());
    }
    std::process::ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// Parses the command line, runs the command and returns the process exit code.
/// How long blocking work may take to finish once a command returned.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

pub fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    crewbox::secrets::register_secret_env();
    // Telemetry is user-only: read from the user's file alone, never a repository's.
    // A file that does not load is reported by the command itself.
    let telemetry = crewbox::types::TelemetryFile::of_user();
    crewbox::init_tracing(cli.global.log_json, cli.global.color.forced(), &telemetry);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("crewbox: cannot start the async runtime: {e}");
            return Exit::Usage.into();
        }
    };
    let result = runtime.block_on(dispatch(cli));
    // The runtime goes first: its tasks' spans end before the last ones are sent. Its
    // blocking work gets a bounded time to finish: a read of stdin that waits for a
    // client who keeps the pipe open (`mcp serve` told to stop by a signal) never
    // ends, and dropping the runtime would wait for it for good.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    crewbox::flush_telemetry();
    match result {
        Ok(code) => code.into(),
        Err(e) => {
            if is_broken_pipe(&e) {
                return Exit::Ok.into();
            }
            errln!(
                "crewbox: {}",
                crewbox::secrets::clean(&describe(e.as_ref()))
            );
            Exit::Usage.into()
        }
    }
}

/// An error and its causes on one line, `outer: cause: cause`, each cause said once:
/// most of our errors already name their cause in their own message (`… : {source}`),
/// so a cause whose text the line holds is not repeated.
pub(crate) fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    line
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    // JSON written straight to stdout fails with a serde error holding the io one.
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| c.downcast_ref::<serde_json::Error>()?.io_error_kind())
            == Some(std::io::ErrorKind::BrokenPipe)
    })
}

async fn dispatch(cli: Cli) -> anyhow::Result<Exit> {
    let g = &cli.global;
    let machine = cli.command.machine_output();
    // Every command that works on a repository says what of the repository's own
    // files was not applied (see `context::announce`).
    let ctx = || -> anyhow::Result<Context> {
        let ctx = g.resolve()?;
        context::announce(&ctx, machine);
        Ok(ctx)
    };
    match cli.command {
        Command::Run(args) => run::run(ctx()?, args).await,
        Command::Demo(args) => demo::run(g, args).await,
        Command::Status(args) => status::run(ctx()?, args).await,
        Command::Events(args) => events::run(ctx()?, args).await,
        Command::Tree(args) => tree::run(ctx()?, args).await,
        Command::History(args) => history::run(ctx()?, args).await,
        Command::Steer(args) => control::steer(ctx()?, args).await,
        Command::Stop(args) => control::stop(ctx()?, args).await,
        Command::Resume(args) => resume::run(ctx()?, args).await,
        Command::Dead(args) => dead::run(ctx()?, args).await,
        Command::Retry(args) => retry::run(ctx()?, args).await,
        Command::Replay(args) => replay::run(ctx()?, args).await,
        Command::Export(args) => export::run(ctx()?, args).await,
        Command::Audit(args) => audit::run(ctx()?, args).await,
        Command::Send(args) => send::run(ctx()?, args).await,
        Command::Plugin(args) => plugin::run(args).await,
        Command::Dispatch(args) => dispatch::run(ctx()?, args).await,
        Command::Validate(args) => validate::run(args).await,
        Command::Handoff(args) => handoff::dispatch(&args),
        Command::Team(args) => team::run(args, &ctx()?).await,
        Command::Daemon(args) => daemon::run(ctx()?, args).await,
        Command::Worker(args) => worker::run(g, args).await,
        Command::Health(args) => health::run(ctx()?, args).await,
        Command::Top(args) => top::run(ctx()?, args, g.color.forced()).await,
        Command::Schedule(args) => schedule::run(ctx()?, args).await,
        Command::Worktree(args) => worktree::run(args, &ctx()?).await,
        Command::Trust(args) => trust::run(g, args),
        Command::Branches(args) => branches::run(&ctx()?, args).await,
        // `config` prints what `announce` would, in full.
        Command::Config(args) => config::run(g.resolve()?, args),
        Command::Mcp(args) => mcp::run(ctx()?, args).await,
        Command::Init(args) => init::run(g, args),
        Command::Completions(args) => completions::run(&args),
    }
}

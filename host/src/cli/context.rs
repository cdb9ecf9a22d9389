//! Turning global arguments into a resolved repository (trust, configuration, state
//! directory, store), and telling the user what of the repository's was not applied.

use std::path::PathBuf;

pub use crewbox::Repository as Context;

/// Options every subcommand takes.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalArgs {
    /// The repository to work on (default: the git repository containing the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// The state base: each repository keeps its database and worktrees in its own
    /// directory under it [default: $XDG_STATE_HOME/crewbox].
    #[arg(long, global = true, env = "CREWBOX_STATE_DIR", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Log as JSON lines on stderr (filter with RUST_LOG).
    #[arg(long, global = true)]
    pub log_json: bool,
    /// Colour in log lines: `auto` (only on a terminal, and not when NO_COLOR is set),
    /// `always` or `never`.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
}

/// When to colour output (`--color`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal without `NO_COLOR`.
    #[default]
    Auto,
    /// Always, even into a pipe or file.
    Always,
    /// Never.
    Never,
}

impl ColorChoice {
    /// `Some` when the choice overrides the terminal and `NO_COLOR` checks.
    pub fn forced(self) -> Option<bool> {
        match self {
            Self::Auto => None,
            Self::Always => Some(true),
            Self::Never => Some(false),
        }
    }
}

impl GlobalArgs {
    /// Resolves the repository, its trust, the configuration in force and its state
    /// directory. The state directory never comes from a repository file.
    pub fn resolve(&self) -> anyhow::Result<Context> {
        Ok(Context::open(
            self.repo.as_deref(),
            self.state_dir.as_deref(),
        )?)
    }

    /// The repository the command works on (`--repo`, else the current directory's).
    pub fn repo_root(&self) -> anyhow::Result<PathBuf> {
        use anyhow::Context as _;
        let start = match &self.repo {
            Some(p) => p.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        crewbox::user_trust::repository_root(&start)
            .with_context(|| format!("repository directory {} does not exist", start.display()))
    }
}

/// Tells the user, on stderr, what of the repository's was not applied: each ignored
/// or clamped setting of a trusted repository (one line each), and — only on a
/// terminal, not for machine-readable output, once per repository and set of affected
/// files — one line saying an untrusted repository's files are limited and how to
/// trust it. Never a prompt.
pub fn announce(ctx: &Context, machine_output: bool) {
    if let Some(e) = ctx.trust_error() {
        errln!("crewbox: warning: {e}; the repository is treated as untrusted");
    }
    let config = ctx.config();
    for ignored in config.ignored.iter().filter(|i| i.key != "*") {
        errln!("crewbox: warning: {ignored}");
    }
    if machine_output || !crate::text::stderr_is_terminal() {
        return;
    }
    if let Some(line) = ctx.untrusted_notice() {
        errln!("{line}");
    }
}

/// Opens the engine for commands that run agents, saying on stderr when agents'
/// commands run without the process sandbox (the user turned it off).
pub async fn engine(
    ctx: &Context,
    shutdown: tokio_util::sync::CancellationToken,
) -> anyhow::Result<crewbox::Engine> {
    let engine = ctx.engine(shutdown).await?;
    if engine.sandbox().is_off() {
        errln!("crewbox: {}", engine.sandbox().off_warning());
    }
    Ok(engine)
}

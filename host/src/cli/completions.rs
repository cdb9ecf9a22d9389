//! `crewbox completions SHELL`: the shell completion script, generated from the same
//! definitions the parser uses (so it never drifts from the flags).

use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, Exit};

/// Arguments of `crewbox completions`.
#[derive(Debug, Clone, clap::Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    pub shell: Shell,
}

/// Writes the completion script on stdout.
pub fn run(args: &CompletionsArgs) -> anyhow::Result<Exit> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "crewbox", &mut script);
    use std::io::Write as _;
    crate::text::stdout().write_all(&script)?;
    Ok(Exit::Ok)
}

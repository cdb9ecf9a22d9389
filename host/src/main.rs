//! The `crewbox` binary: parse, call the library, map errors to exit codes.
//!
//! The commands (`cli/`, one file per subcommand) run on the library's API —
//! [`crewbox::Repository`], [`crewbox::Engine`] and their types — and, for the
//! commands that inspect the lower floors (plugins, worktrees, schedules, teams, the
//! store), on `crewbox::unstable`, named below as the library names its own modules.

mod cli;

use crewbox::handoff;
use crewbox::unstable::{
    config, engine, ids, observe, paths, plugin, provider, redact, schedule, store, team, trust,
    worktree,
};

fn main() -> std::process::ExitCode {
    cli::main()
}

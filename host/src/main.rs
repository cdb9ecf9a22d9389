//! The `crewbox` binary: parse, call the library, map errors to exit codes.
//!
//! The commands (`cli/`, one file per subcommand) run on the library's API —
//! [`crewbox::Repository`], [`crewbox::Engine`] and their types — and, for the
//! commands that inspect the lower floors (plugins, worktrees, schedules, teams, the
//! store), on `crewbox::unstable`, named below as the library names its own modules.

// Text reaches a terminal only through `text`'s escaping sink (`out!`, `errln!`).
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod cli;

use crewbox::handoff;
use crewbox::text;
use crewbox::unstable::{config, engine, mcp, paths, plugin, provider, redact, team, trust};

fn main() -> std::process::ExitCode {
    // First: when started as the sandbox helper, this runs it and never returns.
    #[cfg(target_os = "linux")]
    crewbox::unstable::sandbox::helper::run_if_helper();
    // The plugin compiler child (`Compiler::Child`), before any parsing.
    if let Some(code) = crewbox::unstable::plugin::compiler_main() {
        return code;
    }
    cli::main()
}

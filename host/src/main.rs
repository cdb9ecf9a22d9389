//! The `crewbox` binary: parse, call the library, map errors to exit codes.
//!
//! The commands (`cli/`, one file per subcommand) run on the library's public API
//! only — [`crewbox::Repository`], [`crewbox::Engine`], [`crewbox::plugins`],
//! [`crewbox::types`] and the other public modules — never on the doc-hidden
//! re-exports of the crate's internal floors, which are the test suite's and the
//! benches'.

// Text reaches a terminal only through `text`'s escaping sink (`out!`, `errln!`).
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod cli;

use crewbox::handoff;
use crewbox::text;

fn main() -> std::process::ExitCode {
    // First: when started as the sandbox helper, this runs it and never returns.
    #[cfg(target_os = "linux")]
    crewbox::entry::run_if_sandbox_helper();
    // The plugin compiler child (`Compiler::Child`), before any parsing.
    if let Some(code) = crewbox::entry::plugin_compiler_main() {
        return code;
    }
    cli::main()
}

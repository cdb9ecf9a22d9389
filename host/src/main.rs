//! The `crewbox` binary: parse, call the library, map errors to exit codes.
//!
//! The commands (`cli/`, one file per subcommand) run on the library's API —
//! [`crewbox::Repository`], [`crewbox::Engine`] and their types — and, for the
//! commands not yet moved onto it (plugin authoring and `validate`), on
//! `crewbox::unstable`, named below as the
//! library names its own modules.

// Text reaches a terminal only through `text`'s escaping sink (`out!`, `errln!`).
#![warn(clippy::print_stdout, clippy::print_stderr)]

mod cli;

use crewbox::handoff;
use crewbox::text;
use crewbox::unstable::{config, engine, plugin};

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

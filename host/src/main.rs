//! The `crewbox` binary: parse, call the library, map errors to exit codes.

fn main() -> std::process::ExitCode {
    // The plugin compiler child (`crewbox::plugin::Compiler::Child`), before any parsing.
    if let Some(code) = crewbox::plugin::compiler_main() {
        return code;
    }
    crewbox::cli::main()
}

//! The `crewbox` binary: parse, call the library, map errors to exit codes.

fn main() -> std::process::ExitCode {
    // First: when started as the sandbox helper, this runs it and never returns.
    #[cfg(target_os = "linux")]
    crewbox::sandbox::helper::run_if_helper();
    // The plugin compiler child (`crewbox::plugin::Compiler::Child`), before any parsing.
    if let Some(code) = crewbox::plugin::compiler_main() {
        return code;
    }
    crewbox::cli::main()
}

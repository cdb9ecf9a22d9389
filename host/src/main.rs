//! The `crewbox` binary: parse, call the library, map errors to exit codes.

fn main() -> std::process::ExitCode {
    // First: when started as the sandbox helper, this runs it and never returns.
    #[cfg(target_os = "linux")]
    crewbox::sandbox::helper::run_if_helper();
    crewbox::cli::main()
}

//! The `crewbox` binary: parse, call the library, map errors to exit codes.

fn main() -> std::process::ExitCode {
    crewbox::cli::main()
}

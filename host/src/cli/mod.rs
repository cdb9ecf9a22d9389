//! One file per subcommand. Each parses its own arguments (clap `Args`) and returns an
//! [`Exit`] code; `main` maps errors to codes.

pub mod handoff;

/// Process exit codes shared by every subcommand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// A check or verdict failed (the command itself worked).
    CheckFailed = 1,
    /// Usage or configuration error.
    Usage = 2,
    /// A plugin faulted (trap, deadline, limit).
    PluginFault = 3,
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e as u8)
    }
}

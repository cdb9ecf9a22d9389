//! The command line's spellings of library choices. The library's enums stay free of
//! clap; each choice here converts into its library value.

/// `--executor`: where a run's agents execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExecutorChoice {
    /// In this process.
    Local,
    /// As tasks on NATS JetStream, run by `crewbox worker` processes.
    Nats,
}

impl From<ExecutorChoice> for crewbox::types::ExecutorKind {
    fn from(c: ExecutorChoice) -> Self {
        match c {
            ExecutorChoice::Local => Self::Local,
            ExecutorChoice::Nats => Self::Nats,
        }
    }
}

/// `team export --format`: what to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportChoice {
    /// A Squad pack (`team.md` rows and charters, edited in place).
    Squad,
    /// A crewbox team file (`.crewbox/teams/NAME.toml`).
    Crewbox,
}

impl From<ExportChoice> for crewbox::types::ExportFormat {
    fn from(c: ExportChoice) -> Self {
        match c {
            ExportChoice::Squad => Self::Squad,
            ExportChoice::Crewbox => Self::Crewbox,
        }
    }
}

//! Teams: named groups of members with charters, run in one of the team modes.
//!
//! A team is defined in a TOML file (see [`file`] and `EXAMPLE.toml`); definitions
//! come from built-in, user and repo sources, higher ones overriding lower ones.

pub mod file;

pub use file::{
    Access, Evaluator, MAX_NAME_LEN, Member, Orchestrator, Team, TeamError, TeamMode, TeamProblem,
    TeamSource, load_dir, load_file, merge_layers, parse_team, valid_name,
};

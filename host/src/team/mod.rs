//! Teams: named groups of members with charters, run in one of the team modes.
//!
//! A team is defined in a TOML file (see [`file`] and `EXAMPLE.toml`) or imported
//! from another tool's role pack — Squad's `.squad/`, Claude Code's `.claude/agents/`
//! ([`pack`]); definitions come from built-in, user and repo sources, higher ones
//! overriding lower ones ([`load`]). What a definition may hold is capped, and every
//! member gets min(requested access, the ceiling of where it came from) ([`limits`]).
//! A team can be written back as a team file or into a Squad pack ([`export`]).

pub mod export;
pub mod file;
pub mod files;
pub mod limits;
pub mod load;
pub mod origin;
pub mod pack;

pub use export::export;
pub use file::{
    Access, MAX_NAME_LEN, Member, SkippedWhat, Team, TeamError, TeamSource, valid_name,
};
pub use limits::TeamPolicy;
pub use load::{Discovered, FindTeamError, PackNote, discover};

/// The control-message target of team `name`'s reflect loop `run` (`crewbox send
/// --team` names the loop running when the message is sent): that loop reads it at
/// the start of its next iteration; a later loop on the team never sees it.
pub fn message_target(name: &str, run: &str) -> String {
    format!("team:{}/{run}", name.to_ascii_lowercase())
}

//! The operator's experience of the CLI, through the real binary: signals, closed
//! pipes, read-side commands in a fresh state directory, one vocabulary of ids and
//! flags, the daemon lock, schedule validation and crewbox's branches.

mod branches;
mod daemon_lock;
mod json;
mod pipes;
mod signals;
mod top;
mod tree;
mod vocab;

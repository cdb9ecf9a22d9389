//! The one way the suite starts the real `crewbox` binary: every run gets its own state,
//! config and XDG state directories (never the user's), the suite's shared plugin cache,
//! and no `RUST_LOG` from the environment that runs the tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where a started `crewbox` keeps its files.
#[derive(Clone, Debug)]
pub struct Homes {
    /// `CREWBOX_STATE_DIR`.
    pub state: PathBuf,
    /// `XDG_CONFIG_HOME` (the user's `crewbox/config.toml` is read there).
    pub config: PathBuf,
    /// `XDG_STATE_HOME`.
    pub xdg_state: PathBuf,
    /// `HOME`, when the test gives one (the user's `~/.claude/agents` is a team source:
    /// never the real one).
    pub home: Option<PathBuf>,
}

impl Homes {
    /// `dir/.state`, `dir/.config`, `dir/.xdg-state`: for a repository that is `dir`.
    pub fn hidden_in(dir: &Path) -> Self {
        Self {
            state: dir.join(".state"),
            config: dir.join(".config"),
            xdg_state: dir.join(".xdg-state"),
            home: None,
        }
    }

    /// `dir/state`, `dir/config`, `dir/xdg-state`, `dir/home`: beside a repository in
    /// `dir/repo`.
    pub fn beside_in(dir: &Path) -> Self {
        Self {
            state: dir.join("state"),
            config: dir.join("config"),
            xdg_state: dir.join("xdg-state"),
            home: Some(dir.join("home")),
        }
    }
}

/// `crewbox ARGS` in `cwd` with `homes`.
pub fn crewbox(cwd: &Path, homes: &Homes, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_crewbox"));
    c.args(args)
        .current_dir(cwd)
        .env("CREWBOX_STATE_DIR", &homes.state)
        .env("XDG_CONFIG_HOME", &homes.config)
        .env("XDG_STATE_HOME", &homes.xdg_state)
        .env("XDG_CACHE_HOME", super::shared_cache_home())
        .env_remove("RUST_LOG");
    if let Some(home) = &homes.home {
        c.env("HOME", home);
    }
    c
}

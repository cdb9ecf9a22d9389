//! `crewbox init`: writes a commented `.crewbox/config.toml` and an example team into
//! the repository (never over an existing file), and says what needs trust.

use std::path::Path;

use anyhow::Context as _;

use super::{Exit, GlobalArgs};
use crate::trust::read::Confined;
use crate::trust::{REPO_CONFIG, REPO_TEAMS, Trust};

/// Arguments of `crewbox init`.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {}

const CONFIG: &str = r#"# crewbox settings for this repository.
#
# They apply only for people who trust this repository (`crewbox trust`), and even then
# only these keys: a repository may select one of the user's providers by name, lower
# quotas, and choose a mode and a dispatcher. Provider definitions, state_dir,
# scheduling, sandbox and plugin grants are always the user's own
# ($XDG_CONFIG_HOME/crewbox/config.toml); here they are ignored with a warning.
# `crewbox config` shows what is in force and where each value came from.

# default_provider = "claude"   # the name of one of the user's [providers.NAME]
# default_mode = "crew"         # auto | single | swarm | crew
# dispatcher = "heuristic"      # a built-in, or a .wasm in this repository (relative to .crewbox/)
# max_concurrent = 2            # only lowers the user's value
# timezone = "UTC"              # default zone of cron jobs

[quotas]                        # each only lowers the user's value (defaults in the README)
# max_turns = 20
# max_tokens = 200000
# wall_time_s = 600
# max_cost = 1.0
"#;

const TEAM: &str = r#"# An example team: `crewbox run "PROMPT" --team example`.
# Teams load even in an untrusted repository, but then every member is read-only and
# the team picks no provider, model or validator. The full format is in the README's
# Teams section.
mode = "orchestrate"
shared_context = "Run the tests before claiming a change works."

[[members]]
name = "reviewer"
role = "code reviewer"
charter = "Reads the change and points out bugs and missing tests."
access = "read-only"

[[members]]
name = "implementer"
role = "implementer"
charter = "Makes the change in small, tested steps."
access = "full"                  # read-only until the repository is trusted
"#;

/// Writes the files that do not exist yet.
pub fn run(g: &GlobalArgs, _args: InitArgs) -> anyhow::Result<Exit> {
    let root = g.repo_root()?;
    // Trust covers `.crewbox/` as it was: files the user writes here are the user's
    // own change, so a trusted repository stays trusted with them.
    let trusted = Trust::of(&root).0.is_trusted();
    let mut wrote = false;
    let files = [
        (Path::new(REPO_CONFIG).to_path_buf(), CONFIG),
        (Path::new(REPO_TEAMS).join("example.toml"), TEAM),
    ];
    for (rel, text) in files {
        let path = root.path().join(&rel);
        if path.symlink_metadata().is_ok() {
            outln!("kept     {} (exists)", rel.display());
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        // `.crewbox/` may be a symlink a repository ships: never write outside it.
        let parent = rel.parent().unwrap_or(Path::new(""));
        Confined::new(root.path())
            .map_err(anyhow::Error::from)
            .and_then(|c| Ok(c.dir(parent)?))
            .with_context(|| format!("refusing to write {}", rel.display()))?;
        // create_new: never follow or replace something that appeared meanwhile.
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()))
            .with_context(|| format!("cannot write {}", path.display()))?;
        outln!("wrote    {}", rel.display());
        wrote = true;
    }
    if trusted && wrote {
        crate::trust::TrustStore::user()?.trust(root.path(), None)?;
    }
    if trusted {
        outln!("\nThis repository is trusted: its config.toml applies (the keys it lists).");
    } else {
        outln!(
            "\nNeeds trust: .crewbox/config.toml applies only after `crewbox trust` (for each \
             user, on each machine); until then its teams load with read-only members."
        );
    }
    Ok(Exit::Ok)
}

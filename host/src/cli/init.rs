//! `crewbox init`: writes a commented `.crewbox/config.toml` and an example team into
//! the repository (never over an existing file), and says what needs trust.

use super::{Exit, GlobalArgs};
use crewbox::user_trust::{Written, init_repository};

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
    let done = init_repository(&root, CONFIG, TEAM)?;
    for (rel, written) in &done.files {
        match written {
            Written::Wrote => outln!("wrote    {}", rel.display()),
            Written::Kept => outln!("kept     {} (exists)", rel.display()),
        }
    }
    let trusted = done.trusted;
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

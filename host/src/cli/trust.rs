//! `crewbox trust [--list | --revoke] [--json]`: which repositories the user trusts.
//! Trust is stored outside every repository (see `trust/store.rs`) and keyed by the
//! repository's canonical root; `--repo DIR` picks another repository than the
//! current directory's.

use serde_json::json;

use super::{Exit, GlobalArgs};
use crate::trust::{TrustStore, rules};

/// Arguments of `crewbox trust`.
#[derive(Debug, Clone, clap::Args)]
pub struct TrustArgs {
    /// List the trusted repositories instead.
    #[arg(long, conflicts_with = "revoke")]
    pub list: bool,
    /// Stop trusting the repository.
    #[arg(long)]
    pub revoke: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Trusts, revokes or lists.
pub fn run(g: &GlobalArgs, args: TrustArgs) -> anyhow::Result<Exit> {
    let store = TrustStore::user()?;
    if args.list {
        let (records, problems) = store.list()?;
        for p in &problems {
            eprintln!("crewbox: warning: {p}");
        }
        if args.json {
            println!("{}", serde_json::to_string_pretty(&records)?);
        } else if records.is_empty() {
            println!("no trusted repositories (trust one with `crewbox trust` inside it)");
        } else {
            for r in &records {
                println!("{}  (since {})", r.root.display(), r.trusted_at);
            }
        }
        return Ok(Exit::Ok);
    }
    let root = g.repo_root()?;
    if args.revoke {
        let was = store.revoke(root.path())?;
        if args.json {
            println!(
                "{}",
                json!({"root": root.path(), "trusted": false, "was_trusted": was})
            );
        } else if was {
            println!(
                "no longer trusted: {}\nits .crewbox/config.toml and plugins are ignored again; its teams run read-only",
                root.path().display()
            );
        } else {
            println!("{} was not trusted", root.path().display());
        }
        return Ok(Exit::Ok);
    }
    let record = store.trust(root.path())?;
    if args.json {
        println!(
            "{}",
            json!({"root": record.root, "trusted": true, "trusted_at": record.trusted_at})
        );
        return Ok(Exit::Ok);
    }
    let honoured: Vec<&str> = rules::REPO_KEYS
        .iter()
        .filter(|r| r.rule != rules::RepoRule::UserOnly)
        .map(|r| r.key)
        .collect();
    println!(
        "trusted: {}\n\
         now in force from .crewbox/: config.toml ({}), plugins/, and its teams' own access, \
         providers (yours, by name) and validators.\n\
         still never taken from a repository: provider definitions, state_dir, scheduling, \
         sandbox, plugin grants, telemetry — see `crewbox config`. Undo with `crewbox trust --revoke`.",
        record.root.display(),
        honoured.join(", ")
    );
    Ok(Exit::Ok)
}

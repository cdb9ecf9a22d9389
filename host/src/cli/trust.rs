//! `crewbox trust [--list | --revoke] [--json]`: which repositories the user trusts.
//! Trust is stored outside every repository (the user's state directory) and keyed by the
//! repository's canonical root; `--repo DIR` picks another repository than the
//! current directory's.

use serde_json::json;

use super::{Exit, GlobalArgs};
use crewbox::user_trust::{Standing, UserTrust, repo_config_keys};
use crewbox::{Access, types::MCP_PROJECT_FILE};

/// Arguments of `crewbox trust`.
#[derive(Debug, Clone, clap::Args)]
pub struct TrustArgs {
    /// List the trusted repositories instead.
    #[arg(long, conflicts_with = "revoke")]
    pub list: bool,
    /// Stop trusting the repository.
    #[arg(long)]
    pub revoke: bool,
    /// The most members of this repository's imported role packs (Squad, Claude Code
    /// subagents) may do: `read-only` (the default) or `full`. Kept by a later
    /// `crewbox trust` without it; gone with `--revoke`.
    #[arg(long, value_name = "ACCESS", value_parser = parse_access, conflicts_with_all = ["list", "revoke"])]
    pub pack_access: Option<Access>,
    /// Approve this server of the repository's `.mcp.json` (repeatable): agents may then
    /// be granted it, as it is defined now (a changed definition needs approving again).
    #[arg(long = "mcp", value_name = "NAME", conflicts_with_all = ["list", "revoke"])]
    pub mcp: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_access(s: &str) -> Result<Access, String> {
    Access::parse(s).ok_or_else(|| format!("`{s}` is not an access level (read-only or full)"))
}

/// Trusts, revokes or lists.
pub fn run(g: &GlobalArgs, args: TrustArgs) -> anyhow::Result<Exit> {
    let store = UserTrust::open()?;
    if args.list {
        let (repos, problems) = store.list()?;
        for p in &problems {
            errln!("crewbox: warning: {p}");
        }
        if args.json {
            let records: Vec<_> = repos.iter().map(|r| &r.record).collect();
            outln!("{}", serde_json::to_string_pretty(&records)?);
        } else if repos.is_empty() {
            outln!("no trusted repositories (trust one with `crewbox trust` inside it)");
        } else {
            for repo in &repos {
                let r = &repo.record;
                let note = match &repo.standing {
                    Ok(Standing::Changed(_, changes)) => format!(
                        " — its crewbox files changed since ({}): not trusted until `crewbox trust` again",
                        changes.join(", ")
                    ),
                    Ok(Standing::Unrecorded(_)) => {
                        " — trusted by an earlier crewbox: run `crewbox trust` there again".into()
                    }
                    Ok(_) => String::new(),
                    Err(e) => format!(" — {e}"),
                };
                outln!("{}  (since {}){note}", r.root.display(), r.trusted_at);
            }
        }
        return Ok(Exit::Ok);
    }
    let root = g.repo_root()?;
    if args.revoke {
        let was = store.revoke(&root)?;
        if args.json {
            outln!(
                "{}",
                json!({"root": crewbox::serde_path::json(&root), "trusted": false, "was_trusted": was})
            );
        } else if was {
            outln!(
                "no longer trusted: {}\nits .crewbox/config.toml and plugins are ignored again; its teams run read-only",
                root.display()
            );
        } else {
            outln!("{} was not trusted", root.display());
        }
        return Ok(Exit::Ok);
    }
    let trusted = store.trust(&root, args.pack_access, &args.mcp)?;
    let record = trusted.record;
    for server in &trusted.approved {
        errln!("crewbox: approving `{}`: {}", server.name, server.summary);
        if !args.json {
            outln!(
                "approved MCP server `{}` of {MCP_PROJECT_FILE}",
                server.name
            );
        }
    }
    let packs = record.pack_access.unwrap_or(Access::ReadOnly);
    if args.json {
        outln!(
            "{}",
            json!({"root": record.root, "trusted": true, "trusted_at": record.trusted_at,
                   "pack_access": record.pack_access})
        );
        return Ok(Exit::Ok);
    }
    let honoured = repo_config_keys();
    outln!(
        "trusted: {}\n\
         this covers .crewbox/ as it is now ({} file(s)); if any of it changes (a merge, a \
         pull, a checkout), the repository is untrusted again until you run `crewbox trust` \
         again.\n\
         now in force from .crewbox/: config.toml ({}), plugins/, and its teams' own access, \
         providers (yours, by name) and validators.\n\
         still never taken from a repository: provider definitions, state_dir, scheduling, \
         sandbox, plugin grants, telemetry — see `crewbox config`. Undo with `crewbox trust --revoke`.\n\
         imported packs (.squad/, .ai-team/, .claude/agents/): members {}",
        record.root.display(),
        record.files.as_ref().map_or(0, |f| f.len()),
        honoured.join(", "),
        match record.pack_access {
            Some(a) => format!("at most `{a}` (this repository's trust record)"),
            None => format!(
                "at most your `[packs] max_access` (default `{packs}`); raise it here with \
                 `crewbox trust --pack-access full`"
            ),
        }
    );
    Ok(Exit::Ok)
}

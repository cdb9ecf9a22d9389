//! `crewbox trust [--list | --revoke] [--json]`: which repositories the user trusts.
//! Trust is stored outside every repository (see `trust/store.rs`) and keyed by the
//! repository's canonical root; `--repo DIR` picks another repository than the
//! current directory's.

use serde_json::json;

use super::{Exit, GlobalArgs};
use crate::trust::{TrustStore, rules};
use crewbox::Access;

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

/// The digests of the `.mcp.json` servers named, each checked to be a usable definition.
fn mcp_approvals(
    root: &std::path::Path,
    names: &[String],
) -> anyhow::Result<Vec<(String, String)>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let file = crate::mcp::project::FILE;
    let confined = crate::trust::read::Confined::new(root)?;
    let text = confined
        .read(
            std::path::Path::new(file),
            crate::trust::read::MAX_FILE_BYTES,
        )
        .and_then(|b| b.into_text(&root.join(file), crate::trust::read::MAX_FILE_BYTES))
        .map_err(|e| anyhow::anyhow!("cannot read {file}: {e}"))?;
    let parsed = crate::mcp::project::parse(&text).map_err(anyhow::Error::msg)?;
    let mut out = Vec::new();
    for name in names {
        let Some((_, def, digest)) = parsed.iter().find(|(n, _, _)| n == name) else {
            let known: Vec<&str> = parsed.iter().map(|(n, _, _)| n.as_str()).collect();
            anyhow::bail!(
                "{file} defines no server `{name}` ({})",
                if known.is_empty() {
                    "it defines none".to_owned()
                } else {
                    known.join(", ")
                }
            );
        };
        let server = crate::mcp::project::preview(name, def)
            .map_err(|e| anyhow::anyhow!("{file}: server `{name}`: {e}"))?;
        errln!("crewbox: approving `{name}`: {}", server.summary());
        out.push((name.clone(), digest.clone()));
    }
    Ok(out)
}

fn parse_access(s: &str) -> Result<Access, String> {
    Access::parse(s).ok_or_else(|| format!("`{s}` is not an access level (read-only or full)"))
}

/// Trusts, revokes or lists.
pub fn run(g: &GlobalArgs, args: TrustArgs) -> anyhow::Result<Exit> {
    let store = TrustStore::user()?;
    if args.list {
        let (records, problems) = store.list()?;
        for p in &problems {
            errln!("crewbox: warning: {p}");
        }
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&records)?);
        } else if records.is_empty() {
            outln!("no trusted repositories (trust one with `crewbox trust` inside it)");
        } else {
            for r in &records {
                let note = match store.standing(&r.root) {
                    Ok(crate::trust::Standing::Changed(_, changes)) => format!(
                        " — its crewbox files changed since ({}): not trusted until `crewbox trust` again",
                        changes.join(", ")
                    ),
                    Ok(crate::trust::Standing::Unrecorded(_)) => {
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
        let was = store.revoke(root.path())?;
        if args.json {
            outln!(
                "{}",
                json!({"root": root.path(), "trusted": false, "was_trusted": was})
            );
        } else if was {
            outln!(
                "no longer trusted: {}\nits .crewbox/config.toml and plugins are ignored again; its teams run read-only",
                root.path().display()
            );
        } else {
            outln!("{} was not trusted", root.path().display());
        }
        return Ok(Exit::Ok);
    }
    let approve = mcp_approvals(root.path(), &args.mcp)?;
    let record = store.trust_with_mcp(root.path(), args.pack_access, &approve)?;
    for (name, _) in &approve {
        if !args.json {
            outln!(
                "approved MCP server `{name}` of {}",
                crate::mcp::project::FILE
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
    let honoured: Vec<&str> = rules::REPO_KEYS
        .iter()
        .filter(|r| r.rule != rules::RepoRule::UserOnly)
        .map(|r| r.key)
        .collect();
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

//! `crewbox branches [--merged] [--prune] [--force] [--json]`: the branches crewbox
//! made (`crewbox/…`), and removing them. Unmerged work is only removed with `--force`;
//! a branch checked out anywhere is never removed.

use super::{Context, Exit};
use crewbox::types::BranchInfo;

/// Arguments of `crewbox branches`.
#[derive(Debug, Clone, clap::Args)]
pub struct BranchesArgs {
    /// Only branches whose work is already in HEAD.
    #[arg(long)]
    pub merged: bool,
    /// Remove the listed branches (merged ones; unmerged ones too with `--force`).
    #[arg(long)]
    pub prune: bool,
    /// With `--prune`: also remove branches whose work is not merged.
    #[arg(long, requires = "prune")]
    pub force: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// What happened to a branch.
#[derive(serde::Serialize)]
struct Row<'a> {
    #[serde(flatten)]
    branch: &'a BranchInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    pruned: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kept_because: Option<&'static str>,
}

/// Lists (and with `--prune` removes) crewbox's branches.
pub async fn run(ctx: &Context, args: BranchesArgs) -> anyhow::Result<Exit> {
    let all = ctx.branches().await?;
    let shown: Vec<&BranchInfo> = all.iter().filter(|b| !args.merged || b.merged).collect();
    let mut rows = Vec::with_capacity(shown.len());
    let mut failed = false;
    for b in shown {
        let (pruned, kept_because) = if !args.prune {
            (None, None)
        } else if b.checked_out {
            (Some(false), Some("checked out"))
        } else if !b.merged && !args.force {
            (Some(false), Some("unmerged work (use --force)"))
        } else {
            match ctx.remove_branch(b).await {
                Ok(()) => (Some(true), None),
                Err(e) => {
                    errln!("crewbox: cannot remove {}: {e}", b.name);
                    failed = true;
                    (Some(false), Some("could not be removed"))
                }
            }
        };
        rows.push(Row {
            branch: b,
            pruned,
            kept_because,
        });
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else if rows.is_empty() {
        outln!(
            "no crewbox branches{}",
            if args.merged { " merged into HEAD" } else { "" }
        );
    } else {
        for r in &rows {
            let b = r.branch;
            let state = match (r.pruned, r.kept_because) {
                (Some(true), _) => "removed".to_owned(),
                (Some(false), Some(why)) => format!("kept: {why}"),
                _ if b.checked_out => "checked out".to_owned(),
                _ if b.merged => "merged".to_owned(),
                _ => "unmerged".to_owned(),
            };
            let subject: String = b.subject.chars().take(60).collect();
            outln!(
                "{:<48} {} {:<30} {}",
                b.name,
                &b.tip[..b.tip.len().min(10)],
                state,
                crate::text::escape(&subject)
            );
        }
    }
    Ok(if failed { Exit::CheckFailed } else { Exit::Ok })
}

//! `crewbox config [--json]`: the configuration in force, each value with its source,
//! every repository setting that was ignored or clamped and why, and the table of
//! what a repository may set.

use serde_json::json;

use super::{Context, Exit};
use crate::config::effective::repo_rules_text;

/// Arguments of `crewbox config`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Prints the configuration in force.
pub fn run(ctx: Context, args: ConfigArgs) -> anyhow::Result<Exit> {
    let cfg = ctx.config();
    let env = |var: &str| std::env::var(var).ok();
    // What `run` would use without --provider (or why it cannot run).
    let choice = cfg.choose_provider(None, None, &env);
    if args.json {
        let mut out = cfg.to_json();
        out["repository"] = crate::paths::serde_path::json(ctx.root());
        out["state_dir"] = crate::paths::serde_path::json(ctx.state_dir());
        out["run_provider"] = match &choice {
            Ok(c) => json!({"name": c.name, "source": c.chosen_by}),
            Err(e) => json!({"name": null, "error": e.to_string()}),
        };
        out["trust_error"] = json!(ctx.trust_error());
        out["mcp"] = json!({
            "servers": cfg.mcp.servers.values().map(|s| json!({
                "name": s.name, "transport": s.kind(), "source": s.source.as_str(),
                "summary": s.summary(), "read_only": s.read_only,
            })).collect::<Vec<_>>(),
            "default": cfg.mcp.default,
            "repository": cfg.repo_mcp,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(Exit::Ok);
    }
    outln!(
        "repository: {} ({})",
        ctx.root().display(),
        cfg.trust.as_str()
    );
    if let Some(e) = ctx.trust_error() {
        // An unreadable store, or files changed since the user trusted it.
        outln!("            {e}");
    }
    outln!("state:      {}", ctx.state_dir().display());
    match &choice {
        Ok(c) => outln!("provider:   {} (chosen by {})", c.name, c.chosen_by),
        Err(e) => outln!("provider:   none: {e}"),
    }
    outln!("\nsettings:");
    for s in cfg.settings() {
        outln!(
            "  {:<24} = {:<40} # {}",
            s.key,
            s.value.to_string(),
            s.source
        );
    }
    if !cfg.mcp.servers.is_empty() || !cfg.repo_mcp.is_empty() {
        outln!("\nMCP servers:");
        for s in cfg.mcp.servers.values() {
            outln!(
                "  {:<16} {:<10} {}{}",
                s.name,
                s.source.as_str(),
                s.summary(),
                if cfg.mcp.default.contains(&s.name) {
                    " (default)"
                } else {
                    ""
                }
            );
        }
        for r in &cfg.repo_mcp {
            if r.state == crate::mcp::project::RepoServerState::Approved {
                continue;
            }
            outln!(
                "  {:<16} {:<10} {}{}",
                r.name,
                crate::mcp::project::FILE,
                r.state.describe(),
                r.error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            );
        }
    }
    if !cfg.ignored.is_empty() {
        outln!("\nrepository settings not applied:");
        for i in &cfg.ignored {
            outln!("  {i}");
        }
    }
    outln!("\nwhat a repository's .crewbox/config.toml may set (when trusted):");
    out!("{}", repo_rules_text());
    if !cfg.trust.is_trusted() {
        outln!(
            "\nThis repository is not trusted: its config and plugins are ignored and its teams run \
             read-only. Trust it with `crewbox trust`."
        );
    }
    Ok(Exit::Ok)
}

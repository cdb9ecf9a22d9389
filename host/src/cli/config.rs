//! `crewbox config [--json]`: the configuration in force, each value with its source,
//! every repository setting that was ignored or clamped and why, and the table of
//! what a repository may set.

use serde_json::json;

use super::{Context, Exit};
use crewbox::serde_path;
use crewbox::types::{MCP_PROJECT_FILE, RepoKey, RepoServerState};

/// Arguments of `crewbox config`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfigArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Prints the configuration in force.
pub fn run(ctx: Context, args: ConfigArgs) -> anyhow::Result<Exit> {
    let cfg = ctx.config_in_force();
    if args.json {
        let out = json!({
            "trust": cfg.trust,
            "files": cfg.files.iter().map(|p| serde_path::json(p)).collect::<Vec<_>>(),
            "settings": cfg.settings,
            "ignored": cfg.ignored,
            "repo_rules": cfg.repo_rules,
            "repository": serde_path::json(&cfg.repository),
            "state_dir": serde_path::json(&cfg.state_dir),
            "run_provider": match &cfg.run_provider {
                Ok(c) => json!({"name": c.name, "source": c.chosen_by}),
                Err(e) => json!({"name": null, "error": e.to_string()}),
            },
            "trust_error": cfg.trust_error,
            "mcp": {
                "servers": cfg.mcp_servers.iter().map(|s| json!({
                    "name": s.name, "transport": s.transport.as_str(), "source": s.source.as_str(),
                    "summary": s.summary, "read_only": s.read_only,
                })).collect::<Vec<_>>(),
                "default": cfg.mcp_default,
                "repository": cfg.repo_mcp,
            },
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(Exit::Ok);
    }
    outln!(
        "repository: {} ({})",
        cfg.repository.display(),
        cfg.trust.as_str()
    );
    if let Some(e) = &cfg.trust_error {
        // An unreadable store, or files changed since the user trusted it.
        outln!("            {e}");
    }
    outln!("state:      {}", cfg.state_dir.display());
    match &cfg.run_provider {
        Ok(c) => outln!("provider:   {} (chosen by {})", c.name, c.chosen_by),
        Err(e) => outln!("provider:   none: {e}"),
    }
    outln!("\nsettings:");
    // Keys aligned to the longest one (`quotas.max_children_per_run`).
    let key_width = cfg.settings.iter().map(|s| s.key.len()).max().unwrap_or(0);
    for s in &cfg.settings {
        outln!(
            "  {:<key_width$} = {:<40} # {}",
            s.key,
            s.value.to_string(),
            s.source
        );
    }
    if !cfg.mcp_servers.is_empty() || !cfg.repo_mcp.is_empty() {
        outln!("\nMCP servers:");
        for s in &cfg.mcp_servers {
            outln!(
                "  {:<16} {:<10} {}{}",
                s.name,
                s.source.as_str(),
                s.summary,
                if cfg.mcp_default.contains(&s.name) {
                    " (default)"
                } else {
                    ""
                }
            );
        }
        for r in &cfg.repo_mcp {
            if r.state == RepoServerState::Approved {
                continue;
            }
            outln!(
                "  {:<16} {:<10} {}{}",
                r.name,
                MCP_PROJECT_FILE,
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
    out!("{}", rules_text(&cfg.repo_rules));
    if !cfg.trust.is_trusted() {
        outln!(
            "\nThis repository is not trusted: its config and plugins are ignored and its teams run \
             read-only. Trust it with `crewbox trust`."
        );
    }
    Ok(Exit::Ok)
}

/// The table of what a repository may set, one row a line.
fn rules_text(rules: &[RepoKey]) -> String {
    let mut out = String::new();
    for r in rules {
        out.push_str(&format!(
            "  {:<18} {:<15} {}\n",
            r.key,
            r.rule.as_str(),
            r.why
        ));
    }
    out
}

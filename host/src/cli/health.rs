//! `crewbox health`: the scheduler, circuit breakers, agents, the process sandbox and
//! the store at a glance.

use chrono::DateTime;
use serde_json::json;

use super::{Context, Exit};
use crewbox::types::SCHEMA_VERSION;

/// Arguments of `crewbox health`.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Also probe this provider's server (llama.cpp's `/props`: tool support of its
    /// chat template, context window, slots); exit 1 when its template renders no tools.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
}

/// Prints the health report.
pub async fn run(ctx: Context, args: HealthArgs) -> anyhow::Result<Exit> {
    // A read-side command: a state directory nothing has run in stays empty.
    let facts = ctx.health().await?;
    let (jobs, counts) = (&facts.jobs, facts.agents);
    let (unfinished, interrupted, size) = (facts.unfinished, facts.interrupted, facts.size_bytes);
    let active = facts.active_jobs();
    let next_fire = facts
        .next_fire()
        .and_then(DateTime::from_timestamp_millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    // Breakers live in the memory of the process that calls providers; this command's
    // own process has made no calls, so the snapshot is per process by nature.
    let breakers = ctx.breakers();
    let store_path = facts.store.clone();
    let sandbox = ctx.probe_sandbox().await;
    let probed = match &args.provider {
        Some(name) => {
            let env = |var: &str| std::env::var(var).ok();
            let probe = ctx.probe_provider(name, &env).await?;
            Some(super::health_provider::render(&probe))
        }
        None => None,
    };
    let exit = match &probed {
        Some(p) if p.failed => Exit::CheckFailed,
        _ => Exit::Ok,
    };
    let mut report = json!({
        "scheduler": {
            "enabled": ctx.config().scheduling,
            "jobs": jobs.len(),
            "active_jobs": active,
            "next_fire": next_fire,
            "timezone": ctx.config().timezone,
        },
        "breakers": {
            "scope": "process",
            "note": "circuit breakers are kept per process; this shows the breakers of this crewbox process only",
            "circuits": breakers,
        },
        "agents": { "running": counts.running, "queued": counts.queued },
        "runs": { "unfinished": unfinished, "interrupted": interrupted },
        "sandbox": sandbox,
        "store": {
            "path": store_path,
            "exists": store_path.is_some(),
            "size_bytes": size,
            "schema_version": SCHEMA_VERSION,
        },
        "version": env!("CARGO_PKG_VERSION"),
    });
    if let Some(p) = &probed {
        report["provider"] = p.json.clone();
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(exit);
    }
    outln!(
        "scheduler: {} · {} job(s), {} active · next fire {}",
        if ctx.config().scheduling {
            "enabled"
        } else {
            "disabled"
        },
        jobs.len(),
        active,
        next_fire.as_deref().unwrap_or("-")
    );
    outln!(
        "breakers (this process only): {}",
        if breakers.is_empty() {
            "none tripped or used".to_owned()
        } else {
            breakers
                .iter()
                .map(|b| format!("{} {:?}", b.key, b.state))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    outln!(
        "agents: {} running, {} queued",
        counts.running,
        counts.queued
    );
    outln!(
        "runs: {unfinished} unfinished, {interrupted} interrupted{}",
        if interrupted > 0 {
            " (crewbox resume finishes them)"
        } else {
            ""
        }
    );
    outln!("sandbox: {}", sandbox.render_text());
    match &store_path {
        Some(path) => outln!(
            "store: {} ({} bytes, schema v{})",
            path.display(),
            size,
            SCHEMA_VERSION
        ),
        None => outln!("store: none yet (nothing has run in this state directory)"),
    }
    outln!("version: {}", env!("CARGO_PKG_VERSION"));
    for line in probed.iter().flat_map(|p| &p.lines) {
        outln!("{line}");
    }
    Ok(exit)
}

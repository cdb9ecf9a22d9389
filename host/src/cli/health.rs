//! `crewbox health`: the scheduler, circuit breakers, agents, the process sandbox and
//! the store at a glance.

use chrono::DateTime;
use serde_json::json;

use super::{Context, Exit};
use crate::provider::breaker::Breakers;
use crate::store::SCHEMA_VERSION;

/// Arguments of `crewbox health`.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Prints the health report.
pub async fn run(ctx: Context, args: HealthArgs) -> anyhow::Result<Exit> {
    let store = ctx.open_store()?;
    let jobs = store.schedules().await?;
    let active = jobs
        .iter()
        .filter(|j| !j.paused && j.next_fire.is_some())
        .count();
    let next_fire = jobs
        .iter()
        .filter(|j| !j.paused)
        .filter_map(|j| j.next_fire)
        .min()
        .and_then(DateTime::from_timestamp_millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    // Breakers live in the memory of the process that calls providers; this command's
    // own process has made no calls, so the snapshot is per process by nature.
    let breakers = Breakers::default().snapshot();
    let counts = store.agent_counts().await?;
    let unfinished = store.unfinished_runs().await?.len();
    let interrupted = store.orphaned_runs().await?.len();
    let size = std::fs::metadata(store.path())
        .map(|m| m.len())
        .unwrap_or(0);
    let sandbox = match ctx.sandbox() {
        Ok(sandbox) => sandbox.probe().await,
        Err(e) => crate::sandbox::ProbeReport::failed(e.to_string()),
    };
    let report = json!({
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
            "path": store.path(),
            "size_bytes": size,
            "schema_version": SCHEMA_VERSION,
        },
        "version": env!("CARGO_PKG_VERSION"),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(Exit::Ok);
    }
    println!(
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
    println!(
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
    println!(
        "agents: {} running, {} queued",
        counts.running, counts.queued
    );
    println!(
        "runs: {unfinished} unfinished, {interrupted} interrupted{}",
        if interrupted > 0 {
            " (crewbox resume finishes them)"
        } else {
            ""
        }
    );
    println!("sandbox: {}", sandbox.render_text());
    println!(
        "store: {} ({} bytes, schema v{})",
        store.path().display(),
        size,
        SCHEMA_VERSION
    );
    println!("version: {}", env!("CARGO_PKG_VERSION"));
    Ok(Exit::Ok)
}

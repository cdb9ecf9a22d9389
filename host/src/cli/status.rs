//! `crewbox status [RUN_ID]`.

use serde_json::json;

use super::{Context, Exit};

/// Arguments of `crewbox status`.
#[derive(Debug, Clone, clap::Args)]
pub struct StatusArgs {
    /// A run id (or unique prefix): print that run's report.
    pub run: Option<String>,
    /// How many recent runs to list.
    #[arg(long, default_value_t = 10)]
    pub limit: u32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Prints recent runs or one run's report. Works while another process is writing.
pub async fn run(ctx: Context, args: StatusArgs) -> anyhow::Result<Exit> {
    if let Some(id) = &args.run {
        let Some(report) = ctx.report(id).await? else {
            eprintln!("crewbox: no run matches `{id}`");
            return Ok(Exit::Usage);
        };
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", report.render_text());
        }
        return Ok(Exit::Ok);
    }
    let status = ctx.status(args.limit).await?;
    let (runs, counts) = (&status.runs, status.agents);
    if args.json {
        let runs: Vec<_> = runs
            .iter()
            .map(|r| {
                json!({
                    "run_id": r.id, "mode": r.mode, "status": r.status, "exit_reason": r.exit_reason,
                    "prompt": r.prompt, "created_at": r.created_at, "finished_at": r.finished_at,
                    "interrupted": r.is_interrupted(),
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "runs": runs, "agents": counts, "store": status.store })
            )?
        );
    } else {
        println!(
            "agents: {} running, {} queued   store: {}",
            counts.running,
            counts.queued,
            status.store.display()
        );
        for r in runs {
            let prompt: String = r.prompt.chars().take(60).collect();
            let status = if r.is_interrupted() {
                "interrupted"
            } else {
                r.status.as_str()
            };
            println!(
                "{}  {:<11} {:<11} {}",
                r.id,
                r.mode.as_str(),
                status,
                prompt.replace('\n', " ")
            );
        }
    }
    Ok(Exit::Ok)
}

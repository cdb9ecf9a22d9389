//! `crewbox events [--run ID] [--follow]`: the event log as NDJSON.

use std::io::Write;
use std::time::Duration;

use super::{Context, Exit};

/// Arguments of `crewbox events`.
#[derive(Debug, Clone, clap::Args)]
pub struct EventsArgs {
    /// Only this run's events (id or unique prefix).
    #[arg(long)]
    pub run: Option<String>,
    /// Keep printing new events as they are stored.
    #[arg(long)]
    pub follow: bool,
    /// Start after this sequence number.
    #[arg(long, default_value_t = 0)]
    pub after: i64,
}

/// Prints events, one JSON object per line.
pub async fn run(ctx: Context, args: EventsArgs) -> anyhow::Result<Exit> {
    let log = ctx.events()?;
    let run = match &args.run {
        Some(id) => match log.find_run(id).await? {
            Some(r) => Some(r),
            None => {
                eprintln!("crewbox: no run matches `{id}`");
                return Ok(Exit::Usage);
            }
        },
        None => None,
    };
    let mut after = args.after;
    let stdout = std::io::stdout();
    loop {
        let batch = log.after(run.as_ref(), after, 1000).await?;
        {
            let mut out = stdout.lock();
            for e in &batch {
                serde_json::to_writer(&mut out, e)?;
                out.write_all(b"\n")?;
                after = e.seq;
            }
            out.flush()?;
        }
        if batch.len() == 1000 {
            continue;
        }
        if !args.follow {
            return Ok(Exit::Ok);
        }
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(Exit::Ok),
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
        }
    }
}

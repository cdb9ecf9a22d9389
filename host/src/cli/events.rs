//! `crewbox events [--run ID] [--follow]`: the event log as NDJSON.

use std::io::Write;
use std::time::Duration;

use super::{Context, Exit};

/// Arguments of `crewbox events`.
#[derive(Debug, Clone, clap::Args)]
pub struct EventsArgs {
    /// Only this run's events (id or unique prefix).
    pub run: Option<String>,
    /// The same as the positional RUN (the older spelling).
    #[arg(
        long = "run",
        id = "run_flag",
        value_name = "RUN",
        conflicts_with = "run",
        hide = true
    )]
    pub run_flag: Option<String>,
    /// Keep printing new events as they are stored.
    #[arg(long)]
    pub follow: bool,
    /// Start after this sequence number.
    #[arg(long, default_value_t = 0)]
    pub after: i64,
}

/// Prints events, one JSON object per line.
pub async fn run(ctx: Context, args: EventsArgs) -> anyhow::Result<Exit> {
    let Some(watch) = ctx.watch().await? else {
        return Ok(match args.run.or(args.run_flag) {
            Some(id) => {
                errln!("crewbox: no run matches `{id}` (nothing has run here yet)");
                Exit::Usage
            }
            None => Exit::Ok,
        });
    };
    let run = match args.run.or(args.run_flag) {
        Some(id) => match watch.run(&id).await {
            Ok(r) => Some(r.id),
            Err(e) if e.is_usage() => {
                errln!("crewbox: {e}");
                return Ok(Exit::Usage);
            }
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    let mut after = args.after;
    // NDJSON through the escaping sink: its escapes are JSON escapes of the same text.
    let mut out = crate::text::stdout();
    loop {
        let batch = watch.page(run.as_ref(), after, 1000).await?;
        for e in &batch {
            serde_json::to_writer(&mut out, e)?;
            out.write_all(b"\n")?;
            after = e.seq;
        }
        out.flush()?;
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

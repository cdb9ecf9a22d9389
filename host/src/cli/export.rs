//! `crewbox export RUN --cassette FILE`: writes a run's recording — its request and
//! every model exchange, redacted, no key — as a cassette a `kind = "replay"` provider
//! answers from.

use std::path::PathBuf;

use crate::replay;

use super::{Context, Exit};

/// Arguments of `crewbox export`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// The run (id or unique prefix).
    pub run: String,
    /// Where to write the cassette (JSON).
    #[arg(long, value_name = "FILE")]
    pub cassette: PathBuf,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Writes the cassette and says how many model calls it holds.
pub async fn run(ctx: Context, args: ExportArgs) -> anyhow::Result<Exit> {
    let store = ctx.existing_store()?;
    let run = match super::lookup::run(&store, &args.run).await? {
        Ok(run) => run,
        Err(exit) => return Ok(exit),
    };
    let cassette = match replay::cassette(&store, &run).await {
        Ok(c) => c,
        Err(e) => {
            errln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
    };
    let calls = cassette.exchanges.len();
    replay::save(cassette, args.cassette.clone()).await?;
    if args.json {
        let out = serde_json::json!({
            "run": run.id,
            "cassette": crate::paths::serde_path::json(&args.cassette),
            "model_calls": calls,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        outln!(
            "wrote {} model calls of run {} to {}",
            calls,
            run.id,
            args.cassette.display()
        );
    }
    Ok(Exit::Ok)
}

//! `crewbox export RUN --cassette FILE`: writes a run's recording — its request and
//! every model exchange, redacted, no key — as a cassette a `kind = "replay"` provider
//! answers from.

use std::path::PathBuf;

use crewbox::RecordingError;

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
    let exported = match ctx.export_cassette(&args.run, args.cassette.clone()).await {
        Ok(e) => e,
        Err(RecordingError::Run(e)) if !e.is_usage() => return Err(e.into()),
        Err(RecordingError::Write(e)) => return Err(e.into()),
        Err(e) => {
            errln!("crewbox: {e}");
            return Ok(Exit::Usage);
        }
    };
    let (run, calls) = (exported.run, exported.model_calls);
    if args.json {
        let out = serde_json::json!({
            "run": run,
            "cassette": crewbox::serde_path::json(&args.cassette),
            "model_calls": calls,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        outln!(
            "wrote {} model calls of run {} to {}",
            calls,
            run,
            args.cassette.display()
        );
    }
    Ok(Exit::Ok)
}

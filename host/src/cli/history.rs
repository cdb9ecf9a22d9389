//! `crewbox history`: a histogram of the stored dispatch decisions.

use super::render::history as render;
use super::{Context, Exit};

/// Arguments of `crewbox history`.
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Prints how often each mode was chosen, explicitly or by the dispatcher.
pub async fn run(ctx: Context, args: HistoryArgs) -> anyhow::Result<Exit> {
    let hist = ctx.history().await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&render::json(&hist))?);
    } else {
        out!("{}", render::text(&hist));
    }
    Ok(Exit::Ok)
}

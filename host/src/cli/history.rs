//! `crewbox history`: a histogram of the stored dispatch decisions.

use super::{Context, Exit};
use crate::observe::history::histogram;

/// Arguments of `crewbox history`.
#[derive(Debug, Clone, clap::Args)]
pub struct HistoryArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Prints how often each mode was chosen, explicitly or by the dispatcher.
pub async fn run(ctx: Context, args: HistoryArgs) -> anyhow::Result<Exit> {
    let records = match ctx.store_if_exists()? {
        Some(store) => store.dispatch_history().await?,
        None => Vec::new(),
    };
    let hist = histogram(&records);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&hist.to_json())?);
    } else {
        out!("{}", hist.render_text());
    }
    Ok(Exit::Ok)
}

//! `crewbox send --team NAME "MESSAGE"`: a message for a team's running reflect loop,
//! queued in the store and delivered at the start of the loop's next iteration.

use super::{Context, Exit};
use crate::store::Store;

/// Arguments of `crewbox send`.
#[derive(Debug, Clone, clap::Args)]
pub struct SendArgs {
    /// The team whose reflect loop gets the message.
    #[arg(long, value_name = "NAME")]
    pub team: String,
    /// The message (at most 16 KiB).
    pub message: String,
    /// Print the acknowledgement as JSON (`{"queued", "kind", "target"}`).
    #[arg(long)]
    pub json: bool,
}

/// Queues the message if the team has an unfinished reflect loop.
pub async fn run(ctx: Context, args: SendArgs) -> anyhow::Result<Exit> {
    // Without a store nothing has ever run here, so no loop either.
    let store = ctx.store_if_exists()?;
    match queue(store.as_ref(), &args.team, &args.message).await? {
        Ok(ack) => super::control::acknowledge(args.json, &ack, "message", &args.team)?,
        Err(refused) => {
            errln!("crewbox: {refused}");
            return Ok(Exit::Usage);
        }
    }
    Ok(Exit::Ok)
}

/// Queues `message` for `team`'s unfinished reflect loop: the acknowledgement, or why
/// not (what `crewbox send`, `crewbox top` and `crewbox mcp serve` say).
pub async fn queue(
    store: Option<&Store>,
    team: &str,
    message: &str,
) -> anyhow::Result<Result<String, String>> {
    Ok(crate::control::queue_team_message(store, team, message).await?)
}

//! `crewbox send --team NAME "MESSAGE"`: a message for a team's running reflect loop,
//! queued in the store and delivered at the start of the loop's next iteration.

use super::{Context, Exit};

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

/// Queues the message if the team has an unfinished reflect loop (a refusal is a
/// usage error: without a loop there is nothing to send to).
pub async fn run(ctx: Context, args: SendArgs) -> anyhow::Result<Exit> {
    let queued = ctx.send_team_message(&args.team, &args.message).await;
    super::control::report(queued, args.json, "message", Exit::Usage)
}

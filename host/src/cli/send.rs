//! `crewbox send --team NAME "MESSAGE"`: a message for a team's running reflect loop,
//! queued in the store and delivered at the start of the loop's next iteration.

use super::{Context, Exit};
use crate::store::ControlKind;
use crewbox::RunStatus;

/// Longest message accepted, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// Arguments of `crewbox send`.
#[derive(Debug, Clone, clap::Args)]
pub struct SendArgs {
    /// The team whose reflect loop gets the message.
    #[arg(long, value_name = "NAME")]
    pub team: String,
    /// The message (at most 16 KiB).
    pub message: String,
}

/// Queues the message if the team has an unfinished reflect loop.
pub async fn run(ctx: Context, args: SendArgs) -> anyhow::Result<Exit> {
    let message = args.message.trim();
    if message.is_empty() {
        eprintln!("crewbox: the message is empty");
        return Ok(Exit::Usage);
    }
    if message.len() > MAX_MESSAGE_BYTES {
        eprintln!(
            "crewbox: the message is {} bytes; the limit is {MAX_MESSAGE_BYTES}",
            message.len()
        );
        return Ok(Exit::Usage);
    }
    // Without a store nothing has ever run here, so no loop either.
    let store = ctx.store_if_exists()?;
    let run = match &store {
        Some(store) => match store.team_lock(&args.team).await? {
            Some((run_id, _)) => store.run(&run_id).await?,
            None => None,
        },
        None => None,
    };
    let (Some(store), Some(run)) = (store, run.filter(|r| r.status == RunStatus::Running)) else {
        eprintln!(
            "crewbox: team `{}` has no reflect loop running; start one with \
             `crewbox run --team {} --mode reflect \"...\"`",
            args.team, args.team
        );
        return Ok(Exit::Usage);
    };
    store
        .push_control(
            // The message belongs to this loop; leftovers are reported when it ends.
            &crate::team::message_target(&args.team, run.id.as_str()),
            ControlKind::Message,
            Some(message),
        )
        .await?;
    let live = !run.is_interrupted();
    if live {
        outln!(
            "queued for team `{}` (run {}); delivered at the start of its next iteration",
            args.team,
            run.id
        );
    } else {
        outln!(
            "queued for team `{}` (run {} is interrupted; it reads the message when resumed: crewbox resume {})",
            args.team,
            run.id,
            run.id
        );
    }
    Ok(Exit::Ok)
}

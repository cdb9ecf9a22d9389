//! `crewbox send --team NAME "MESSAGE"`: a message for a team's running reflect loop,
//! queued in the store and delivered at the start of the loop's next iteration.

use super::{Context, Exit};
use crate::store::{ControlKind, Store};
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
/// not (what `crewbox send` and `crewbox top` say).
pub async fn queue(
    store: Option<&Store>,
    team: &str,
    message: &str,
) -> anyhow::Result<Result<String, String>> {
    let message = message.trim();
    if message.is_empty() {
        return Ok(Err("the message is empty".into()));
    }
    if message.len() > MAX_MESSAGE_BYTES {
        return Ok(Err(format!(
            "the message is {} bytes; the limit is {MAX_MESSAGE_BYTES}",
            message.len()
        )));
    }
    let run = match store {
        Some(store) => match store.team_lock(team).await? {
            Some((run_id, _)) => store.run(&run_id).await?,
            None => None,
        },
        None => None,
    };
    let (Some(store), Some(run)) = (store, run.filter(|r| r.status == RunStatus::Running)) else {
        return Ok(Err(format!(
            "team `{team}` has no reflect loop running; start one with \
             `crewbox run --team {team} --mode reflect \"...\"`"
        )));
    };
    store
        .push_control(
            // The message belongs to this loop; leftovers are reported when it ends.
            &crate::team::message_target(team, run.id.as_str()),
            ControlKind::Message,
            Some(message),
        )
        .await?;
    Ok(Ok(if run.is_interrupted() {
        format!(
            "queued for team `{team}` (run {} is interrupted; it reads the message when resumed: crewbox resume {})",
            run.id, run.id
        )
    } else {
        format!(
            "queued for team `{team}` (run {}); delivered at the start of its next iteration",
            run.id
        )
    }))
}

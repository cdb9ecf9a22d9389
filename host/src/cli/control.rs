//! `crewbox steer` and `crewbox stop`: requests sent through the store to whichever
//! process runs the agent; it picks them up within a second.

use super::{Context, Exit};
use crewbox::{ControlError, Queued};

/// Arguments of `crewbox steer`.
#[derive(Debug, Clone, clap::Args)]
pub struct SteerArgs {
    /// The running agent: its id, a unique prefix or the tail the progress view shows.
    pub agent: String,
    /// The message, delivered before its next model call.
    pub message: String,
    /// Print the acknowledgement as JSON (`{"queued", "kind", "target"}`).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `crewbox stop`.
#[derive(Debug, Clone, clap::Args)]
pub struct StopArgs {
    /// An agent or a run: an id, a unique prefix or the tail the progress view shows.
    pub target: String,
    /// Print the acknowledgement as JSON (`{"queued", "kind", "target"}`).
    #[arg(long)]
    pub json: bool,
}

/// Queues a steering message.
pub async fn steer(ctx: Context, args: SteerArgs) -> anyhow::Result<Exit> {
    let queued = ctx.steer(&args.agent, &args.message).await;
    report(queued, args.json, "steer", Exit::CheckFailed)
}

/// Queues a stop for an agent or a run.
pub async fn stop(ctx: Context, args: StopArgs) -> anyhow::Result<Exit> {
    let queued = ctx.stop(&args.target).await;
    report(queued, args.json, "stop", Exit::CheckFailed)
}

/// Prints what was queued (exit 0), or why not: a target the user named that is not
/// there is a usage error (exit 2), a refusal exits `refused`, a failure is an error.
pub fn report(
    queued: Result<Queued, ControlError>,
    json: bool,
    kind: &str,
    refused: Exit,
) -> anyhow::Result<Exit> {
    match queued {
        Ok(q) => {
            acknowledge(json, &q.sentence, kind, &q.target)?;
            Ok(Exit::Ok)
        }
        Err(e @ ControlError::Refused(_)) => {
            errln!("crewbox: {e}");
            Ok(refused)
        }
        Err(e) if e.is_usage() => {
            errln!("crewbox: {e}");
            Ok(Exit::Usage)
        }
        Err(e) => Err(e.into()),
    }
}

/// Prints what was queued: the sentence, or with `json` one object a program reads.
fn acknowledge(json: bool, ack: &str, kind: &str, target: &str) -> std::io::Result<()> {
    if json {
        let value =
            serde_json::json!({ "queued": true, "kind": kind, "target": target, "message": ack });
        outln!("{value}");
    } else {
        outln!("{ack}");
    }
    Ok(())
}

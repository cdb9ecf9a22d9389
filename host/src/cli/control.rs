//! `crewbox steer` and `crewbox stop`: requests sent through the store to whichever
//! process runs the agent; it picks them up within a second.

use super::{Context, Exit};
pub use crate::control::StopTarget;
use crate::store::{AgentRecord, Store};

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
    let store = ctx.existing_store()?;
    let agent = match super::lookup::agent(&store, &args.agent).await? {
        Ok(agent) => agent,
        Err(exit) => return Ok(exit),
    };
    match steer_agent(&store, &agent, &args.message).await? {
        Ok(ack) => acknowledge(args.json, &ack, "steer", agent.id.as_str())?,
        Err(refused) => {
            errln!("crewbox: {refused}");
            return Ok(Exit::CheckFailed);
        }
    }
    Ok(Exit::Ok)
}

/// Queues `message` for `agent` unless it has ended: the acknowledgement, or why not
/// (what `crewbox steer`, `crewbox top` and `crewbox mcp serve` say).
pub async fn steer_agent(
    store: &Store,
    agent: &AgentRecord,
    message: &str,
) -> anyhow::Result<Result<String, String>> {
    Ok(crate::control::steer_agent(store, agent, message).await?)
}

/// Queues a stop for an agent (unless it has ended) or a run: the acknowledgement,
/// or why not.
pub async fn stop_target(
    store: &Store,
    target: StopTarget<'_>,
) -> anyhow::Result<Result<String, String>> {
    Ok(crate::control::stop_target(store, target).await?)
}

/// Prints what was queued: the sentence, or with `json` one object a program reads.
pub fn acknowledge(json: bool, ack: &str, kind: &str, target: &str) -> std::io::Result<()> {
    if json {
        let value =
            serde_json::json!({ "queued": true, "kind": kind, "target": target, "message": ack });
        outln!("{value}");
    } else {
        outln!("{ack}");
    }
    Ok(())
}

/// Queues a stop for an agent or a run.
pub async fn stop(ctx: Context, args: StopArgs) -> anyhow::Result<Exit> {
    let store = ctx.existing_store()?;
    let found = match crate::control::find_stoppable(&store, &args.target).await? {
        Ok(found) => found,
        Err(why) => {
            errln!("crewbox: {why}");
            return Ok(Exit::Usage);
        }
    };
    let (target, id) = (found.target(), found.id());
    match stop_target(&store, target).await? {
        Ok(ack) => acknowledge(args.json, &ack, "stop", id)?,
        Err(refused) => {
            errln!("crewbox: {refused}");
            return Ok(Exit::CheckFailed);
        }
    }
    Ok(Exit::Ok)
}

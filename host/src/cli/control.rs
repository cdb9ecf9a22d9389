//! `crewbox steer` and `crewbox stop`: requests sent through the store to whichever
//! process runs the agent; it picks them up within a second.

use super::{Context, Exit};
use crate::store::{AgentRecord, ControlKind, Lookup, Store};
use crewbox::RunId;

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
/// (what `crewbox steer` and `crewbox top` say).
pub async fn steer_agent(
    store: &Store,
    agent: &AgentRecord,
    message: &str,
) -> anyhow::Result<Result<String, String>> {
    if agent.state.is_terminal() {
        return Ok(Err(ended(agent)));
    }
    store
        .push_control(agent.id.as_str(), ControlKind::Steer, Some(message))
        .await?;
    Ok(Ok(if agent.state == crewbox::types::AgentState::Queued {
        format!(
            "queued for {} (the agent is queued, will be delivered at start: with its first model call)",
            agent.id
        )
    } else {
        format!(
            "queued for {} (delivered before its next model call)",
            agent.id
        )
    }))
}

/// Queues a stop for an agent (unless it has ended) or a run: the acknowledgement,
/// or why not.
pub async fn stop_target(
    store: &Store,
    target: StopTarget<'_>,
) -> anyhow::Result<Result<String, String>> {
    let id = match target {
        StopTarget::Agent(agent) if agent.state.is_terminal() => return Ok(Err(ended(agent))),
        StopTarget::Agent(agent) => agent.id.as_str(),
        StopTarget::Run(run) => run.as_str(),
    };
    store.push_control(id, ControlKind::Stop, None).await?;
    Ok(Ok(format!("stop requested for {id}")))
}

/// What `stop` stops.
#[derive(Clone, Copy, Debug)]
pub enum StopTarget<'a> {
    /// One agent.
    Agent(&'a AgentRecord),
    /// A whole run.
    Run(&'a RunId),
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

fn ended(agent: &AgentRecord) -> String {
    format!("agent {} has already ended ({})", agent.id, agent.state)
}

/// Queues a stop for an agent or a run.
pub async fn stop(ctx: Context, args: StopArgs) -> anyhow::Result<Exit> {
    let store = ctx.existing_store()?;
    // An agent first (its ids are what the progress view shows), then a run.
    let agent = match store.lookup_agent(&args.target).await? {
        Lookup::One(agent) => Some(agent),
        Lookup::Ambiguous(_) => match super::lookup::agent(&store, &args.target).await? {
            Ok(agent) => Some(agent),
            Err(exit) => return Ok(exit),
        },
        Lookup::None => None,
    };
    let run = match &agent {
        Some(_) => None,
        None => match store.lookup_run(&args.target).await? {
            Lookup::None => {
                errln!("crewbox: no agent or run matches `{}`", args.target);
                return Ok(Exit::Usage);
            }
            _ => match super::lookup::run(&store, &args.target).await? {
                Ok(run) => Some(run.id),
                Err(exit) => return Ok(exit),
            },
        },
    };
    let target = match (&agent, &run) {
        (Some(agent), _) => StopTarget::Agent(agent),
        (None, Some(run)) => StopTarget::Run(run),
        (None, None) => return Ok(Exit::Usage),
    };
    let id = match target {
        StopTarget::Agent(a) => a.id.to_string(),
        StopTarget::Run(r) => r.to_string(),
    };
    match stop_target(&store, target).await? {
        Ok(ack) => acknowledge(args.json, &ack, "stop", &id)?,
        Err(refused) => {
            errln!("crewbox: {refused}");
            return Ok(Exit::CheckFailed);
        }
    }
    Ok(Exit::Ok)
}

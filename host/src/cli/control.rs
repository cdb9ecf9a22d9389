//! `crewbox steer` and `crewbox stop`: requests sent through the store to whichever
//! process runs the agent; it picks them up within a second.

use super::{Context, Exit};
use crate::store::{ControlKind, Lookup};

/// Arguments of `crewbox steer`.
#[derive(Debug, Clone, clap::Args)]
pub struct SteerArgs {
    /// The running agent: its id, a unique prefix or the tail the progress view shows.
    pub agent: String,
    /// The message, delivered before its next model call.
    pub message: String,
}

/// Arguments of `crewbox stop`.
#[derive(Debug, Clone, clap::Args)]
pub struct StopArgs {
    /// An agent or a run: an id, a unique prefix or the tail the progress view shows.
    pub target: String,
}

/// Queues a steering message.
pub async fn steer(ctx: Context, args: SteerArgs) -> anyhow::Result<Exit> {
    let store = ctx.existing_store()?;
    let agent = match super::lookup::agent(&store, &args.agent).await? {
        Ok(agent) => agent,
        Err(exit) => return Ok(exit),
    };
    if agent.state.is_terminal() {
        eprintln!(
            "crewbox: agent {} has already ended ({})",
            agent.id, agent.state
        );
        return Ok(Exit::CheckFailed);
    }
    store
        .push_control(agent.id.as_str(), ControlKind::Steer, Some(&args.message))
        .await?;
    outln!(
        "queued for {} (delivered before its next model call)",
        agent.id
    );
    Ok(Exit::Ok)
}

/// Queues a stop for an agent or a run.
pub async fn stop(ctx: Context, args: StopArgs) -> anyhow::Result<Exit> {
    let store = ctx.existing_store()?;
    // An agent first (its ids are what the progress view shows), then a run.
    let target = match store.lookup_agent(&args.target).await? {
        Lookup::One(agent) => {
            if agent.state.is_terminal() {
                eprintln!(
                    "crewbox: agent {} has already ended ({})",
                    agent.id, agent.state
                );
                return Ok(Exit::CheckFailed);
            }
            agent.id.to_string()
        }
        Lookup::Ambiguous(_) => match super::lookup::agent(&store, &args.target).await? {
            Ok(agent) => agent.id.to_string(),
            Err(exit) => return Ok(exit),
        },
        Lookup::None => match store.lookup_run(&args.target).await? {
            Lookup::None => {
                eprintln!("crewbox: no agent or run matches `{}`", args.target);
                return Ok(Exit::Usage);
            }
            _ => match super::lookup::run(&store, &args.target).await? {
                Ok(run) => run.id.to_string(),
                Err(exit) => return Ok(exit),
            },
        },
    };
    store.push_control(&target, ControlKind::Stop, None).await?;
    outln!("stop requested for {target}");
    Ok(Exit::Ok)
}

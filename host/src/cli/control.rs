//! `crewbox steer` and `crewbox stop`: requests sent through the store to whichever
//! process runs the agent; it picks them up within a second.

use super::{Context, Exit};
use crate::ids::AgentId;
use crate::store::ControlKind;

/// Arguments of `crewbox steer`.
#[derive(Debug, Clone, clap::Args)]
pub struct SteerArgs {
    /// The running agent's id.
    pub agent: String,
    /// The message, delivered before its next model call.
    pub message: String,
}

/// Arguments of `crewbox stop`.
#[derive(Debug, Clone, clap::Args)]
pub struct StopArgs {
    /// An agent id or a run id.
    pub target: String,
}

/// Queues a steering message.
pub async fn steer(ctx: Context, args: SteerArgs) -> anyhow::Result<Exit> {
    let store = ctx.existing_store()?;
    let Some(agent) = store
        .agent(&AgentId::from_string(args.agent.clone()))
        .await?
    else {
        eprintln!("crewbox: no agent `{}`", args.agent);
        return Ok(Exit::Usage);
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
    println!(
        "queued for {} (delivered before its next model call)",
        agent.id
    );
    Ok(Exit::Ok)
}

/// Queues a stop for an agent or a run.
pub async fn stop(ctx: Context, args: StopArgs) -> anyhow::Result<Exit> {
    let store = ctx.existing_store()?;
    let target = if let Some(agent) = store
        .agent(&AgentId::from_string(args.target.clone()))
        .await?
    {
        if agent.state.is_terminal() {
            eprintln!(
                "crewbox: agent {} has already ended ({})",
                agent.id, agent.state
            );
            return Ok(Exit::CheckFailed);
        }
        agent.id.to_string()
    } else if let Some(run) = store.find_run(&args.target).await? {
        run.id.to_string()
    } else {
        eprintln!("crewbox: no agent or run `{}`", args.target);
        return Ok(Exit::Usage);
    };
    store.push_control(&target, ControlKind::Stop, None).await?;
    println!("stop requested for {target}");
    Ok(Exit::Ok)
}

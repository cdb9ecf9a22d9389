//! Requests to work another process may be driving, sent through the store: steering
//! an agent, stopping an agent or a run, a message for a team's reflect loop, and ids
//! as a person types them. What `crewbox steer|stop|send`, `crewbox top` and
//! `crewbox mcp serve` do, with the sentences they say.

use crate::ids::{AgentId, RunId};
use crate::store::{AgentRecord, ControlKind, Lookup, RunRecord, Store, StoreError};
use crate::vocab::{AgentState, RunStatus};

/// Longest team message accepted, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// Why a request was not queued: nothing is wrong with the store, the request itself
/// cannot be delivered (its message is the sentence the commands print).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// A steer or stop for an agent that has ended.
    #[error("agent {agent} has already ended ({state})")]
    Ended {
        /// The agent.
        agent: AgentId,
        /// How it ended.
        state: AgentState,
    },
    /// A stop for a run that has finished, or for an agent of one.
    #[error("run {run} has already finished ({status}); there is nothing to stop")]
    RunEnded {
        /// The run.
        run: RunId,
        /// How it ended.
        status: crate::RunStatus,
    },
    /// A stop or steer for a run no live process drives (or an agent of one): a stop
    /// queued then would wait for the next `crewbox resume` and cut it short partway;
    /// a steer would be for an agent the resume replaces with another.
    #[error(
        "run {run} is not running: it was interrupted and no process drives it, so \
         nothing would act on {order} now; `crewbox resume {run}` finishes it (steer its \
         agents then), or leave it unfinished"
    )]
    Interrupted {
        /// The run.
        run: RunId,
        /// `a stop` or `a steer`.
        order: &'static str,
    },
    /// A team message with nothing in it but whitespace.
    #[error("the message is empty")]
    EmptyMessage,
    /// A team message over [`MAX_MESSAGE_BYTES`].
    #[error("the message is {bytes} bytes; the limit is {MAX_MESSAGE_BYTES}")]
    TooLong {
        /// Its length, trimmed.
        bytes: usize,
    },
    /// A team message for a team without an unfinished reflect loop.
    #[error(
        "team `{team}` has no reflect loop running; start one with \
         `crewbox run --team {team} --mode reflect \"...\"`"
    )]
    NoReflectLoop {
        /// The team.
        team: String,
    },
}

/// The one record `found` holds, or why there is none (nothing, or several: named).
pub fn settle<T>(kind: &str, text: &str, found: Lookup<T>) -> Result<T, String> {
    match found {
        Lookup::One(t) => Ok(t),
        Lookup::None => Err(format!("no {kind} matches `{text}`")),
        Lookup::Ambiguous(ids) => Err(format!(
            "`{text}` matches several {kind}s; give more of the id:\n  {}",
            ids.join("\n  ")
        )),
    }
}

/// The run `text` names (an id, a unique prefix or tail), or why not.
pub async fn find_run(store: &Store, text: &str) -> Result<Result<RunRecord, String>, StoreError> {
    Ok(settle("run", text, store.lookup_run(text).await?))
}

/// The agent `text` names (an id, a unique prefix or tail), or why not.
pub async fn find_agent(
    store: &Store,
    text: &str,
) -> Result<Result<AgentRecord, String>, StoreError> {
    Ok(settle("agent", text, store.lookup_agent(text).await?))
}

/// Queues `message` for `agent` unless it has ended: the acknowledgement, or why not.
pub async fn steer_agent(
    store: &Store,
    agent: &AgentRecord,
    message: &str,
) -> Result<Result<String, Refused>, StoreError> {
    if agent.state.is_terminal() {
        return Ok(Err(ended(agent)));
    }
    // As for a stop: an agent of a run no live process drives never sees a steer (a
    // resume runs its step again under another agent).
    if let Some(refused) = undriven(store, &agent.run_id, "a steer").await? {
        return Ok(Err(refused));
    }
    store
        .push_control(agent.id.as_str(), ControlKind::Steer, Some(message))
        .await?;
    Ok(Ok(if agent.state == AgentState::Queued {
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

/// What `stop` stops.
#[derive(Clone, Copy, Debug)]
pub enum StopTarget<'a> {
    /// One agent.
    Agent(&'a AgentRecord),
    /// A whole run.
    Run(&'a RunId),
}

/// What a stop request's text named: an agent first (its ids are what progress views
/// show), then a run.
#[derive(Clone, Debug)]
pub enum Stoppable {
    /// One agent.
    Agent(Box<AgentRecord>),
    /// A whole run.
    Run(RunId),
}

impl Stoppable {
    /// The target to queue the stop for.
    pub fn target(&self) -> StopTarget<'_> {
        match self {
            Self::Agent(a) => StopTarget::Agent(a),
            Self::Run(r) => StopTarget::Run(r),
        }
    }

    /// Its full id.
    pub fn id(&self) -> &str {
        match self {
            Self::Agent(a) => a.id.as_str(),
            Self::Run(r) => r.as_str(),
        }
    }
}

/// Why a stop's text names nothing to stop ([`find_stoppable`]); each a usage error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotStoppable {
    /// No agent and no run has this id, prefix or tail.
    #[error("no agent or run matches `{0}`")]
    NoMatch(String),
    /// Several agents match.
    #[error("`{text}` matches several agents; give more of the id:\n  {}", .ids.join("\n  "))]
    SeveralAgents {
        /// The id as typed.
        text: String,
        /// The full ids of the candidates (at most ten), oldest first.
        ids: Vec<String>,
    },
    /// No agent matches, and several runs do.
    #[error("`{text}` matches several runs; give more of the id:\n  {}", .ids.join("\n  "))]
    SeveralRuns {
        /// The id as typed.
        text: String,
        /// The full ids of the candidates (at most ten), oldest first.
        ids: Vec<String>,
    },
}

/// The agent or run `text` names (an id, a unique prefix or tail), looked up as an
/// agent first (its ids are what progress views show), then as a run; or why neither.
/// The one lookup of `crewbox stop` ([`Repository::stop`](crate::Repository::stop))
/// and of the MCP server's `stop` tool.
pub async fn find_stoppable(
    store: &Store,
    text: &str,
) -> Result<Result<Stoppable, NotStoppable>, StoreError> {
    match store.lookup_agent(text).await? {
        Lookup::One(agent) => return Ok(Ok(Stoppable::Agent(Box::new(agent)))),
        Lookup::Ambiguous(ids) => {
            return Ok(Err(NotStoppable::SeveralAgents {
                text: text.to_owned(),
                ids,
            }));
        }
        Lookup::None => {}
    }
    Ok(match store.lookup_run(text).await? {
        Lookup::One(run) => Ok(Stoppable::Run(run.id)),
        Lookup::Ambiguous(ids) => Err(NotStoppable::SeveralRuns {
            text: text.to_owned(),
            ids,
        }),
        Lookup::None => Err(NotStoppable::NoMatch(text.to_owned())),
    })
}

/// Queues a stop for an agent (unless it has ended) or a run: the acknowledgement,
/// or why not.
pub async fn stop_target(
    store: &Store,
    target: StopTarget<'_>,
) -> Result<Result<String, Refused>, StoreError> {
    let (id, run) = match target {
        StopTarget::Agent(agent) if agent.state.is_terminal() => return Ok(Err(ended(agent))),
        StopTarget::Agent(agent) => (agent.id.as_str(), &agent.run_id),
        StopTarget::Run(run) => (run.as_str(), run),
    };
    // Only a run a live process drives acts on a stop.
    if let Some(refused) = undriven(store, run, "a stop").await? {
        return Ok(Err(refused));
    }
    store.push_control(id, ControlKind::Stop, None).await?;
    Ok(Ok(format!("stop requested for {id}")))
}

/// Why an `order` for `run` would reach nothing: the run ended, or no live process
/// drives it (killed, not resumed yet). `None` for a run that is not stored.
async fn undriven(
    store: &Store,
    run: &RunId,
    order: &'static str,
) -> Result<Option<Refused>, StoreError> {
    let Some(record) = store.run(run).await? else {
        return Ok(None);
    };
    Ok(if record.status != crate::RunStatus::Running {
        Some(Refused::RunEnded {
            run: run.clone(),
            status: record.status,
        })
    } else if record.is_interrupted() {
        Some(Refused::Interrupted {
            run: run.clone(),
            order,
        })
    } else {
        None
    })
}

fn ended(agent: &AgentRecord) -> Refused {
    Refused::Ended {
        agent: agent.id.clone(),
        state: agent.state,
    }
}

/// Queues `message` for `team`'s unfinished reflect loop: the acknowledgement, or why
/// not. Without a store nothing has ever run, so no loop either.
pub async fn queue_team_message(
    store: Option<&Store>,
    team: &str,
    message: &str,
) -> Result<Result<String, Refused>, StoreError> {
    let message = message.trim();
    if message.is_empty() {
        return Ok(Err(Refused::EmptyMessage));
    }
    if message.len() > MAX_MESSAGE_BYTES {
        return Ok(Err(Refused::TooLong {
            bytes: message.len(),
        }));
    }
    let run = match store {
        Some(store) => match store.team_lock(team).await? {
            Some((run_id, _)) => store.run(&run_id).await?,
            None => None,
        },
        None => None,
    };
    let (Some(store), Some(run)) = (store, run.filter(|r| r.status == RunStatus::Running)) else {
        return Ok(Err(Refused::NoReflectLoop {
            team: team.to_owned(),
        }));
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

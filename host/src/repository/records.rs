//! What the commands that act on stored records ask a repository: an agent as the user
//! names it, the runs left unfinished, the audit trail (and checking it), the dead
//! letters (and dropping them), steering an agent, stopping an agent
//! or a run, a message for a team's reflect loop, and what `crewbox health` shows beside
//! the store's facts. Typed answers, typed errors; the binary only renders them.

use crate::control::{self, NotStoppable, Refused};
use crate::ids::{AgentId, RunId};
use crate::provider::breaker::{BreakerStatus, Breakers};
use crate::sandbox::ProbeReport;
use crate::store::audit::{Anchor as AuditAnchor, AuditRecord, Verdict as AuditVerdict};
use crate::store::{AgentRecord, DeadLetter, RunRecord, Store, StoreError};
use crate::vocab::AgentState;

use super::{ReadError, RecordKind, Repository};

/// Why a request for another process's work (steer, stop, a team message) was not
/// queued.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The store cannot be read, or the id names no record or several.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// A stop's text names neither an agent nor a run (a usage error).
    #[error("no agent or run matches `{0}`")]
    NoTarget(String),
    /// The request cannot be delivered (the agent ended, the message is empty or too
    /// long, the team runs no reflect loop).
    #[error(transparent)]
    Refused(#[from] Refused),
}

impl From<StoreError> for ControlError {
    fn from(e: StoreError) -> Self {
        Self::Read(ReadError::Store(e))
    }
}

impl From<NotStoppable> for ControlError {
    fn from(e: NotStoppable) -> Self {
        match e {
            NotStoppable::NoMatch(text) => Self::NoTarget(text),
            NotStoppable::SeveralAgents { text, ids } => Self::Read(ReadError::Ambiguous {
                kind: RecordKind::Agent,
                text,
                ids,
            }),
            NotStoppable::SeveralRuns { text, ids } => Self::Read(ReadError::Ambiguous {
                kind: RecordKind::Run,
                text,
                ids,
            }),
        }
    }
}

impl ControlError {
    /// True when the user named nothing there is (exit code 2); a refusal and a store
    /// failure are not.
    pub fn is_usage(&self) -> bool {
        match self {
            Self::Read(e) => e.is_usage(),
            Self::NoTarget(_) => true,
            Self::Refused(_) => false,
        }
    }
}

/// A request queued for whichever process runs its target ([`Repository::steer`],
/// [`Repository::stop`], [`Repository::send_team_message`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queued {
    /// The full id of the agent or run, or the team's name.
    pub target: String,
    /// The acknowledgement, as a sentence for a person.
    pub sentence: String,
}

/// Which dead letters [`Repository::drop_dead_letters`] forgets.
#[derive(Clone, Copy, Debug)]
pub enum DeadTarget<'a> {
    /// The agent this text names (an id, a unique prefix or tail).
    Agent(&'a str),
    /// Every dead letter of the run this text names.
    Run(&'a str),
}

/// Why dead letters could not be dropped.
#[derive(Debug, thiserror::Error)]
pub enum DropError {
    /// Nothing has run here, the id names no record or several, or the store failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The agent named is not a dead letter (a usage error).
    #[error(
        "agent {agent} is not a dead letter (it ended {state}, or it was dropped or retried already)"
    )]
    NotDead {
        /// The agent.
        agent: AgentId,
        /// How it ended (or that it has not).
        state: AgentState,
    },
}

impl From<StoreError> for DropError {
    fn from(e: StoreError) -> Self {
        Self::Read(ReadError::Store(e))
    }
}

impl DropError {
    /// True when the user named nothing droppable (exit code 2), not a failure.
    pub fn is_usage(&self) -> bool {
        match self {
            Self::Read(e) => e.is_usage(),
            Self::NotDead { .. } => true,
        }
    }
}

impl Repository {
    /// The agent `text` names (a full id, a unique prefix or tail).
    pub async fn agent_record(&self, text: &str) -> Result<AgentRecord, ReadError> {
        let Some(store) = self.store_if_exists()? else {
            return Err(ReadError::NoMatch {
                kind: RecordKind::Agent,
                text: text.to_owned(),
            });
        };
        find_agent(&store, text).await
    }

    /// The dead letters — agents that ended `error` or `aborted` and that nobody
    /// dropped or retried — of the run `run` names, or of every run. Nothing has run
    /// here: [`ReadError::NoRuns`] (no store is created).
    pub async fn dead_letters(&self, run: Option<&str>) -> Result<Vec<DeadLetter>, ReadError> {
        let store = self.store_if_exists()?.ok_or(ReadError::NoRuns)?;
        let run = match run {
            Some(text) => Some(find_run(&store, text).await?),
            None => None,
        };
        Ok(store.dead_letters(run.as_ref()).await?)
    }

    /// Forgets dead letters (no longer listed, kept in history; the drop is audited):
    /// the agents dropped, none when a run named has none. Nothing has run here:
    /// [`ReadError::NoRuns`].
    pub async fn drop_dead_letters(
        &self,
        target: DeadTarget<'_>,
    ) -> Result<Vec<AgentId>, DropError> {
        let store = self.store_if_exists()?.ok_or(ReadError::NoRuns)?;
        let dead = match target {
            DeadTarget::Agent(text) => {
                let agent = find_agent(&store, text).await?;
                match store.dead_letter(&agent.id).await? {
                    Some(d) => vec![d],
                    None => {
                        return Err(DropError::NotDead {
                            agent: agent.id,
                            state: agent.state,
                        });
                    }
                }
            }
            DeadTarget::Run(text) => {
                let run = find_run(&store, text).await?;
                store.dead_letters(Some(&run)).await?
            }
        };
        let ids = dead.iter().map(|d| d.agent_id.clone()).collect();
        store
            .drop_dead(dead.into_iter().map(|d| (d.agent_id, d.run_id)).collect())
            .await?;
        Ok(ids)
    }

    /// The runs a crashed process left unfinished (none when nothing has run here).
    pub async fn orphaned_runs(&self) -> Result<Vec<RunRecord>, ReadError> {
        match self.store_if_exists()? {
            Some(store) => Ok(store.orphaned_runs().await?),
            None => Ok(Vec::new()),
        }
    }

    /// The audit trail, oldest first: only the records of the run `run` names when
    /// given. Nothing has run here: [`ReadError::NoRuns`] (no store is created).
    pub async fn audit_trail(&self, run: Option<&str>) -> Result<Vec<AuditRecord>, ReadError> {
        let store = self.store_if_exists()?.ok_or(ReadError::NoRuns)?;
        let run = match run {
            Some(text) => Some(find_run(&store, text).await?),
            None => None,
        };
        Ok(store.audit_records(run.as_ref()).await?)
    }

    /// Checks every link of the audit trail: intact, or the first place it is broken
    /// (with `anchor`, a record kept elsewhere that it must still hold). Nothing has run
    /// here: [`ReadError::NoRuns`].
    pub async fn verify_audit(
        &self,
        anchor: Option<AuditAnchor>,
    ) -> Result<AuditVerdict, ReadError> {
        let store = self.store_if_exists()?.ok_or(ReadError::NoRuns)?;
        Ok(match anchor {
            Some(a) => store.audit_verify_anchored(a).await?,
            None => store.audit_verify().await?,
        })
    }

    /// Queues `message` for the running agent `agent` names (an id, a unique prefix or
    /// tail), delivered before its next model call by whichever process runs it.
    pub async fn steer(&self, agent: &str, message: &str) -> Result<Queued, ControlError> {
        let store = self.existing_store()?;
        let agent = find_agent(&store, agent).await?;
        let sentence = control::steer_agent(&store, &agent, message).await??;
        Ok(Queued {
            target: agent.id.to_string(),
            sentence,
        })
    }

    /// Queues a stop for the agent or run `target` names (an agent first: its ids are
    /// what progress views show, then a run).
    pub async fn stop(&self, target: &str) -> Result<Queued, ControlError> {
        let store = self.existing_store()?;
        let found = control::find_stoppable(&store, target).await??;
        let sentence = control::stop_target(&store, found.target()).await??;
        Ok(Queued {
            target: found.id().to_owned(),
            sentence,
        })
    }

    /// Queues `message` for `team`'s unfinished reflect loop, read at the start of its
    /// next iteration. Nothing has run here: no loop either ([`Refused::NoReflectLoop`]).
    pub async fn send_team_message(
        &self,
        team: &str,
        message: &str,
    ) -> Result<Queued, ControlError> {
        let store = self.store_if_exists()?;
        let sentence = control::queue_team_message(store.as_ref(), team, message).await??;
        Ok(Queued {
            target: team.to_owned(),
            sentence,
        })
    }

    /// What the process sandbox can use on this machine, as configured here (a sandbox
    /// that cannot be set up is reported, not an error).
    pub async fn probe_sandbox(&self) -> ProbeReport {
        match self.sandbox() {
            Ok(sandbox) => sandbox.probe().await,
            Err(e) => ProbeReport::failed(e.to_string()),
        }
    }

    /// The circuit breakers of this process. Breakers live in the memory of the process
    /// that calls providers, and a repository calls none: the answer is per process by
    /// nature (other crewbox processes' breakers are not visible).
    pub fn breakers(&self) -> Vec<BreakerStatus> {
        Breakers::default().snapshot()
    }
}

async fn find_agent(store: &Store, text: &str) -> Result<AgentRecord, ReadError> {
    ReadError::settle(RecordKind::Agent, text, store.lookup_agent(text).await?)
}

async fn find_run(store: &Store, text: &str) -> Result<RunId, ReadError> {
    Ok(ReadError::settle(RecordKind::Run, text, store.lookup_run(text).await?)?.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `crewbox stop` and the MCP server's `stop` tool share one lookup: a text naming
    /// several records, or none, is the same usage error, in the same words, for both.
    #[test]
    fn a_stop_lookup_says_what_a_read_says() {
        let ids = vec!["x-1".to_owned(), "x-2".to_owned()];
        let several = [
            (
                NotStoppable::SeveralAgents {
                    text: "x".into(),
                    ids: ids.clone(),
                },
                RecordKind::Agent,
            ),
            (
                NotStoppable::SeveralRuns {
                    text: "x".into(),
                    ids: ids.clone(),
                },
                RecordKind::Run,
            ),
        ];
        for (not, kind) in several {
            let said = not.to_string();
            let read = ReadError::Ambiguous {
                kind,
                text: "x".into(),
                ids: ids.clone(),
            };
            assert_eq!(said, read.to_string());
            let e = ControlError::from(not);
            assert!(e.is_usage());
            assert_eq!(e.to_string(), said);
        }
        let e = ControlError::from(NotStoppable::NoMatch("x".into()));
        assert!(matches!(e, ControlError::NoTarget(_)) && e.is_usage());
        assert_eq!(e.to_string(), "no agent or run matches `x`");
    }
}

//! A run's journal as its modes see it: look a step up before doing it, record it as
//! begun and as done. On a fresh run the lookup finds nothing; on a resumed run every
//! step stored as done is read back instead of run again (see `store/steps.rs`).
//!
//! Steps are named by [`StepKey`], never by ad-hoc strings; each key has one stored
//! form, kept stable so a resumed run reads the keys the process that started it wrote.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ids::{AgentId, RunId};
use crate::provider::Message;
use crate::store::{RetryPlan, StepState, Store, StoreError};

/// Which orchestrate round a step belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Round {
    /// The one round of an `orchestrate` run.
    Only,
    /// Iteration `n` (from 1) of a `reflect` loop.
    Iteration(u32),
}

/// A step of a run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum StepKey {
    /// The dispatch decision: `decision`.
    Decision,
    /// A broadcast or sequential member's reply: `member/<name>` (name lowercased).
    Member(String),
    /// An orchestrator's plan: `[it<n>/]plan`.
    Plan(Round),
    /// A worker's result: `[it<n>/]worker/<name>` (name lowercased).
    Worker(Round, String),
    /// The synthesis of a round: `[it<n>/]synthesis`.
    Synthesis(Round),
    /// The evaluation of reflect iteration n: `it<n>/evaluation`.
    Evaluation(u32),
    /// The messages reflect iteration n took in: `it<n>/inbox`.
    Inbox(u32),
    /// Messages for a reflect loop that no iteration took in: `leftover-messages`.
    Leftovers,
    /// The commit a team run's integration branch starts from: `workspace`.
    Workspace,
    /// Members' branches merged into the integration branch at the end of a stage:
    /// `merge/<stage>` (the stage's own key, e.g. `merge/member/alice`, `merge/it2`).
    Merge(String),
    /// A `single` agent (and its chain's follow-ups) or a `swarm` member, by its name:
    /// `agent/<name>` (e.g. `agent/agent-2`, `agent/swarm-3`).
    Agent(String),
    /// A crew's plan: `crew/plan`.
    CrewPlan,
    /// The worktree a crew's executor holds across revisions: `crew/worktree`.
    CrewWorktree,
    /// A crew executor's revision `n` (0 first): `crew/r<n>/executor`.
    CrewExecution(u32),
    /// The review of revision `n`: `crew/r<n>/review`.
    CrewReview(u32),
    /// The crew executor's branch, once its worktree is committed: `crew/branch`.
    CrewBranch,
    /// The commit a `single` or `swarm` run's agents start from: `base` (HEAD when
    /// the run began; a resumed run's agents start there too).
    Base,
    /// The `n`th `spawn_agent` child (from 1) of the parent agent `parent`:
    /// `child/<parent-agent-id>/<n>`. Keyed by the parent's agent id, not its name or
    /// step: every attempt of a step is an agent of its own (a resumed `single` agent
    /// in a fresh worktree, a crew revision re-run from its last checkpoint, a retry),
    /// and the work a child did in its parent's workspace lives only as long as that
    /// attempt. So a parent that goes on as the same agent (same workspace, same
    /// conversation) reads a finished child back; a parent that starts again, as a
    /// new agent, runs its children again. A child begun but not ended runs again.
    Child {
        /// The parent agent.
        parent: AgentId,
        /// Which of its `spawn_agent` calls, in the order they were made, from 1.
        n: u32,
    },
}

impl StepKey {
    /// A member's step (names match case-insensitively, as team files do).
    pub(crate) fn member(name: &str) -> Self {
        Self::Member(name.to_ascii_lowercase())
    }

    /// A worker's step in `round`.
    pub(crate) fn worker(round: Round, name: &str) -> Self {
        Self::Worker(round, name.to_ascii_lowercase())
    }
}

impl std::fmt::Display for Round {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Only => Ok(()),
            Self::Iteration(n) => write!(f, "it{n}/"),
        }
    }
}

/// The stored form of the key.
impl std::fmt::Display for StepKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Decision => f.write_str("decision"),
            Self::Member(name) => write!(f, "member/{name}"),
            Self::Plan(round) => write!(f, "{round}plan"),
            Self::Worker(round, name) => write!(f, "{round}worker/{name}"),
            Self::Synthesis(round) => write!(f, "{round}synthesis"),
            Self::Evaluation(n) => write!(f, "it{n}/evaluation"),
            Self::Inbox(n) => write!(f, "it{n}/inbox"),
            Self::Leftovers => f.write_str("leftover-messages"),
            Self::Workspace => f.write_str("workspace"),
            Self::Merge(stage) => write!(f, "merge/{stage}"),
            Self::Agent(name) => write!(f, "agent/{name}"),
            Self::CrewPlan => f.write_str("crew/plan"),
            Self::CrewWorktree => f.write_str("crew/worktree"),
            Self::CrewExecution(n) => write!(f, "crew/r{n}/executor"),
            Self::CrewReview(n) => write!(f, "crew/r{n}/review"),
            Self::CrewBranch => f.write_str("crew/branch"),
            Self::Base => f.write_str("base"),
            Self::Child { parent, n } => write!(f, "child/{parent}/{n}"),
        }
    }
}

/// What a step records when it begins: who does it and, for team members, the task
/// they were given (the report shows it as `assigned_task`).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct StepInput<'a> {
    /// The agent's name.
    pub name: &'a str,
    /// The task it was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<&'a str>,
}

/// The steps of one run.
pub(crate) struct Journal {
    store: Store,
    run_id: RunId,
    done: Mutex<HashMap<String, serde_json::Value>>,
    /// Done steps' agents' final conversations, by step key.
    conversations: Mutex<HashMap<String, Vec<Message>>>,
    /// Steps a earlier process began but did not record as done: the agent doing each.
    started: HashMap<String, AgentId>,
    /// Steps a `crewbox retry` reopened: the dead agent each replaces, and how.
    retries: HashMap<String, RetryPlan>,
    resumed: bool,
    replayed: AtomicU32,
}

impl Journal {
    /// The journal of a run that starts now.
    pub(crate) fn fresh(store: Store, run_id: RunId) -> Self {
        Self {
            store,
            run_id,
            done: Mutex::new(HashMap::new()),
            conversations: Mutex::new(HashMap::new()),
            started: HashMap::new(),
            retries: HashMap::new(),
            resumed: false,
            replayed: AtomicU32::new(0),
        }
    }

    /// The journal of a run being resumed: its done steps are loaded.
    pub(crate) async fn load(store: Store, run_id: RunId) -> Result<Self, StoreError> {
        let mut done = HashMap::new();
        let mut started = HashMap::new();
        for s in store.steps(&run_id).await? {
            match s.state {
                StepState::Done => {
                    done.insert(s.key, s.data);
                }
                StepState::Started => {
                    if let Some(agent) = s.agent_id {
                        started.insert(s.key, AgentId::from_string(agent));
                    }
                }
            }
        }
        let mut conversations = HashMap::new();
        for (key, text) in store.step_conversations(&run_id).await? {
            match serde_json::from_str::<Vec<Message>>(&text) {
                Ok(messages) => {
                    conversations.insert(key, messages);
                }
                Err(e) => {
                    tracing::warn!(key = %key, error = %e, "a stored conversation does not read back; its agent starts afresh");
                }
            }
        }
        // The latest retry of a step wins (a retried agent that failed again).
        let retries = store
            .retry_plans(&run_id)
            .await?
            .into_iter()
            .map(|p| (p.step.clone(), p))
            .collect();
        Ok(Self {
            store,
            run_id,
            done: Mutex::new(done),
            conversations: Mutex::new(conversations),
            started,
            retries,
            resumed: true,
            replayed: AtomicU32::new(0),
        })
    }

    /// True when this run is being resumed.
    pub(crate) fn is_resumed(&self) -> bool {
        self.resumed
    }

    /// How many stored steps were read back instead of run.
    pub(crate) fn replayed(&self) -> u32 {
        self.replayed.load(Ordering::Relaxed)
    }

    /// The stored result of step `key`, if it is done and reads as a `T`. A stored
    /// value that no longer reads (written by another version) is run again.
    pub(crate) fn done<T: DeserializeOwned>(&self, key: &StepKey) -> Option<T> {
        let stored = key.to_string();
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        let value = done.get(&stored)?;
        match serde_json::from_value(value.clone()) {
            Ok(v) => {
                // The workspace's bookkeeping is not work read back instead of done.
                if !matches!(
                    key,
                    StepKey::Workspace
                        | StepKey::Merge(_)
                        | StepKey::CrewWorktree
                        | StepKey::CrewBranch
                        | StepKey::Base
                ) {
                    self.replayed.fetch_add(1, Ordering::Relaxed);
                }
                Some(v)
            }
            Err(e) => {
                tracing::warn!(key = %stored, error = %e, "a stored step does not read back; running it again");
                None
            }
        }
    }

    /// The stored result of step `key`, as [`Journal::done`], for bookkeeping that
    /// looks ahead (it does not count as a step read back).
    pub(crate) fn peek<T: DeserializeOwned>(&self, key: &StepKey) -> Option<T> {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        serde_json::from_value(done.get(&key.to_string())?.clone()).ok()
    }

    /// The stored results of every done `merge/…` step, in no particular order
    /// (bookkeeping: none counts as a step read back).
    pub(crate) fn done_merges(&self) -> Vec<serde_json::Value> {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        done.iter()
            .filter(|(key, _)| key.starts_with("merge/"))
            .map(|(_, value)| value.clone())
            .collect()
    }

    /// The agent an earlier process began step `key` with, when the step was begun
    /// but not recorded as done. The agent a retry replaces is not one: its step runs
    /// again, even when it completed (a validator faulted on its work).
    pub(crate) fn started_by(&self, key: &StepKey) -> Option<&AgentId> {
        if self.has(key) {
            return None;
        }
        let stored = key.to_string();
        let agent = self.started.get(&stored)?;
        match self.retries.get(&stored) {
            Some(plan) if &plan.agent_id == agent => None,
            _ => Some(agent),
        }
    }

    /// The retry that reopened step `key`, while the step is not done again.
    pub(crate) fn retry_of(&self, key: &StepKey) -> Option<&RetryPlan> {
        if self.has(key) {
            return None;
        }
        self.retries.get(&key.to_string())
    }

    /// True when step `key` is stored as done (without reading it back).
    pub(crate) fn has(&self, key: &StepKey) -> bool {
        self.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&key.to_string())
    }

    /// Records that step `key` begins, done by `agent` (before it runs).
    pub(crate) async fn begin(
        &self,
        key: &StepKey,
        agent: Option<&AgentId>,
        input: &StepInput<'_>,
    ) -> Result<(), StoreError> {
        let input = serde_json::to_value(input).unwrap_or(serde_json::Value::Null);
        self.store
            .begin_step(
                &self.run_id,
                &key.to_string(),
                agent.map(AgentId::as_str),
                &input,
            )
            .await
    }

    /// Stores step `key`'s result (and consumes the control messages it took in, in
    /// the same transaction). Returns once it is committed.
    pub(crate) async fn finish<T: Serialize>(
        &self,
        key: &StepKey,
        agent: Option<&AgentId>,
        result: &T,
        consume: Vec<i64>,
    ) -> Result<(), StoreError> {
        let value = serde_json::to_value(result).unwrap_or(serde_json::Value::Null);
        self.store
            .finish_step(
                &self.run_id,
                &key.to_string(),
                agent.map(AgentId::as_str),
                &value,
                consume,
                None,
            )
            .await
    }

    /// Stores step `key`'s result together with the final conversation of `agent`,
    /// which did it; [`Journal::conversation`] reads it back, also after a resume.
    pub(crate) async fn finish_agent<T: Serialize>(
        &self,
        key: &StepKey,
        agent: &AgentId,
        result: &T,
        conversation: &[Message],
    ) -> Result<(), StoreError> {
        let value = serde_json::to_value(result).unwrap_or(serde_json::Value::Null);
        let text = serde_json::to_string(conversation).ok();
        self.store
            .finish_step(
                &self.run_id,
                &key.to_string(),
                Some(agent.as_str()),
                &value,
                Vec::new(),
                text,
            )
            .await?;
        self.conversations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_string(), conversation.to_vec());
        Ok(())
    }

    /// Stores step `key`'s result as [`Journal::finish_agent`] does and makes it read
    /// back from now on, as if it had been stored when this run was loaded (a step
    /// finished from the store on resume, which the mode then replays).
    pub(crate) async fn finish_recovered<T: Serialize>(
        &self,
        key: &StepKey,
        agent: &AgentId,
        result: &T,
        conversation: &[Message],
    ) -> Result<(), StoreError> {
        self.finish_agent(key, agent, result, conversation).await?;
        let value = serde_json::to_value(result).unwrap_or(serde_json::Value::Null);
        self.done
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_string(), value);
        Ok(())
    }

    /// The final conversation of the agent that did step `key`, when it is stored.
    pub(crate) fn conversation(&self, key: &StepKey) -> Option<Vec<Message>> {
        self.conversations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key.to_string())
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_stored_form() {
        let it = Round::Iteration(3);
        let cases = [
            (StepKey::Decision, "decision"),
            (StepKey::member("Alice"), "member/alice"),
            (StepKey::Plan(Round::Only), "plan"),
            (StepKey::Plan(it), "it3/plan"),
            (StepKey::worker(Round::Only, "Bob"), "worker/bob"),
            (StepKey::worker(it, "bob"), "it3/worker/bob"),
            (StepKey::Synthesis(Round::Only), "synthesis"),
            (StepKey::Synthesis(it), "it3/synthesis"),
            (StepKey::Evaluation(3), "it3/evaluation"),
            (StepKey::Inbox(3), "it3/inbox"),
            (StepKey::Workspace, "workspace"),
            (StepKey::Merge("it2".into()), "merge/it2"),
            (StepKey::Agent("swarm-2".into()), "agent/swarm-2"),
            (StepKey::CrewPlan, "crew/plan"),
            (StepKey::CrewWorktree, "crew/worktree"),
            (StepKey::CrewExecution(1), "crew/r1/executor"),
            (StepKey::CrewReview(0), "crew/r0/review"),
            (StepKey::CrewBranch, "crew/branch"),
            (StepKey::Base, "base"),
            (
                StepKey::Child {
                    parent: AgentId::from_string("a-1".to_owned()),
                    n: 2,
                },
                "child/a-1/2",
            ),
        ];
        for (key, stored) in cases {
            assert_eq!(key.to_string(), stored);
        }
    }
}

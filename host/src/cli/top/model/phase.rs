//! What a run is doing now, derived from its journal steps and its agents: the
//! orchestrate and reflect modes journal every step (plan, workers, synthesis,
//! evaluation), the others are read from their agents' roles and states.

use crewbox::types::{AgentRow, StepOutline, StepState};
use crewbox::vocab::AgentState;
use crewbox::{Mode, RunStatus};

/// A run's current phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Recorded; nothing has started yet.
    Starting,
    /// The orchestrator (or crew planner) is planning.
    Planning,
    /// The plan is stored; its workers are being started.
    Dispatching,
    /// Workers or members are working: how many of how many are done.
    Waiting {
        /// Finished.
        done: usize,
        /// All of them.
        total: usize,
    },
    /// The synthesis of the workers' results.
    Synthesising,
    /// The reflect evaluator is scoring the iteration.
    Evaluating,
    /// Members' branches are being merged into the integration branch.
    Merging,
    /// The crew executor is working.
    Executing,
    /// The crew reviewer is reviewing.
    Reviewing,
    /// The run is unfinished and no process drives it (`crewbox resume` finishes it).
    Interrupted,
    /// The run has ended.
    Finished(RunStatus),
}

impl Phase {
    /// A short label for a status line.
    pub fn label(self) -> String {
        match self {
            Self::Starting => "starting".into(),
            Self::Planning => "planning".into(),
            Self::Dispatching => "dispatching".into(),
            Self::Waiting { done, total } => format!("waiting for workers ({done}/{total} done)"),
            Self::Synthesising => "synthesising".into(),
            Self::Evaluating => "evaluating".into(),
            Self::Merging => "merging branches".into(),
            Self::Executing => "executing".into(),
            Self::Reviewing => "reviewing".into(),
            Self::Interrupted => "interrupted (resumable)".into(),
            Self::Finished(status) => format!("finished: {status}"),
        }
    }
}

/// The phase of a run in `mode` with `status`, its journal `steps` (in the order they
/// were begun) and its `agents` (in creation order).
pub fn derive(
    mode: Mode,
    status: RunStatus,
    interrupted: bool,
    steps: &[StepOutline],
    agents: &[AgentRow],
) -> Phase {
    if status != RunStatus::Running {
        return Phase::Finished(status);
    }
    if interrupted {
        return Phase::Interrupted;
    }
    match mode {
        Mode::Orchestrate | Mode::Reflect => team_round(steps),
        Mode::Crew => crew(agents),
        Mode::Single | Mode::Swarm | Mode::Broadcast | Mode::Sequential => members(agents),
    }
}

/// The phase of the newest orchestrate round (`plan`, `worker/…`, `synthesis`, or
/// the same under `it<n>/` for reflect).
fn team_round(steps: &[StepOutline]) -> Phase {
    let round_of = |key: &str| -> u32 {
        key.strip_prefix("it")
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or(0)
    };
    let Some(round) = steps.iter().map(|s| round_of(&s.key)).max() else {
        return Phase::Starting;
    };
    let prefix = if round == 0 {
        String::new()
    } else {
        format!("it{round}/")
    };
    let current: Vec<(&str, StepState)> = steps
        .iter()
        .filter_map(|s| Some((s.key.strip_prefix(&prefix)?, s.state)))
        .filter(|(k, _)| round != 0 || round_of(k) == 0)
        .collect();
    let step = |name: &str| current.iter().find(|(k, _)| *k == name).map(|(_, s)| *s);
    // A merge of a stage is journalled at the top level (`merge/it2`).
    let merging = steps
        .iter()
        .any(|s| s.key.starts_with("merge/") && s.state == StepState::Started);
    if merging {
        return Phase::Merging;
    }
    if step("evaluation").is_some() {
        return match step("evaluation") {
            Some(StepState::Started) => Phase::Evaluating,
            // The next iteration's plan is about to begin.
            _ => Phase::Planning,
        };
    }
    if step("synthesis").is_some() {
        return Phase::Synthesising;
    }
    let workers: Vec<StepState> = current
        .iter()
        .filter(|(k, _)| k.starts_with("worker/"))
        .map(|(_, s)| *s)
        .collect();
    if !workers.is_empty() {
        let done = workers.iter().filter(|s| **s == StepState::Done).count();
        return Phase::Waiting {
            done,
            total: workers.len(),
        };
    }
    match step("plan") {
        Some(StepState::Done) => Phase::Dispatching,
        Some(StepState::Started) | None => Phase::Planning,
    }
}

/// A crew's phase: which of its roles is running now.
fn crew(agents: &[AgentRow]) -> Phase {
    match agents
        .iter()
        .rev()
        .find(|a| matches!(a.state, AgentState::Running | AgentState::Queued))
        .map(|a| a.role.as_str())
    {
        Some("planner") => Phase::Planning,
        Some("reviewer") => Phase::Reviewing,
        Some(_) => Phase::Executing,
        None if agents.is_empty() => Phase::Starting,
        // Between two roles: the next one is being started.
        None => Phase::Dispatching,
    }
}

/// The phase of modes that only run members: how many have finished.
fn members(agents: &[AgentRow]) -> Phase {
    if agents.is_empty() {
        return Phase::Starting;
    }
    Phase::Waiting {
        done: agents.iter().filter(|a| a.state.is_terminal()).count(),
        total: agents.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crewbox::AgentId;
    use crewbox::vocab::AgentStats;

    fn steps(list: &[(&str, StepState)]) -> Vec<StepOutline> {
        list.iter()
            .map(|(k, s)| StepOutline {
                key: (*k).into(),
                state: *s,
            })
            .collect()
    }

    fn agent(role: &str, state: AgentState) -> AgentRow {
        AgentRow {
            id: AgentId::from_string(format!("a-{role}")),
            parent: None,
            name: role.into(),
            role: role.into(),
            state,
            stats: AgentStats::default(),
            error: None,
            created_at: 0,
            started_at: None,
            finished_at: None,
        }
    }

    fn orchestrate(list: &[(&str, StepState)]) -> Phase {
        derive(
            Mode::Orchestrate,
            RunStatus::Running,
            false,
            &steps(list),
            &[],
        )
    }

    use StepState::{Done, Started};

    #[test]
    fn an_orchestrate_round_goes_plan_dispatch_wait_synthesise() {
        assert_eq!(orchestrate(&[]), Phase::Starting);
        assert_eq!(orchestrate(&[("plan", Started)]), Phase::Planning);
        assert_eq!(orchestrate(&[("plan", Done)]), Phase::Dispatching);
        assert_eq!(
            orchestrate(&[
                ("plan", Done),
                ("worker/alice", Done),
                ("worker/bob", Started)
            ]),
            Phase::Waiting { done: 1, total: 2 }
        );
        assert_eq!(
            orchestrate(&[
                ("plan", Done),
                ("worker/alice", Done),
                ("synthesis", Started)
            ]),
            Phase::Synthesising
        );
        assert_eq!(
            orchestrate(&[("plan", Done), ("merge/plan", Started)]),
            Phase::Merging
        );
    }

    #[test]
    fn reflect_reads_the_newest_iteration() {
        let phase = |list: &[(&str, StepState)]| {
            derive(Mode::Reflect, RunStatus::Running, false, &steps(list), &[])
        };
        let first = [
            ("decision", Done),
            ("it1/plan", Done),
            ("it1/worker/alice", Done),
            ("it1/synthesis", Done),
        ];
        let mut list = first.to_vec();
        list.push(("it1/evaluation", Started));
        assert_eq!(phase(&list), Phase::Evaluating);
        list.pop();
        list.push(("it1/evaluation", Done));
        assert_eq!(phase(&list), Phase::Planning, "the next plan is due");
        list.push(("it2/plan", Done));
        list.push(("it2/worker/bob", Started));
        assert_eq!(phase(&list), Phase::Waiting { done: 0, total: 1 });
    }

    #[test]
    fn crews_and_members_are_read_from_their_agents() {
        let crew = |agents: &[AgentRow]| derive(Mode::Crew, RunStatus::Running, false, &[], agents);
        assert_eq!(
            crew(&[agent("planner", AgentState::Running)]),
            Phase::Planning
        );
        assert_eq!(
            crew(&[
                agent("planner", AgentState::Completed),
                agent("executor", AgentState::Running)
            ]),
            Phase::Executing
        );
        assert_eq!(
            crew(&[
                agent("planner", AgentState::Completed),
                agent("executor", AgentState::Completed),
                agent("reviewer", AgentState::Running)
            ]),
            Phase::Reviewing
        );
        let swarm = derive(
            Mode::Swarm,
            RunStatus::Running,
            false,
            &[],
            &[
                agent("a", AgentState::Completed),
                agent("b", AgentState::Running),
            ],
        );
        assert_eq!(swarm, Phase::Waiting { done: 1, total: 2 });
    }

    #[test]
    fn ended_and_interrupted_runs_say_so() {
        assert_eq!(
            derive(Mode::Single, RunStatus::Failed, false, &[], &[]),
            Phase::Finished(RunStatus::Failed)
        );
        assert_eq!(
            derive(Mode::Single, RunStatus::Running, true, &[], &[]),
            Phase::Interrupted
        );
    }
}

//! The view model behind `crewbox top`: plain data, updated by applying stored events
//! and the few rows the dashboard reads (runs, one run's agents and journal steps,
//! schedules). No terminal and no store in here, so every rule is unit-tested.
//!
//! A run's detail is followed incrementally: it keeps the sequence number of the last
//! event it applied and ignores anything at or below it, so the initial read of its
//! latest events and the global poll of newer ones can overlap without doubling.

pub mod phase;

use std::collections::{HashMap, VecDeque};

pub use phase::Phase;

use crewbox::event::{Artifact, Event, EventRecord, IterationRecord};
use crewbox::types::{AgentNode, AgentRow, AgentTree, RunRow, ScheduleRecord, StepOutline};
use crewbox::vocab::AgentState;
use crewbox::{AgentId, RunId};

/// Events kept in a run's tail.
pub const TAIL_LEN: usize = 200;
/// Turns and tool calls kept per agent.
pub const ACTIVITY_LEN: usize = 50;
/// The longest text kept of one line (model text, tool arguments).
const LINE_CHARS: usize = 240;

/// Everything the dashboard shows.
#[derive(Debug, Default)]
pub struct Dashboard {
    /// The newest runs, newest first.
    pub runs: Vec<RunRow>,
    /// Which run is selected (an index into `runs`).
    pub selected: usize,
    /// The selected run, followed in detail.
    pub detail: Option<RunDetail>,
    /// The scheduled jobs.
    pub schedules: Vec<ScheduleRecord>,
    /// Store-wide facts.
    pub health: Health,
    /// The newest event sequence number seen across the store.
    pub last_seq: i64,
    /// The user picked a run: keep it selected instead of following the newest.
    pub pinned: bool,
}

/// Store-wide facts shown beside the schedules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    /// Agents running in every process.
    pub running_agents: u64,
    /// Agents queued.
    pub queued_agents: u64,
    /// Unfinished runs.
    pub unfinished: usize,
    /// Unfinished runs no live process drives.
    pub interrupted: usize,
    /// The database file's size.
    pub store_bytes: u64,
}

/// The run the dashboard follows in detail.
#[derive(Debug)]
pub struct RunDetail {
    /// The run.
    pub run_id: RunId,
    /// The last event applied (newer ones are applied, older ones ignored).
    pub seen: i64,
    /// Its agents, in creation order.
    pub agents: Vec<AgentRow>,
    /// Its agents as a tree: (index into `agents`, depth), in the order shown.
    pub tree: Vec<(usize, usize)>,
    /// Which line of `tree` is selected.
    pub selected: usize,
    /// Its journal steps.
    pub steps: Vec<StepOutline>,
    /// Its reflect iterations, in order.
    pub iterations: Vec<IterationRecord>,
    /// Its newest events, one line each.
    pub tail: VecDeque<TailLine>,
    /// Each agent's newest turns and tool calls.
    pub activity: HashMap<AgentId, VecDeque<Activity>>,
    /// An event came that the stored agents or steps may not reflect yet.
    pub stale: bool,
}

/// One line of a run's event tail.
#[derive(Clone, Debug, PartialEq)]
pub struct TailLine {
    /// The event's sequence number.
    pub seq: i64,
    /// When (ms).
    pub at: i64,
    /// The agent, when the event is about one.
    pub agent: Option<AgentId>,
    /// What happened.
    pub text: String,
}

/// Something an agent did.
#[derive(Clone, Debug, PartialEq)]
pub enum Activity {
    /// A model reply.
    Turn {
        /// The turn.
        turn: u32,
        /// Its first line.
        text: String,
        /// Tools it called.
        tools: Vec<String>,
        /// Tokens in and out.
        tokens: (u64, u64),
    },
    /// A tool call.
    Tool {
        /// The turn.
        turn: u32,
        /// The tool.
        tool: String,
        /// Its arguments (capped).
        args: String,
        /// Whether it succeeded.
        ok: bool,
    },
    /// A steering message reached it.
    Steered {
        /// The message.
        message: String,
    },
}

impl Dashboard {
    /// The selected run's row.
    pub fn selected_run(&self) -> Option<&RunRow> {
        self.runs.get(self.selected)
    }

    /// Replaces the run list: the newest run is selected until the user picks one,
    /// which then stays selected while it is listed.
    pub fn set_runs(&mut self, runs: Vec<RunRow>) {
        let keep = self
            .selected_run()
            .filter(|_| self.pinned)
            .map(|r| r.id.clone());
        self.runs = runs;
        self.selected = keep
            .and_then(|id| self.runs.iter().position(|r| r.id == id))
            .unwrap_or(0)
            .min(self.runs.len().saturating_sub(1));
    }

    /// Moves the run selection by `delta` lines (clamped).
    pub fn move_run(&mut self, delta: isize) {
        self.pinned = true;
        self.selected = step(self.selected, delta, self.runs.len());
    }

    /// Whether the followed detail is not the selected run's (it must be loaded).
    pub fn detail_outdated(&self) -> bool {
        match (self.selected_run(), &self.detail) {
            (Some(run), Some(d)) => run.id != d.run_id,
            (Some(_), None) => true,
            (None, Some(_)) => true,
            (None, None) => false,
        }
    }

    /// Applies new events from the global poll: the followed run's update its detail;
    /// every event advances `last_seq`. Returns the runs they touched.
    pub fn apply_all(&mut self, events: &[EventRecord]) -> Vec<RunId> {
        let mut touched: Vec<RunId> = Vec::new();
        for e in events {
            self.last_seq = self.last_seq.max(e.seq);
            if !touched.contains(&e.run_id) {
                touched.push(e.run_id.clone());
            }
            if let Some(d) = self.detail.as_mut().filter(|d| d.run_id == e.run_id) {
                d.apply(e);
            }
        }
        touched
    }

    /// The phase of the selected run.
    pub fn phase(&self) -> Option<Phase> {
        let run = self.selected_run()?;
        let d = self.detail.as_ref().filter(|d| d.run_id == run.id)?;
        Some(phase::derive(
            run.mode,
            run.status,
            run.is_interrupted(),
            &d.steps,
            &d.agents,
        ))
    }
}

impl RunDetail {
    /// A detail of `run_id` that has applied nothing yet.
    pub fn new(run_id: RunId) -> Self {
        Self {
            run_id,
            seen: 0,
            agents: Vec::new(),
            tree: Vec::new(),
            selected: 0,
            steps: Vec::new(),
            iterations: Vec::new(),
            tail: VecDeque::new(),
            activity: HashMap::new(),
            stale: false,
        }
    }

    /// Replaces the agents (keeping the same agent selected) and rebuilds the tree:
    /// children under their parents, each level in creation order.
    pub fn set_agents(&mut self, agents: Vec<AgentRow>) {
        let keep = self.selected_agent().map(|a| a.id.clone());
        let nodes: Vec<AgentNode> = agents
            .iter()
            .map(|a| AgentNode {
                id: a.id.clone(),
                parent: a.parent.clone(),
                name: a.name.clone(),
                role: a.role.clone(),
                state: a.state,
                join: None,
                created_at: a.created_at,
            })
            .collect();
        self.tree = AgentTree::build(nodes)
            .preorder()
            .into_iter()
            .map(|(i, depth, _)| (i, depth))
            .collect();
        self.agents = agents;
        self.selected = keep
            .and_then(|id| self.tree.iter().position(|&(i, _)| self.agents[i].id == id))
            .unwrap_or(self.selected)
            .min(self.tree.len().saturating_sub(1));
    }

    /// The selected agent.
    pub fn selected_agent(&self) -> Option<&AgentRow> {
        self.tree
            .get(self.selected)
            .and_then(|&(i, _)| self.agents.get(i))
    }

    /// Moves the agent selection by `delta` lines (clamped).
    pub fn move_agent(&mut self, delta: isize) {
        self.selected = step(self.selected, delta, self.tree.len());
    }

    /// An agent's name, or its id while its row is not read yet.
    pub fn name_of(&self, id: &AgentId) -> String {
        self.agents
            .iter()
            .find(|a| &a.id == id)
            .map_or_else(|| id.to_string(), |a| a.name.clone())
    }

    /// Applies one stored event of this run; one at or below `seen` is ignored.
    pub fn apply(&mut self, e: &EventRecord) {
        if e.seq <= self.seen || e.run_id != self.run_id {
            return;
        }
        self.seen = e.seq;
        self.tail.push_back(TailLine {
            seq: e.seq,
            at: e.at,
            agent: e.agent_id.clone(),
            text: summary(&e.event),
        });
        while self.tail.len() > TAIL_LEN {
            self.tail.pop_front();
        }
        let activity = match &e.event {
            Event::ModelReply {
                turn,
                text,
                tool_calls,
                usage,
                ..
            } => Some(Activity::Turn {
                turn: *turn,
                text: clean(text),
                tools: tool_calls.iter().map(|t| clean(t)).collect(),
                tokens: (usage.input, usage.output),
            }),
            Event::ToolCall {
                turn,
                tool,
                args,
                ok,
                ..
            } => Some(Activity::Tool {
                turn: *turn,
                tool: clean(tool),
                args: clean(args),
                ok: *ok,
            }),
            Event::AgentSteer { message } => Some(Activity::Steered {
                message: clean(message),
            }),
            _ => None,
        };
        if let (Some(a), Some(agent)) = (activity, &e.agent_id) {
            let list = self.activity.entry(agent.clone()).or_default();
            list.push_back(a);
            while list.len() > ACTIVITY_LEN {
                list.pop_front();
            }
        }
        match &e.event {
            Event::ReflectIteration(it) => {
                // A retried iteration replaces the failed try shown before it.
                self.iterations.retain(|i| i.iteration != it.iteration);
                self.iterations.push(it.clone());
                self.iterations.sort_by_key(|i| i.iteration);
            }
            Event::AgentState { state, .. } => {
                if let Some(a) = e
                    .agent_id
                    .as_ref()
                    .and_then(|id| self.agents.iter_mut().find(|a| &a.id == id))
                {
                    a.state = *state;
                }
            }
            _ => {}
        }
        // Agents are created, counted and journalled without an event of their own.
        self.stale = true;
    }

    /// The selected agent's newest activity, oldest first.
    pub fn selected_activity(&self) -> Option<&VecDeque<Activity>> {
        self.selected_agent().and_then(|a| self.activity.get(&a.id))
    }

    /// The agents still queued or running.
    pub fn live_agents(&self) -> usize {
        self.agents
            .iter()
            .filter(|a| matches!(a.state, AgentState::Queued | AgentState::Running))
            .count()
    }
}

fn step(at: usize, delta: isize, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    at.saturating_add_signed(delta).min(len - 1)
}

/// The first line of `text`, capped, escaped ([`crate::text::escape`]): text from
/// models, tools and workers never reaches the terminal as control sequences.
pub fn clean(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("");
    let line = line.strip_suffix('\r').unwrap_or(line);
    let capped: String = line.chars().take(LINE_CHARS).collect();
    let mut out = crate::text::escape(&capped).into_owned();
    if line.chars().count() > LINE_CHARS || text.trim().lines().nth(1).is_some() {
        out.push('…');
    }
    out
}

/// One line for any event.
pub fn summary(event: &Event) -> String {
    match event {
        Event::RunStarted { mode, provider } => {
            format!("run started ({mode}, {})", clean(provider))
        }
        Event::RunResumed {
            pid,
            interrupted_agents,
        } => format!("resumed by process {pid} ({interrupted_agents} agents interrupted)"),
        Event::RunInterrupted {} => "interrupted (resumable)".into(),
        Event::RunFinished {
            status,
            exit_reason,
        } => format!("run {status} ({exit_reason})"),
        Event::BatchFinalized(b) => format!(
            "batch: {} group(s), {} swarm(s), {} individual(s)",
            b.groups.len(),
            b.swarms.len(),
            b.individuals.len()
        ),
        Event::AgentState { state, error, .. } => match error {
            Some(e) => format!("{state}: {}", clean(e)),
            None => state.to_string(),
        },
        Event::AgentWorktree { .. } => "worktree created".into(),
        Event::AgentWrapUp { turn } => format!("soft turn limit at turn {turn}: wrapping up"),
        Event::AgentCompacted { dropped } => format!("context compacted ({dropped} dropped)"),
        Event::AgentSteer { message } => format!("steered: {}", clean(message)),
        Event::AgentSteerUndelivered { why, .. } => {
            format!("steer not delivered: {}", clean(why))
        }
        Event::AgentContinue { reason, .. } => format!("asked to continue ({reason:?})"),
        Event::AgentFixRound { round } => format!("fix round {round}"),
        Event::AgentValidation { status, .. } => format!("validation {status:?}"),
        Event::AgentArtifact(Artifact::Branch(b)) => {
            format!("branch {}", clean(&b.branch))
        }
        Event::AgentChain { .. } => "chained agent started".into(),
        Event::AgentCheckpoint { .. } => "worktree checkpointed".into(),
        Event::AgentRecovered { .. } => {
            "completed earlier; its step finished from the store".into()
        }
        Event::AgentLeftOut { files, more } => {
            format!(
                "left {} file(s) out of its commit",
                files.len() + *more as usize
            )
        }
        Event::ModelReply { turn, text, .. } => format!("turn {turn}: {}", clean(text)),
        Event::ProviderBreakerOpen { breaker, .. } => format!("circuit {} opened", clean(breaker)),
        Event::ToolCall { tool, ok, args, .. } => format!(
            "{} {} {}",
            if *ok { "✓" } else { "✗" },
            clean(tool),
            clean(args)
        ),
        Event::ValidatorVerdict(r) => {
            format!("validator {} round {}", clean(&r.validator), r.round)
        }
        Event::SwarmDelivery { wave, agents } => {
            format!("swarm wave {wave}: {} delivered", agents.len())
        }
        Event::GroupDelivery { group, results, .. } => {
            format!("group {}: {} delivered", clean(group), results.len())
        }
        Event::GroupDeliveryFailed {
            group, attempts, ..
        } => {
            format!("group {} delivery failed after {attempts}", clean(group))
        }
        Event::CrewReview(v) => format!("review {}", v.label()),
        Event::OrchestratePlan { assignments, .. } => format!("plan: {assignments} assignment(s)"),
        Event::OrchestrateUnknownWorkers { names } => {
            format!("unknown workers: {}", clean(&names.join(", ")))
        }
        Event::MergeConflict { member, files, .. } => format!(
            "merge conflict: {} ({} file(s))",
            clean(member),
            files.len()
        ),
        Event::ReflectIteration(it) => format!(
            "iteration {} score {}",
            it.iteration,
            it.score.map_or_else(|| "-".into(), |s| format!("{s:.2}"))
        ),
        Event::ReflectScoreUnreadable { iteration, assumed } => {
            format!("iteration {iteration}: score unreadable, assumed {assumed:.2}")
        }
        Event::TeamMessages { iteration, count } => {
            format!("iteration {iteration} took {count} team message(s)")
        }
        Event::Other { kind, .. } => clean(kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crewbox::vocab::{AgentStats, Usage};
    use crewbox::{Mode, RunStatus};

    fn run_id() -> RunId {
        RunId::from_string(String::from("r-1"))
    }

    fn agent(id: &str, parent: Option<&str>, created_at: i64) -> AgentRow {
        AgentRow {
            id: AgentId::from_string(String::from(id)),
            parent: parent.map(|p| AgentId::from_string(String::from(p))),
            name: id.trim_start_matches("a-").into(),
            role: "worker".into(),
            state: AgentState::Running,
            stats: AgentStats::default(),
            error: None,
            created_at,
            started_at: None,
            finished_at: None,
        }
    }

    fn event(seq: i64, agent: Option<&str>, event: Event) -> EventRecord {
        EventRecord {
            seq,
            run_id: run_id(),
            agent_id: agent.map(|a| AgentId::from_string(String::from(a))),
            at: seq,
            event,
        }
    }

    fn reply(turn: u32, text: &str) -> Event {
        Event::ModelReply {
            turn,
            text: text.into(),
            tool_calls: vec!["read_file".into()],
            usage: Usage {
                input: 10,
                output: 2,
            },
            stop: None,
            reasoning: None,
        }
    }

    #[test]
    fn events_apply_once_in_sequence() {
        let mut d = RunDetail::new(run_id());
        d.set_agents(vec![agent("a-alice", None, 1)]);
        d.apply(&event(5, Some("a-alice"), reply(1, "hello\nmore")));
        // The initial read and the poll overlap: an event seen already is skipped.
        d.apply(&event(5, Some("a-alice"), reply(1, "hello")));
        d.apply(&event(4, Some("a-alice"), reply(0, "old")));
        assert_eq!(d.seen, 5);
        assert_eq!(d.tail.len(), 1);
        assert_eq!(d.name_of(d.tail[0].agent.as_ref().unwrap()), "alice");
        assert_eq!(d.tail[0].text, "turn 1: hello…");
        let activity = d.selected_activity().unwrap();
        assert_eq!(
            activity.iter().collect::<Vec<_>>(),
            [&Activity::Turn {
                turn: 1,
                text: "hello…".into(),
                tools: vec!["read_file".into()],
                tokens: (10, 2)
            }]
        );
        // Another run's events are not this detail's.
        let mut other = event(9, None, Event::RunInterrupted {});
        other.run_id = RunId::from_string(String::from("r-2"));
        d.apply(&other);
        assert_eq!(d.seen, 5);
    }

    #[test]
    fn agent_states_and_iterations_follow_events() {
        let mut d = RunDetail::new(run_id());
        d.set_agents(vec![agent("a-alice", None, 1)]);
        d.stale = false;
        d.apply(&event(
            1,
            Some("a-alice"),
            Event::AgentState {
                state: AgentState::Completed,
                error: None,
                exceeded: None,
                reason: None,
            },
        ));
        assert_eq!(d.agents[0].state, AgentState::Completed);
        assert!(d.stale, "the stored rows are read again");
        for (seq, iteration, score) in [(2, 1, 0.4), (3, 1, 0.5), (4, 2, 0.7)] {
            d.apply(&event(
                seq,
                None,
                Event::ReflectIteration(IterationRecord {
                    iteration,
                    score: Some(score),
                    ..IterationRecord::default()
                }),
            ));
        }
        let scores: Vec<(u32, Option<f64>)> = d
            .iterations
            .iter()
            .map(|i| (i.iteration, i.score))
            .collect();
        assert_eq!(scores, [(1, Some(0.5)), (2, Some(0.7))]);
    }

    #[test]
    fn the_tree_puts_workers_under_their_parent_in_creation_order() {
        let mut d = RunDetail::new(run_id());
        d.set_agents(vec![
            agent("a-orch", None, 1),
            agent("a-bob", Some("a-orch"), 3),
            agent("a-alice", Some("a-orch"), 2),
            agent("a-synth", None, 4),
        ]);
        let shown: Vec<(&str, usize)> = d
            .tree
            .iter()
            .map(|&(i, depth)| (d.agents[i].name.as_str(), depth))
            .collect();
        assert_eq!(shown, [("orch", 0), ("alice", 1), ("bob", 1), ("synth", 0)]);
        // The selection follows its agent when the rows are read again.
        d.move_agent(2);
        assert_eq!(d.selected_agent().unwrap().name, "bob");
        let mut again = d.agents.clone();
        again.insert(0, agent("a-early", None, 0));
        d.set_agents(again);
        assert_eq!(d.selected_agent().unwrap().name, "bob");
        d.move_agent(100);
        assert_eq!(d.selected_agent().unwrap().name, "synth");
    }

    fn run_row(id: &str) -> RunRow {
        RunRow {
            id: RunId::from_string(String::from(id)),
            mode: Mode::Single,
            prompt: "p".into(),
            team: None,
            status: RunStatus::Completed,
            exit_reason: None,
            pid: None,
            pid_identity: None,
            created_at: 0,
            finished_at: None,
            agents: 0,
            running: 0,
            tokens: (0, 0),
            cost: None,
        }
    }

    #[test]
    fn the_run_selection_survives_new_runs_and_polls_track_the_sequence() {
        let mut m = Dashboard::default();
        m.set_runs(vec![run_row("r-b"), run_row("r-a")]);
        m.set_runs(vec![run_row("r-c"), run_row("r-b")]);
        assert_eq!(m.selected_run().unwrap().id.as_str(), "r-c", "the newest");
        m.set_runs(vec![run_row("r-b"), run_row("r-a")]);
        m.move_run(1);
        assert_eq!(m.selected_run().unwrap().id.as_str(), "r-a");
        assert!(m.detail_outdated());
        m.detail = Some(RunDetail::new(RunId::from_string(String::from("r-a"))));
        assert!(!m.detail_outdated());
        m.set_runs(vec![run_row("r-c"), run_row("r-b"), run_row("r-a")]);
        assert_eq!(m.selected_run().unwrap().id.as_str(), "r-a");
        let mut e = event(7, None, Event::RunInterrupted {});
        e.run_id = RunId::from_string(String::from("r-a"));
        let touched = m.apply_all(&[e]);
        assert_eq!(m.last_seq, 7);
        assert_eq!(touched, [RunId::from_string(String::from("r-a"))]);
        assert_eq!(m.detail.as_ref().unwrap().tail.len(), 1);
    }

    #[test]
    fn model_text_never_reaches_the_terminal_as_escapes() {
        assert_eq!(clean("\u{1b}[2Jgone\u{7}"), "\\x1b[2Jgone\\x07");
        assert_eq!(clean("a\u{9b}b\u{202e}c"), "a\\u009bb\\u202ec");
        assert!(clean(&"x".repeat(1000)).chars().count() <= LINE_CHARS + 1);
    }
}

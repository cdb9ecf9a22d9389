//! The turn loop of one agent: ask the model, run the tools it asks for, deliver steering
//! messages after each tool call, and stop on completion, `finish`, a quota or a stop.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::compaction;
use super::lifecycle::AgentState;
use super::permissions::Permissions;
use super::quota::{Budget, Exceeded, Prices, TurnGate};
use crate::config::Quotas;
use crate::ids::{AgentId, RunId};
use crate::provider::{AgentLabel, CompletionRequest, Message, Provider};
use crate::store::{AgentStats, Store};
use crate::tool::registry::ToolRegistry;
use crate::tool::{Spawner, ToolContext};

/// Longest text kept in an event (replies and tool output are truncated there, not in the
/// conversation).
const EVENT_TEXT_CAP: usize = 2_000;

/// The message that turns a running agent into a wrapping-up one at its soft limit.
pub const WRAP_UP: &str = "You have reached your turn limit. Stop exploring: summarise what you did and what \
     remains, then call `finish` (or reply without tool calls).";

/// Everything that defines one agent.
#[derive(Clone)]
pub struct AgentSpec {
    /// Its id.
    pub id: AgentId,
    /// Its run.
    pub run_id: RunId,
    /// The agent that spawned it.
    pub parent: Option<AgentId>,
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// Its task.
    pub task: String,
    /// The system prompt.
    pub system_prompt: String,
    /// Effective permissions (already intersected with the parent's).
    pub perms: Permissions,
    /// The root its tools work in.
    pub workspace: PathBuf,
    /// Its quotas.
    pub quotas: Quotas,
    /// Its model.
    pub provider: Arc<dyn Provider>,
    /// Prices for the cost budget.
    pub prices: Option<Prices>,
}

/// How an agent ended.
#[derive(Clone, Debug)]
pub struct AgentOutcome {
    /// Terminal state.
    pub state: AgentState,
    /// Counters.
    pub stats: AgentStats,
    /// The final text (the `finish` summary, else the last reply).
    pub result: String,
    /// Why it failed, for error/aborted/stopped.
    pub error: Option<String>,
    /// Which budget ran out, for aborted.
    pub exceeded: Option<Exceeded>,
    /// The whole conversation (for fix rounds that continue the same agent).
    pub history: Vec<Message>,
}

/// The channels a running agent listens on.
pub struct AgentIo {
    /// Steering messages, delivered after the current tool call.
    pub steer: mpsc::UnboundedReceiver<String>,
    /// Stops the agent at the next await point.
    pub cancel: CancellationToken,
}

/// What the turn loop needs from its surroundings.
#[derive(Clone)]
pub struct RunnerEnv {
    /// Where facts go.
    pub store: Store,
    /// The tools.
    pub tools: Arc<ToolRegistry>,
    /// For `spawn_agent` (only used when the agent holds `spawn`).
    pub spawner: Option<Arc<dyn Spawner>>,
}

fn cap(text: &str) -> String {
    if text.len() <= EVENT_TEXT_CAP {
        return text.to_owned();
    }
    let mut end = EVENT_TEXT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// The first conversation of an agent.
pub fn initial_messages(spec: &AgentSpec) -> Vec<Message> {
    vec![
        Message::system(spec.system_prompt.clone()),
        Message::user(spec.task.clone()),
    ]
}

/// Runs the turn loop from `messages` until the agent ends. Records the agent's state
/// changes and events in the store; the caller records its final outcome.
pub async fn run_turns(
    env: &RunnerEnv,
    spec: &AgentSpec,
    io: &mut AgentIo,
    messages: Vec<Message>,
) -> AgentOutcome {
    let span =
        tracing::info_span!("agent", run_id = %spec.run_id, agent_id = %spec.id, role = %spec.role);
    TurnLoop {
        env,
        spec,
        budget: Budget::new(spec.quotas.clone(), spec.prices),
        messages,
        wrapped_up: false,
    }
    .run(io)
    .instrument(span)
    .await
}

struct TurnLoop<'a> {
    env: &'a RunnerEnv,
    spec: &'a AgentSpec,
    budget: Budget,
    messages: Vec<Message>,
    wrapped_up: bool,
}

enum Step {
    Next,
    Done(AgentState, String),
    Fail(AgentState, String, Option<Exceeded>),
}

impl TurnLoop<'_> {
    async fn run(mut self, io: &mut AgentIo) -> AgentOutcome {
        let deadline = Instant::now() + self.spec.quotas.wall_time;
        let mut last_text = String::new();
        let mut turn = 0u32;
        let cancel = io.cancel.clone();
        let step = loop {
            turn += 1;
            let step = tokio::select! {
                biased;
                _ = cancel.cancelled() => Step::Fail(AgentState::Stopped, "stopped on request".into(), None),
                _ = tokio::time::sleep_until(deadline) => Step::Fail(AgentState::Aborted, Exceeded::WallTime.to_string(), Some(Exceeded::WallTime)),
                step = self.turn(turn, io, &mut last_text).instrument(tracing::info_span!("turn", turn)) => step,
            };
            if !matches!(step, Step::Next) {
                break step;
            }
        };
        let (state, result, error, exceeded) = match step {
            Step::Done(state, result) => (state, result, None, None),
            Step::Fail(state, error, exceeded) => (state, last_text, Some(error), exceeded),
            Step::Next => unreachable!("the loop only breaks on an ending step"),
        };
        AgentOutcome {
            state,
            stats: self.budget.stats,
            result,
            error,
            exceeded,
            history: self.messages,
        }
    }

    async fn turn(&mut self, turn: u32, io: &mut AgentIo, last_text: &mut String) -> Step {
        let spec = self.spec;
        match self.budget.gate(turn) {
            TurnGate::Stop => {
                return Step::Fail(
                    AgentState::Aborted,
                    Exceeded::Turns.to_string(),
                    Some(Exceeded::Turns),
                );
            }
            TurnGate::WrapUp => {
                self.wrapped_up = true;
                self.messages.push(Message::user(WRAP_UP));
                self.env.store.log_event(
                    &spec.run_id,
                    Some(&spec.id),
                    "agent.wrap-up",
                    json!({ "turn": turn }),
                );
            }
            TurnGate::Continue => {}
        }
        let q = self.budget.quotas();
        let dropped = compaction::compact(&mut self.messages, q.context_tokens, q.keep_turns);
        if dropped > 0 {
            self.env.store.log_event(
                &spec.run_id,
                Some(&spec.id),
                "agent.compacted",
                json!({ "dropped": dropped }),
            );
        }
        // [plugin helper, issue 13] A request that cannot fit the token budget is not sent.
        if let Some(exceeded) = self
            .budget
            .refuses_request(compaction::estimate(&self.messages))
        {
            return Step::Fail(AgentState::Aborted, exceeded.to_string(), Some(exceeded));
        }
        let request = CompletionRequest {
            agent: AgentLabel {
                id: spec.id.to_string(),
                name: spec.name.clone(),
                role: spec.role.clone(),
            },
            turn,
            messages: self.messages.clone(),
            tools: self.env.tools.specs_for(&spec.perms.caps),
            max_tokens: None,
            workspace: Some(spec.workspace.clone()),
        };
        let reply =
            match tokio::time::timeout(q.model_timeout, spec.provider.complete(&request)).await {
                Err(_) => {
                    let msg = format!("model call stalled for {} s", q.model_timeout.as_secs());
                    return Step::Fail(AgentState::Aborted, msg, Some(Exceeded::WallTime));
                }
                Ok(Err(e)) => return Step::Fail(AgentState::Error, e.to_string(), None),
                Ok(Ok(reply)) => reply,
            };
        let broke = self.budget.charge_usage(reply.usage);
        self.env.store.log_event(
            &spec.run_id,
            Some(&spec.id),
            "model.reply",
            json!({
                "turn": turn,
                "text": cap(&reply.text),
                "tool_calls": reply.tool_calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
                "usage": reply.usage,
            }),
        );
        if !reply.text.is_empty() {
            *last_text = reply.text.clone();
        }
        self.messages.push(Message::assistant(
            reply.text.clone(),
            reply.tool_calls.clone(),
        ));
        if let Some(exceeded) = broke {
            return Step::Fail(AgentState::Aborted, exceeded.to_string(), Some(exceeded));
        }
        let ending = if self.wrapped_up {
            AgentState::Steered
        } else {
            AgentState::Completed
        };
        if reply.tool_calls.is_empty() {
            return Step::Done(ending, reply.text);
        }
        let ctx = ToolContext {
            agent_id: spec.id.clone(),
            root: spec.workspace.clone(),
            spawner: self
                .env
                .spawner
                .clone()
                .filter(|_| spec.perms.caps.contains(crate::tool::Capability::Spawn)),
        };
        let mut finish = None;
        for call in &reply.tool_calls {
            if let Err(exceeded) = self.budget.charge_tool_call() {
                // Answer the call so the conversation stays well-formed for a later fix round.
                self.messages
                    .push(Message::tool(call.id.clone(), format!("error: {exceeded}")));
                return Step::Fail(AgentState::Aborted, exceeded.to_string(), Some(exceeded));
            }
            let result = self
                .env
                .tools
                .call(&call.name, &ctx, call.args.clone(), &spec.perms.caps)
                .instrument(tracing::info_span!("tool", tool = %call.name))
                .await;
            let (ok, content) = match result {
                Ok(out) => {
                    if out.finish.is_some() {
                        finish = out.finish;
                    }
                    (true, out.content)
                }
                Err(e) => (false, format!("error: {e}")),
            };
            self.env.store.log_event(
                &spec.run_id,
                Some(&spec.id),
                "tool.call",
                json!({ "turn": turn, "tool": call.name, "args": cap(&call.args.to_string()), "ok": ok, "output": cap(&content) }),
            );
            self.messages.push(Message::tool(call.id.clone(), content));
            self.deliver_steering(io);
        }
        match finish {
            Some(summary) => {
                let result = if summary.trim().is_empty() {
                    last_text.clone()
                } else {
                    summary
                };
                Step::Done(ending, result)
            }
            None => Step::Next,
        }
    }

    fn deliver_steering(&mut self, io: &mut AgentIo) {
        while let Ok(message) = io.steer.try_recv() {
            self.env.store.log_event(
                &self.spec.run_id,
                Some(&self.spec.id),
                "agent.steer",
                json!({ "message": cap(&message) }),
            );
            self.messages.push(Message::user(format!(
                "Message from the operator: {message}"
            )));
        }
    }
}

//! The turn loop of one agent: ask the model, run the tools it asks for, deliver steering
//! messages between turns (never inside a batch of tool results), read why the model
//! stopped, and end on completion, `finish`, a quota, a stop or a typed failure.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::compaction;
use super::permissions::Permissions;
use super::quota::{Budget, Exceeded, Prices, TurnGate};
use crate::config::Quotas;
use crate::event::Event;
use crate::ids::{AgentId, RunId};
use crate::observe::spans;
use crate::provider::{
    AgentLabel, Completion, CompletionRequest, Message, Progress, Provider, ProviderError,
    StopReason, ToolCall, Usage,
};
use crate::store::{AgentStats, Store};
use crate::tool::registry::ToolRegistry;
use crate::tool::{Spawner, ToolContext};
use crate::vocab::AgentState;
pub use crate::vocab::FailReason;

/// Longest text kept in an event (replies and tool output are truncated there, not in the
/// conversation).
const EVENT_TEXT_CAP: usize = 2_000;

/// The message that turns a running agent into a wrapping-up one at its soft limit.
pub const WRAP_UP: &str = "You have reached your turn limit. Stop exploring: summarise what you did and what \
     remains, then call `finish` (or reply without tool calls).";

/// How a steering message reaches the model.
pub const STEER_PREFIX: &str = "Message from the operator: ";

/// Most replies cut at the output token limit that one run of the loop continues before
/// the agent fails as `truncated`.
pub const MAX_CONTINUATIONS: u32 = 2;

/// Most empty replies answered with a nudge before the agent fails as `empty-reply`.
pub const MAX_EMPTY_NUDGES: u32 = 1;

/// Sent after a text reply cut at the output token limit.
pub const CONTINUE: &str = "Your reply was cut off at the output token limit. Continue exactly where it \
     stopped, without repeating what you already wrote.";

/// The answer to a call that came after `finish` in one reply.
pub const AFTER_FINISH: &str =
    "error: not run: it came after `finish` in the same reply, and `finish` ended your work";

/// The result of the call a reply cut at the output token limit broke: its arguments
/// are incomplete, so it is not run (the complete calls before it are).
pub const CUT_CALL: &str = "error: not run: your reply was cut off at the output token limit inside this \
     call, so its arguments are incomplete (the history shows them as `{}`). Send the call again; \
     split large content into smaller calls.";

/// Sent after an empty reply.
pub const EMPTY_NUDGE: &str =
    "Your last reply was empty. Answer the task, call a tool, or call `finish`.";

/// Sent after a reply of reasoning only (a thinking model that stopped before its
/// answer).
pub const REASONING_NUDGE: &str = "Your last reply was reasoning only, with no answer. Answer now: \
     reply with your answer, call a tool, or call `finish`.";

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
    /// Whether its commands share the host's network (granted by the user's config or
    /// command line, never by a repository).
    pub network: bool,
    /// MCP servers it is granted (names of the user's servers; which of them it reaches
    /// also depends on its capabilities).
    pub mcp: Vec<String>,
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
    /// Why it failed, for every ending that is not a success.
    pub reason: Option<FailReason>,
    /// The whole conversation (for fix rounds that continue the same agent).
    pub history: Vec<Message>,
}

/// The channels a running agent listens on.
pub struct AgentIo {
    /// Steering messages, delivered before the next model call (after the whole batch of
    /// tool results), and before the agent may finish.
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
    /// The agent's process sandbox (only offered to tools when it holds `exec`).
    pub sandbox: Option<Arc<crate::sandbox::AgentSandbox>>,
    /// The MCP servers it reaches (already narrowed by its capabilities).
    pub mcp: Option<Arc<crate::mcp::AgentMcp>>,
    /// Its start, confirmed stored before its first effect.
    pub started: Arc<super::started::Started>,
}

/// `text` as an event holds it (a steer's message in `agent.steer`): cut past
/// [`EVENT_TEXT_CAP`] bytes, with its length.
pub(crate) fn cap(text: &str) -> String {
    if text.len() <= EVENT_TEXT_CAP {
        return text.to_owned();
    }
    format!(
        "{}… ({} bytes)",
        crate::text::within(text, EVENT_TEXT_CAP),
        text.len()
    )
}

/// The first conversation of an agent.
pub fn initial_messages(spec: &AgentSpec) -> Vec<Message> {
    vec![
        Message::system(spec.system_prompt.clone()),
        Message::user(spec.task.clone()),
    ]
}

/// What an agent's turn loop carries from one run of it to the next (its validators'
/// fix rounds): the quotas hold for the agent, not per round — one budget, one
/// wall-clock deadline, one count of turns — and its last reply stays its result when a
/// later round fails before replying.
pub struct Carry {
    budget: Budget,
    deadline: Instant,
    turns: u32,
    last_text: String,
}

impl Carry {
    /// Before the agent's first turn: its quotas whole, its wall time from now.
    pub fn new(spec: &AgentSpec) -> Self {
        // Quotas are checked at load, but a task from a worker's peer is not: a wall
        // time no clock can hold means no deadline, never a panic.
        let now = Instant::now();
        let deadline = now.checked_add(spec.quotas.wall_time).unwrap_or_else(|| {
            now + std::time::Duration::from_secs(crate::config::quotas::MAX_DURATION_S)
        });
        Self {
            budget: Budget::new(spec.quotas.clone(), spec.prices),
            deadline,
            turns: 0,
            last_text: String::new(),
        }
    }
}

/// Runs the turn loop from `messages` until the agent ends, within what `carry` says
/// is left of its quotas; returns its outcome (whose counters are the agent's so far)
/// and what a next round goes on from. Records the agent's state changes and events in
/// the store; the caller records its final outcome.
pub async fn run_turns(
    env: &RunnerEnv,
    spec: &AgentSpec,
    io: &mut AgentIo,
    messages: Vec<Message>,
    carry: Carry,
) -> (AgentOutcome, Carry) {
    let Carry {
        budget,
        deadline,
        turns,
        last_text,
    } = carry;
    TurnLoop {
        env,
        spec,
        budget,
        messages,
        wrapped_up: false,
        continuations: 0,
        empty_nudges: 0,
        cut_text: String::new(),
    }
    .run(io, deadline, turns, last_text)
    .await
}

struct TurnLoop<'a> {
    env: &'a RunnerEnv,
    spec: &'a AgentSpec,
    budget: Budget,
    messages: Vec<Message>,
    wrapped_up: bool,
    /// Replies cut at the output limit so far.
    continuations: u32,
    /// Empty replies nudged so far.
    empty_nudges: u32,
    /// Text of replies cut at the output limit, waiting for their continuation.
    cut_text: String,
}

/// How an agent failed.
struct Failure {
    state: AgentState,
    reason: FailReason,
    error: String,
    exceeded: Option<Exceeded>,
}

impl Failure {
    fn budget(exceeded: Exceeded) -> Self {
        Self {
            state: AgentState::Aborted,
            reason: FailReason::Budget,
            error: exceeded.to_string(),
            exceeded: Some(exceeded),
        }
    }
    /// Its start could not be stored, so it does nothing more.
    fn unrecorded(why: String) -> Self {
        Self {
            state: AgentState::Error,
            reason: FailReason::Internal,
            error: why,
            exceeded: None,
        }
    }
    /// An error whose text starts with its reason, so the report names it.
    fn typed(reason: FailReason, detail: impl std::fmt::Display) -> Self {
        Self {
            state: AgentState::Error,
            reason,
            error: format!("{reason}: {detail}"),
            exceeded: None,
        }
    }
}

enum Step {
    Next,
    Done(AgentState, String),
    Fail(Failure),
}

impl TurnLoop<'_> {
    async fn run(
        mut self,
        io: &mut AgentIo,
        deadline: Instant,
        mut turn: u32,
        mut last_text: String,
    ) -> (AgentOutcome, Carry) {
        let cancel = io.cancel.clone();
        let step = loop {
            turn = turn.saturating_add(1);
            let step = tokio::select! {
                biased;
                _ = cancel.cancelled() => Step::Fail(Failure {
                    state: AgentState::Stopped,
                    reason: FailReason::Stopped,
                    error: "stopped on request".into(),
                    exceeded: None,
                }),
                _ = tokio::time::sleep_until(deadline) => Step::Fail(Failure::budget(Exceeded::WallTime)),
                step = self.turn(turn, io, &mut last_text).instrument(spans::turn(turn)) => step,
            };
            if !matches!(step, Step::Next) {
                break step;
            }
        };
        let (state, result, error, exceeded, reason) = match step {
            Step::Done(state, result) => (state, result, None, None, None),
            Step::Fail(f) => (
                f.state,
                last_text.clone(),
                Some(f.error),
                f.exceeded,
                Some(f.reason),
            ),
            Step::Next => unreachable!("the loop only breaks on an ending step"),
        };
        if !result.trim().is_empty() {
            last_text.clone_from(&result);
        }
        let outcome = AgentOutcome {
            state,
            stats: self.budget.stats,
            result,
            error,
            exceeded,
            reason,
            history: self.messages,
        };
        let carry = Carry {
            budget: self.budget,
            deadline,
            // A next round (only after a success, which took its turn) goes on after it.
            turns: turn,
            last_text,
        };
        (outcome, carry)
    }

    fn log(&self, event: Event) {
        self.env
            .store
            .log_event(&self.spec.run_id, Some(&self.spec.id), event);
    }

    async fn turn(&mut self, turn: u32, io: &mut AgentIo, last_text: &mut String) -> Step {
        let spec = self.spec;
        match self.budget.gate(turn) {
            TurnGate::Stop => return Step::Fail(Failure::budget(Exceeded::Turns)),
            TurnGate::WrapUp => {
                self.wrapped_up = true;
                self.messages.push(Message::user(WRAP_UP));
                self.log(Event::AgentWrapUp { turn });
            }
            TurnGate::Continue => {}
        }
        // The last batch of tool results is complete here: a steer goes after all of them.
        self.deliver_steering(io);
        let q = self.budget.quotas().clone();
        let limits = spec
            .provider
            .limits_for(compaction::estimate(&self.messages))
            .await;
        let max_output = limits.max_output_tokens.unwrap_or(q.max_output_tokens);
        // The model's window holds the request and the reply: compact to what leaves
        // room for the output cap.
        let window = limits.context_tokens.map_or(q.context_tokens, |n| {
            q.context_tokens
                .min(n.saturating_sub(u64::from(max_output)))
        });
        let dropped = compaction::compact(&mut self.messages, window, q.keep_turns);
        if dropped > 0 {
            self.log(Event::AgentCompacted { dropped });
        }
        // A request that cannot fit the token budget is not sent.
        if let Some(exceeded) = self
            .budget
            .refuses_request(compaction::estimate(&self.messages))
        {
            return Step::Fail(Failure::budget(exceeded));
        }
        let (tools, tools_hash) = self.tool_specs().await;
        let request = CompletionRequest {
            agent: AgentLabel {
                id: spec.id.to_string(),
                name: spec.name.clone(),
                role: spec.role.clone(),
            },
            turn,
            messages: self.messages.clone(),
            tools,
            max_tokens: Some(max_output),
            workspace: Some(spec.workspace.clone()),
            progress: Some(Arc::new(Progress::default())),
        };
        let sent = crate::provider::replay::digest::digest_with(&request, tools_hash);
        // A provider that acts on the workspace (an agent CLI) is an effect: the start
        // is stored first. A model behind an API only answers, so it is asked while
        // the start's writes are in flight.
        if spec.provider.acts()
            && let Err(why) = self.env.started.confirmed().await
        {
            return Step::Fail(Failure::unrecorded(why));
        }
        let reply =
            match tokio::time::timeout(q.model_timeout, spec.provider.complete(&request)).await {
                Err(_) => return Step::Fail(self.model_timeout(&request, turn)),
                Ok(Err(e)) => {
                    // A stream that stalled or broke still generated what it sent.
                    self.charge_partial(&request, turn);
                    return Step::Fail(self.model_failure(e));
                }
                Ok(Ok(reply)) => reply,
            };
        spans::turn_replied(reply.usage, reply.tool_calls.len());
        self.env
            .store
            .record_exchange(crate::store::ExchangeRecord {
                run_id: spec.run_id.clone(),
                agent_id: spec.id.clone(),
                agent: spec.name.clone(),
                turn,
                request: sent,
                reply: &reply,
            });
        let broke = self.budget.charge_usage(reply.usage);
        self.log(Event::ModelReply {
            turn,
            reasoning: (!reply.reasoning.trim().is_empty()).then(|| cap(&reply.reasoning)),
            text: cap(&reply.text),
            tool_calls: reply.tool_calls.iter().map(|c| c.name.clone()).collect(),
            usage: reply.usage,
            stop: Some(reply.stop),
        });
        if !reply.text.trim().is_empty() {
            *last_text = format!("{}{}", self.cut_text, reply.text);
        }
        self.messages.push(Message::from_reply(&reply));
        if let Some(exceeded) = broke {
            self.answer_unrun(&reply.tool_calls, &format!("error: {exceeded}"));
            return Step::Fail(Failure::budget(exceeded));
        }
        let cut = reply.stop == StopReason::MaxTokens;
        if cut && (reply.tool_calls.is_empty() || self.continuations >= MAX_CONTINUATIONS) {
            return self.cut_off(&reply, request.max_tokens);
        }
        if reply.tool_calls.is_empty() {
            return self.text_only(reply, io, turn);
        }
        if cut {
            // The complete calls of a cut reply run; only the one the limit broke (its
            // arguments are not JSON) is answered "not run".
            self.continuations += 1;
            self.log(Event::AgentContinue {
                reason: FailReason::Truncated,
                continuation: Some(self.continuations),
            });
        } else {
            self.continuations = 0;
        }
        self.cut_text.clear();
        match self.run_tools(turn, &reply.tool_calls, cut).await {
            Err(failure) => Step::Fail(failure),
            // A steer that came in during the batch must reach the model before it ends.
            Ok(Some(summary)) if !self.answers_steering(io, turn) => {
                let result = if summary.trim().is_empty() {
                    last_text.clone()
                } else {
                    summary
                };
                Step::Done(self.ending(), result)
            }
            Ok(_) => Step::Next,
        }
    }

    /// The built-in tools its capabilities allow, then its MCP servers' tools, with
    /// their hash for the request's fingerprint (the built-in list's is computed once).
    async fn tool_specs(&self) -> (Arc<[crate::provider::ToolSpec]>, [u8; 32]) {
        let offered = self.env.tools.offered_to(&self.spec.perms.caps);
        match &self.env.mcp {
            Some(mcp) => {
                let mut specs = offered.specs.to_vec();
                specs.extend(mcp.specs().await);
                let hash = crate::provider::replay::digest::tools_hash(&specs);
                (specs.into(), hash)
            }
            None => (offered.specs.clone(), offered.hash),
        }
    }

    /// Runs one call: an MCP tool through its server, any other through the registry.
    async fn call_tool(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
    ) -> Result<crate::tool::ToolOutput, String> {
        let spec = self.spec;
        if crate::mcp::tools::server_of(&call.name).is_some()
            && self.env.tools.get(&call.name).is_none()
        {
            return match &self.env.mcp {
                Some(mcp) => mcp
                    .call(&call.name, call.args.clone())
                    .await
                    .map(crate::tool::ToolOutput::text)
                    .map_err(|e| format!("error: {e}")),
                None => Err(format!(
                    "error: {}",
                    crate::tool::ToolError::UnknownTool(call.name.clone())
                )),
            };
        }
        self.env
            .tools
            .call(&call.name, ctx, call.args.clone(), &spec.perms.caps)
            .await
            .map_err(|e| format!("error: {e}"))
    }

    fn ending(&self) -> AgentState {
        if self.wrapped_up {
            AgentState::Steered
        } else {
            AgentState::Completed
        }
    }

    fn model_failure(&self, e: ProviderError) -> Failure {
        if let ProviderError::CircuitOpen {
            key,
            cause,
            opened_now: true,
            ..
        } = &e
        {
            self.log(Event::ProviderBreakerOpen {
                breaker: key.to_string(),
                cause: cap(cause),
            });
        }
        if let ProviderError::Diverged(d) = &e {
            return Failure::typed(FailReason::Diverged, d);
        }
        // An open breaker heals with time, as a server that is down may come back.
        let transient = e.is_retryable() || matches!(e, ProviderError::CircuitOpen { .. });
        Failure {
            state: AgentState::Error,
            reason: if transient {
                FailReason::Unavailable
            } else {
                FailReason::Model
            },
            error: e.to_string(),
            exceeded: None,
        }
    }

    /// `model_timeout_s` ran out while the call was under way: named as that limit
    /// (a stall, no byte for `stall_timeout_s`, is the provider's own error), and what
    /// the reply had brought so far is charged.
    fn model_timeout(&mut self, request: &CompletionRequest, turn: u32) -> Failure {
        let secs = self.budget.quotas().model_timeout.as_secs();
        let detail = match self.charge_partial(request, turn) {
            Some(output) => {
                format!(
                    "model_timeout_s = {secs} elapsed while the reply was still arriving \
                     ({output} tokens generated so far, charged)"
                )
            }
            None => format!(
                "model_timeout_s = {secs} elapsed before any of the reply arrived (the server \
                 may be busy, or answers only when done: stream = false)"
            ),
        };
        Failure::typed(FailReason::ModelTimeout, detail)
    }

    /// Charges what a call that did not complete had generated (its request estimated,
    /// its output as the server counted or ~4 bytes a token), logged as a reply with no
    /// stop reason; the output tokens, `None` when nothing had arrived.
    fn charge_partial(&mut self, request: &CompletionRequest, turn: u32) -> Option<u64> {
        let output = request.progress.as_ref()?.output_tokens()?;
        let usage = Usage {
            input: compaction::estimate(&request.messages),
            output,
        };
        // The failure that ended the call is what the agent reports; a budget crossed by
        // this charge shows in its stats.
        let _ = self.budget.charge_usage(usage);
        self.log(Event::ModelReply {
            turn,
            reasoning: None,
            text: String::new(),
            tool_calls: Vec::new(),
            usage,
            stop: None,
        });
        Some(output)
    }

    /// A text reply that hit the output token limit: continue it (bounded); past the
    /// bound, its calls are answered "not run" and the agent fails `truncated`.
    /// `limit`: the cap crewbox sent, if it sent one.
    fn cut_off(&mut self, reply: &Completion, limit: Option<u32>) -> Step {
        self.continuations += 1;
        if self.continuations > MAX_CONTINUATIONS {
            self.answer_unrun(&reply.tool_calls, CUT_CALL);
            let by = match limit {
                Some(n) => format!("at the output token limit crewbox set ({n} tokens)"),
                None => "by the server's output limit".to_owned(),
            };
            return Step::Fail(Failure::typed(
                FailReason::Truncated,
                format!(
                    "the model's reply was cut {by} {} times in a row",
                    self.continuations
                ),
            ));
        }
        self.log(Event::AgentContinue {
            reason: FailReason::Truncated,
            continuation: Some(self.continuations),
        });
        self.cut_text.push_str(&reply.text);
        self.messages.push(Message::user(CONTINUE));
        Step::Next
    }

    /// A reply without tool calls: the agent's answer, unless it is empty or a steer is
    /// waiting for it.
    fn text_only(&mut self, reply: Completion, io: &mut AgentIo, turn: u32) -> Step {
        let cut = std::mem::take(&mut self.cut_text);
        self.continuations = 0;
        if reply.text.trim().is_empty() && cut.trim().is_empty() {
            if reply.stop == StopReason::Refused {
                return Step::Fail(Failure::typed(
                    FailReason::Refused,
                    "the model or the server's content filter refused to answer",
                ));
            }
            let reasoned = !reply.reasoning.trim().is_empty();
            if self.empty_nudges < MAX_EMPTY_NUDGES {
                self.empty_nudges += 1;
                self.log(Event::AgentContinue {
                    reason: FailReason::EmptyReply,
                    continuation: None,
                });
                self.messages.push(Message::user(if reasoned {
                    REASONING_NUDGE
                } else {
                    EMPTY_NUDGE
                }));
                return Step::Next;
            }
            return Step::Fail(Failure::typed(
                FailReason::EmptyReply,
                if reasoned {
                    "the model answered with reasoning only (no text, no tool call), even after \
                     being asked to answer"
                } else {
                    "the model answered with no text and no tool call"
                },
            ));
        }
        if self.answers_steering(io, turn) {
            // Delivered at the top of the next turn: the agent answers it before ending.
            return Step::Next;
        }
        Step::Done(self.ending(), format!("{cut}{}", reply.text))
    }

    /// Runs a batch of tool calls; `Ok(Some(summary))` when one of them was `finish`.
    /// `cut`: the reply stopped at the output token limit, so a call whose arguments
    /// are not JSON was broken by it.
    async fn run_tools(
        &mut self,
        turn: u32,
        calls: &[ToolCall],
        cut: bool,
    ) -> Result<Option<String>, Failure> {
        let spec = self.spec;
        let ctx = ToolContext {
            agent_id: spec.id.clone(),
            root: spec.workspace.clone(),
            spawner: self
                .env
                .spawner
                .clone()
                .filter(|_| spec.perms.caps.contains(crate::vocab::Capability::Spawn)),
            sandbox: self
                .env
                .sandbox
                .clone()
                .filter(|_| spec.perms.caps.contains(crate::vocab::Capability::Exec)),
        };
        // Tools act: the agent's start is stored before the first of them runs.
        if let Err(why) = self.env.started.confirmed().await {
            self.answer_unrun(calls, &format!("error: not run: {why}"));
            return Err(Failure::unrecorded(why));
        }
        let mut finish = None;
        for (i, call) in calls.iter().enumerate() {
            // The agent declared itself done: what it asked for after that is not done
            // (probe 17: a write after `finish` ran, and its branch held it).
            if finish.is_some() {
                self.answer_unrun(&calls[i..], AFTER_FINISH);
                break;
            }
            // Ending is counted, never refused: an agent that used all its tool calls
            // may still finish (it was aborted, its summary lost).
            let finishing =
                call.name == crate::tool::finish::NAME && self.env.tools.get(&call.name).is_some();
            if finishing {
                self.budget.stats.tool_calls = self.budget.stats.tool_calls.saturating_add(1);
            } else if let Err(exceeded) = self.budget.charge_tool_call() {
                // Answer every call of the batch so the conversation stays well-formed
                // for a later fix round.
                self.answer_unrun(&calls[i..], &format!("error: {exceeded}"));
                return Err(Failure::budget(exceeded));
            }
            let span = spans::tool(&call.name);
            if self.env.tools.get(&call.name).is_none()
                && let Some(server) = crate::mcp::tools::server_of(&call.name)
            {
                let tool = call
                    .name
                    .strip_prefix(&format!("{}{server}__", crate::mcp::tools::PREFIX))
                    .unwrap_or(&call.name);
                spans::tool_mcp(&span, server, tool);
            }
            let result = match &call.invalid_args {
                Some(_) if cut => Err(CUT_CALL.to_owned()),
                Some(raw) => Err(format!(
                    "error: not run: the arguments of `{}` are not valid JSON ({}); the history \
                     shows them as `{{}}`. Send the call again with a JSON object",
                    call.name,
                    serde_json::from_str::<serde_json::Value>(raw)
                        .err()
                        .map(|e| e.to_string())
                        .unwrap_or_default()
                )),
                None => self.call_tool(call, &ctx).instrument(span.clone()).await,
            };
            let (ok, content) = match result {
                Ok(out) => {
                    if out.finish.is_some() {
                        finish = out.finish;
                    }
                    (true, out.content)
                }
                Err(e) => (false, e),
            };
            spans::tool_ended(&span, ok);
            self.log(Event::ToolCall {
                turn,
                tool: call.name.clone(),
                server: crate::mcp::tools::server_of(&call.name)
                    .filter(|_| self.env.tools.get(&call.name).is_none())
                    .map(str::to_owned),
                args: cap(&call.args_text()),
                ok,
                output: cap(&content),
            });
            self.messages.push(if ok {
                Message::tool(call.id.clone(), content)
            } else {
                Message::tool_error(call.id.clone(), content)
            });
        }
        Ok(finish)
    }

    /// Answers calls that will not run, so every call in the history has its result.
    fn answer_unrun(&mut self, calls: &[ToolCall], why: &str) {
        for call in calls {
            self.messages
                .push(Message::tool_error(call.id.clone(), why));
        }
    }

    /// Whether a steer is waiting and the agent has a turn left to answer it in (if it
    /// has none, the agent ends and the manager reports the steer undelivered).
    fn answers_steering(&self, io: &AgentIo, turn: u32) -> bool {
        !io.steer.is_empty() && self.budget.gate(turn + 1) != TurnGate::Stop
    }

    /// Appends every waiting steering message as a user turn.
    fn deliver_steering(&mut self, io: &mut AgentIo) {
        while let Ok(message) = io.steer.try_recv() {
            self.log(Event::AgentSteer {
                message: cap(&message),
            });
            self.messages
                .push(Message::user(format!("{STEER_PREFIX}{message}")));
        }
    }
}

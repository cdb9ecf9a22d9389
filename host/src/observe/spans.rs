//! The spans of a run — `run` → `agent` → `turn` → `tool` — and every attribute they
//! carry, in one place. Attributes are ids, names, counts and statuses only: never a
//! prompt, a reply, a tool's arguments or output, or an error's text (those can hold
//! secrets and repository content). With the `otlp` feature these spans are exported
//! as they are (see `observe::otlp`); without it they only frame log lines.
//!
//! A failed span is marked with `otel.status_code = "error"` and a fixed reason
//! (`otel.status_description`), which OTLP receivers show as the span's status.

use tracing::Span;
use tracing::field::Empty;

use crate::ids::{AgentId, RunId};
use crate::vocab::{AgentState, AgentStats, FailReason, Usage};

/// Who an `agent` span is about.
pub struct AgentNames<'a> {
    /// Its run.
    pub run_id: &'a RunId,
    /// The agent.
    pub agent_id: &'a AgentId,
    /// Its name.
    pub name: &'a str,
    /// Its role.
    pub role: &'a str,
    /// The agent that spawned it.
    pub parent: Option<&'a AgentId>,
}

/// The `run` span; `run_id` and `mode` are recorded once known.
pub fn run(run_id: Option<&RunId>) -> Span {
    let span = tracing::info_span!(
        "run",
        run_id = Empty,
        mode = Empty,
        status = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    );
    if let Some(id) = run_id {
        span.record("run_id", tracing::field::display(id));
    }
    span
}

/// Records how a run ended on its span: its status name and, when it failed, the
/// reason's name.
pub fn run_ended(span: &Span, status: &'static str, failed: Option<&'static str>) {
    span.record("status", status);
    if let Some(reason) = failed {
        error(span, reason);
    }
}

/// The `agent` span, a child of `parent` (the run's span, or the `tool` span of the
/// agent that spawned it): the agent runs in its own task, so the parent is passed
/// explicitly rather than taken from whatever is current there.
pub fn agent(parent: &Span, who: &AgentNames<'_>) -> Span {
    tracing::info_span!(
        parent: parent,
        "agent",
        run_id = %who.run_id,
        agent_id = %who.agent_id,
        agent_name = %who.name,
        role = %who.role,
        parent_agent_id = who.parent.map(|p| tracing::field::display(p.to_string())),
        status = Empty,
        turns = Empty,
        tool_calls = Empty,
        input_tokens = Empty,
        output_tokens = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    )
}

/// The `task` span of a worker running a coordinator's task: its agent's span is a
/// child of it, and it is a child of the coordinator's span the task names (when both
/// sides export traces), so a run's trace holds its remote agents.
pub fn remote_task(key: &str, worker: &str) -> Span {
    tracing::info_span!("task", task = %key, worker = %worker)
}

/// Records an agent's end: its state, counts and (on failure) the reason's name.
pub fn agent_ended(span: &Span, state: AgentState, stats: &AgentStats, reason: Option<FailReason>) {
    span.record("status", state.as_str());
    span.record("turns", i64::from(stats.turns));
    span.record("tool_calls", i64::from(stats.tool_calls));
    span.record("input_tokens", count(stats.tokens_in));
    span.record("output_tokens", count(stats.tokens_out));
    if !state.is_success() {
        error(span, reason.map_or(state.as_str(), |r| r.as_str()));
    }
}

/// The `turn` span of turn `turn` (1-based) of the current agent.
pub fn turn(turn: u32) -> Span {
    tracing::info_span!(
        "turn",
        turn = i64::from(turn),
        input_tokens = Empty,
        output_tokens = Empty,
        tool_calls = Empty,
    )
}

/// Records a turn's model reply on the current (`turn`) span: its tokens and how many
/// tool calls it asked for.
pub fn turn_replied(usage: Usage, tool_calls: usize) {
    let span = Span::current();
    span.record("input_tokens", count(usage.input));
    span.record("output_tokens", count(usage.output));
    span.record("tool_calls", i64::try_from(tool_calls).unwrap_or(i64::MAX));
}

/// The `tool` span of one call of `tool`.
pub fn tool(tool: &str) -> Span {
    tracing::info_span!(
        "tool",
        tool = %tool,
        status = Empty,
        "mcp.server" = Empty,
        "mcp.tool" = Empty,
        "otel.status_code" = Empty,
        "otel.status_description" = Empty,
    )
}

/// Marks a tool span as an MCP call: its server and the tool's name there.
pub fn tool_mcp(span: &Span, server: &str, tool: &str) {
    span.record("mcp.server", server);
    span.record("mcp.tool", tool);
}

/// Records whether a tool call succeeded.
pub fn tool_ended(span: &Span, ok: bool) {
    span.record("status", if ok { "ok" } else { "error" });
    if !ok {
        error(span, "tool-error");
    }
}

/// A count as a signed integer: OTLP has only signed ints, and an unsigned value would
/// be exported as a string.
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Marks `span` failed with a fixed reason name (never free text).
fn error(span: &Span, reason: &'static str) {
    span.record("otel.status_code", "error");
    span.record("otel.status_description", reason);
}
